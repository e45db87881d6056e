package io.weir.node.feed;

import io.weir.sharding.partition.PartitionObserver;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Notes that a partition hosted on this node persisted a group commit (its outbox grew), so the
 * node can tell every node's pushed live queries ({@link LiveStreams}) to read on. Writes only set
 * a flag; the node sends at most one signal per interval, and only when a flag was set, so a
 * cluster without writes sends nothing and one with many writes sends a few messages a second.
 */
public final class TailSignals implements PartitionObserver {
  private final AtomicBoolean grown = new AtomicBoolean();

  @Override
  public void persisted(int partition, int frames) {
    if (!grown.get()) {
      grown.set(true);
    }
  }

  /** Whether some outbox grew since the last call (and clears it). */
  public boolean takeGrown() {
    return grown.get() && grown.getAndSet(false);
  }
}
