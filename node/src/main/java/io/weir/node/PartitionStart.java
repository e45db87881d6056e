package io.weir.node;

import io.weir.node.metrics.NodeMetrics;
import io.weir.persistence.Database;
import io.weir.persistence.StorageStatus;
import io.weir.sharding.partition.JournalPruner;
import io.weir.sharding.partition.PartitionObserver;
import io.weir.sharding.partition.PartitionSharding;
import io.weir.sharding.partition.PartitionWiring;
import io.weir.sharding.storage.AcknowledgedMarks;
import io.weir.sharding.storage.DistributedMarks;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.apache.pekko.Done;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.typed.ClusterSingleton;
import org.apache.pekko.cluster.typed.SingletonActor;

/**
 * The start of this node's partitions: sharded over the server nodes with what they are built with
 * ({@link PartitionWiring}: the documents table, the journal pruner, metrics, the storage gate and
 * the acknowledged marks), kept running by one keeper per cluster, and the outbox retention, when
 * set, by another singleton.
 */
final class PartitionStart {
  private PartitionStart() {}

  /**
   * The partitions: sharded over the server nodes, all kept running by one keeper per cluster; the
   * outbox retention, when set, by another singleton.
   */
  static void start(
      ActorSystem<Void> system,
      NodeSettings settings,
      JournalPruner journalPruner,
      AtomicReference<StorageStatus> storage,
      NodeMetrics metrics,
      PartitionObserver signals) {
    PartitionSharding.init(
        system,
        partitionWiring(system, settings, journalPruner, storage, metrics, signals),
        settings.partitionShards());
    ClusterSingleton.get(system)
        .init(
            SingletonActor.of(
                    PartitionSharding.keeper(
                        settings.partitions(),
                        () -> storage.get().isReady(),
                        settings.partitionKeepAlive()),
                    "weir-partition-keeper")
                .withSettings(NodeStartup.serverSingleton(system)));
    settings
        .outboxRetention()
        .ifPresent(
            interval ->
                ClusterSingleton.get(system)
                    .init(
                        SingletonActor.of(
                                PartitionSharding.retention(
                                    settings.partitions(),
                                    () -> storage.get().isReady(),
                                    interval,
                                    100_000),
                                "weir-outbox-retention")
                            .withSettings(NodeStartup.serverSingleton(system))));
  }

  /**
   * What this node's partitions are built with: the documents table on a pool and threads of its
   * own (ADR 0032), old snapshots upgraded a few at a time, the JDBC journal's query to catch the
   * table up, the journal pruner, metrics and the storage gate.
   */
  private static PartitionWiring partitionWiring(
      ActorSystem<Void> system,
      NodeSettings settings,
      JournalPruner pruner,
      AtomicReference<StorageStatus> storage,
      NodeMetrics metrics,
      PartitionObserver signals) {
    String schema = settings.postgres().schema();
    BlockingPool pool =
        BlockingPool.open(
            system, settings.postgres(), settings.documentsPoolSize(), "weir-documents");
    Database documents = pool.database();
    ExecutorService documentsIo = pool.threads();
    ExecutorService upgrades =
        Executors.newFixedThreadPool(
            settings.snapshotUpgrades(), NodeStartup.daemonThreads("weir-snapshot-upgrade"));
    CoordinatedShutdown.get(system)
        .addTask(
            CoordinatedShutdown.PhaseBeforeActorSystemTerminate(),
            "close-weir-snapshot-upgrades",
            () -> {
              upgrades.shutdownNow();
              return CompletableFuture.completedFuture(Done.getInstance());
            });
    return PartitionWiring.jdbc(
            settings.partitionLimits(), documents.dataSource(), schema, documentsIo, upgrades)
        .withPruner(pruner)
        .withObserver(
            PartitionObserver.both(
                settings.metrics().enabled()
                    ? metrics.partitions(settings.partitions())
                    : PartitionObserver.NONE,
                signals))
        .withGate(
            new NodeStorageGate(
                storage,
                settings.requiredCopies(),
                documents.dataSource(),
                documentsIo,
                settings.marks().settleTimeout()))
        .withMarks(
            settings.marks().enabled()
                ? new DistributedMarks(system, marksScope(storage), settings.marks().timeout())
                : AcknowledgedMarks.NONE);
  }

  /**
   * The scope of the acknowledged marks: the cluster's identity and restore epoch (a restore
   * rewinds the journal on purpose and starts new marks; nodes are stopped during one), as last
   * seen; null before storage was reached.
   */
  private static Supplier<String> marksScope(AtomicReference<StorageStatus> storage) {
    AtomicReference<String> seen = new AtomicReference<>();
    return () -> {
      if (storage.get() instanceof StorageStatus.Ready r) {
        seen.set(r.identity().clusterId() + "-" + r.identity().restoreEpoch());
      }
      return seen.get();
    };
  }
}
