package io.weir.persistence.cdc;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.CborSerializable;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.CdcEvent;
import io.weir.protocol.cdc.CdcMessage;
import io.weir.protocol.cdc.SlotIncarnation;
import io.weir.protocol.cdc.SnapshotWatermark;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.PgOutputDecodeException;
import io.weir.protocol.pgoutput.PgOutputDecoder;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.eventstream.EventStream;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.japi.Pair;
import org.apache.pekko.stream.KillSwitches;
import org.apache.pekko.stream.OverflowStrategy;
import org.apache.pekko.stream.UniqueKillSwitch;
import org.apache.pekko.stream.javadsl.Flow;
import org.apache.pekko.stream.javadsl.Keep;
import org.apache.pekko.stream.javadsl.RunnableGraph;
import org.apache.pekko.stream.javadsl.Sink;
import org.apache.pekko.stream.javadsl.Source;
import org.slf4j.LoggerFactory;

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
   * @param error null when dropped; else {@code not-stopped} (it runs: stop it first), {@code
   *     slot-active} (another connection still holds the slot) or {@code failed} (nothing of Weir's
   *     records was deleted; repeat the drop)
   * @param message value-free explanation of the error
   */
  public record DropReply(PipelineStatus status, String error, String message)
      implements CborSerializable {}

  private record DropDone(Throwable error, PipelineState previousState, ActorRef<DropReply> replyTo)
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

  private record IncrementalBegun(long attempt, Throwable error, ActorRef<SnapshotReply> replyTo)
      implements Command {
    @Override
    public String toString() {
      return "IncrementalBegun[" + (error == null ? "ok" : SafeErrors.describe(error)) + "]";
    }
  }

  private record Connected(
      long attempt, ReplicationConnection connection, SlotIncarnation incarnation)
      implements Command {}

  // toString overridden: a dead-letter log line must not print an exception message (pgjdbc's
  // can carry row values).
  private record ConnectFailed(long attempt, Throwable error) implements Command {
    @Override
    public String toString() {
      return "ConnectFailed[" + SafeErrors.describe(error) + "]";
    }
  }

  private record StreamEnded(long attempt, Throwable error) implements Command {
    @Override
    public String toString() {
      return "StreamEnded[" + (error == null ? "completed" : SafeErrors.describe(error)) + "]";
    }
  }

  private record Retry(long attempt) implements Command {}

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
                      new Runner(
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

  private static final class Runner extends AbstractBehavior<Command> {
    private final TimerScheduler<Command> timers;
    private final PipelineSettings settings;
    private final SourceSettings source;
    private final ChangeSink sink;
    private final SlotManager slots;
    private final SlotHolders holders;
    private final Executor blockingIo;
    private final ActorSystem<?> system;

    private final AtomicLong transactions = new AtomicLong();
    private final AtomicLong rows = new AtomicLong();

    // Volatile: a metrics scrape reads it (weir.cdc.state) besides the actor.
    private volatile PipelineState state = PipelineState.STOPPED;
    private final LagClock lagClock = new LagClock();
    private HaltReason haltReason;
    private String detail;
    // Written by the actor only; volatile so a running snapshot notices it was superseded.
    private volatile long attempt;

    /** Halt or restart after a failure, and the counters that bound the retries. */
    private final FailurePolicy failures;

    /**
     * The highest position any run of this pipeline acknowledged (sink-stage writes, actor reads):
     * a sink failure after it moved is the first at a new transaction.
     */
    private volatile Lsn highestAcknowledged = Lsn.INVALID;

    /** The sink stage acknowledged through {@code lsn} (one stage at a time writes). */
    private void acknowledgedThrough(Lsn lsn) {
      if (lsn.isAfter(highestAcknowledged)) {
        highestAcknowledged = lsn;
      }
    }

    private int restarts;
    private ReplicationConnection connection;
    private UniqueKillSwitch killSwitch;
    private AtomicBoolean established;
    private SlotIncarnation incarnation;
    private final PipelineMetrics metrics;
    private volatile ReplicationConnection live;

    Runner(
        ActorContext<Command> ctx,
        TimerScheduler<Command> timers,
        PipelineSettings settings,
        SourceSettings source,
        ChangeSink sink,
        SlotManager slots,
        MeterRegistry registry,
        RelationStore relations,
        SlotHolders holders) {
      super(ctx);
      this.holders = holders;
      this.timers = timers;
      this.settings = settings;
      this.source = source;
      this.sink = sink;
      this.slots = slots;
      this.system = ctx.getSystem();
      this.blockingIo =
          ctx.getSystem()
              .dispatchers()
              .lookup(DispatcherSelector.fromConfig("weir.blocking-io-dispatcher"));
      this.failures = new FailurePolicy(settings);
      this.relations = relations;
      this.metrics =
          new PipelineMetrics(
              registry,
              settings.name(),
              () -> {
                ReplicationConnection c = live;
                return c != null ? c.confirmed().asLong() : lastConfirmed.asLong();
              },
              () -> lagBytes(live));
      metrics.lagSeconds(() -> lagClock.seconds(System.currentTimeMillis()));
      metrics.stateGauges(this::shownState);
      if (settings.streaming().enabled()) {
        metrics.spillGauges(
            () -> {
              SpillStore s = runSpill;
              return s == null ? 0 : s.bytesOnDisk();
            },
            () -> {
              SpillStore s = runSpill;
              return s == null ? 0 : s.memoryInUse();
            });
      }
    }

    @Override
    public Receive<Command> createReceive() {
      return newReceiveBuilder()
          .onMessage(Start.class, this::onStart)
          .onMessage(Stop.class, this::onStop)
          .onMessage(
              GetStatus.class,
              m -> {
                m.replyTo().tell(status());
                return this;
              })
          .onMessage(Drop.class, this::onDrop)
          .onMessage(DropDone.class, this::onDropDone)
          .onMessage(Connected.class, this::onConnected)
          .onMessage(StartIncrementalSnapshot.class, this::onStartIncremental)
          .onMessage(CheckTables.class, this::onCheckTables)
          .onMessage(IncrementalBegun.class, this::onIncrementalBegun)
          .onMessage(ConnectFailed.class, this::onConnectFailed)
          .onMessage(StreamEnded.class, this::onStreamEnded)
          .onMessage(
              Retry.class,
              r -> {
                if (r.attempt() == attempt && state == PipelineState.BACKOFF) {
                  connect();
                }
                return this;
              })
          .onSignal(
              PostStop.class,
              s -> {
                stopped.set(true);
                shutdownStream();
                sink.close();
                metrics.close();
                return this;
              })
          .build();
    }

    private Behavior<Command> onStart(Start start) {
      if (state.startable()) {
        haltReason = null;
        detail = null;
        failures.started();
        connect();
      }
      start.replyTo().tell(status());
      return this;
    }

    private Behavior<Command> onStop(Stop stop) {
      attempt++;
      timers.cancelAll();
      shutdownStream();
      if (state != PipelineState.HALTED
          && state != PipelineState.DROPPED
          && state != PipelineState.DROPPING) {
        state = PipelineState.STOPPED;
      }
      getContext().getLog().info("pipeline {}: stopped", settings.name());
      sink.streamStopped();
      stop.replyTo().tell(status());
      return this;
    }

    /** How often the sink stage asks the sink what it made durable since (see Tick). */
    private static final Duration DURABLE_POLL = Duration.ofSeconds(1);

    private static final int DROP_ATTEMPTS = 10;
    private static final Duration DROP_PAUSE = Duration.ofMillis(500);

    private Behavior<Command> onDrop(Drop drop) {
      if (!state.startable()) {
        drop.replyTo()
            .tell(
                new DropReply(
                    status(),
                    "not-stopped",
                    "the pipeline is " + status().state() + "; stop it first"));
        return this;
      }
      PipelineState previous = state;
      state = PipelineState.DROPPING;
      attempt++;
      // After the previous run's sink call and connect phase are over, so nothing recreates the
      // slot or its record behind the drop. The slot goes first; Weir's records only once it is
      // gone.
      CompletableFuture<Void> work =
          quiet()
              .thenRunAsync(
                  () -> {
                    try (Connection sourceConn = source.connect("weir-cdc")) {
                      List<String> dropped = slots.dropSlots(sourceConn, DROP_ATTEMPTS, DROP_PAUSE);
                      sink.forget(settings.name()).toCompletableFuture().get();
                      slots.forgetRecords();
                      system
                          .log()
                          .warn(
                              "pipeline {}: dropped (slot(s) dropped: {}); the next start creates a new slot",
                              settings.name(),
                              dropped.isEmpty() ? "none existed" : String.join(", ", dropped));
                    } catch (InterruptedException e) {
                      Thread.currentThread().interrupt();
                      throw new CompletionException(e);
                    } catch (Exception e) {
                      throw new CompletionException(e);
                    }
                  },
                  blockingIo);
      getContext()
          .pipeToSelf(
              work,
              (ok, err) ->
                  new DropDone(err == null ? null : unwrap(err), previous, drop.replyTo()));
      return this;
    }

    private Behavior<Command> onDropDone(DropDone done) {
      Throwable error = done.error();
      if (error == null) {
        state = PipelineState.DROPPED;
        lagClock.reset();
        lastLagBytes = 0;
        lastServerPosition = 0;
        haltReason = null;
        detail = null;
        incarnation = null;
        lastConfirmed = Lsn.INVALID;
        highestAcknowledged = Lsn.INVALID;
        failures.dropped();
        snapshot = null;
        storedProgress = Optional.empty();
        recordedShapes = Map.of();
        done.replyTo().tell(new DropReply(status(), null, null));
        return this;
      }
      state = done.previousState();
      if (error instanceof SlotManager.SlotActiveException active) {
        done.replyTo()
            .tell(
                new DropReply(
                    status(),
                    "slot-active",
                    "slot "
                        + active.slot()
                        + " is still active for another connection; nothing was deleted; retry"));
      } else {
        String why = error instanceof SinkException s ? s.getMessage() : SafeErrors.describe(error);
        getContext().getLog().warn("pipeline {}: drop failed: {}", settings.name(), why);
        done.replyTo()
            .tell(
                new DropReply(
                    status(),
                    "failed",
                    "the drop failed ("
                        + why
                        + "); Weir's records of the pipeline are kept until a drop succeeds; retry"));
      }
      return this;
    }

    private void connect() {
      long myAttempt = ++attempt;
      state = PipelineState.CONNECTING;
      // Sink calls never overlap and connect phases never run side by side: a new connect waits
      // (bounded) for the previous run's sink call and the previous connect phase to finish.
      CompletableFuture<Pair<ReplicationConnection, SlotIncarnation>> connecting =
          quiet()
              .thenRunAsync(this::cleanSpillDirectory, blockingIo)
              .thenComposeAsync(v -> prepare(myAttempt), blockingIo)
              .toCompletableFuture();
      previousConnect = connecting;
      connecting.whenComplete(
          (ok, err) -> {
            if (ok != null && stopped.get()) {
              ok.first().close(); // the actor is gone: nobody else will close this connection
            }
          });
      getContext()
          .pipeToSelf(
              connecting,
              (ok, err) ->
                  err == null
                      ? new Connected(myAttempt, ok.first(), ok.second())
                      : new ConnectFailed(myAttempt, err));
    }

    private CompletableFuture<Void> quiet() {
      CompletableFuture<?> apply = inFlight.get();
      CompletableFuture<?> connecting = previousConnect;
      return CompletableFuture.allOf(
              apply.handle((v, e) -> null).toCompletableFuture(),
              connecting.handle((v, e) -> null).toCompletableFuture())
          .completeOnTimeout(null, QUIET_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** This pipeline's spill directory, or null when it does not spill. */
    private Path spillDirectory() {
      StreamingSettings streaming = settings.streaming();
      return streaming.spills()
          ? SpillStore.pipelineDirectory(streaming.spillDirectory(), settings.name())
          : null;
    }

    /**
     * Deletes spill files an earlier run left behind (a crash, or a sink call that outlived its run
     * by more than the quiet wait). Blocking; before each connect.
     */
    private void cleanSpillDirectory() {
      Path dir = spillDirectory();
      if (dir == null) {
        return;
      }
      try {
        int stale = SpillStore.clean(dir);
        if (stale > 0) {
          system.log().info("pipeline {}: deleted {} stale spill file(s)", settings.name(), stale);
        }
      } catch (IOException e) {
        throw new UncheckedIOException("cannot clean the spill directory", e);
      }
    }

    /** Blocking connect phase; runs on the blocking-IO dispatcher. */
    private CompletionStage<Pair<ReplicationConnection, SlotIncarnation>> prepare(long myAttempt) {
      if (settings.messages() && !sink.acceptsMessages()) {
        throw new PipelineHaltException(
            HaltReason.CONFLICTING_OPTIONS,
            "messages are on but the sink does not take non-transactional messages");
      }
      if (settings.startMode() == StartMode.SNAPSHOT && !sink.supportsSnapshots()) {
        throw new PipelineHaltException(
            HaltReason.CONFLICTING_OPTIONS,
            "start mode snapshot needs a sink that can be seeded from a snapshot");
      }
      if (settings.incrementalAtStart() && !takesIncrementalSnapshots()) {
        throw new PipelineHaltException(
            HaltReason.CONFLICTING_OPTIONS,
            sink.supportsSnapshots()
                ? "incremental-at-start needs a sink that stores incremental snapshot progress"
                    + " with its chunks; this one does not"
                : "incremental-at-start needs a sink that can be seeded from a snapshot");
      }
      if (settings.batchMaxTransactions() > 1 && !sink.supportsBatches()) {
        throw new PipelineHaltException(
            HaltReason.CONFLICTING_OPTIONS,
            "batch delivery is not possible with this sink (library checkpoint store)");
      }
      try (Connection sourceConn = source.connect("weir-cdc")) {
        SlotManager.ServerFacts facts = slots.checkSource(sourceConn);
        if (sink.refusesTablesAtStart()) {
          List<TableVerdict> refused =
              sink
                  .check(PublishedTable.list(sourceConn, settings.publications()))
                  .toCompletableFuture()
                  .get()
                  .stream()
                  .filter(v -> v.reason() != null)
                  .toList();
          if (!refused.isEmpty()) {
            throw new PipelineHaltException(
                HaltReason.SINK_REJECTED,
                refused.size()
                    + " published table(s) cannot be taken by the sink ("
                    + refused.get(0).reason()
                    + ": "
                    + refused.get(0).detail()
                    + "); GET /admin/pipelines/"
                    + settings.name()
                    + "/check lists them");
          }
        }
        int ended = 0;
        try {
          ended = holders.endDownedHolder(sourceConn, settings.slot(), Duration.ofSeconds(10));
        } catch (SQLException e) {
          // Not allowed to signal it, say: the slot is waited for as without a takeover.
          LoggerFactory.getLogger(CdcPipeline.class)
              .warn(
                  "pipeline {}: taking slot {} over from a downed member failed ({}); waiting for"
                      + " the slot instead",
                  settings.name(),
                  settings.slot(),
                  SafeErrors.describe(e));
        }
        if (ended != 0) {
          LoggerFactory.getLogger(CdcPipeline.class)
              .warn(
                  "pipeline {}: slot {} was held by the walsender (pid {}) of a cluster member that was"
                      + " downed; ended it to take the slot over",
                  settings.name(),
                  settings.slot(),
                  ended);
          metrics.slotTakenOver();
        }
        failures.walSenderTimeout(facts.walSenderTimeout());
        StreamingSettings streaming = settings.streaming();
        Connection session =
            ReplicationConnection.openReplicationSession(
                source,
                streaming.enabled() ? streaming.decodingWorkMemKb() : 0,
                holders.applicationName());
        try {
          ReplicationConnection.SystemIdentity server =
              ReplicationConnection.identifySystem(session);
          Optional<SlotIncarnation> recorded = slots.recordedIncarnation();
          Optional<SinkCheckpoint> checkpoint =
              sink.open(new PipelineContext(settings.name(), recorded)).toCompletableFuture().get();
          SlotManager.Prepared prepared =
              slots.prepareSlot(sourceConn, session, server, checkpoint);
          SlotIncarnation inc = prepared.incarnation();
          if (recorded.isEmpty() || !recorded.get().equals(inc)) {
            sink.open(new PipelineContext(settings.name(), Optional.of(inc)))
                .toCompletableFuture()
                .get();
          }
          if (prepared.exported().isPresent()) {
            initialSnapshot(prepared.exported().get(), myAttempt);
          }
          storedProgress =
              takesIncrementalSnapshots()
                  ? IncrementalSnapshot.Progress.decode(
                      sink.snapshotProgress().toCompletableFuture().get())
                  : Optional.empty();
          recordedShapes = relations.load(settings.name());
          Duration interval =
              settings.statusInterval().isZero()
                  ? facts.walSenderTimeout().dividedBy(3)
                  : settings.statusInterval();
          if (interval.isZero() || interval.isNegative()) {
            interval = Duration.ofSeconds(10);
          }
          ReplicationConnection rc =
              ReplicationConnection.start(
                  // Messages always on at the protocol level: snapshot watermarks are messages.
                  session,
                  settings.slot(),
                  settings.publications(),
                  prepared.confirmed(),
                  interval,
                  true,
                  streaming.enabled());
          return CompletableFuture.completedFuture(Pair.create(rc, inc));
        } catch (Exception e) {
          session.close();
          throw e;
        }
      } catch (ExecutionException e) {
        return CompletableFuture.failedFuture(e.getCause());
      } catch (Exception e) {
        return CompletableFuture.failedFuture(e);
      }
    }

    /**
     * Seeds the sink from the slot's exported snapshot, then stores the hand-off checkpoint. The
     * replication session stays idle meanwhile (a command on it would end the snapshot).
     */
    private void initialSnapshot(SlotManager.ExportedSnapshot exported, long myAttempt)
        throws Exception {
      SnapshotTracker tracker = new SnapshotTracker("initial");
      snapshot = tracker;
      try {
        List<TableSchema> shapes =
            new InitialSnapshot(
                    settings, source, sink, tracker, () -> attempt != myAttempt || stopped.get())
                .run(exported);
        relations.save(settings.name(), shapes, exported.consistentPoint());
        // A commit record may start exactly at the consistent point: it is not in the snapshot and
        // the slot streams it, so the hand-off checkpoint sits just before that position.
        sink.completeSnapshot(Lsn.of(exported.consistentPoint().asLong() - 1))
            .toCompletableFuture()
            .get();
        slots.markSnapshot("done");
        tracker.finished("done");
        tracker.log(LoggerFactory.getLogger(CdcPipeline.class), settings.name());
      } catch (Exception | Error e) {
        tracker.finished("failed");
        throw e;
      }
    }

    private Behavior<Command> onConnected(Connected c) {
      if (c.attempt() != attempt || state != PipelineState.CONNECTING) {
        CompletableFuture.runAsync(c.connection()::close, blockingIo);
        if (stoppedForGood()) {
          sink.streamStopped(); // the sink was opened for an attempt a stop or halt overtook
        }
        return this;
      }
      connection = c.connection();
      live = connection;
      incarnation = c.incarnation();
      established = new AtomicBoolean(false);
      acknowledgedInRun = new AtomicBoolean(false);
      state = PipelineState.RUNNING;
      failures.streaming();
      detail = null;
      getContext()
          .getLog()
          .info(
              "pipeline {}: streaming slot {} (incarnation {})",
              settings.name(),
              settings.slot(),
              incarnation.id());
      SpillStore spill =
          settings.streaming().enabled()
              ? new SpillStore(
                  spillDirectory(),
                  settings.streaming().memoryBound(),
                  settings.streaming().maxSpillBytes())
              : null;
      runSpill = spill;
      AtomicReference<UniqueKillSwitch> switchRef = new AtomicReference<>();
      incremental =
          new IncrementalSnapshot(
              settings,
              source,
              sink,
              blockingIo,
              e -> {
                UniqueKillSwitch ks = switchRef.get();
                if (ks != null) {
                  ks.abort(e);
                }
              });
      Pair<UniqueKillSwitch, CompletionStage<Done>> run =
          graph(connection, established, spill, incremental).run(system);
      if (spill != null) {
        // Every buffer of the run goes (open transactions' and undelivered ones'), once the sink
        // call in flight, which may be reading one, has finished.
        run.second().whenComplete((d, e) -> inFlight.get().whenComplete((v, f) -> spill.close()));
      }
      killSwitch = run.first();
      switchRef.set(killSwitch);
      Optional<IncrementalSnapshot.Progress> stored = storedProgress;
      if (stored.isPresent() && !stored.get().done()) {
        beginIncremental(stored.get(), null);
      } else if (stored.isEmpty() && settings.incrementalAtStart()) {
        beginIncremental(
            new IncrementalSnapshot.Progress(
                UUID.randomUUID().toString(), List.of(), 0, null, false),
            null);
      }
      long myAttempt = attempt;
      getContext().pipeToSelf(run.second(), (done, err) -> new StreamEnded(myAttempt, err));
      return this;
    }

    /** What the sink stage handles: a run of transactions, or one non-transactional message. */
    private sealed interface Delivery {}

    private record Transactions(List<Transaction> transactions) implements Delivery {}

    private record Message(CdcMessage message) implements Delivery {}

    private record Mark(SnapshotWatermark watermark) implements Delivery {}

    /**
     * About once a second: ask the sink what it made durable since ({@link ChangeSink#durableNow}).
     */
    private enum Tick implements Delivery {
      INSTANCE
    }

    /**
     * Splits a group of events into runs of transactions and single messages, keeping WAL order.
     */
    private static List<Delivery> deliveries(List<CdcEvent> events) {
      List<Delivery> out = new ArrayList<>();
      List<Transaction> run = new ArrayList<>();
      for (CdcEvent e : events) {
        if (e instanceof Transaction t) {
          run.add(t);
        } else {
          if (!run.isEmpty()) {
            out.add(new Transactions(List.copyOf(run)));
            run.clear();
          }
          out.add(e instanceof SnapshotWatermark w ? new Mark(w) : new Message((CdcMessage) e));
        }
      }
      if (!run.isEmpty()) {
        out.add(new Transactions(List.copyOf(run)));
      }
      return out;
    }

    private RunnableGraph<Pair<UniqueKillSwitch, CompletionStage<Done>>> graph(
        ReplicationConnection conn,
        AtomicBoolean flowing,
        SpillStore spill,
        IncrementalSnapshot snapshots) {
      PgOutputDecoder decoder = new PgOutputDecoder();
      TransactionAssembler assembler =
          new TransactionAssembler(
              new SchemaGuard(recordedShapes),
              settings.maxTransactionChanges(),
              settings.messages(),
              spill,
              settings.streaming().spills());
      Flow<CdcEvent, Delivery, ?> batching =
          settings.batchMaxTransactions() <= 1
              ? Flow.<CdcEvent>create().mapConcat(e -> deliveries(List.of(e)))
              : Flow.<CdcEvent>create()
                  .groupedWithin(settings.batchMaxTransactions(), settings.batchMaxDelay())
                  .mapConcat(Runner::deliveries);
      // Sink-stage state; the sink stage runs one element at a time, so plain fields suffice.
      Lsn[] deliveredEnd = {Lsn.INVALID};
      // Starts where the server resumes: acknowledging that again is no progress.
      Lsn[] acknowledged = {conn.confirmed()};
      AtomicBoolean acked = acknowledgedInRun;
      LagClock lag = lagClock;
      lag.keepOldest();
      return Source.repeat(Done.getInstance())
          .mapAsync(1, tick -> conn.poll(512, Duration.ofMillis(200)))
          .map(
              batch -> {
                // Established once the server has sent anything: data or a keep-alive.
                if (!flowing.get() && conn.hasReceived()) {
                  flowing.set(true);
                }
                return batch;
              })
          .mapConcat(batch -> batch)
          // The payload goes along: a streamed transaction keeps its raw bytes until its commit.
          .mapConcat(
              m ->
                  guardProtocolStep(
                      m.lsn(),
                      () ->
                          assembler
                              .accept(decoder.decode(m.payload()), m.payload())
                              .map(List::of)
                              .orElse(List.<CdcEvent>of())))
          .map(
              e -> {
                if (e instanceof Transaction t) {
                  lag.received(t.endLsn(), t.commitTime());
                }
                return e;
              })
          .via(batching)
          .buffer(Math.max(1, settings.inFlightWindow()), OverflowStrategy.backpressure())
          // Ticks are dropped while the sink stage is busy; one gets through when it is idle.
          .merge(Source.tick(DURABLE_POLL, DURABLE_POLL, (Delivery) Tick.INSTANCE), true)
          .mapAsync(
              1,
              d -> {
                if (d == Tick.INSTANCE) {
                  return CompletableFuture.completedFuture(d);
                }
                Timer.Sample sample = Timer.start();
                CompletionStage<Void> done;
                if (d instanceof Transactions t) {
                  snapshots.onTransactions(t.transactions());
                  done = sinkCall(sink.apply(t.transactions()));
                } else if (d instanceof Mark m) {
                  done = snapshots.onWatermark(m.watermark());
                } else {
                  // With messages off, a message is only confirmed past, never delivered.
                  done =
                      settings.messages()
                          ? sinkCall(sink.onMessage(((Message) d).message()))
                          : CompletableFuture.completedFuture(null);
                }
                inFlight.set(done.toCompletableFuture());
                // A streamed transaction's changes are valid during the call only: free the memory
                // and
                // delete the spill file as soon as it completes, whatever the outcome.
                return done.whenComplete((v, e) -> release(d))
                    .thenApply(
                        v -> {
                          sample.stop(metrics.applyTimer());
                          return d;
                        });
              })
          .viaMat(KillSwitches.single(), Keep.right())
          .toMat(
              Sink.foreach(
                  d -> {
                    if (d instanceof Transactions batch) {
                      List<Transaction> txns = batch.transactions();
                      deliveredEnd[0] = txns.get(txns.size() - 1).endLsn();
                      lag.applied(deliveredEnd[0]);
                      Lsn durable = sink.durableThrough(txns);
                      if (durable.isValid() && durable.isAfter(acknowledged[0])) {
                        conn.acknowledge(durable);
                        acknowledged[0] = durable;
                        acked.set(true);
                        acknowledgedThrough(durable);
                      }
                      recordShapes(assembler, txns);
                      transactions.addAndGet(txns.size());
                      long n = 0;
                      for (Transaction t : txns) {
                        n += t.rowCount();
                      }
                      rows.addAndGet(n);
                      metrics.applied(txns);
                      for (Transaction t : txns) {
                        if (t.changes() instanceof StreamedChanges streamed) {
                          metrics.streamed(streamed.spilled());
                        }
                      }
                    } else if (d == Tick.INSTANCE) {
                      Lsn durable = sink.durableNow();
                      if (durable.isValid() && durable.isAfter(acknowledged[0])) {
                        conn.acknowledge(durable);
                        acknowledged[0] = durable;
                        acked.set(true);
                        acknowledgedThrough(durable);
                      }
                    } else {
                      // A message or watermark moves the confirmed position to itself, but never
                      // past a
                      // transaction the sink has not made durable yet.
                      if (acknowledged[0].compareTo(deliveredEnd[0]) >= 0) {
                        Lsn at =
                            d instanceof Mark m
                                ? m.watermark().endLsn()
                                : ((Message) d).message().lsn();
                        conn.acknowledge(at);
                        acknowledged[0] = at;
                        acknowledgedThrough(at);
                      }
                    }
                  }),
              Keep.both());
    }

    private static void release(Delivery d) {
      if (d instanceof Transactions t) {
        for (Transaction txn : t.transactions()) {
          if (txn.changes() instanceof StreamedChanges streamed) {
            streamed.release();
          }
        }
      }
    }

    /** Records table shapes first accepted in these (durably applied) transactions. */
    private void recordShapes(TransactionAssembler assembler, List<Transaction> txns) {
      for (Transaction t : txns) {
        List<TableSchema> shapes = assembler.takeAcceptedShapes(t);
        if (!shapes.isEmpty()) {
          // Off the stream thread. A failed write only means the next run re-records the shape;
          // the version guard keeps an older write from replacing a newer one.
          CompletableFuture.runAsync(
              () -> {
                try {
                  relations.save(settings.name(), shapes, t.commitLsn());
                } catch (SQLException e) {
                  getContext()
                      .getSystem()
                      .log()
                      .warn(
                          "pipeline {}: could not record table shapes ({})",
                          settings.name(),
                          SafeErrors.describe(e));
                }
              },
              blockingIo);
        }
      }
    }

    private Behavior<Command> onCheckTables(CheckTables request) {
      String name = settings.name();
      CompletableFuture<List<PublishedTable>> published =
          CompletableFuture.supplyAsync(
              () -> {
                try (Connection c = source.connect("weir-check")) {
                  return PublishedTable.list(c, settings.publications());
                } catch (SQLException e) {
                  throw new CompletionException(e);
                }
              },
              blockingIo);
      published
          .thenCompose(sink::check)
          .whenComplete(
              (tables, error) -> {
                Throwable cause = error == null ? null : unwrap(error);
                CheckReply reply;
                if (cause == null) {
                  reply = new CheckReply(name, tables, null, null);
                } else if (published.isCompletedExceptionally()) {
                  reply =
                      new CheckReply(
                          name,
                          List.of(),
                          "source-unavailable",
                          "the publications' tables could not be read: "
                              + SafeErrors.describe(cause));
                } else {
                  reply =
                      new CheckReply(
                          name,
                          List.of(),
                          "sink-unavailable",
                          "the sink could not check the tables: "
                              + (cause instanceof SinkException se
                                  ? se.getMessage()
                                  : describe(cause)));
                }
                request.replyTo().tell(reply);
              });
      return this;
    }

    /** Whether the sink can take an incremental snapshot and keep its progress across restarts. */
    private boolean takesIncrementalSnapshots() {
      return sink.supportsSnapshots() && sink.storesSnapshotProgress();
    }

    private Behavior<Command> onStartIncremental(StartIncrementalSnapshot request) {
      if (!takesIncrementalSnapshots()) {
        request
            .replyTo()
            .tell(
                new SnapshotReply(
                    status(),
                    "unsupported",
                    "this pipeline's sink cannot take an incremental snapshot (it does not store"
                        + " snapshot progress with its chunks)"));
      } else if (state != PipelineState.RUNNING || incremental == null) {
        request
            .replyTo()
            .tell(
                new SnapshotReply(
                    status(),
                    "not-running",
                    "an incremental snapshot runs while the pipeline streams; its state is "
                        + state.wire()));
      } else if (incrementalStarting || incremental.running()) {
        request
            .replyTo()
            .tell(
                new SnapshotReply(
                    status(),
                    "snapshot-in-progress",
                    "an incremental snapshot is running; it must finish first"));
      } else {
        beginIncremental(
            new IncrementalSnapshot.Progress(
                UUID.randomUUID().toString(), List.copyOf(request.tables()), 0, null, false),
            request.replyTo());
      }
      return this;
    }

    /** Resolves the tables and starts the first chunk, off the actor thread. */
    private void beginIncremental(
        IncrementalSnapshot.Progress plan, ActorRef<SnapshotReply> replyTo) {
      IncrementalSnapshot engine = incremental;
      incrementalStarting = true; // reserved until begin answers: a second request is refused
      SnapshotTracker tracker = new SnapshotTracker("incremental");
      long myAttempt = attempt;
      getContext()
          .pipeToSelf(
              CompletableFuture.runAsync(
                  () -> {
                    try {
                      engine.begin(plan, tracker);
                    } catch (SQLException e) {
                      throw new CompletionException(e);
                    }
                  },
                  blockingIo),
              (ok, err) ->
                  new IncrementalBegun(myAttempt, err == null ? null : unwrap(err), replyTo));
      snapshot = tracker;
    }

    private Behavior<Command> onIncrementalBegun(IncrementalBegun begun) {
      incrementalStarting = false;
      Throwable error = begun.error();
      if (begun.replyTo() != null) {
        if (error == null) {
          begun.replyTo().tell(new SnapshotReply(status(), null, null));
        } else if (error instanceof PipelineHaltException h
            && h.reason() == HaltReason.SNAPSHOT_FAILED) {
          snapshot.finished("failed");
          begun.replyTo().tell(new SnapshotReply(status(), "unknown-table", h.detail()));
          return this; // a bad request: streaming goes on
        } else {
          begun
              .replyTo()
              .tell(
                  new SnapshotReply(
                      status(), "failed", "the snapshot could not start: " + describe(error)));
        }
      }
      if (error != null && begun.attempt() == attempt && killSwitch != null) {
        snapshot.finished("failed");
        killSwitch.abort(
            error); // the stream restarts (or halts) and resumes from the stored progress
      }
      return this;
    }

    private static String describe(Throwable error) {
      return error instanceof PipelineHaltException h ? h.detail() : SafeErrors.describe(error);
    }

    private Behavior<Command> onConnectFailed(ConnectFailed f) {
      if (f.attempt() != attempt) {
        if (stoppedForGood()) {
          sink.streamStopped();
        }
        return this;
      }
      fail(f.error(), false);
      return this;
    }

    /** Stopped by an operator, halted or dropped: not streaming until told to start. */
    private boolean stoppedForGood() {
      return state.stoppedForGood();
    }

    private Behavior<Command> onStreamEnded(StreamEnded e) {
      if (e.attempt() != attempt) {
        return this;
      }
      boolean wasFlowing = established != null && established.get();
      shutdownStream();
      if (e.error() == null) {
        // The server ended the stream (e.g. shutdown); reconnect.
        fail(new SQLException("replication stream ended", "08006"), wasFlowing);
      } else {
        fail(e.error(), wasFlowing);
      }
      return this;
    }

    /** Halts or schedules a restart, as the {@link FailurePolicy} decides. */
    private void fail(Throwable raw, boolean wasFlowing) {
      Throwable error = unwrap(raw);
      boolean fromSink = false;
      if (error instanceof SinkCallFailed marked) {
        fromSink = true;
        error = unwrap(marked.getCause());
      }
      shutdownStream();
      boolean progressed = acknowledgedInRun != null && acknowledgedInRun.get();
      acknowledgedInRun = null;
      FailurePolicy.Decision decision =
          failures.decide(
              error, fromSink, wasFlowing, progressed, highestAcknowledged, System.nanoTime());
      if (decision.sinkFailure()) {
        metrics.sinkFailed();
      }
      if (decision instanceof FailurePolicy.Halt h) {
        halt(h.reason(), h.why());
        return;
      }
      FailurePolicy.Restart restart = (FailurePolicy.Restart) decision;
      restarts++;
      metrics.restarted(error.getClass().getSimpleName());
      state = PipelineState.BACKOFF;
      detail = restart.described();
      getContext()
          .getLog()
          .warn(
              "pipeline {}: {}; restarting from the confirmed position in {} ms",
              settings.name(),
              restart.described(),
              restart.after().toMillis());
      timers.startSingleTimer(new Retry(attempt), restart.after());
    }

    private void halt(HaltReason reason, String why) {
      state = PipelineState.HALTED;
      haltReason = reason;
      metrics.halted(reason);
      detail = why;
      getContext()
          .getLog()
          .error("pipeline {}: halted ({}): {}", settings.name(), reason.wire(), why);
      sink.streamStopped();
      if (reason == HaltReason.SPILL_LIMIT_EXCEEDED) {
        // An alert: operators must free disk or raise the bound before the slot fills the source's
        // disk.
        metrics.alert(reason);
        system
            .eventStream()
            .tell(
                new EventStream.Publish<>(
                    new SpillLimitExceeded(settings.name(), settings.streaming().maxSpillBytes())));
      }
    }

    private void shutdownStream() {
      if (incremental != null) {
        incremental.close();
        incremental = null;
      }
      if (killSwitch != null) {
        killSwitch.shutdown();
        killSwitch = null;
      }
      if (connection != null) {
        ReplicationConnection c = connection;
        connection = null;
        live = null;
        lagClock.keepOldest();
        lastLagBytes = lagBytes(c);
        lastServerPosition = Math.max(lastServerPosition, c.serverPosition().asLong());
        lastConfirmed = c.confirmed();
        CompletableFuture.runAsync(c::close, blockingIo);
      }
    }

    private volatile Lsn lastConfirmed = Lsn.INVALID;

    /**
     * The lag in bytes when the last stream stopped: what the gauge shows until the next one runs.
     */
    private volatile long lastLagBytes;

    /**
     * The highest server position any earlier connection of this pipeline saw. A new connection
     * knows only its start position until the server's first message, so its own position would
     * show no lag while the WAL is far ahead (a pipeline backing off on full outboxes reconnects
     * often). Until the server's first message on the new connection, the earlier position stands
     * in (the WAL moved on from there); after it, the connection's own (a failover may have moved
     * the server back).
     */
    private volatile long lastServerPosition;

    /**
     * WAL bytes between the server's position (as far as known) and what {@code c} confirmed; the
     * last known lag when there is no connection.
     */
    private long lagBytes(ReplicationConnection c) {
      if (c == null) {
        return lastLagBytes;
      }
      long server =
          c.hasReceived()
              ? c.serverPosition().asLong()
              : Math.max(c.serverPosition().asLong(), lastServerPosition);
      return Math.max(0, server - c.confirmed().asLong());
    }

    private volatile SpillStore runSpill;
    private volatile SnapshotTracker snapshot;
    private IncrementalSnapshot incremental;
    private boolean incrementalStarting;
    private volatile Optional<IncrementalSnapshot.Progress> storedProgress = Optional.empty();
    private static final Duration QUIET_TIMEOUT = Duration.ofSeconds(60);
    private final AtomicBoolean stopped = new AtomicBoolean(false);
    private final AtomicReference<CompletableFuture<?>> inFlight =
        new AtomicReference<>(CompletableFuture.completedFuture(null));
    private CompletableFuture<?> previousConnect = CompletableFuture.completedFuture(null);
    private AtomicBoolean acknowledgedInRun;
    private volatile Map<Long, TableSchema> recordedShapes = Map.of();
    private final RelationStore relations;

    /** The state as the status shows it; safe to call from any thread. */
    private String shownState() {
      SnapshotTracker snap = snapshot;
      return shown(state, snap == null ? null : snap.view()).wire();
    }

    /** {@code state}, or snapshotting while connecting with an initial snapshot running. */
    private static PipelineState shown(PipelineState state, SnapshotStatus snapshot) {
      return state == PipelineState.CONNECTING
              && snapshot != null
              && snapshot.state().equals("running")
          ? PipelineState.SNAPSHOTTING
          : state;
    }

    private PipelineStatus status() {
      ReplicationConnection c = connection;
      Lsn confirmed = c != null ? c.confirmed() : lastConfirmed;
      long lag = c != null ? lagBytes(c) : 0;
      SnapshotTracker snap = snapshot;
      SnapshotStatus snapshotStatus = snap == null ? null : snap.view();
      return new PipelineStatus(
          settings.name(),
          shown(state, snapshotStatus).wire(),
          haltReason == null ? null : haltReason.wire(),
          detail,
          settings.slot(),
          confirmed.toString(),
          lag,
          transactions.get(),
          rows.get(),
          restarts,
          incarnation == null ? null : incarnation.key(),
          snapshotStatus);
    }

    /** A failure of a sink call, marked so {@link #fail} counts it towards sink-failing. */
    private static final class SinkCallFailed extends RuntimeException {
      SinkCallFailed(Throwable cause) {
        super(null, cause, false, false);
      }
    }

    /** {@code call}, its failure marked as the sink's (see {@link SinkCallFailed}). */
    private static CompletionStage<Void> sinkCall(CompletionStage<Void> call) {
      return call.handle(
          (v, e) -> {
            if (e != null) {
              throw new SinkCallFailed(unwrap(e));
            }
            return v;
          });
    }

    private static Throwable unwrap(Throwable t) {
      Throwable e = t;
      while ((e instanceof CompletionException || e instanceof ExecutionException)
          && e.getCause() != null) {
        e = e.getCause();
      }
      return e;
    }
  }

  private CdcPipeline() {}
}
