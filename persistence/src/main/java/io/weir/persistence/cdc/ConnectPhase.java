package io.weir.persistence.cdc;

import io.weir.persistence.SafeErrors;
import io.weir.persistence.cdc.assembly.RelationStore;
import io.weir.persistence.cdc.assembly.SpillStore;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.persistence.cdc.snapshot.IncrementalSnapshot;
import io.weir.persistence.cdc.snapshot.InitialSnapshot;
import io.weir.persistence.cdc.snapshot.SnapshotTracker;
import io.weir.persistence.cdc.source.PublishedTable;
import io.weir.persistence.cdc.source.ReplicationConnection;
import io.weir.persistence.cdc.source.SlotHolders;
import io.weir.persistence.cdc.source.SlotManager;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.persistence.cdc.source.StartMode;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.SlotIncarnation;
import io.weir.protocol.cdc.TableSchema;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.slf4j.Logger;

/**
 * The blocking part of connecting a pipeline, from the option checks to a started replication
 * stream. It reads the sink's checkpoint and the slot's records, so what one run streams from is
 * decided here; what it returns is all the actor needs to start the run. Beside it, the two other
 * blocking steps over the same source, sink and slot records: the table check and the drop.
 */
final class ConnectPhase {
  /**
   * A started replication stream and what the run starts from.
   *
   * @param storedProgress an incremental snapshot's progress the sink stored, if it takes them
   * @param recordedShapes the table shapes accepted before, by relation id
   */
  record Opened(
      ReplicationConnection connection,
      SlotIncarnation incarnation,
      Optional<IncrementalSnapshot.Progress> storedProgress,
      Map<Long, TableSchema> recordedShapes) {}

  private final PipelineSettings settings;
  private final SourceSettings source;
  private final ChangeSink sink;
  private final SlotManager slots;
  private final SlotHolders holders;
  private final RelationStore relations;
  private final PipelineMetrics metrics;
  private final FailurePolicy failures;
  private final Logger log;

  /** {@code failures} is told the source's wal_sender_timeout (it sets the hand-over window). */
  ConnectPhase(
      PipelineSettings settings,
      SourceSettings source,
      ChangeSink sink,
      SlotManager slots,
      SlotHolders holders,
      RelationStore relations,
      PipelineMetrics metrics,
      FailurePolicy failures,
      Logger log) {
    this.settings = settings;
    this.source = source;
    this.sink = sink;
    this.slots = slots;
    this.holders = holders;
    this.relations = relations;
    this.metrics = metrics;
    this.failures = failures;
    this.log = log;
  }

  /** This pipeline's spill directory, or null when it does not spill. */
  static Path spillDirectory(PipelineSettings settings) {
    StreamingSettings streaming = settings.streaming();
    return streaming.spills()
        ? SpillStore.pipelineDirectory(streaming.spillDirectory(), settings.name())
        : null;
  }

