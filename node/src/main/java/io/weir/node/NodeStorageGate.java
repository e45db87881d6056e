package io.weir.node;

import io.weir.persistence.StorageStatus;
import io.weir.persistence.StorageSystem;
import io.weir.sharding.partition.StorageGate;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;

/**
 * The partitions' view of this node's storage (ADR 0031, ADR 0036), from the storage monitor's last
 * probe: whether writes may go (with {@code weir.storage.required-copies} above 1, only while the
 * probe showed that many durable copies; unknown copies or storage not ready refuse, fail closed),
 * the storage generation (advanced when the storage is reached again or changes identity), and the
 * wait for the standbys after a partition's recovery.
 */
final class NodeStorageGate implements StorageGate {
  private final AtomicReference<StorageStatus> storage;
  private final int required;
  private final DataSource data;
  private final Executor io;
  private final Duration settleTimeout;

  NodeStorageGate(
      AtomicReference<StorageStatus> storage,
      int required,
      DataSource data,
      Executor io,
      Duration settleTimeout) {
    this.storage = storage;
    this.required = required;
    this.data = data;
    this.io = io;
    this.settleTimeout = settleTimeout;
  }

  /** Set once storage was ready: the cluster's record accepted this node's settings. */
  private volatile boolean checked;

  @Override
  public boolean settingsChecked() {
    if (!checked && storage.get() instanceof StorageStatus.Ready) {
      checked = true;
    }
    return checked;
  }

  @Override
  public Refusal refusal() {
    if (required <= 1) {
      return null; // the commit itself is the one copy
    }
    if (storage.get() instanceof StorageStatus.Ready r && r.copies().known()) {
      return r.copies().copies() >= required ? null : new Refusal(r.copies().copies(), required);
    }
    return new Refusal(-1, required);
  }

  @Override
  public int copies() {
    return storage.get() instanceof StorageStatus.Ready r && r.copies().known()
        ? r.copies().copies()
        : -1;
  }

  @Override
  public StorageSystem system() {
    return storage.get() instanceof StorageStatus.Ready r ? r.system() : null;
  }

  @Override
  public long generation() {
    return storage.get() instanceof StorageStatus.Ready r ? r.generation() : -1;
  }

  /**
   * With fewer copies than required the partition may serve at once: its writes are refused until
   * the copies are back, and a standby counts again only once it streams, that is, after it caught
   * up past everything the primary held when it connected.
   */
  @Override
  public CompletionStage<Void> settled() {
    if (refusal() != null) {
      return CompletableFuture.completedFuture(null);
    }
    return StorageSystem.settled(data, required - 1, settleTimeout, io);
  }
}
