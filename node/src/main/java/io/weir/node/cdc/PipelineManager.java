package io.weir.node.cdc;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.weir.node.continuous.ContinuousQueries;
import io.weir.node.continuous.ContinuousSink;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.StorageStatus;
import io.weir.persistence.cdc.CdcPipeline;
import io.weir.persistence.cdc.PipelineStatus;
import io.weir.persistence.cdc.mirror.PostgresMirrorSink;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.CheckpointStore;
import io.weir.persistence.cdc.sink.CheckpointedSink;
import io.weir.persistence.cdc.source.SlotHolders;
import io.weir.protocol.CborSerializable;
import io.weir.sharding.cdc.PartitionChannel;
import io.weir.sharding.cdc.PartitionSink;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executor;
import java.util.function.Supplier;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.cluster.typed.Cluster;

/**
 * Owns every configured CDC pipeline of the cluster. Runs as a cluster singleton, so each slot has
 * exactly one consumer in the cluster; when the node hosting it leaves, the singleton (and with it
 * every autostart pipeline) starts on the next oldest node, whose pipelines resume from their
 * sinks' checkpoints (retrying while PostgreSQL still shows the slot active for the old owner).
 *
 * <p>Commands: {@link Get}, {@link Start}, {@link Stop} reply with the pipeline's {@link
 * PipelineStatus}; {@link ListAll} replies with a {@link PipelineList}. Unknown names are answered
 * by the HTTP layer before asking (every node has the same configuration).
 */
public final class PipelineManager {
  public sealed interface Command extends CborSerializable {}

  public record Get(String name, ActorRef<PipelineStatus> replyTo) implements Command {}

  public record Start(String name, ActorRef<PipelineStatus> replyTo) implements Command {}

  public record Stop(String name, ActorRef<PipelineStatus> replyTo) implements Command {}

  public record ListAll(ActorRef<PipelineList> replyTo) implements Command {}

  /**
   * Drops pipeline {@code name}'s slot and Weir's records of it (see {@link CdcPipeline.Drop}); the
   * pipeline must be stopped or halted. Routed through this singleton so exactly one actor in the
   * cluster drops a slot, never while it streams.
   */
  public record Drop(String name, ActorRef<CdcPipeline.DropReply> replyTo) implements Command {}

  /**
   * Starts an incremental snapshot of the named tables (empty: all published) in pipeline {@code
   * name}.
   */
  public record Snapshot(
      String name, List<String> tables, ActorRef<CdcPipeline.SnapshotReply> replyTo)
      implements Command {}

  /** How pipeline {@code name}'s sink would handle each published table. */
  public record Check(String name, ActorRef<CdcPipeline.CheckReply> replyTo) implements Command {}

  /** Every pipeline's status, sorted by name. */
  /**
   * Every pipeline's status.
   *
   * @param owner cluster address of the node running the pipelines: the one consumer of their slots
   */
  public record PipelineList(String owner, List<PipelineStatus> pipelines)
      implements CborSerializable {
    public PipelineList {
      pipelines = List.copyOf(pipelines);
    }
  }

  private enum CheckStorage implements Command {
    INSTANCE
  }

  private PipelineManager() {}

  /**
   * @param storage this node's storage status: pipelines autostart once Weir's schema is migrated
   * @param continuous this node's continuous-query engine: the sink of a pipeline with {@code
   *     sink.type = continuous} (null when no pipeline has that sink)
   * @param holders how this node names itself on its replication connections, and which holders of
   *     a slot it may end to take the slot over (members the cluster downed, ADR 0037)
   */
  public static Behavior<Command> create(
      List<PipelineConfig> pipelines,
      PostgresSettings weirDatabase,
      Supplier<StorageStatus> storage,
      MeterRegistry registry,
      int partitionCount,
      ContinuousQueries continuous,
      SlotHolders holders) {
    return Behaviors.setup(
        ctx ->
            Behaviors.withTimers(
                timers -> {
                  Executor io =
                      ctx.getSystem()
                          .dispatchers()
                          .lookup(DispatcherSelector.fromConfig("weir.blocking-io-dispatcher"));
                  Database state = Database.create(weirDatabase, "weir-pipelines");
                  Map<String, Database> targets = new HashMap<>();
                  Map<String, ActorRef<CdcPipeline.Command>> children = new HashMap<>();
                  List<PartitionSink> partitionSinks = new ArrayList<>();
                  for (PipelineConfig p : pipelines) {
                    ChangeSink sink;
                    if (p.continuous()) {
                      if (continuous == null) {
                        throw new IllegalStateException(
                            "pipeline "
                                + p.name()
                                + " feeds continuous queries, but the node has no engine for them");
                      }
                      sink =
                          new ContinuousSink(
                              continuous,
                              new CheckpointStore(state.dataSource(), weirDatabase.schema()),
                              io);
                    } else if (p.partitions() != null) {
                      sink =
                          new PartitionSink(
                              PartitionChannel.sharded(ctx.getSystem()),
                              p.partitions().settings(partitionCount),
                              new CheckpointStore(state.dataSource(), weirDatabase.schema()));
                      partitionSinks.add((PartitionSink) sink);
                    } else if (p.file() != null) {
                      PipelineConfig.FileSinkConfig f = p.file();
                      CheckpointedSink checkpointed =
                          new CheckpointedSink(
                              new FileSink(f.path(), io),
                              new CheckpointStore(state.dataSource(), weirDatabase.schema()),
                              io,
                              f.maxRetries(),
                              f.retryBackoff(),
                              f.checkpointEvery(),
                              f.checkpointMaxDelay());
                      // A pipeline made again on this node (the manager restarted) counts anew.
                      registry
                          .find("weir.cdc.checkpoint.retries")
                          .tag("pipeline", p.name())
                          .meters()
                          .forEach(registry::remove);
                      FunctionCounter.builder(
                              "weir.cdc.checkpoint.retries",
                              checkpointed,
                              CheckpointedSink::storeRetries)
                          .description(
                              "library checkpoint store calls retried after a transient fault")
                          .tag("pipeline", p.name())
                          .register(registry);
                      sink = checkpointed;
                    } else {
                      Database target =
                          targets.computeIfAbsent(
                              p.sinkUrl(),
                              url -> Database.create(weirDatabase.withUrl(url), "weir-mirror"));
                      sink = new PostgresMirrorSink(target.dataSource(), io, p.mirror());
                    }
                    children.put(
                        p.name(),
                        ctx.spawn(
                            CdcPipeline.builder(
                                    p.settings(),
                                    p.source(),
                                    sink,
                                    state.dataSource(),
                                    weirDatabase.schema())
                                .metrics(registry)
                                .holders(holders)
                                .build(),
                            "pipeline-" + p.name()));
                  }
                  ctx.getLog()
                      .info(
                          "pipeline manager started on this node with {} pipeline(s)",
                          children.size());
                  if (pipelines.stream().anyMatch(PipelineConfig::autostart)) {
                    // The first look at once: a manager that moved to a survivor after a failover
                    // finds storage ready there and starts its pipelines without waiting a period.
                    timers.startTimerWithFixedDelay(
                        CheckStorage.INSTANCE,
                        CheckStorage.INSTANCE,
                        Duration.ZERO,
                        Duration.ofMillis(500));
                  }
                  return running(
                      ctx,
                      pipelines,
                      children,
                      storage,
                      timers,
                      () -> {
                        state.close();
                        targets.values().forEach(Database::close);
                        partitionSinks.forEach(PartitionSink::shutdown);
                      });
                }));
  }

