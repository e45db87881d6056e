package io.weir.persistence.cdc.sink;

import io.weir.persistence.cdc.CdcPipeline;
import io.weir.persistence.cdc.PipelineContext;
import io.weir.persistence.cdc.TableVerdict;
import io.weir.persistence.cdc.snapshot.SnapshotChunk;
import io.weir.persistence.cdc.source.PublishedTable;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.CdcMessage;
import io.weir.protocol.cdc.Transaction;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Where a pipeline delivers committed transactions. The default contract is <em>sink-owned
 * checkpoints</em>, which makes delivery effect-once:
 *
 * <ol>
 *   <li>{@link #open} reports the sink's durable checkpoint for this pipeline (empty the first
 *       time). The pipeline uses it to choose between creating and resuming the slot, and refuses a
 *       checkpoint of another slot incarnation.
 *   <li>{@link #apply} receives one or more transactions in commit order. The sink persists their
 *       effects <em>and</em> its new checkpoint (the last transaction's incarnation and commit LSN)
 *       atomically, skips every transaction whose commit LSN is at or below its checkpoint, and
 *       completes the stage only once that is durable.
 *   <li>The pipeline confirms WAL to PostgreSQL only up to what the sink has completed. Anything
 *       not completed is delivered again after a restart; the checkpoint makes the redelivery
 *       harmless.
 * </ol>
 *
 * <p>Failures: complete the stage exceptionally with a {@link SinkException} — permanent (the data
 * is refused; the pipeline halts) or transient (timeouts, lost connections; the pipeline restarts
 * from the confirmed position with backoff). Any other exception counts as transient. Exception
 * messages must not carry row values: the pipeline logs only exception classes, SQLStates and the
 * sink's value-free reason.
 *
 * <p>Calls are never concurrent: {@code apply} is called again only after the previous stage
 * completed.
 *
 * <p>Changes: iterate {@link Transaction#changes()} and handle each change as it comes. A large
 * streamed transaction may have been spilled to disk; its changes are then a single pass, valid
 * only until the stage returned by {@code apply} completes (the file is deleted then): iterating
 * twice, or after that, throws {@link IllegalStateException}. Do not keep changes beyond the call;
 * take counts from {@link Transaction#rowCount()} and {@link Transaction#rowsByTable()}.
 */
public interface ChangeSink extends AutoCloseable {

  /** Called before streaming starts, and again after every restart of the stream. */
  CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context);

  /** Durably applies {@code transactions} (in commit order) with the checkpoint; see class docs. */
  CompletionStage<Void> apply(List<Transaction> transactions);

  /**
   * Whether this sink takes non-transactional logical messages ({@link #onMessage}). A pipeline
   * with messages on and a sink that does not halts at start ({@code conflicting-options}).
   */
  default boolean acceptsMessages() {
    return false;
  }

  /**
   * A non-transactional logical message, in WAL order with the transactions around it:
   * at-least-once (after a crash it may come again). Complete the stage when it is handled; the
   * slot then confirms the message's position, but never past a transaction that is delivered and
   * not yet acknowledged. Message contents are user bytes: never log them.
   */
  default CompletionStage<Void> onMessage(CdcMessage message) {
    return CompletableFuture.failedFuture(
        SinkException.permanent("this sink does not take logical messages", null));
  }

  /**
   * Whether {@link #apply} accepts several transactions per call ({@code batch.max-transactions >
   * 1}); a pipeline with batching and a sink that refuses it halts at start.
   */
  default boolean supportsBatches() {
    return true;
  }

  /**
   * The end LSN the slot may confirm after {@code applied} completed: for sinks with atomic
   * checkpoints, the last transaction's end LSN. A sink that checkpoints later (see {@link
   * CheckpointedSink}) returns what it has stored; {@link Lsn#INVALID} confirms nothing new.
   */
  default Lsn durableThrough(List<Transaction> applied) {
    return applied.get(applied.size() - 1).endLsn();
  }

  /**
   * For a sink that makes transactions durable later than {@link #apply} completes (a checkpoint
   * written on a timer, see {@link CheckpointedSink}): the end LSN it has made durable by now. The
   * pipeline asks about once a second, also while no transaction arrives, and confirms it when it
   * moved. {@link Lsn#INVALID}, the default, confirms nothing beyond {@link #durableThrough}.
   * Throwing fails the stream as a failed {@link #apply} would.
   */
  default Lsn durableNow() {
    return Lsn.INVALID;
  }

  /**
   * Whether this sink can be seeded from a snapshot ({@link #applySnapshot}, {@link
   * #completeSnapshot}). A pipeline that needs a snapshot and a sink that cannot take one halts at
   * start ({@code conflicting-options}).
   */
  default boolean supportsSnapshots() {
    return false;
  }

  /**
   * Durably applies rows read from a snapshot: upsert by primary key; when {@link
   * SnapshotChunk#firstForTable()} is set, empty the table first. A sink taking incremental
   * snapshots stores {@link SnapshotChunk#progress()} atomically with the rows. Calls never overlap
   * with each other or with {@link #apply}.
   */
  default CompletionStage<Void> applySnapshot(SnapshotChunk chunk) {
    return CompletableFuture.failedFuture(
        SinkException.permanent("this sink cannot be seeded from a snapshot", null));
  }

  /**
   * The initial snapshot is wholly applied: durably store the hand-off checkpoint, i.e. the current
   * slot incarnation with commit LSN {@code handOff}. The pipeline passes the position just before
   * the snapshot's consistent point: every transaction committed at or after that point is streamed
   * (and applied), every earlier one is in the snapshot.
   */
  default CompletionStage<Void> completeSnapshot(Lsn handOff) {
    return CompletableFuture.failedFuture(
        SinkException.permanent("this sink cannot be seeded from a snapshot", null));
  }

  /**
   * What this sink would do with each published table, before anything streams ({@code weir ctl
   * pipelines check}): checked as its first change of each published kind would be, without writing
   * anything. The default takes every change as delivered.
   */
  default CompletionStage<List<TableVerdict>> check(List<PublishedTable> tables) {
    return CompletableFuture.completedFuture(
        tables.stream()
            .map(
                t ->
                    TableVerdict.handled(
                        t.schema().qualifiedName(),
                        TableHandling.AS_DELIVERED,
                        "the sink takes every change as the stream delivers it"))
            .toList());
  }

  /**
   * Whether a published table {@link #check} refuses halts the pipeline at start ({@code
   * sink-rejected}, before the slot is created or read), instead of at that table's first change.
   */
  default boolean refusesTablesAtStart() {
    return false;
  }

  /**
   * Whether this sink stores {@link SnapshotChunk#progress()} with its chunk and returns it from
   * {@link #snapshotProgress}: an incremental snapshot needs it (without it a restart would start
   * the snapshot again and its first chunk would empty the table once more). A pipeline with {@code
   * incremental-at-start} and a sink that does not halts at start ({@code conflicting-options});
   * {@link CdcPipeline.StartIncrementalSnapshot} is refused ({@code unsupported}).
   */
  default boolean storesSnapshotProgress() {
    return false;
  }

  /**
   * The progress token stored with the last applied incremental snapshot chunk of this pipeline,
   * empty if none (or the last one completed the snapshot). Called after {@link #open}, only when
   * {@link #storesSnapshotProgress}.
   */
  default CompletionStage<Optional<String>> snapshotProgress() {
    return CompletableFuture.completedFuture(Optional.empty());
  }

  /**
   * The pipeline was dropped ({@code DELETE /admin/pipelines/{name}}): its slot is gone, and the
   * next start creates a new slot and incarnation. A sink that keeps its checkpoint outside Weir's
   * {@code cdc_checkpoint} table forgets this pipeline's checkpoint here (and only that: its data
   * stays), so the next start is a first start instead of a {@code slot-lost} halt. Called while
   * the pipeline is stopped, before Weir deletes its own records; a failure leaves the pipeline
   * halting {@code slot-lost} on its next start until the drop is repeated. Default: nothing to
   * forget (checkpoints in {@code cdc_checkpoint}, or keyed by the slot incarnation).
   */
  default CompletionStage<Void> forget(String pipeline) {
    return CompletableFuture.completedFuture(null);
  }

  /**
   * The pipeline stopped streaming and stays stopped: an operator stopped it, or it halted (fail
   * closed). Nothing is delivered until {@link #open} is called again. A sink that serves readers
   * from what it is delivered can tell them it is no longer kept current. Default: nothing.
   */
  default void streamStopped() {}

  /** Releases resources; the pipeline is stopped or restarting. */
  @Override
  default void close() {}
}
