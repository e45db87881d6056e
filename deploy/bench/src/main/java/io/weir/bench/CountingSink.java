package io.weir.bench;

import io.weir.persistence.cdc.PipelineContext;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.protocol.cdc.Transaction;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * A sink that does no work: it counts row changes and keeps its checkpoint in memory, honouring the
 * sink-owned checkpoint contract (transactions at or below the checkpoint are skipped). {@link
 * #finished()} completes, with the {@link System#nanoTime()} of the moment, when the sink has
 * applied the workload's last transaction: the one with the given xid, or one whose end LSN reaches
 * the workload's end position.
 */
final class CountingSink implements ChangeSink, DrainCounts {
  private static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);

  private final long lastXid;
  private final long endLsn;
  private final CompletableFuture<Long> finished = new CompletableFuture<>();

  // apply is never called concurrently; volatile for the reader on the benchmark thread.
  private volatile long rows;
  private volatile long transactions;
  private volatile Optional<SinkCheckpoint> checkpoint = Optional.empty();
  private volatile PipelineContext context;

  CountingSink(long lastXid, long endLsn) {
    this.lastXid = lastXid;
    this.endLsn = endLsn;
  }

  @Override
  public CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context) {
    this.context = context;
    return CompletableFuture.completedFuture(checkpoint);
  }

  @Override
  public CompletionStage<Void> apply(List<Transaction> batch) {
    long r = rows;
    long t = transactions;
    boolean last = false;
    Optional<SinkCheckpoint> cp = checkpoint;
    for (Transaction txn : batch) {
      if (cp.isPresent() && txn.commitLsn().compareTo(cp.get().commitLsn()) <= 0) {
        continue;
      }
      r += txn.rowCount();
      t++;
      cp = Optional.of(new SinkCheckpoint(context.incarnation().orElseThrow(), txn.commitLsn()));
      last |= txn.xid() == lastXid || Long.compareUnsigned(txn.endLsn().asLong(), endLsn) >= 0;
    }
    checkpoint = cp;
    rows = r;
    transactions = t;
    if (last) {
      finished.complete(System.nanoTime());
    }
    return DONE;
  }

  @Override
  public CompletableFuture<Long> finished() {
    return finished;
  }

  @Override
  public long rows() {
    return rows;
  }

  @Override
  public long transactions() {
    return transactions;
  }
}
