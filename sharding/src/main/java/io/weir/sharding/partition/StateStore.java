package io.weir.sharding.partition;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.apache.pekko.serialization.Serialization;

/**
 * Where a partition reads its state at start and writes its snapshots, without Pekko's event replay
 * and snapshot store (ADRs 0054, 0055). {@link SqlStateStore} reads the latest snapshot and the
 * journal events after it with SQL, applying the events with the event handler's own transition;
 * the partition then starts on that state with Pekko's recovery disabled (Pekko still reads the
 * journal's highest sequence number, and the partition checks that it is the state's before it
 * serves). It also writes the partition's snapshots in the background, so that no write waits for
 * one. {@link #NONE} leaves both to Pekko (in-memory journals, tests, tools).
 */
public interface StateStore {
  /**
   * What a recovery read: the state, the sequence number of the snapshot it started from (0: none)
   * and how many events it applied after it.
   */
  record Recovered(PartitionState state, long snapshotSequence, long events) {}

  /**
   * A journal or snapshot the store will not recover from (a hole in the sequence numbers, a row of
   * another type): the message names the partition, sequence numbers and classes, never a value, so
   * it may be logged as it is.
   */
  final class Unreadable extends RuntimeException {
    public Unreadable(String valueFreeMessage) {
      super(valueFreeMessage, null, false, false);
    }
  }

  /** Pekko replays the journal and keeps the snapshots. */
  StateStore NONE =
      new StateStore() {
        @Override
        public boolean enabled(int partition) {
          return false;
        }

        @Override
        public CompletionStage<Recovered> recover(
            int partition,
            Serialization serialization,
            Supplier<PartitionState> empty,
            UnaryOperator<PartitionState> fromSnapshot) {
          return CompletableFuture.failedFuture(
              new UnsupportedOperationException("no state store"));
        }

        @Override
        public void refuted(int partition) {}

        @Override
        public boolean writesSnapshots() {
          return false;
        }

        @Override
        public CompletionStage<String> journalWriter(int partition, long sequence) {
          return CompletableFuture.failedFuture(
              new UnsupportedOperationException("no state store"));
        }

        @Override
        public CompletionStage<Boolean> saveSnapshot(
            int partition, long sequence, String writer, PartitionState copy) {
          return CompletableFuture.failedFuture(
              new UnsupportedOperationException("no state store"));
        }
      };

  /**
   * Whether partition {@code partition} recovers here rather than with Pekko's replay: false once a
   * recovery of it was {@linkplain #refuted refuted} on this node.
   */
  boolean enabled(int partition);

  /**
   * Reads partition {@code partition}'s latest snapshot (deserialized with {@code serialization},
   * then passed through {@code fromSnapshot} as Pekko's snapshot adapter would be) or starts from
   * {@code empty}, and applies every journal event after it in sequence order. Fails when the
   * snapshot or an event cannot be read, or the events after the snapshot are not contiguous;
   * completes with null when the journal's highest sequence number is not the state's (its rows
   * were deleted through the snapshot, or rows after the read ones are marked deleted): then
   * Pekko's replay recovers the partition.
   */
  CompletionStage<Recovered> recover(
      int partition,
      Serialization serialization,
      Supplier<PartitionState> empty,
      UnaryOperator<PartitionState> fromSnapshot);

  /**
   * The journal's highest sequence number, read by Pekko after {@link #recover}, was not the
   * recovered state's: the partition recovers with Pekko's replay from now on on this node.
   */
  void refuted(int partition);

  /** Whether partitions write their snapshots here ({@link #saveSnapshot}) rather than Pekko's. */
  boolean writesSnapshots();

  /**
   * Who wrote partition {@code partition}'s journal event {@code sequence}: the journal's writer
   * column, Pekko's writer id, new with every start of the partition's actor; null when the journal
   * does not hold that event. A partition reads it once for an event it persisted itself and binds
   * its snapshots to it ({@link #saveSnapshot}).
   */
  CompletionStage<String> journalWriter(int partition, long sequence);

  /**
   * Saves {@code copy}, partition {@code partition}'s state after journal event {@code sequence} (a
   * copy no one changes any more), as its snapshot at that sequence, in the journal plugin's
   * snapshot table (so Pekko's replay reads it too), if the journal holds that event written by
   * {@code writer} ({@link #journalWriter}).
   *
   * @return whether it was saved: false when the journal does not hold event {@code sequence} from
   *     {@code writer}: the storage lost it, or was replaced, since it was acknowledged, and
   *     perhaps another start of the partition (after an accepted storage loss, ADR 0036) wrote a
   *     different event at that sequence. A snapshot must never cover events the journal lacks, nor
   *     another incarnation's.
   */
  CompletionStage<Boolean> saveSnapshot(
      int partition, long sequence, String writer, PartitionState copy);
}
