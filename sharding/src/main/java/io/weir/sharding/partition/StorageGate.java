package io.weir.sharding.partition;

import io.weir.persistence.StorageSystem;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Whether the partition's storage keeps enough copies of a commit for a write to be acknowledged
 * ({@code weir.storage.required-copies}, ADR 0031). While it does not, the partition writes nothing
 * a client or a pipeline asked for: frames and rows are answered {@link
 * PartitionProtocol.StorageRefused}, consumer commands {@link
 * ConsumerProtocol.ConsumerRefusal#STORAGE_COPIES}; the caller retries later. Row-rule changes
 * (administration) and the partition's own upkeep (purges, snapshots, the documents table) go on.
 */
@FunctionalInterface
public interface StorageGate {
  /** Null while writes may go; otherwise how many copies the storage keeps and needs. */
  Refusal refusal();

  /**
   * @param copies the durable copies of a commit the storage keeps now, or -1 when unknown (the
   *     node may not read its replication state)
   * @param required {@code weir.storage.required-copies}
   */
  record Refusal(int copies, int required) {
    /** A value-free sentence for errors and logs. */
    public String describe() {
      return (copies < 0 ? "an unknown number of" : Integer.toString(copies))
          + " durable copies of a commit where "
          + required
          + " are required";
    }
  }

  /**
   * A number that changes whenever the storage may have changed under the partitions: it was lost
   * and reached again, or its identity (system identifier, timeline) changed. A partition that
   * recovered under another generation recovers again before it serves (ADR 0036).
   */
  default long generation() {
    return 0;
  }

  /**
   * Completes once every commit visible on the primary now is durable on the required copies (the
   * standbys' flushed positions have passed the primary's WAL position read by this call). A
   * partition waits for it after recovery before it answers anything: a commit whose synchronous
   * wait was cancelled is visible on the primary alone (ADR 0036).
   */
  default CompletionStage<Void> settled() {
    return CompletableFuture.completedFuture(null);
  }

  /**
   * On how many copies a commit is durable before it is acknowledged, as last read; -1 when unknown
   * (no storage monitor, or the role cannot see the standbys).
   */
  default int copies() {
    return -1;
  }

  /**
   * The storage the journal is written to now (system identifier and timeline), as last read; null
   * when unknown. Partitions record it in their acknowledged marks and their status (ADR 0036).
   */
  default StorageSystem system() {
    return null;
  }

  /**
   * Whether this node's settings were checked against what the cluster recorded in its storage
   * (partition count, shard layout; ADR 0052) at least once. Until they were, no partition starts
   * on this node: a node whose shard layout differs from the cluster's would otherwise run a
   * partition that already runs elsewhere, in a shard of its own layout, between joining the
   * cluster and being refused.
   */
  default boolean settingsChecked() {
    return true;
  }

  /** Never refuses (tests and tools without a storage monitor). */
  StorageGate OPEN = () -> null;
}
