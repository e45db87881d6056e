package io.weir.persistence.cdc;

import static io.weir.persistence.cdc.CdcPipeline.guardProtocolStep;

import io.micrometer.core.instrument.Timer;
import io.weir.persistence.SafeErrors;
import io.weir.persistence.cdc.assembly.RelationStore;
import io.weir.persistence.cdc.assembly.SchemaGuard;
import io.weir.persistence.cdc.assembly.SpillStore;
import io.weir.persistence.cdc.assembly.StreamedChanges;
import io.weir.persistence.cdc.assembly.TransactionAssembler;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.snapshot.IncrementalSnapshot;
import io.weir.persistence.cdc.source.ReplicationConnection;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.CdcEvent;
import io.weir.protocol.cdc.CdcMessage;
import io.weir.protocol.cdc.SnapshotWatermark;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.PgOutputDecoder;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.japi.Pair;
import org.apache.pekko.stream.KillSwitches;
import org.apache.pekko.stream.OverflowStrategy;
import org.apache.pekko.stream.UniqueKillSwitch;
import org.apache.pekko.stream.javadsl.Flow;
import org.apache.pekko.stream.javadsl.Keep;
import org.apache.pekko.stream.javadsl.RunnableGraph;
import org.apache.pekko.stream.javadsl.Sink;
import org.apache.pekko.stream.javadsl.Source;
import org.slf4j.Logger;

/**
 * One run of a pipeline as a stream: slot -> pgoutput decoding -> transaction assembly and schema
 * guard -> batching -> bounded in-flight window -> {@link ChangeSink} -> acknowledgement. It owns
 * the acknowledged position of the run: PostgreSQL is told a position is flushed only once the sink
 * made every transaction up to it durable ({@link ChangeSink#durableThrough}, {@link
 * ChangeSink#durableNow}); a message or snapshot watermark moves it to itself only when nothing
 * delivered before it is still waiting.
 */
final class DeliveryGraph {
  private final PipelineSettings settings;
  private final SourceSettings source;
  private final ChangeSink sink;
  private final PipelineMetrics metrics;
  private final LagClock lagClock;
  private final RelationStore relations;
  private final Executor blockingIo;
  private final Logger log;
  private final AtomicReference<CompletableFuture<?>> inFlight;
  private final AtomicLong transactions;
  private final AtomicLong rows;
  private final Consumer<Lsn> acknowledgedThrough;

  /**
   * @param inFlight where the sink call in flight is published (a new connect waits for it)
   * @param transactions counts the transactions delivered, {@code rows} their rows
   * @param acknowledgedThrough told each position acknowledged to the server
   */
  DeliveryGraph(
      PipelineSettings settings,
      SourceSettings source,
      ChangeSink sink,
      PipelineMetrics metrics,
      LagClock lagClock,
      RelationStore relations,
      Executor blockingIo,
      Logger log,
      AtomicReference<CompletableFuture<?>> inFlight,
      AtomicLong transactions,
      AtomicLong rows,
      Consumer<Lsn> acknowledgedThrough) {
    this.settings = settings;
    this.source = source;
    this.sink = sink;
    this.metrics = metrics;
    this.lagClock = lagClock;
    this.relations = relations;
    this.blockingIo = blockingIo;
    this.log = log;
    this.inFlight = inFlight;
    this.transactions = transactions;
    this.rows = rows;
    this.acknowledgedThrough = acknowledgedThrough;
  }

  /** The spill store of the run streaming now (null: none, or no spilling); read by gauges. */
  private volatile SpillStore runSpill;

  /**
   * One started run: the connection it streams from, the kill switch that ends it, its incremental
   * snapshot engine, whether the server has sent anything ({@code flowing}) and whether the run
   * acknowledged a position ({@code acknowledged}: a failure after progress is a new one).
   */
  record Run(
      ReplicationConnection connection,
      UniqueKillSwitch killSwitch,
      CompletionStage<Done> ended,
      IncrementalSnapshot incremental,
      AtomicBoolean flowing,
      AtomicBoolean acknowledged) {
    /** Ends the run's stream and snapshot engine; the connection is the caller's to close. */
    void shutdown() {
      incremental.close();
      killSwitch.shutdown();
    }
  }

