package io.weir.bench;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.cdc.CdcPipeline;
import io.weir.persistence.cdc.PipelineSettings;
import io.weir.persistence.cdc.PipelineStatus;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.CheckpointStore;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.persistence.cdc.source.StartMode;
import io.weir.sharding.cdc.PartitionChannel;
import io.weir.sharding.cdc.PartitionSink;
import io.weir.sharding.partition.PartitionSettings;
import io.weir.sharding.partition.PartitionSharding;
import io.weir.sharding.partition.PartitionWiring;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Weir's consumer: the slot stage ({@link CdcPipeline}) streaming a slot into a {@link
 * CountingSink}, in an actor system of its own (local provider: no cluster). Timed from the Start
 * command to the sink applying the workload's last transaction, so connecting, the slot checks and
 * the sink's open count, as pg_recvlogical's start-up does.
 */
final class WeirDrain implements AutoCloseable {
  private static final Duration ASK = Duration.ofSeconds(30);

  private final ActorSystem<HostCommand> system;
  private final Database state;
  private final SourceSettings source;
  private final int batch;
  private final Duration batchDelay;
  private final Duration statusInterval = Duration.ofSeconds(10);
  private int runs;

  /** What one drain saw. */
  /**
   * @param cpuSeconds the JVM's CPU time during the drain (every thread)
   * @param jitSeconds of which the JIT compiler threads'
   * @param gcSeconds of which the garbage collector's and the VM thread's
   */
  record Result(
      long nanos,
      double cpuSeconds,
      double jitSeconds,
      double gcSeconds,
      long rows,
      long transactions) {
    Result(long nanos, double cpuSeconds, long rows, long transactions) {
      this(nanos, cpuSeconds, Double.NaN, Double.NaN, rows, transactions);
    }
  }

  /** Partitions of the partition sink run. */
  static final int PARTITIONS = 64;

  private final boolean partitions;

  /** The documents table's pool (null without partitions) and threads. */
  private final Database documents;

  private final ExecutorService documentsIo = Executors.newFixedThreadPool(8);

  WeirDrain(BenchDatabase db, int batch, Duration batchDelay) {
    this(db, batch, batchDelay, false);
  }

