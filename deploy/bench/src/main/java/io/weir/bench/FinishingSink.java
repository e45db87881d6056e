package io.weir.bench;

import io.weir.persistence.cdc.PipelineContext;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.protocol.cdc.Transaction;
import io.weir.sharding.cdc.PartitionSink;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Wraps a real sink for the benchmark: counts what it made durable and completes {@link
 * #finished()} (with {@link System#nanoTime()}) when the call holding the workload's last
 * transaction has completed, i.e. when that transaction is durable in the wrapped sink.
 */
class FinishingSink implements ChangeSink, DrainCounts {
  private final ChangeSink inner;
  private final long lastXid;
  private final long endLsn;
  private final CompletableFuture<Long> finished = new CompletableFuture<>();
  private volatile long rows;
  private volatile long transactions;

  FinishingSink(ChangeSink inner, long lastXid, long endLsn) {
    this.inner = inner;
    this.lastXid = lastXid;
    this.endLsn = endLsn;
  }

  @Override
  public CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context) {
    return inner.open(context);
  }

  @Override
  public CompletionStage<Void> apply(List<Transaction> batch) {
    long r = 0;
    boolean last = false;
    for (Transaction t : batch) {
      r += t.rowCount();
      last |= t.xid() == lastXid || Long.compareUnsigned(t.endLsn().asLong(), endLsn) >= 0;
    }
    long added = r;
    boolean done = last;
    int n = batch.size();
    return inner
        .apply(batch)
        .thenRun(
            () -> {
              rows += added;
              transactions += n;
              if (done) {
                finished.complete(System.nanoTime());
              }
            });
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

  @Override
  public boolean supportsBatches() {
    return inner.supportsBatches();
  }

  @Override
  public void close() {
    inner.close();
  }

  /** Releases the wrapped sink for good (the pipeline's {@link #close} only means "restarting"). */
  void shutdown() {
    if (inner instanceof PartitionSink p) {
      p.shutdown();
    }
  }
}
