package io.weir.persistence.cdc;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.weir.persistence.SafeErrors;
import io.weir.persistence.cdc.assembly.RelationStore;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.SinkException;
import io.weir.persistence.cdc.source.SlotHolders;
import io.weir.persistence.cdc.source.SlotManager;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.protocol.CborSerializable;
import io.weir.protocol.Lsn;
import io.weir.protocol.pgoutput.PgOutputDecodeException;
import java.io.UncheckedIOException;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Runs one CDC pipeline: slot -> pgoutput decoding -> transaction assembly and schema guard ->
 * bounded in-flight window -> {@link ChangeSink} -> acknowledgement. Demand-driven end to end: the
 * slot is read only when the sink has room.
 *
 * <p>Life cycle (an actor): {@code connecting} (checks, sink checkpoint, slot decision, start
 * replication) -> {@code running} -> on failure either {@code halted} (a typed {@link HaltReason}:
 * nothing more happens until an operator starts it again) or {@code backoff} and a new connect.
 * Transient failures before the stream is established count against {@code maxCommandRetries}; an
 * unreachable server and a slot still held by a previous owner (within the handover window) do not
 * count; once messages flow the count resets.
 *
 * <p>Guarantee: PostgreSQL is told a position is flushed only after the sink completed {@code
 * apply} for every transaction up to it; unacknowledged transactions are delivered again after any
 * restart and the sink's checkpoint skips them.
 */
public final class CdcPipeline {

  public sealed interface Command {}

  /**
   * Whether a failure with {@code sqlState} may pass by itself, so retrying the same transaction is
   * right: connection (08), operator intervention and shutdown (57P), serialization failure and
   * deadlock (40001, 40P01) and insufficient resources (53). Anything else the sink reports with a
   * SQLState counts towards {@code max-sink-retries}.
   */
  public static boolean isTransientSqlState(String sqlState) {
    return sqlState.startsWith("08")
        || sqlState.startsWith("57P")
        || sqlState.startsWith("53")
        || sqlState.equals("40001")
        || sqlState.equals("40P01");
  }

  /**
   * A value-free description of a failure: a halt's or a sink's own (value-free) text, else the
   * exception's class and SQLState.
   */
  static String describe(Throwable error) {
    return error instanceof PipelineHaltException h
        ? h.detail()
        : error instanceof SinkException s ? s.getMessage() : SafeErrors.describe(error);
  }

  /** {@code t} without the CompletionException and ExecutionException wrappers around it. */
  static Throwable unwrap(Throwable t) {
    Throwable e = t;
    while ((e instanceof CompletionException || e instanceof ExecutionException)
        && e.getCause() != null) {
      e = e.getCause();
    }
    return e;
  }

  /**
   * Runs one decoding or assembly step of the message at {@code at}. Its typed failures pass
   * unchanged (a halt, a decode error, a spill file that cannot be written: the disk may recover);
   * any other RuntimeException is a defect that would fail the same way on every redelivery, so it
   * halts {@code protocol-violation} with the exception's class and where it was thrown (never its
   * message, which may quote the stream) instead of restarting for ever.
   */
  static <T> T guardProtocolStep(Lsn at, Supplier<T> step) {
    try {
      return step.get();
    } catch (PipelineHaltException | PgOutputDecodeException | UncheckedIOException e) {
      throw e;
    } catch (RuntimeException e) {
      StackTraceElement[] frames = e.getStackTrace();
      String where =
          frames.length == 0
              ? ""
              : " in "
                  + frames[0].getClassName()
                  + "."
                  + frames[0].getMethodName()
                  + ":"
                  + frames[0].getLineNumber();
      throw new PipelineHaltException(
          HaltReason.PROTOCOL_VIOLATION,
          "decoding or assembling the message at "
              + at
              + " failed unexpectedly: "
              + SafeErrors.describe(e)
              + where);
    }
  }

  /** Starts (or restarts after a halt or stop). Replies with the status after the command. */
  public record Start(ActorRef<PipelineStatus> replyTo) implements Command {}

  /** Stops streaming and closes the connection. Replies with the status after the command. */
  public record Stop(ActorRef<PipelineStatus> replyTo) implements Command {}

  /**
   * Drops the pipeline: its slot on the source (so it stops holding WAL), then Weir's records of it
   * (slot record, library checkpoint, accepted table shapes) and the sink's checkpoint if it keeps
   * one elsewhere ({@link ChangeSink#forget}). Only while stopped, halted or dropped; afterwards
   * the state is {@code dropped} and a start is a first start (a new slot per the start mode).
   */
  public record Drop(ActorRef<DropReply> replyTo) implements Command {}

  /**
   * The answer to {@link Drop}.
   *
   * @param error null when dropped; else a {@link DropError}'s wire name
   * @param message value-free explanation of the error
   */
  public record DropReply(PipelineStatus status, String error, String message)
      implements CborSerializable {
    DropReply(PipelineStatus status, DropError error, String message) {
      this(status, error.wire(), message);
    }

    static DropReply dropped(PipelineStatus status) {
      return new DropReply(status, (String) null, null);
    }

    /** The error, empty when dropped or when a newer peer sent one this release does not know. */
    public Optional<DropError> dropError() {
      return Arrays.stream(DropError.values()).filter(e -> e.wire().equals(error)).findFirst();
    }
  }

  /** Why a {@link Drop} changed nothing. */
  public enum DropError {
    /** The pipeline runs: stop it first. */
    NOT_STOPPED("not-stopped"),
    /** Another connection still holds the slot; nothing was deleted. */
    SLOT_ACTIVE("slot-active"),
    /** The drop failed; Weir's records of the pipeline are kept until one succeeds. */
    FAILED("failed");

    private final String wire;

    DropError(String wire) {
      this.wire = wire;
    }

