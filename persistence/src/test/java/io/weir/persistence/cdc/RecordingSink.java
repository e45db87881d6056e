package io.weir.persistence.cdc;

import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.protocol.cdc.Transaction;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;

/**
 * A test sink that keeps what it applied and its checkpoint in memory (so "durable" means: for the
 * life of this object), honouring the sink-owned checkpoint contract: it skips transactions at or
 * below its checkpoint. A failure can be injected for the next apply.
 *
 * <p>It reads each transaction's changes once, during the call, as a sink must (a spilled
 * transaction's changes are a single pass, gone after the call): it keeps an in-memory copy for
 * assertions, or with {@code keepChanges = false} only the number of changes read, so that large
 * transactions are not held.
 */
public final class RecordingSink implements ChangeSink {
  private final List<Transaction> applied = new ArrayList<>();
  private final List<io.weir.protocol.cdc.CdcMessage> messages = new ArrayList<>();
  private final boolean acceptsMessages;
  private final boolean keepChanges;
  private final List<Long> changesRead = new ArrayList<>();
  private final List<Boolean> repeatable = new ArrayList<>();

  public RecordingSink() {
    this(false);
  }

  /**
   * @param acceptsMessages whether this sink takes non-transactional messages
   */
  public RecordingSink(boolean acceptsMessages) {
    this(acceptsMessages, true);
  }

  /**
   * @param keepChanges keep a copy of each transaction's changes; false keeps the transaction
   *     without them (see {@link #changesRead()})
   */
  public RecordingSink(boolean acceptsMessages, boolean keepChanges) {
    this.acceptsMessages = acceptsMessages;
    this.keepChanges = keepChanges;
  }

  @Override
  public boolean acceptsMessages() {
    return acceptsMessages;
  }

  @Override
  public synchronized CompletionStage<Void> onMessage(io.weir.protocol.cdc.CdcMessage message) {
    messages.add(message);
    return CompletableFuture.completedFuture(null);
  }

  public synchronized List<io.weir.protocol.cdc.CdcMessage> messages() {
    return List.copyOf(messages);
  }

  private Optional<SinkCheckpoint> checkpoint = Optional.empty();
  private PipelineContext context;
  private Function<List<Transaction>, RuntimeException> failNext;
  private Function<List<Transaction>, RuntimeException> failing;
  private int opens;
  private java.time.Duration delayNext;

  private int failOpens;

  /** The next {@code n} opens fail (an error that is neither a connection's nor typed). */
  public synchronized void failOpens(int n) {
    failOpens = n;
  }

  @Override
  public synchronized CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context) {
    if (failOpens > 0) {
      failOpens--;
      opens++;
      return CompletableFuture.failedFuture(new IllegalStateException("test: open refused"));
    }
    this.context = context;
    opens++;
    return CompletableFuture.completedFuture(checkpoint);
  }

  @Override
  public CompletionStage<Void> apply(List<Transaction> transactions) {
    java.time.Duration delay;
    synchronized (this) {
      delay = delayNext;
      delayNext = null;
    }
    if (delay != null) {
      // A slow sink: the pipeline must keep its connection alive meanwhile.
      return CompletableFuture.runAsync(
              () -> {},
              CompletableFuture.delayedExecutor(
                  delay.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS))
          .thenCompose(v -> applyNow(transactions));
    }
    return applyNow(transactions);
  }

  private synchronized CompletionStage<Void> applyNow(List<Transaction> transactions) {
    if (failNext != null) {
      RuntimeException e = failNext.apply(transactions);
      failNext = null;
      return CompletableFuture.failedFuture(e);
    }
    RuntimeException failure = failing == null ? null : failing.apply(transactions);
    if (failure != null) {
      return CompletableFuture.failedFuture(failure);
    }
    for (Transaction t : transactions) {
      if (checkpoint.isPresent() && t.commitLsn().compareTo(checkpoint.get().commitLsn()) <= 0) {
        continue;
      }
      List<io.weir.protocol.cdc.Change> copy = new ArrayList<>();
      long read = 0;
      for (io.weir.protocol.cdc.Change c : t.changes()) {
        read++;
        if (keepChanges) {
          copy.add(c);
        }
      }
      changesRead.add(read);
      repeatable.add(t.changes().repeatable());
      applied.add(
          new Transaction(
              t.xid(),
              t.commitLsn(),
              t.endLsn(),
              t.commitTime(),
              io.weir.protocol.cdc.Changes.of(copy),
              t.schemaChanges(),
              t.rowCount(),
              t.rowsByTable()));
      checkpoint =
          Optional.of(new SinkCheckpoint(context.incarnation().orElseThrow(), t.commitLsn()));
    }
    return CompletableFuture.completedFuture(null);
  }

  public synchronized List<Transaction> applied() {
    return List.copyOf(applied);
  }

  /** Per applied transaction, how many changes the sink read from it. */
  public synchronized List<Long> changesRead() {
    return List.copyOf(changesRead);
  }

  /**
   * Per applied transaction, whether its changes could have been read more than once (not spilled).
   */
  public synchronized List<Boolean> repeatable() {
    return List.copyOf(repeatable);
  }

  public synchronized Optional<SinkCheckpoint> checkpoint() {
    return checkpoint;
  }

  public synchronized int opens() {
    return opens;
  }

  /** The next apply completes only after {@code delay}. */
  public synchronized void delayNext(java.time.Duration delay) {
    this.delayNext = delay;
  }

  public synchronized void failNext(Function<List<Transaction>, RuntimeException> failure) {
    this.failNext = failure;
  }

  /**
   * Every apply from now on asks {@code failure} first and fails with what it returns (none when it
   * returns null); null stops it.
   */
  public synchronized void failWhile(Function<List<Transaction>, RuntimeException> failure) {
    this.failing = failure;
  }
}
