package io.weir.persistence.cdc;

import static io.weir.persistence.cdc.CdcPipeline.unwrap;

import io.micrometer.core.instrument.MeterRegistry;
import io.weir.persistence.cdc.CdcPipeline.CheckTables;
import io.weir.persistence.cdc.CdcPipeline.Command;
import io.weir.persistence.cdc.CdcPipeline.ConnectFailed;
import io.weir.persistence.cdc.CdcPipeline.Connected;
import io.weir.persistence.cdc.CdcPipeline.Drop;
import io.weir.persistence.cdc.CdcPipeline.DropDone;
import io.weir.persistence.cdc.CdcPipeline.DropError;
import io.weir.persistence.cdc.CdcPipeline.DropReply;
import io.weir.persistence.cdc.CdcPipeline.GetStatus;
import io.weir.persistence.cdc.CdcPipeline.IncrementalBegun;
import io.weir.persistence.cdc.CdcPipeline.Retry;
import io.weir.persistence.cdc.CdcPipeline.SnapshotReply;
import io.weir.persistence.cdc.CdcPipeline.Start;
import io.weir.persistence.cdc.CdcPipeline.StartIncrementalSnapshot;
import io.weir.persistence.cdc.CdcPipeline.Stop;
import io.weir.persistence.cdc.CdcPipeline.StreamEnded;
import io.weir.persistence.cdc.assembly.RelationStore;
import io.weir.persistence.cdc.assembly.SpillLimitExceeded;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.SinkException;
import io.weir.persistence.cdc.snapshot.IncrementalSnapshot;
import io.weir.persistence.cdc.snapshot.SnapshotTracker;
import io.weir.persistence.cdc.source.SlotHolders;
import io.weir.persistence.cdc.source.SlotManager;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.SlotIncarnation;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.eventstream.EventStream;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.slf4j.LoggerFactory;

/**
 * The actor behind {@link CdcPipeline}: its life cycle (connecting, running, backoff, halted,
 * stopped, dropped), the commands of its protocol and the status. The blocking connect is {@link
 * ConnectPhase}, one run's stream is {@link DeliveryGraph}, and whether a failure halts or restarts
 * is {@link FailurePolicy}.
 */
final class PipelineRunner extends AbstractBehavior<Command> {
  private static final Duration QUIET_TIMEOUT = Duration.ofSeconds(60);

  private final TimerScheduler<Command> timers;
  private final PipelineSettings settings;
  private final SourceSettings source;
  private final ChangeSink sink;
  private final SlotManager slots;
  private final SlotHolders holders;
  private final Executor blockingIo;
  private final ActorSystem<?> system;
  private final PipelineMetrics metrics;
  private final FailurePolicy failures; // halt or restart, and the counters bounding retries
  private final ConnectPhase phase;
  private final DeliveryGraph delivery;
  private final StreamPositions positions = new StreamPositions();
  private final LagClock lagClock = new LagClock();
  private final AtomicLong transactions = new AtomicLong();
  private final AtomicLong rows = new AtomicLong();
  private final AtomicBoolean stopped = new AtomicBoolean(false);

  /** The sink call in flight (a new connect or a drop waits for it, bounded). */
  private final AtomicReference<CompletableFuture<?>> inFlight =
      new AtomicReference<>(CompletableFuture.completedFuture(null));

  // Volatile: a metrics scrape reads it (weir.cdc.state) besides the actor.
  private volatile PipelineState state = PipelineState.STOPPED;
  // Written by the actor only; volatile so a running snapshot notices it was superseded.
  private volatile long attempt;
  private volatile SnapshotTracker snapshot;
  private HaltReason haltReason;
  private String detail;

  /**
   * The typed cause of the current backoff when the sink paused for one ({@link
   * SinkException#paused}: {@code quota-exceeded}, {@code storage-behind}, ...), else null; shown
   * as the status's reason while the pipeline waits.
   */
  private String pauseReason;

  private int restarts;
  private SlotIncarnation incarnation;
  private DeliveryGraph.Run run; // the run streaming now; null while none does
  private boolean incrementalStarting;
  private CompletableFuture<?> previousConnect = CompletableFuture.completedFuture(null);

