package io.weir.persistence.cdc;

import io.weir.protocol.Lsn;
import java.time.Instant;
import java.util.concurrent.ConcurrentLinkedDeque;

/**
 * A pipeline's lag in time: how long ago the oldest transaction that the slot has sent and the sink
 * has not applied yet was committed at the source. Zero when nothing waits, so an idle pipeline
 * reads 0 rather than the time since the last commit; a stalled sink, or a pipeline backing off or
 * halted with a transaction waiting, reads a growing value from its first waiting transaction on.
 *
 * <p>The stream records each assembled transaction ({@link #received}) and each applied batch's end
 * ({@link #applied}); the queue between them holds at most what the pipeline's in-flight window and
 * batching allow. Written by the stream's stages, read by a metrics scrape: thread-safe.
 */
final class LagClock {
  private record Waiting(long endLsn, long commitMillis) {}

  private final ConcurrentLinkedDeque<Waiting> waiting = new ConcurrentLinkedDeque<>();

  /** A transaction ending at {@code end}, committed at {@code commitTime}, left the assembler. */
  void received(Lsn end, Instant commitTime) {
    waiting.addLast(
        new Waiting(
            end.asLong(),
            commitTime == null ? System.currentTimeMillis() : commitTime.toEpochMilli()));
  }

  /** The sink applied every transaction ending at or before {@code end}. */
  void applied(Lsn end) {
    Waiting head;
    while ((head = waiting.peekFirst()) != null
        && Long.compareUnsigned(head.endLsn(), end.asLong()) <= 0) {
      waiting.pollFirst();
    }
  }

  /**
   * The stream stopped (to restart, or halted): keeps only the oldest waiting transaction. It is
   * still waiting, so the lag keeps growing from its commit while the pipeline backs off, retries
   * or stays halted; the next run receives it again (and what follows), and applying it clears it.
   */
  void keepOldest() {
    Waiting head = waiting.peekFirst();
    waiting.clear();
    if (head != null) {
      waiting.addFirst(head);
    }
  }

  /** The pipeline was dropped: what it was waiting for will never come. */
  void reset() {
    waiting.clear();
  }

  /**
   * Seconds since the oldest waiting transaction's commit at {@code nowMillis}; 0 when none waits.
   */
  double seconds(long nowMillis) {
    Waiting head = waiting.peekFirst();
    return head == null ? 0 : Math.max(0, nowMillis - head.commitMillis()) / 1000.0;
  }

  /** Transactions received and not yet applied. */
  int waiting() {
    return waiting.size();
  }
}
