package io.weir.sharding.partition;

import io.weir.persistence.SafeErrors;
import io.weir.persistence.StorageSystem;
import io.weir.sharding.partition.Partition.MarkRaised;
import io.weir.sharding.partition.Partition.RecoveryMarked;
import io.weir.sharding.partition.Partition.StorageChecked;
import io.weir.sharding.partition.Partition.StorageLossMarked;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.storage.AckMark;
import java.util.Objects;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A partition's acknowledged mark (ADR 0036) as this incarnation knows it: the check of the
 * recovered journal against it, and raising it after group commits, over recovered events and for a
 * new incarnation once an operator accepted a loss. A raise completes by telling the partition
 * ({@link Partition.MarkRaised}, {@link Partition.RecoveryMarked}, {@link
 * Partition.StorageLossMarked}). Actor thread only.
 */
final class PartitionMarks {
  private static final Logger log = LoggerFactory.getLogger(Partition.class);

  /** Where the check of the journal against the acknowledged mark stands (ADR 0036). */
  enum StorageCheck {
    /** No marks are kept (tests, tools): nothing to check. */
    UNCHECKED("unchecked"),
    /** Recovered; reading the mark and waiting for the standbys. Serves nothing yet. */
    CHECKING("checking"),
    SERVING("serving"),
    /** The journal lacks frames this partition acknowledged: every write is refused. */
    BEHIND("storage-behind");

    final String wireName;

    StorageCheck(String wireName) {
      this.wireName = wireName;
    }
  }

  private StorageCheck storageCheck = StorageCheck.CHECKING;

  private final int partition;
  private final PartitionWiring wiring;
  private final ActorRef<Command> self;

  private StorageCheck check = StorageCheck.CHECKING;

  /** The storage the journal was checked against after recovery (null: unknown or not yet). */
  private StorageSystem checkedOn;

  /** The acknowledged mark as this partition last read or raised it. */
  private AckMark mark = AckMark.NONE;

  PartitionMarks(int partition, PartitionWiring wiring, ActorRef<Command> self) {
    this.partition = partition;
    this.wiring = wiring;
    this.self = self;
  }

  StorageCheck check() {
    return check;
  }

  /**
   * After recovery: waits until the storage's standbys hold every commit the primary shows (a
   * commit whose synchronous wait was cancelled is on the primary alone), then reads the mark of
   * what this partition acknowledged, outside the journal's database (ADR 0036), and tells the
   * partition ({@link Partition.StorageChecked}).
   */
  void checkStorage() {
    wiring
        .gate()
        .settled()
        .thenCompose(settled -> wiring.marks().read(partition))
        .whenComplete(
            (m, error) ->
                self.tell(
                    new StorageChecked(
                        error == null ? m : null,
                        error == null ? null : SafeErrors.describe(error))));
  }

  /**
   * The recovered journal ({@code state}) against the mark read after recovery. Returns whether the
   * check is over: the journal holds everything acknowledged (serving), or it lacks some (behind:
   * every write is refused). When the journal holds events above the mark, raises the mark over
   * them first and returns false; {@link #recoveryMarked} ends the check.
   */
  boolean checked(PartitionState state, AckMark read) {
    mark = read;
    checkedOn = wiring.gate().system();
    if (mark.aheadOf(state.incarnation, state.events)) {
      check = StorageCheck.BEHIND;
      log.error(
          "partition {}: storage-behind: its journal on {} ends at sequence {} but it acknowledged"
              + " {} on {}; it refuses writes until an operator accepts the loss (weir ctl"
              + " partitions accept-storage-loss {} --confirm)",
          partition,
          describe(checkedOn),
          state.events,
          acknowledged(state) > 0
              ? "sequence " + mark.sequence()
              : "a history the journal does not hold",
          describe(mark.storage()),
          partition);
      wiring.observer().storageBehind(partition, true);
      return true;
    }
    if (wiring.marks().enabled()
        && state.incarnation != null
        && acknowledged(state) < state.events) {
      // The journal holds events above the mark: a group commit whose raise failed (its writers
      // were not answered, and a retry is answered from its receipt) or events no raise covers
      // (purges). The storage settled, so they are on the required copies: mark them before
      // anything is answered, or a later loss of them would go unnoticed.
      AckMark to = tailMark(mark.epoch(), state);
      raise(to, failure -> new RecoveryMarked(to, failure));
      return false;
    }
    check = wiring.marks().enabled() ? StorageCheck.SERVING : StorageCheck.UNCHECKED;
    return true;
  }