    /** The name in {@link DropReply#error}. */
    public String wire() {
      return wire;
    }
  }

  record DropDone(Throwable error, PipelineState previousState, ActorRef<DropReply> replyTo)
      implements Command {
    @Override
    public String toString() {
      return "DropDone[" + (error == null ? "ok" : SafeErrors.describe(error)) + "]";
    }
  }

  /** Replies with the current status. */
  public record GetStatus(ActorRef<PipelineStatus> replyTo) implements Command {}

  /**
   * Starts an incremental snapshot of {@code tables} ({@code schema.table}; empty: every published
   * table) while the pipeline streams.
   */
  public record StartIncrementalSnapshot(List<String> tables, ActorRef<SnapshotReply> replyTo)
      implements Command {}

  /**
   * Lists how the sink would handle every table the publications publish (in any state: also before
   * the first start). Reads the source's catalog; writes nothing.
   */
  public record CheckTables(ActorRef<CheckReply> replyTo) implements Command {}

  /**
   * The answer to {@link CheckTables}.
   *
   * @param tables sorted by name; empty when {@code error} is set
   * @param error null, {@code source-unavailable} (the source's catalog could not be read) or
   *     {@code sink-unavailable} (the sink could not check, e.g. the mirror's target is down)
   * @param message value-free explanation of the error
   */
  public record CheckReply(String pipeline, List<TableVerdict> tables, String error, String message)
      implements CborSerializable {
    public CheckReply {
      tables = List.copyOf(tables);
    }
  }

  /**
   * The answer to {@link StartIncrementalSnapshot}.
   *
   * @param error null when the snapshot started; else {@code unsupported} (the sink cannot take
   *     one), {@code not-running}, {@code snapshot-in-progress} or {@code unknown-table}
   * @param message value-free explanation of the error
   */
  public record SnapshotReply(PipelineStatus status, String error, String message)
      implements CborSerializable {}

  record IncrementalBegun(long attempt, Throwable error, ActorRef<SnapshotReply> replyTo)
      implements Command {
    @Override
    public String toString() {
      return "IncrementalBegun[" + (error == null ? "ok" : SafeErrors.describe(error)) + "]";
    }
  }

  record Connected(long attempt, ConnectPhase.Opened opened) implements Command {}

  // toString overridden: a dead-letter log line must not print an exception message (pgjdbc's
  // can carry row values).
  record ConnectFailed(long attempt, Throwable error) implements Command {
    @Override
    public String toString() {
      return "ConnectFailed[" + SafeErrors.describe(error) + "]";
    }
  }

  record StreamEnded(long attempt, Throwable error) implements Command {
    @Override
    public String toString() {
      return "StreamEnded[" + (error == null ? "completed" : SafeErrors.describe(error)) + "]";
    }
  }

  record Retry(long attempt) implements Command {}

  /**
   * A pipeline over {@code settings}' slot of {@code source}, delivering to {@code sink}, keeping
   * its slot records and relation shapes in {@code stateSchema} of {@code stateStore}. Without
   * {@link Builder#metrics} meters go to a private registry; without {@link Builder#holders} the
   * replication connections name no member and no slot is taken over.
   */
  public static Builder builder(
      PipelineSettings settings,
      SourceSettings source,
      ChangeSink sink,
      DataSource stateStore,
      String stateSchema) {
    return new Builder(settings, source, sink, stateStore, stateSchema);
  }

  /** The pipeline actor's behavior as {@link #builder} describes, with defaults for the rest. */
  public static Behavior<Command> create(
      PipelineSettings settings,
      SourceSettings source,
      ChangeSink sink,
      DataSource stateStore,
      String stateSchema) {
    return builder(settings, source, sink, stateStore, stateSchema).build();
  }

  /** What a pipeline is built from besides its settings, source, sink and state store. */
  public static final class Builder {
    private final PipelineSettings settings;
    private final SourceSettings source;
    private final ChangeSink sink;
    private final DataSource stateStore;
    private final String stateSchema;
    private MeterRegistry registry = new SimpleMeterRegistry();
    private SlotHolders holders = SlotHolders.NONE;

    private Builder(
        PipelineSettings settings,
        SourceSettings source,
        ChangeSink sink,
        DataSource stateStore,
        String stateSchema) {
      this.settings = settings;
      this.source = source;
      this.sink = sink;
      this.stateStore = stateStore;
      this.stateSchema = stateSchema;
    }

    /** Where the pipeline's meters go (the node's Prometheus registry). */
    public Builder metrics(MeterRegistry registry) {
      this.registry = registry;
      return this;
    }

    /**
     * On a cluster member: its replication connections name the member, and a slot held by the
     * walsender of a member the cluster downed is taken over (ADR 0037).
     */
    public Builder holders(SlotHolders holders) {
      this.holders = holders;
      return this;
    }

    /** The pipeline actor's behavior; spawn it under a supervisor of your choice. */
    public Behavior<Command> build() {
      // The slot manager and relation store are made in setup, as before the builder: a
      // supervisor's restart gets fresh ones. The lambda captures copies, not the builder.
      PipelineSettings settings = this.settings;
      SourceSettings source = this.source;
      ChangeSink sink = this.sink;
      DataSource stateStore = this.stateStore;
      String stateSchema = this.stateSchema;
      MeterRegistry registry = this.registry;
      SlotHolders holders = this.holders;
      return Behaviors.setup(
          ctx ->
              Behaviors.withTimers(
                  timers ->
                      new PipelineRunner(
                          ctx,
                          timers,
                          settings,
                          source,
                          sink,
                          new SlotManager(settings, stateStore, stateSchema),
                          registry,
                          new RelationStore(stateStore, stateSchema),
                          holders)));
    }
  }

  private CdcPipeline() {}
}