  PipelineRunner(
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
    this.metrics =
        new PipelineMetrics(
            registry, settings.name(), () -> positions.confirmed().asLong(), positions::lagBytes);
    this.phase =
        new ConnectPhase(
            settings,
            source,
            sink,
            slots,
            holders,
            relations,
            metrics,
            failures,
            LoggerFactory.getLogger(CdcPipeline.class));
    this.delivery =
        new DeliveryGraph(
            settings,
            source,
            sink,
            metrics,
            lagClock,
            relations,
            blockingIo,
            LoggerFactory.getLogger(CdcPipeline.class),
            inFlight,
            transactions,
            rows,
            positions::acknowledgedThrough);
    metrics.lagSeconds(() -> lagClock.seconds(System.currentTimeMillis()));
    metrics.stateGauges(this::shownState);
    if (settings.streaming().enabled()) {
      metrics.spillGauges(delivery::spillBytesOnDisk, delivery::spillMemoryInUse);
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
      pauseReason = null;
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

  private Behavior<Command> onDrop(Drop drop) {
    if (!state.startable()) {
      drop.replyTo()
          .tell(
              new DropReply(
                  status(),
                  DropError.NOT_STOPPED,
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
                  try {
                    phase.drop();
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
            (ok, err) -> new DropDone(err == null ? null : unwrap(err), previous, drop.replyTo()));
    return this;
  }

  private Behavior<Command> onDropDone(DropDone done) {
    Throwable error = done.error();
    if (error == null) {
      state = PipelineState.DROPPED;
      lagClock.reset();
      haltReason = null;
      detail = null;
      pauseReason = null;
      incarnation = null;
      positions.reset();
      failures.dropped();
      snapshot = null;
      done.replyTo().tell(DropReply.dropped(status()));
      return this;
    }
    state = done.previousState();
    if (error instanceof SlotManager.SlotActiveException active) {
      done.replyTo()
          .tell(
              new DropReply(
                  status(),
                  DropError.SLOT_ACTIVE,
                  "slot "
                      + active.slot()
                      + " is still active for another connection; nothing was deleted; retry"));
    } else {
      String why = CdcPipeline.describe(error);
      getContext().getLog().warn("pipeline {}: drop failed: {}", settings.name(), why);
      done.replyTo()
          .tell(
              new DropReply(
                  status(),
                  DropError.FAILED,
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
    CompletableFuture<ConnectPhase.Opened> connecting =
        quiet()
            .thenApplyAsync(
                v -> {
                  try {
                    phase.cleanSpillDirectory();
                    return phase.open(
                        () -> attempt != myAttempt || stopped.get(), tracker -> snapshot = tracker);
                  } catch (RuntimeException e) {
                    throw e;
                  } catch (Exception e) {
                    throw new CompletionException(e);
                  }
                },
                blockingIo)
            .toCompletableFuture();
    previousConnect = connecting;
    connecting.whenComplete(
        (ok, err) -> {
          if (ok != null && stopped.get()) {
            ok.connection().close(); // the actor is gone: nobody else will close this connection
          }
        });
    getContext()
        .pipeToSelf(
            connecting,
            (ok, err) ->
                err == null ? new Connected(myAttempt, ok) : new ConnectFailed(myAttempt, err));
  }

  private CompletableFuture<Void> quiet() {
    CompletableFuture<?> apply = inFlight.get();
    CompletableFuture<?> connecting = previousConnect;
    return CompletableFuture.allOf(
            apply.handle((v, e) -> null).toCompletableFuture(),
            connecting.handle((v, e) -> null).toCompletableFuture())
        .completeOnTimeout(null, QUIET_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
  }

  private Behavior<Command> onConnected(Connected c) {
    if (c.attempt() != attempt || state != PipelineState.CONNECTING) {
      CompletableFuture.runAsync(c.opened().connection()::close, blockingIo);
      if (state.stoppedForGood()) {
        sink.streamStopped(); // the sink was opened for an attempt a stop or halt overtook
      }
      return this;
    }
    ConnectPhase.Opened opened = c.opened();
    positions.streaming(opened.connection());
    incarnation = opened.incarnation();
    state = PipelineState.RUNNING;
    failures.streaming();
    detail = null;
    pauseReason = null;
    getContext()
        .getLog()
        .info(
            "pipeline {}: streaming slot {} (incarnation {})",
            settings.name(),
            settings.slot(),
            incarnation.id());
    run = delivery.start(opened, blockingIo, system);
    Optional<IncrementalSnapshot.Progress> stored = opened.storedProgress();
    if (stored.isPresent() && !stored.get().done()) {
      beginIncremental(stored.get(), null);
    } else if (stored.isEmpty() && settings.incrementalAtStart()) {
      beginIncremental(
          new IncrementalSnapshot.Progress(UUID.randomUUID().toString(), List.of(), 0, null, false),
          null);
    }
    long myAttempt = attempt;
    getContext().pipeToSelf(run.ended(), (done, err) -> new StreamEnded(myAttempt, err));
    return this;
  }

  private Behavior<Command> onCheckTables(CheckTables request) {
    phase.checkTables(blockingIo).thenAccept(request.replyTo()::tell);
    return this;
  }

  private Behavior<Command> onStartIncremental(StartIncrementalSnapshot request) {
    if (!ConnectPhase.takesIncrementalSnapshots(sink)) {
      request
          .replyTo()
          .tell(
              new SnapshotReply(
                  status(),
                  "unsupported",
                  "this pipeline's sink cannot take an incremental snapshot (it does not store"
                      + " snapshot progress with its chunks)"));
    } else if (state != PipelineState.RUNNING || run == null) {
      request
          .replyTo()
          .tell(
              new SnapshotReply(
                  status(),
                  "not-running",
                  "an incremental snapshot runs while the pipeline streams; its state is "
                      + state.wire()));
    } else if (incrementalStarting || run.incremental().running()) {
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
    IncrementalSnapshot engine = run.incremental();
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
                    status(),
                    "failed",
                    "the snapshot could not start: " + CdcPipeline.describe(error)));
      }
    }
    if (error != null && begun.attempt() == attempt && run != null) {
      snapshot.finished("failed");
      run.killSwitch()
          .abort(error); // the stream restarts (or halts) and resumes from the stored progress
    }
    return this;
  }

  private Behavior<Command> onConnectFailed(ConnectFailed f) {
    if (f.attempt() != attempt) {
      if (state.stoppedForGood()) {
        sink.streamStopped();
      }
      return this;
    }
    fail(f.error(), false, false);
    return this;
  }

  private Behavior<Command> onStreamEnded(StreamEnded e) {
    if (e.attempt() != attempt) {
      return this;
    }
    boolean wasFlowing = run != null && run.flowing().get();
    boolean progressed = run != null && run.acknowledged().get();
    shutdownStream();
    if (e.error() == null) {
      // The server ended the stream (e.g. shutdown); reconnect.
      fail(new SQLException("replication stream ended", "08006"), wasFlowing, progressed);
    } else {
      fail(e.error(), wasFlowing, progressed);
    }
    return this;
  }

  /**
   * Halts or schedules a restart, as the {@link FailurePolicy} decides; {@code progressed}: the run
   * that ended acknowledged a position.
   */
  private void fail(Throwable raw, boolean wasFlowing, boolean progressed) {
    Throwable error = unwrap(raw);
    boolean fromSink = false;
    if (error instanceof DeliveryGraph.SinkCallFailed marked) {
      fromSink = true;
      error = unwrap(marked.getCause());
    }
    shutdownStream();
    FailurePolicy.Decision decision =
        failures.decide(
            error,
            fromSink,
            wasFlowing,
            progressed,
            positions.highestAcknowledged(),
            System.nanoTime());
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
    pauseReason =
        error instanceof SinkException paused && !paused.isPermanent() ? paused.code() : null;
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
    pauseReason = null;
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
    if (run != null) {
      DeliveryGraph.Run stopping = run;
      run = null;
      stopping.shutdown();
      lagClock.keepOldest();
      positions.stopped(stopping.connection());
      CompletableFuture.runAsync(stopping.connection()::close, blockingIo);
    }
  }

  /** The state as the status shows it; safe to call from any thread. */
  private String shownState() {
    SnapshotTracker snap = snapshot;
    return state.shown(snap == null ? null : snap.view()).wire();
  }

  private PipelineStatus status() {
    Lsn confirmed = positions.confirmed();
    long lag = positions.currentLagBytes();
    SnapshotTracker snap = snapshot;
    SnapshotStatus snapshotStatus = snap == null ? null : snap.view();
    return new PipelineStatus(
        settings.name(),
        state.shown(snapshotStatus).wire(),
        haltReason != null
            ? haltReason.wire()
            : state == PipelineState.BACKOFF ? pauseReason : null,
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
}