  /**
   * @param partitions drain into the partition sink: the actor system is a one-node cluster hosting
   *     {@value #PARTITIONS} partitions whose journal is in the benchmark database
   */
  WeirDrain(BenchDatabase db, int batch, Duration batchDelay, boolean partitions) {
    this.partitions = partitions;
    Map<String, Object> settings =
        new HashMap<>(
            Map.of(
                "weir.postgres.url", db.url(),
                "weir.postgres.user", db.user(),
                "weir.postgres.password", db.password(),
                // A single process: no remoting, no cluster.
                "pekko.actor.provider", "local",
                "pekko.loglevel", "WARNING"));
    if (partitions) {
      settings.put("pekko.actor.provider", "cluster");
      settings.put("pekko.remote.artery.canonical.hostname", "127.0.0.1");
      settings.put("pekko.remote.artery.canonical.port", 0);
      settings.put("pekko.cluster.roles", List.of("server"));
      settings.put("pekko.cluster.sharding.passivation.strategy", "none");
      settings.put("pekko.cluster.jmx.enabled", "off");
    }
    Config overrides = ConfigFactory.parseMap(settings);
    Config config =
        ConfigFactory.load(
            overrides.withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
    this.state = Database.create(PostgresSettings.create(config), "bench-state");
    // The pipeline records slot incarnations in weir.cdc_slot.
    SchemaMigrator.migrate(state.dataSource(), "weir");
    this.source = new SourceSettings(db.url(), db.user(), db.password());
    this.batch = batch;
    this.batchDelay = batchDelay;
    this.system = ActorSystem.create(host(), "weir-bench", config);
    if (partitions) {
      org.apache.pekko.cluster.typed.Cluster cluster =
          org.apache.pekko.cluster.typed.Cluster.get(system);
      cluster
          .manager()
          .tell(org.apache.pekko.cluster.typed.Join.create(cluster.selfMember().address()));
      // A large quota: the benchmark's rounds accumulate outbox entries and nothing purges them.
      // The documents table as the node keeps it: its own pool and threads.
      this.documents =
          Database.create(PostgresSettings.create(config).withPoolSize(8), "bench-documents");
      PartitionSharding.init(
          system,
          PartitionWiring.jdbc(
              new PartitionSettings(100_000_000, 1L << 40, 256, 20_000),
              documents.dataSource(),
              "weir",
              documentsIo,
              documentsIo));
    } else {
      this.documents = null;
    }
  }

  /**
   * The pipeline settings of a run on {@code slot}: the only tuning is batching (a documented
   * option).
   */
  PipelineSettings settings(String name, String slot) {
    return PipelineSettings.of(name, slot, List.of(BenchDatabase.PUBLICATION))
        // The slot was created before the workload; never create another.
        .withStartMode(StartMode.RESUME)
        .withBatching(batch, batchDelay)
        // pg_recvlogical's default status interval.
        .withStatusInterval(statusInterval);
  }

  /**
   * The pgoutput {@code messages} option the pipeline asks for: always on (incremental snapshot
   * watermarks are logical messages), whatever the pipeline's {@code messages} setting.
   */
  boolean messages() {
    return true;
  }

  /**
   * Runs a pipeline until {@code finished} completes with a {@code System.nanoTime()}; returns the
   * time from the Start command to then and the JVM's CPU time meanwhile.
   */
  Result run(
      String name,
      PipelineSettings settings,
      ChangeSink sink,
      CompletableFuture<Long> finished,
      long rows)
      throws Exception {
    ActorRef<CdcPipeline.Command> pipeline =
        ask(
            replyTo ->
                new Spawn(
                    CdcPipeline.create(settings, source, sink, state.dataSource(), "weir"),
                    name,
                    replyTo));
    try {
      CpuTimes cpu = CpuTimes.now();
      long start = System.nanoTime();
      check(ask(pipeline, CdcPipeline.Start::new));
      Long end = null;
      while (end == null) {
        try {
          end = finished.get(1, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
          check(ask(pipeline, CdcPipeline.GetStatus::new));
          if (System.nanoTime() - start > TimeUnit.MINUTES.toNanos(30)) {
            throw new IllegalStateException("the pipeline did not finish within 30 minutes");
          }
        }
      }
      return new Result(end - start, CpuTimes.now().self() - cpu.self(), rows, 0);
    } finally {
      ask(pipeline, CdcPipeline.Stop::new);
      AskPattern.<HostCommand, Done>ask(
              system, r -> new Despawn(pipeline, r), ASK, system.scheduler())
          .toCompletableFuture()
          .get(ASK.toSeconds(), TimeUnit.SECONDS);
    }
  }

  String describeSettings() {
    PipelineSettings s = settings("x", "x");
    return "batching "
        + s.batchMaxTransactions()
        + " transactions / "
        + s.batchMaxDelay().toMillis()
        + " ms per sink call, in-flight window "
        + s.inFlightWindow()
        + ", status interval "
        + s.statusInterval().toSeconds()
        + " s, max transaction changes "
        + s.maxTransactionChanges()
        + " (other settings: PipelineSettings.of defaults)";
  }

  /** Drains {@code slot} until the sink has applied the workload's last transaction. */
  Result drain(String slot, BenchDatabase.Workload workload) throws Exception {
    String name = "bench_" + (++runs) + "_" + slot;
    FinishingSink finishing =
        !partitions
            ? null
            : new FinishingSink(
                new PartitionSink(
                    PartitionChannel.sharded(system),
                    PartitionSink.Settings.defaults(PARTITIONS),
                    new CheckpointStore(state.dataSource(), "weir")),
                workload.lastXid(),
                workload.endLsn());
    ChangeSink sink;
    DrainCounts counted;
    if (finishing != null) {
      sink = finishing;
      counted = finishing;
    } else {
      CountingSink c = new CountingSink(workload.lastXid(), workload.endLsn());
      sink = c;
      counted = c;
    }
    ActorRef<CdcPipeline.Command> pipeline =
        ask(
            replyTo ->
                new Spawn(
                    CdcPipeline.create(
                        settings(name, slot), source, sink, state.dataSource(), "weir"),
                    name,
                    replyTo));
    try {
      CpuTimes cpu = CpuTimes.now();
      CpuTimes.ThreadCpu threads = CpuTimes.ThreadCpu.now();
      long start = System.nanoTime();
      PipelineStatus started = ask(pipeline, CdcPipeline.Start::new);
      check(started);
      long deadline = start + TimeUnit.MINUTES.toNanos(30);
      Long end = null;
      while (end == null) {
        try {
          end = counted.finished().get(1, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
          check(ask(pipeline, CdcPipeline.GetStatus::new));
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException(
                "Weir did not reach the end position within 30 minutes");
          }
        }
      }
      double cpuSeconds = CpuTimes.now().self() - cpu.self();
      CpuTimes.ThreadCpu after = CpuTimes.ThreadCpu.now();
      return new Result(
          end - start,
          cpuSeconds,
          after.jitSince(threads),
          after.gcSince(threads),
          counted.rows(),
          counted.transactions());
    } finally {
      if (finishing != null) {
        finishing.shutdown();
      }
      ask(pipeline, CdcPipeline.Stop::new);
      AskPattern.<HostCommand, Done>ask(
              system, r -> new Despawn(pipeline, r), ASK, system.scheduler())
          .toCompletableFuture()
          .get(ASK.toSeconds(), TimeUnit.SECONDS);
    }
  }

  private static void check(PipelineStatus status) {
    if (status.state().equals("halted") || status.state().equals("backoff")) {
      throw new IllegalStateException(
          "the pipeline is " + status.state() + " (" + status.reason() + "): " + status.detail());
    }
  }

  private <T> T ask(
      ActorRef<CdcPipeline.Command> target, Function<ActorRef<T>, CdcPipeline.Command> make)
      throws InterruptedException, ExecutionException, TimeoutException {
    CompletionStage<T> reply = AskPattern.ask(target, make::apply, ASK, system.scheduler());
    return reply.toCompletableFuture().get(ASK.toSeconds(), TimeUnit.SECONDS);
  }

  private ActorRef<CdcPipeline.Command> ask(
      Function<ActorRef<ActorRef<CdcPipeline.Command>>, HostCommand> make)
      throws InterruptedException, ExecutionException, TimeoutException {
    CompletionStage<ActorRef<CdcPipeline.Command>> reply =
        AskPattern.ask(system, make::apply, ASK, system.scheduler());
    return reply.toCompletableFuture().get(ASK.toSeconds(), TimeUnit.SECONDS);
  }

  @Override
  public void close() {
    system.terminate();
    try {
      system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      // Leaving anyway; the JVM exits after the report.
    }
    documentsIo.shutdownNow();
    if (documents != null) {
      documents.close();
    }
    state.close();
  }

  // --- the guardian: spawns pipelines as its children and stops them on request ---

  sealed interface HostCommand {}

  record Spawn(
      Behavior<CdcPipeline.Command> behavior,
      String name,
      ActorRef<ActorRef<CdcPipeline.Command>> replyTo)
      implements HostCommand {}

  record Despawn(ActorRef<CdcPipeline.Command> child, ActorRef<Done> replyTo)
      implements HostCommand {}

  private record Stopped(ActorRef<Done> replyTo) implements HostCommand {}

  private static Behavior<HostCommand> host() {
    return Behaviors.setup(
        ctx ->
            Behaviors.receive(HostCommand.class)
                .onMessage(
                    Spawn.class,
                    s -> {
                      s.replyTo().tell(ctx.spawn(s.behavior(), s.name()));
                      return Behaviors.same();
                    })
                .onMessage(
                    Despawn.class,
                    d -> {
                      // PostStop shuts the stream down and closes the connection (asynchronously).
                      ctx.watchWith(d.child(), new Stopped(d.replyTo()));
                      ctx.stop(d.child());
                      return Behaviors.same();
                    })
                .onMessage(
                    Stopped.class,
                    s -> {
                      s.replyTo().tell(Done.getInstance());
                      return Behaviors.same();
                    })
                .build());
  }
}
