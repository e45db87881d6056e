package io.weir.node.continuous;

import io.weir.persistence.cdc.PipelineContext;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.CheckpointStore;
import io.weir.persistence.cdc.sink.CheckpointedSink;
import io.weir.persistence.cdc.sink.DeliverySink;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.CdcMessage;
import io.weir.protocol.cdc.Transaction;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;

/**
 * The sink of the continuous pipeline ({@code sink.type = continuous}): each committed transaction
 * goes to this node's {@link ContinuousQueries}, and the slot is acknowledged through the library
 * checkpoint store ({@code weir.cdc_checkpoint}) once every session has handled it. A restart
 * re-reads every query (a new InitialResult in each session's log) and a redelivered transaction
 * only causes another read. When the pipeline stops or halts, the engine stops serving the sessions
 * from memory: their streams end and are served from the session entities' journals until it runs
 * again.
 */
public final class ContinuousSink implements ChangeSink {
  private final ContinuousQueries engine;
  private final CheckpointedSink checkpointed;

  public ContinuousSink(ContinuousQueries engine, CheckpointStore store, Executor blockingIo) {
    this.engine = engine;
    this.checkpointed =
        new CheckpointedSink(
            new DeliverySink() {
              @Override
              public CompletionStage<Void> deliver(Transaction transaction) {
                return engine.onTransaction(transaction);
              }

              @Override
              public boolean acceptsMessages() {
                return true;
              }

              @Override
              public CompletionStage<Void> deliverMessage(CdcMessage message) {
                return engine.onMessage(message);
              }

              @Override
              public void close() {
                engine.deactivate();
              }
            },
            store,
            blockingIo,
            5,
            Duration.ofMillis(500),
            1,
            CheckpointedSink.DEFAULT_MAX_DELAY);
  }

  @Override
  public CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context) {
    return checkpointed
        .open(context)
        .thenCompose(checkpoint -> engine.activate().thenApply(v -> checkpoint));
  }

  @Override
  public CompletionStage<Void> apply(List<Transaction> transactions) {
    return checkpointed.apply(transactions);
  }

  /** The engine's fence messages (ADR 0042): the continuous pipeline always takes messages. */
  @Override
  public boolean acceptsMessages() {
    return true;
  }

  @Override
  public CompletionStage<Void> onMessage(CdcMessage message) {
    return checkpointed.onMessage(message);
  }

  @Override
  public boolean supportsBatches() {
    return false;
  }

  @Override
  public Lsn durableNow() {
    return checkpointed.durableNow();
  }

  @Override
  public Lsn durableThrough(List<Transaction> applied) {
    return checkpointed.durableThrough(applied);
  }

  /**
   * The pipeline stopped or halted: the sessions are no longer kept current here, so their streams
   * end.
   */
  @Override
  public void streamStopped() {
    checkpointed.streamStopped();
    engine.deactivate();
  }

  @Override
  public CompletionStage<Void> forget(String pipeline) {
    return checkpointed.forget(pipeline);
  }

  @Override
  public void close() {
    checkpointed.close();
  }
}