  /** The mark over the recovered events was kept: the check is over. */
  void recoveryMarked(AckMark kept) {
    mark = mark.max(kept);
    check = StorageCheck.SERVING;
  }

  private static String describe(StorageSystem storage) {
    return storage == null ? "an unknown storage" : storage.describe();
  }

  /**
   * The highest journal sequence this partition acknowledged in its current incarnation, 0 when its
   * mark names another one (or none).
   */
  long acknowledged(PartitionState s) {
    return Objects.equals(mark.incarnation(), s.incarnation) ? mark.sequence() : 0;
  }

  /** The acknowledged events the journal lacks (0 when the mark names another incarnation). */
  long lostBy(PartitionState s) {
    return acknowledged(s) > 0 ? mark.sequence() - s.events : 0;
  }

  /** Raises the mark to the journal's tail after a group commit ({@link Partition.MarkRaised}). */
  void raiseToTail(PartitionState s) {
    AckMark to = tailMark(mark.epoch(), s);
    mark = mark.max(to);
    long started = System.nanoTime();
    raise(to, failure -> new MarkRaised(to.sequence(), failure, started));
  }

  /**
   * A new incarnation was persisted after an operator accepted a loss: raises the mark to it in the
   * next epoch ({@link Partition.StorageLossMarked} when kept; logged when not: the partition stays
   * storage-behind until the loss is accepted again).
   */
  void raiseNewIncarnation(
      PartitionState s, long lost, ActorRef<StatusProtocol.StorageLossReply> replyTo) {
    AckMark next = tailMark(mark.epoch() + 1, s);
    wiring
        .marks()
        .raise(partition, next)
        .whenComplete(
            (done, error) -> {
              if (error == null) {
                self.tell(new StorageLossMarked(next, lost, replyTo));
              } else {
                log.error(
                    "partition {}: the new incarnation's mark could not be kept ({}); it stays"
                        + " storage-behind until the loss is accepted again",
                    partition,
                    SafeErrors.describe(error));
              }
            });
  }

  /** The new incarnation's mark is kept: the partition serves again. */
  void lossAccepted(AckMark kept) {
    mark = mark.max(kept);
    check = wiring.marks().enabled() ? StorageCheck.SERVING : StorageCheck.UNCHECKED;
    wiring.observer().storageBehind(partition, false);
  }

  /** The storage part of the partition's status. */
  StatusProtocol.StorageView view(PartitionState s) {
    return new StatusProtocol.StorageView(
        check.wireName,
        acknowledged(s),
        mark.epoch(),
        wiring.gate().copies(),
        checkedOn,
        mark.isNone() ? null : mark.storage());
  }

  /** A mark of epoch {@code epoch} at the journal's tail, on the storage the node sees now. */
  private AckMark tailMark(long epoch, PartitionState s) {
    return new AckMark(epoch, s.incarnation, s.events, wiring.gate().system());
  }

  /**
   * Raises the mark to {@code to} and tells this partition {@code done} of the failure's value-free
   * description (null once kept).
   */
  private void raise(AckMark to, Function<String, Command> done) {
    wiring
        .marks()
        .raise(partition, to)
        .whenComplete(
            (kept, error) ->
                self.tell(done.apply(error == null ? null : SafeErrors.describe(error))));
  }
}
