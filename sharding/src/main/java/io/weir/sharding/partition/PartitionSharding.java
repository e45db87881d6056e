package io.weir.sharding.partition;

import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.BooleanSupplier;
import org.apache.pekko.actor.ActorSelection;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.RootActorPath;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.sharding.ShardRegion;
import org.apache.pekko.cluster.sharding.typed.GetClusterShardingStats;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityRef;
import org.apache.pekko.pattern.Patterns;

/**
 * The partitions on Cluster Sharding: entity {@code weir-partition}, entity id = the partition
 * number, hosted by nodes with the {@code server} role. {@link #keeper} keeps all P partitions
 * running (started eagerly, and again on the surviving nodes when a node is lost).
 */
public final class PartitionSharding {
  /** Nodes with this role host partitions. */
  public static final String ROLE = "server";

  private PartitionSharding() {}

  /**
   * Registers the entity type on this node (hosting partitions if it has the server role), on the
   * in-memory documents table (tests and tools on Pekko's in-memory journals).
   */
  public static void init(ActorSystem<?> system, PartitionSettings settings) {
    init(system, PartitionWiring.inMemory(settings));
  }

  /**
   * Registers the entity type on this node, each partition built with {@code wiring}, in Pekko's
   * own shard layout ({@link PartitionShards#LEGACY_LAYOUT}).
   */
  public static void init(ActorSystem<?> system, PartitionWiring wiring) {
    init(system, wiring, PartitionShards.LEGACY_LAYOUT);
  }

  /**
   * Registers the entity type on this node, each partition built with {@code wiring}, partitions
   * grouped into shards as {@code layout} says (the same on every node of the cluster).
   */
  public static void init(ActorSystem<?> system, PartitionWiring wiring, PartitionShards layout) {
    int legacyShards = system.settings().config().getInt("pekko.cluster.sharding.number-of-shards");
    ClusterSharding.get(system)
        .init(
            Entity.of(
                    PartitionEntity.TYPE_KEY,
                    ctx ->
                        ServerOrigin.guard(
                            PartitionEntity.create(Integer.parseInt(ctx.getEntityId()), wiring),
                            Command.class,
                            ROLE))
                .withMessageExtractor(layout.extractor(legacyShards))
                .withRole(ROLE));
  }

  /** A reference to partition {@code n} wherever it runs. */
  public static EntityRef<Command> partition(ActorSystem<?> system, int n) {
    return ClusterSharding.get(system).entityRefFor(PartitionEntity.TYPE_KEY, Integer.toString(n));
  }

  private enum Tick {
    INSTANCE
  }

  /**
   * Every {@code interval}, while {@code storageReady} holds, sends each of the {@code partitions}
   * partitions a status request: a stopped one (never started, or lost with its node) starts and
   * recovers. Run it once per cluster (a cluster singleton).
   */
  public static Behavior<Void> keeper(
      int partitions, BooleanSupplier storageReady, Duration interval) {
    return Behaviors.<Tick>setup(
            ctx ->
                Behaviors.withTimers(
                    timers -> {
                      timers.startTimerWithFixedDelay(Tick.INSTANCE, Duration.ZERO, interval);
                      ActorRef<StatusProtocol.PartitionStatus> ignore = ctx.getSystem().ignoreRef();
                      return Behaviors.receiveMessage(
                          tick -> {
                            if (storageReady.getAsBoolean()) {
                              for (int n = 0; n < partitions; n++) {
                                partition(ctx.getSystem(), n).tell(new GetStatus(ignore));
                              }
                            }
                            return Behaviors.same();
                          });
                    }))
        .unsafeCast();
  }

  /**
   * Automatic outbox retention: every {@code interval}, while {@code storageReady} holds, asks each
   * partition to purge through its consumers' lowest checkpoint ({@link
   * PartitionProtocol.PurgeConsumed}, at most {@code maxEntries} entries each time). Run it once
   * per cluster (a cluster singleton), only when retention is configured.
   */
  public static Behavior<Void> retention(
      int partitions, BooleanSupplier storageReady, Duration interval, long maxEntries) {
    return Behaviors.<Tick>setup(
            ctx ->
                Behaviors.withTimers(
                    timers -> {
                      timers.startTimerWithFixedDelay(Tick.INSTANCE, interval, interval);
                      ActorRef<PartitionProtocol.PurgeReply> ignore = ctx.getSystem().ignoreRef();
                      return Behaviors.receiveMessage(
                          tick -> {
                            if (storageReady.getAsBoolean()) {
                              for (int n = 0; n < partitions; n++) {
                                partition(ctx.getSystem(), n)
                                    .tell(new PartitionProtocol.PurgeConsumed(maxEntries, ignore));
                              }
                            }
                            return Behaviors.same();
                          });
                    }))
        .unsafeCast();
  }

  /** Running partitions per node address, as the shard regions report them. */
  public static CompletionStage<Map<String, Integer>> runningByNode(
      ActorSystem<?> system, Duration timeout) {
    CompletionStage<ShardRegion.ClusterShardingStats> stats =
        AskPattern.ask(
            ClusterSharding.get(system).shardState(),
            replyTo -> new GetClusterShardingStats(PartitionEntity.TYPE_KEY, timeout, replyTo),
            timeout.plusSeconds(1),
            system.scheduler());
    return stats.thenApply(
        s -> {
          Map<String, Integer> out = new HashMap<>();
          s.getRegions()
              .forEach(
                  (address, region) -> {
                    int running = 0;
                    for (Object count : region.getStats().values()) {
                      running += ((Number) count).intValue();
                    }
                    out.put(address.toString(), running);
                  });
          return out;
        });
  }

  /**
   * Which partitions run on which node: asks the partition shard region of every {@code members}
   * address for its entities. A region that does not answer within {@code timeout} is left out of
   * the map (its node is shown without placement), so one slow or unreachable node never blocks the
   * answer for the others.
   */
  public static CompletionStage<Map<String, SortedSet<Integer>>> placement(
      ActorSystem<?> system, Collection<Address> members, Duration timeout) {
    org.apache.pekko.actor.ActorSystem classic = Adapter.toClassic(system);
    List<CompletableFuture<Map.Entry<String, SortedSet<Integer>>>> asks = new ArrayList<>();
    for (Address address : members) {
      ActorSelection region =
          classic.actorSelection(
              new RootActorPath(address, "/")
                  .child("system")
                  .child("sharding")
                  .child(PartitionEntity.TYPE_KEY.name()));
      asks.add(
          Patterns.ask(region, ShardRegion.getShardRegionStateInstance(), timeout)
              .toCompletableFuture()
              .thenApply(
                  reply -> {
                    SortedSet<Integer> ids = new TreeSet<>();
                    for (ShardRegion.ShardState shard :
                        ((ShardRegion.CurrentShardRegionState) reply).getShards()) {
                      for (String id : shard.getEntityIds()) {
                        ids.add(Integer.parseInt(id));
                      }
                    }
                    return Map.entry(address.toString(), ids);
                  })
              .exceptionally(e -> null));
    }
    return CompletableFuture.allOf(asks.toArray(new CompletableFuture<?>[0]))
        .thenApply(
            done -> {
              Map<String, SortedSet<Integer>> out = new HashMap<>();
              asks.forEach(
                  a -> {
                    Map.Entry<String, SortedSet<Integer>> e = a.join();
                    if (e != null) {
                      out.put(e.getKey(), e.getValue());
                    }
                  });
              return out;
            });
  }
}
