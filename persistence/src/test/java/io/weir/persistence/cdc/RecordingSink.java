package io.weir.persistence.cdc;

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
 */
public final class RecordingSink implements ChangeSink {
  private final List<Transaction> applied = new ArrayList<>();
  private final List<io.weir.protocol.cdc.CdcMessage> messages = new ArrayList<>();
  private final boolean acceptsMessages;

  public RecordingSink() {
    this(false);
  }

  /** @param acceptsMessages whether this sink takes non-transactional messages */
  public RecordingSink(boolean acceptsMessages) {
    this.acceptsMessages = acceptsMessages;
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
  private int opens;
  private java.time.Duration delayNext;

  @Override
  public synchronized CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context) {
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
      return CompletableFuture.runAsync(() -> {}, CompletableFuture.delayedExecutor(delay.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS))
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
    for (Transaction t : transactions) {
      if (checkpoint.isPresent() && t.commitLsn().compareTo(checkpoint.get().commitLsn()) <= 0) {
        continue;
      }
      applied.add(t);
      checkpoint = Optional.of(new SinkCheckpoint(context.incarnation().orElseThrow(), t.commitLsn()));
    }
    return CompletableFuture.completedFuture(null);
  }

  public synchronized List<Transaction> applied() {
    return List.copyOf(applied);
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
}
