package io.weir.sharding.partition;

import io.weir.persistence.SafeErrors;
import io.weir.sharding.partition.PartitionProtocol.Command;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How a partition's {@link ReceiptFilter} learns the receipts written before the partition started
 * (ADR 0057): those in the heap at once, and, when receipts left the heap by count within their
 * time, the receipts table's, read in the background ({@link DocumentTable#receiptKeys}) into a
 * part of the filter that becomes the filter's when the read is over. A failed read is tried again
 * after 2, 4, 8 and 16 s; until a read succeeds a keyed write not in the heap is looked up in the
 * table, so nothing is lost meanwhile. Each read carries a number (begun at random per start): an
 * answer to another read than the last one begun is ignored. A stopped partition cancels its read
 * ({@link #stop}).
 *
 * <p>Owned by the partition's actor: every method runs on it. Answers come back as {@link
 * Partition.ReceiptsLoaded} and retries as {@link Partition.LoadReceipts} commands to the actor.
 */
final class ReceiptFilterStart {
  private static final Logger log = LoggerFactory.getLogger(ReceiptFilterStart.class);

  /** Reads of the receipts table for the filter at most, a failed one tried again after a pause. */
  static final int READS = 5;

  private final int partition;
  private final ReceiptFilter filter;
  private final DocumentTable table;
  private final long ttlMillis;
  private final ActorContext<Command> ctx;

  /** The part of the filter the table's receipts are being read into, if any. */
  private ReceiptFilter.Loading loading;

  /** Reads of the table's receipts this start began: the last one's number is the one awaited. */
  private long reads = ThreadLocalRandom.current().nextLong();

  ReceiptFilterStart(
      int partition,
      ReceiptFilter filter,
      DocumentTable table,
      long ttlMillis,
      ActorContext<Command> ctx) {
    this.partition = partition;
    this.filter = filter;
    this.table = table;
    this.ttlMillis = ttlMillis;
    this.ctx = ctx;
  }

  /**
   * The partition is ready with {@code state}: the heap's receipts go into the filter, and the
   * table's are read when some left the heap within their time. Every receipt persisted from here
   * on is added by the partition as it is written; the table holds every recovered event by now.
   */
  void start(PartitionState state) {
    long now = System.currentTimeMillis();
    state.receipts().forEach((key, r) -> filter.add(key, r.atMillis()));
    if (!state.receiptsSpilledSince(now)) {
      filter.completeWith(null);
      return;
    }
    load(1);
  }

  /** Reads the table's unexpired receipts into a part of the filter: attempt {@code attempt}. */
  void load(int attempt) {
    long now = System.currentTimeMillis();
    ReceiptFilter.Loading part = filter.loading(now);
    loading = part;
    long read = ++reads;
    ActorRef<Command> self = ctx.getSelf();
    table
        .receiptKeys(partition, now - ttlMillis, part.limit(), part)
        .whenComplete(
            (done, error) ->
                self.tell(
                    error == null
                        ? new Partition.ReceiptsLoaded(read, part.added(), null, attempt)
                        : new Partition.ReceiptsLoaded(
                            read, 0, SafeErrors.describe(error), attempt)));
  }

  /** A read is over: the filter is complete, or the read is tried again later. */
  void loaded(Partition.ReceiptsLoaded c) {
    if (loading == null || c.read() != reads) {
      return; // not the read this start waits for
    }
    if (c.failure() != null) {
      loading = null;
      if (c.attempt() < READS) {
        Duration pause = Duration.ofSeconds(1L << c.attempt());
        log.warn(
            "partition {}: reading the receipts table for its filter failed ({}); trying again in"
                + " {} s",
            partition,
            c.failure(),
            pause.toSeconds());
        ctx.scheduleOnce(pause, ctx.getSelf(), new Partition.LoadReceipts(c.attempt() + 1));
      } else {
        log.warn(
            "partition {}: reading the receipts table for its filter failed {} times ({}); keyed"
                + " writes are looked up in the table until the partition starts again",
            partition,
            c.attempt(),
            c.failure());
      }
      return;
    }
    // The part is the actor's again: this message came after the read was over.
    filter.completeWith(loading.part());
    loading = null;
    log.debug(
        "partition {}: receipt filter complete, {} receipts read from the table, {} held",
        partition,
        c.receipts(),
        filter.keys());
  }

  /** The partition stopped: a read queued or running for it is not wanted any more. */
  void stop() {
    if (loading != null) {
      loading.cancel();
    }
  }
}
