package io.weir.sharding.partition;

import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What a partition keeps of its outbox and journal: how far a purge may go (never past the lowest
 * consumer checkpoint, never more than asked), and which journal rows and snapshots can then be
 * deleted. Deletions run in the background through the {@link JournalPruner}, at most one at a
 * time; a failed one is tried again after the next purge or snapshot.
 */
final class OutboxRetention {
  private final JournalPruner pruner;
  private final String persistenceId;
  private final int partition;

  /** Sequence numbers of the two latest snapshots this incarnation saved (0: none yet). */
  private volatile long latestSnapshot;

  private volatile long previousSnapshot;
  private final AtomicLong prunedThrough = new AtomicLong();
  private final AtomicBoolean pruning = new AtomicBoolean();

  OutboxRetention(JournalPruner pruner, String persistenceId, int partition) {
    this.partition = partition;
    this.pruner = pruner;
    this.persistenceId = persistenceId;
  }

  /**
   * What a purge request comes to: an answer at once ({@code reply}: refused, or nothing to purge),
   * or the entry to purge through ({@code target}), whether the request asked for more than one
   * purge takes ({@code more}) and whether a consumer's checkpoint held it back ({@code pinned}).
   */
  record Purge(PartitionProtocol.PurgeReply reply, long target, boolean more, boolean pinned) {}

  /** Decides {@code c} against the outbox of {@code s}: at most its maxEntries, never unread. */
  static Purge decide(PartitionState s, PartitionProtocol.PurgeOutbox c) {
    long first = s.outboxFirst;
    long next = s.nextSequence;
    if (c.through() >= next) {
      return new Purge(
          new PartitionProtocol.PurgeRefused(
              "the outbox ends at " + (next - 1) + "; entries after it cannot be purged",
              first,
              next),
          0,
          false,
          false);
    }
    long room = Math.max(1, c.maxEntries());
    long bounded =
        c.through() - (first - 1) > room
            ? first - 1 + room
            : c.through(); // no overflow for huge limits
    Optional<Long> pin = s.lowestCheckpoint();
    boolean pinned = pin.isPresent() && pin.get() < bounded;
    long target = pinned ? pin.get() : bounded;
    if (target < first) {
      return new Purge(
          new PartitionProtocol.OutboxPurged(first, next, 0, false, pinned), 0, false, pinned);
    }
    return new Purge(null, target, !pinned && target < c.through(), pinned);
  }

  /**
   * A snapshot at {@code sequenceNr} was saved: snapshots older than the previous one go, and so
   * may journal rows the previous one now covers.
   */
  void snapshotCompleted(long sequenceNr, PartitionState s, long appliedThrough) {
    previousSnapshot = latestSnapshot;
    latestSnapshot = sequenceNr;
    if (previousSnapshot > 0) {
      pruner.deleteSnapshotsBefore(persistenceId, previousSnapshot);
    }
    prune(s, appliedThrough);
  }

  /**
   * Deletes journal rows that hold only purged entries (or none), that the older of the two latest
   * snapshots covers and that the documents table has applied ({@code appliedThrough}), always
   * keeping the last row.
   */
  void prune(PartitionState s, long appliedThrough) {
    long limit = s.outbox.isEmpty() ? s.events - 1 : s.outbox.first().journalSequence() - 1;
    long through =
        Math.min(Math.min(Math.min(limit, previousSnapshot), s.events - 1), appliedThrough);
    if (through <= prunedThrough.get() || !pruning.compareAndSet(false, true)) {
      return;
    }
    pruner
        .deleteThroughApplied(persistenceId, partition, through)
        .whenComplete(
            (bound, error) -> {
              if (error == null) {
                // What it pruned through: the table's position when that was lower (the rows up
                // to the asked bound go with a later prune).
                prunedThrough.accumulateAndGet(bound, Math::max);
              }
              pruning.set(false);
            });
  }
}
