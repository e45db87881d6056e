package io.weir.sharding.partition;

/**
 * When a partition takes a snapshot: after at least {@code events} journal events or {@code bytes}
 * bytes of events since the last one, and at least a {@value #STATE_DIVISOR}th of the snapshot's
 * estimated size in event bytes. A snapshot holds no bodies, so it stays small: recovery reads it
 * and at most about that much of the journal (a few large events, such as an initial snapshot's
 * rows, count by their bytes), and snapshot writes cost at most {@value #STATE_DIVISOR} times the
 * events' bytes.
 *
 * @param events events after which a snapshot is due ({@code
 *     weir.partitions.snapshots.after-events})
 * @param bytes bytes of events after which a snapshot is due even before {@code events} events
 *     ({@code weir.partitions.snapshots.after-bytes})
 */
public record SnapshotPolicy(int events, long bytes) {
  /** The share of the snapshot's size the events since the last one must reach at least. */
  public static final int STATE_DIVISOR = 4;

  public static final SnapshotPolicy DEFAULT = new SnapshotPolicy(1000, 16L << 20);

  public SnapshotPolicy {
    if (events < 1 || bytes < 1) {
      throw new IllegalArgumentException("snapshot thresholds must be positive");
    }
  }

  /**
   * Whether a snapshot is due at {@code sequenceNr}, the journal holding {@code eventBytes} in all
   * and a snapshot taking about {@code snapshotBytes}; when it is, {@code mark} moves there (it is
   * part of the state, recorded before the snapshot copies it, so the policy goes on from a
   * recovered snapshot).
   */
  boolean due(Partition.SnapshotMark mark, long sequenceNr, long eventBytes, long snapshotBytes) {
    long written = eventBytes - mark.eventBytes;
    if ((sequenceNr - mark.events >= events || written >= bytes)
        && written >= snapshotBytes / STATE_DIVISOR) {
      mark.events = sequenceNr;
      mark.eventBytes = eventBytes;
      return true;
    }
    return false;
  }
}