  /** Starts a run over the stream {@code opened}; {@link Run#ended} completes when it stops. */
  Run start(ConnectPhase.Opened opened, Executor blockingIo, ActorSystem<?> system) {
    SpillStore spill =
        settings.streaming().enabled()
            ? new SpillStore(
                ConnectPhase.spillDirectory(settings),
                settings.streaming().memoryBound(),
                settings.streaming().maxSpillBytes())
            : null;
    runSpill = spill;
    AtomicReference<UniqueKillSwitch> switchRef = new AtomicReference<>();
    IncrementalSnapshot incremental =
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
    AtomicBoolean flowing = new AtomicBoolean(false);
    AtomicBoolean acknowledged = new AtomicBoolean(false);
    Pair<UniqueKillSwitch, CompletionStage<Done>> run =
        graph(
                opened.connection(),
                flowing,
                acknowledged,
                spill,
                incremental,
                opened.recordedShapes())
            .run(system);
    if (spill != null) {
      // Every buffer of the run goes (open transactions' and undelivered ones'), once the sink
      // call in flight, which may be reading one, has finished.
      run.second().whenComplete((d, e) -> inFlight.get().whenComplete((v, f) -> spill.close()));
    }
    switchRef.set(run.first());
    return new Run(
        opened.connection(), run.first(), run.second(), incremental, flowing, acknowledged);
  }

  /** Bytes the running run's spill store holds on disk (0 without one). */
  long spillBytesOnDisk() {
    SpillStore s = runSpill;
    return s == null ? 0 : s.bytesOnDisk();
  }

  /** Bytes the running run's spill store holds in memory (0 without one). */
  long spillMemoryInUse() {
    SpillStore s = runSpill;
    return s == null ? 0 : s.memoryInUse();
  }

  /** How often the sink stage asks the sink what it made durable since (see Tick). */
  private static final Duration DURABLE_POLL = Duration.ofSeconds(1);

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

  /** Splits a group of events into runs of transactions and single messages, keeping WAL order. */
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

  /**
   * One run's stream over {@code conn}: {@code flowing} is set once the server has sent anything,
   * {@code acked} once this run acknowledged a position; {@code recordedShapes} are the table
   * shapes accepted before.
   */
  private RunnableGraph<Pair<UniqueKillSwitch, CompletionStage<Done>>> graph(
      ReplicationConnection conn,
      AtomicBoolean flowing,
      AtomicBoolean acked,
      SpillStore spill,
      IncrementalSnapshot snapshots,
      Map<Long, TableSchema> recordedShapes) {
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
                .mapConcat(DeliveryGraph::deliveries);
    // Sink-stage state; the sink stage runs one element at a time, so plain fields suffice.
    Lsn[] deliveredEnd = {Lsn.INVALID};
    // Starts where the server resumes: acknowledging that again is no progress.
    Lsn[] acknowledged = {conn.confirmed()};
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
                      acknowledgedThrough.accept(durable);
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
                      acknowledgedThrough.accept(durable);
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
                      acknowledgedThrough.accept(at);
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
                log.warn(
                    "pipeline {}: could not record table shapes ({})",
                    settings.name(),
                    SafeErrors.describe(e));
              }
            },
            blockingIo);
      }
    }
  }

  /** A failure of a sink call, marked so {@link FailurePolicy} counts it towards sink-failing. */
  static final class SinkCallFailed extends RuntimeException {
    SinkCallFailed(Throwable cause) {
      super(null, cause, false, false);
    }
  }

  /** {@code call}, its failure marked as the sink's (see {@link SinkCallFailed}). */
  private static CompletionStage<Void> sinkCall(CompletionStage<Void> call) {
    return call.handle(
        (v, e) -> {
          if (e != null) {
            throw new SinkCallFailed(CdcPipeline.unwrap(e));
          }
          return v;
        });
  }
}