  /**
   * Deletes spill files an earlier run left behind (a crash, or a sink call that outlived its run
   * by more than the quiet wait). Blocking; before each connect.
   */
  void cleanSpillDirectory() {
    Path dir = spillDirectory(settings);
    if (dir == null) {
      return;
    }
    try {
      int stale = SpillStore.clean(dir);
      if (stale > 0) {
        log.info("pipeline {}: deleted {} stale spill file(s)", settings.name(), stale);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot clean the spill directory", e);
    }
  }

  /**
   * Checks the options against the sink and the source, takes the slot over from a downed member
   * when allowed, opens the sink at its checkpoint, decides the slot, runs the initial snapshot
   * when the slot exported one and starts replication. Blocking: the caller runs it on the
   * blocking-IO dispatcher.
   *
   * @param superseded whether a newer attempt or a stop overtook this one (ends a running snapshot)
   * @param snapshotStarted told the tracker of an initial snapshot as it starts (for the status)
   */
  Opened open(BooleanSupplier superseded, Consumer<SnapshotTracker> snapshotStarted)
      throws Exception {
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
    if (settings.incrementalAtStart() && !takesIncrementalSnapshots(sink)) {
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
        log.warn(
            "pipeline {}: taking slot {} over from a downed member failed ({}); waiting for"
                + " the slot instead",
            settings.name(),
            settings.slot(),
            SafeErrors.describe(e));
      }
      if (ended != 0) {
        log.warn(
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
        ReplicationConnection.SystemIdentity server = ReplicationConnection.identifySystem(session);
        Optional<SlotIncarnation> recorded = slots.recordedIncarnation();
        Optional<SinkCheckpoint> checkpoint =
            sink.open(new PipelineContext(settings.name(), recorded)).toCompletableFuture().get();
        SlotManager.Prepared prepared = slots.prepareSlot(sourceConn, session, server, checkpoint);
        SlotIncarnation inc = prepared.incarnation();
        if (recorded.isEmpty() || !recorded.get().equals(inc)) {
          sink.open(new PipelineContext(settings.name(), Optional.of(inc)))
              .toCompletableFuture()
              .get();
        }
        if (prepared.exported().isPresent()) {
          initialSnapshot(prepared.exported().get(), superseded, snapshotStarted);
        }
        Optional<IncrementalSnapshot.Progress> storedProgress =
            takesIncrementalSnapshots(sink)
                ? IncrementalSnapshot.Progress.decode(
                    sink.snapshotProgress().toCompletableFuture().get())
                : Optional.empty();
        Map<Long, TableSchema> recordedShapes = relations.load(settings.name());
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
        return new Opened(rc, inc, storedProgress, recordedShapes);
      } catch (Exception e) {
        session.close();
        throw e;
      }
    } catch (ExecutionException e) {
      throw e.getCause() instanceof Exception cause ? cause : e;
    }
  }

  /**
   * Seeds the sink from the slot's exported snapshot, then stores the hand-off checkpoint. The
   * replication session stays idle meanwhile (a command on it would end the snapshot).
   */
  private void initialSnapshot(
      SlotManager.ExportedSnapshot exported,
      BooleanSupplier superseded,
      Consumer<SnapshotTracker> snapshotStarted)
      throws Exception {
    SnapshotTracker tracker = new SnapshotTracker("initial");
    snapshotStarted.accept(tracker);
    try {
      List<TableSchema> shapes =
          new InitialSnapshot(settings, source, sink, tracker, superseded).run(exported);
      relations.save(settings.name(), shapes, exported.consistentPoint());
      // A commit record may start exactly at the consistent point: it is not in the snapshot and
      // the slot streams it, so the hand-off checkpoint sits just before that position.
      sink.completeSnapshot(Lsn.of(exported.consistentPoint().asLong() - 1))
          .toCompletableFuture()
          .get();
      slots.markSnapshot("done");
      tracker.finished("done");
      tracker.log(log, settings.name());
    } catch (Exception | Error e) {
      tracker.finished("failed");
      throw e;
    }
  }

  /** Whether the sink can take an incremental snapshot and keep its progress across restarts. */
  static boolean takesIncrementalSnapshots(ChangeSink sink) {
    return sink.supportsSnapshots() && sink.storesSnapshotProgress();
  }

  /**
   * How the sink would handle every table the publications publish: the answer to {@link
   * CdcPipeline.CheckTables}. Reads the source's catalog on {@code blockingIo}; writes nothing;
   * never completes exceptionally (a failure is the reply's typed error).
   */
  CompletionStage<CdcPipeline.CheckReply> checkTables(Executor blockingIo) {
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
    return published
        .thenCompose(sink::check)
        .handle(
            (tables, error) -> {
              if (error == null) {
                return new CdcPipeline.CheckReply(name, tables, null, null);
              }
              Throwable cause = CdcPipeline.unwrap(error);
              if (published.isCompletedExceptionally()) {
                return new CdcPipeline.CheckReply(
                    name,
                    List.of(),
                    "source-unavailable",
                    "the publications' tables could not be read: " + SafeErrors.describe(cause));
              }
              return new CdcPipeline.CheckReply(
                  name,
                  List.of(),
                  "sink-unavailable",
                  "the sink could not check the tables: " + CdcPipeline.describe(cause));
            });
  }

  private static final int DROP_ATTEMPTS = 10;
  private static final Duration DROP_PAUSE = Duration.ofMillis(500);

  /**
   * The blocking part of a drop: the slot(s) on the source first, then the sink's checkpoint and
   * Weir's records, only once no slot is left. Run only when no connect phase or sink call is in
   * flight, so nothing recreates the slot or its record behind it.
   */
  void drop() throws Exception {
    try (Connection sourceConn = source.connect("weir-cdc")) {
      List<String> dropped = slots.dropSlots(sourceConn, DROP_ATTEMPTS, DROP_PAUSE);
      sink.forget(settings.name()).toCompletableFuture().get();
      slots.forgetRecords();
      log.warn(
          "pipeline {}: dropped (slot(s) dropped: {}); the next start creates a new slot",
          settings.name(),
          dropped.isEmpty() ? "none existed" : String.join(", ", dropped));
    }
  }
}
