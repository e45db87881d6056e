package io.weir.persistence.cdc.sink;

import io.weir.persistence.cdc.snapshot.SnapshotChunk;
import io.weir.protocol.cdc.CdcMessage;
import io.weir.protocol.cdc.Transaction;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * A sink that cannot keep a checkpoint atomically with its effects (a file, an HTTP endpoint, a
 * broker). Wrap it in a {@link CheckpointedSink}, which keeps the checkpoint in PostgreSQL after
 * each delivery: at-least-once, and a crash redelivers at most the transaction (or checkpoint
 * batch) in flight.
 *
 * <p>{@link #deliver} is called with one transaction at a time, in commit order, never
 * concurrently; complete the stage only once the effects are durable. Fail with a permanent {@link
 * SinkException} to halt the pipeline; any other failure restarts it. A spilled transaction's
 * changes can be read once, before the returned stage completes (see {@link ChangeSink}).
 */
public interface DeliverySink extends AutoCloseable {
  CompletionStage<Void> deliver(Transaction transaction);

  /** Whether {@link #deliverMessage} is supported (see {@link ChangeSink#acceptsMessages}). */
  default boolean acceptsMessages() {
    return false;
  }

  /** A non-transactional logical message; at-least-once. */
  default CompletionStage<Void> deliverMessage(CdcMessage message) {
    return CompletableFuture.failedFuture(
        SinkException.permanent("this sink does not take logical messages", null));
  }

  /** Whether {@link #deliverSnapshot} is supported (see {@link ChangeSink#supportsSnapshots}). */
  default boolean supportsSnapshots() {
    return false;
  }

  /**
   * Rows read from a snapshot (see {@link SnapshotChunk}: empty the table first when {@code
   * firstForTable}); complete once durable. The progress token is kept by the checkpoint store.
   */
  default CompletionStage<Void> deliverSnapshot(SnapshotChunk chunk) {
    return CompletableFuture.failedFuture(
        SinkException.permanent("this sink cannot be seeded from a snapshot", null));
  }

  @Override
  default void close() {}
}