  private static Behavior<Command> running(
      ActorContext<Command> ctx,
      List<PipelineConfig> pipelines,
      Map<String, ActorRef<CdcPipeline.Command>> children,
      Supplier<StorageStatus> storage,
      TimerScheduler<Command> timers,
      Runnable closeResources) {
    return Behaviors.receive(Command.class)
        .onMessageEquals(
            CheckStorage.INSTANCE,
            () -> {
              if (storage.get().isReady()) {
                timers.cancel(CheckStorage.INSTANCE);
                ActorRef<PipelineStatus> ignore = ctx.getSystem().ignoreRef();
                for (PipelineConfig p : pipelines) {
                  if (p.autostart()) {
                    children.get(p.name()).tell(new CdcPipeline.Start(ignore));
                  }
                }
              }
              return Behaviors.same();
            })
        .onMessage(
            Get.class, m -> forward(children, m.name(), new CdcPipeline.GetStatus(m.replyTo())))
        .onMessage(
            Start.class, m -> forward(children, m.name(), new CdcPipeline.Start(m.replyTo())))
        .onMessage(Stop.class, m -> forward(children, m.name(), new CdcPipeline.Stop(m.replyTo())))
        .onMessage(Drop.class, m -> forward(children, m.name(), new CdcPipeline.Drop(m.replyTo())))
        .onMessage(
            Snapshot.class,
            m ->
                forward(
                    children,
                    m.name(),
                    new CdcPipeline.StartIncrementalSnapshot(m.tables(), m.replyTo())))
        .onMessage(
            Check.class, m -> forward(children, m.name(), new CdcPipeline.CheckTables(m.replyTo())))
        .onMessage(
            ListAll.class,
            m -> {
              List<ActorRef<CdcPipeline.Command>> all = new ArrayList<>(children.values());
              ctx.spawnAnonymous(collect(all, m.replyTo()));
              return Behaviors.same();
            })
        .onSignal(
            PostStop.class,
            s -> {
              closeResources.run();
              return Behaviors.same();
            })
        .build();
  }

  private static Behavior<Command> forward(
      Map<String, ActorRef<CdcPipeline.Command>> children,
      String name,
      CdcPipeline.Command command) {
    ActorRef<CdcPipeline.Command> child = children.get(name);
    if (child != null) {
      child.tell(command);
    }
    return Behaviors.same();
  }

  /** Asks every pipeline for its status and replies once all have answered (or after 5 s). */
  private static Behavior<PipelineStatus> collect(
      List<ActorRef<CdcPipeline.Command>> pipelines, ActorRef<PipelineList> replyTo) {
    return Behaviors.setup(
        ctx -> {
          pipelines.forEach(p -> p.tell(new CdcPipeline.GetStatus(ctx.getSelf())));
          String owner = Cluster.get(ctx.getSystem()).selfMember().address().toString();
          List<PipelineStatus> got = new ArrayList<>();
          if (pipelines.isEmpty()) {
            replyTo.tell(new PipelineList(owner, got));
            return Behaviors.stopped();
          }
          ctx.setReceiveTimeout(
              Duration.ofSeconds(5),
              new PipelineStatus(null, "timeout", null, null, null, null, 0, 0, 0, 0, null, null));
          return Behaviors.receive(PipelineStatus.class)
              .onMessage(
                  PipelineStatus.class,
                  s -> {
                    if (s.name() != null) {
                      got.add(s);
                    }
                    if (s.name() == null || got.size() == pipelines.size()) {
                      got.sort(Comparator.comparing(PipelineStatus::name));
                      replyTo.tell(new PipelineList(owner, got));
                      return Behaviors.stopped();
                    }
                    return Behaviors.same();
                  })
              .build();
        });
  }
}
