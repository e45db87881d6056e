package io.weir.node;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;
import io.weir.node.auth.Policies;
import io.weir.node.auth.Principals;
import io.weir.node.cdc.PipelineAdmin;
import io.weir.node.continuous.ContinuousQueries;
import io.weir.node.continuous.ContinuousSettings;
import io.weir.node.documents.Documents;
import io.weir.node.feed.Feeds;
import io.weir.node.gateway.GatewaySettings;
import io.weir.node.http.HttpApi;
import io.weir.node.metrics.NodeMetrics;
import io.weir.node.projection.Projections;
import io.weir.node.tokens.TokenKeys;
import io.weir.persistence.Database;
import io.weir.persistence.StorageMonitor;
import io.weir.persistence.StorageStatus;
import io.weir.persistence.serialization.WeirCborSerializer;
import io.weir.sharding.partition.OutboxReader;
import io.weir.sharding.partition.SqlJournalPruner;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.BootstrapSetup;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.setup.ActorSystemSetup;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.management.cluster.bootstrap.ClusterBootstrap;
import org.apache.pekko.management.javadsl.PekkoManagement;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A running Weir node: an ActorSystem in a Pekko cluster, the storage monitor (schema migration,
 * cluster identity, journal health) and the HTTP API. A node with no seed nodes forms a cluster of
 * its own; otherwise it joins through its seeds. SIGTERM runs coordinated shutdown.
 */
public final class WeirNode {
  private static final Logger log = LoggerFactory.getLogger(WeirNode.class);

  /** Actor system name: every node of a cluster must use the same one. */
  public static final String SYSTEM_NAME = "weir";

  private final ActorSystem<Void> system;
  private final ServerBinding binding;
  private final AtomicReference<StorageStatus> storage;

  private WeirNode(
      ActorSystem<Void> system, ServerBinding binding, AtomicReference<StorageStatus> storage) {
    this.system = system;
    this.binding = binding;
    this.storage = storage;
  }

  /**
   * Starts a node and waits until its HTTP port is bound: the actor system and cluster membership,
   * then each area in the order the next one needs it.
   *
   * @throws NodeStartException when the HTTP port cannot be bound (the actor system is stopped)
   */
  public static WeirNode start(Config config, NodeSettings settings) {
    // Before anything starts: a bad scope is a configuration error.
    ContinuousSettings continuousSettings = ContinuousSettings.create(config);
    GatewaySettings gateway = GatewaySettings.create(config);
    MemberPresence.Settings presence = MemberPresence.Settings.create(config);
    AtomicReference<StorageStatus> storage =
        new AtomicReference<>(new StorageStatus.Starting(Instant.now()));
    Database database = Database.create(settings.postgres(), "weir");
    ActorSystem<Void> system =
        ActorSystem.create(
            guardian(database, storage, settings.partitions(), settings.partitionShards().shards()),
            SYSTEM_NAME,
            actorSystemSetup(config, settings));
    NodeMetrics metrics = new NodeMetrics(settings.metrics());
    NodeStartup node = new NodeStartup(system, settings, storage, database, metrics);
    try {
      node.closeOnShutdown();
      WeirCborSerializer.requireBound(system);
      ServerMembersOnly.watch(system);
      joinCluster(system, settings, database);
      MemberPresence.start(system, settings.postgres(), presence, metrics.registry());
      SqlJournalPruner journalPruner =
          new SqlJournalPruner(
              database.dataSource(), settings.postgres().schema(), node.blockingIo);
      node.partitions(journalPruner);
      ContinuousQueries continuous = node.continuousQueries(continuousSettings, journalPruner);
      PipelineAdmin pipelines = node.pipelines(continuous);
      Principals principals = node.principals(continuous);
      Documents documents =
          new Documents(
              system, settings.partitions(), settings.pipelines(), settings.documentAskTimeout());
      TokenKeys tokenKeys = node.tokenKeys(continuous);
      // One reader for every outbox read of this node: they share its cache of decoded events.
      OutboxReader outbox = node.outboxReader();
      Policies policies = node.policies(documents);
      Feeds feeds = node.feeds(documents, outbox, tokenKeys, policies);
      Route routes =
          new HttpApi(
                  new ObjectMapper(),
                  node.apiServices(pipelines, principals, continuous)
                      .documents(documents, settings.documentMaxBytes())
                      .documentBatches(settings.documentBatches())
                      .projections(
                          new Projections(
                              documents,
                              outbox,
                              tokenKeys,
                              settings.projections(),
                              settings.partitionLimits().maxEffects(),
                              settings.tokens().batchTtl(),
                              Clock.systemUTC()))
                      .tokenKeys(tokenKeys)
                      .policies(policies)
                      .feeds(feeds)
                      .liveStreams(node.liveStreams(feeds, principals))
                      .build())
              .routes();
      ServerBinding binding = node.serveHttp(routes);
      node.serveGateway(config, gateway, routes);
      node.logStarted(binding.localAddress());
      return new WeirNode(system, binding, storage);
    } catch (NodeStartException e) {
      // The step that failed has begun stopping the actor system.
      awaitStopped(system, settings.bindTimeout());
      throw e;
    } catch (RuntimeException | LinkageError e) {
      // Never leave a half-started node running: its actor system would keep the JVM alive.
      awaitStopped(system, settings.bindTimeout());
      throw refusedOr(storage, new NodeStartException("start-up failed", e));
    }
  }

  /**
   * Stops a failed start's actor system and waits, at most {@code bound}, for it to terminate: its
   * cluster port, its pipelines' slots and its database connections are released when {@link
   * #start} throws, so a caller that starts again (another port after a lost bind) does not race
   * the leftovers.
   */
  private static void awaitStopped(ActorSystem<Void> system, Duration bound) {
    system.terminate();
    try {
      system.getWhenTerminated().toCompletableFuture().get(bound.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      log.warn(
          "a node whose start failed did not stop within {} ms ({}); going on",
          bound.toMillis(),
          e.getClass().getSimpleName());
    }
  }

  /**
   * The storage monitor may refuse the node (partition count, PostgreSQL's certificate) while
   * start-up is still going, and its shutdown then fails what start-up does next (e.g. the HTTP
   * bind): the refusal is the cause to report, not that failure.
   */
  static NodeStartException refusedOr(
      AtomicReference<StorageStatus> storage, NodeStartException failure) {
    if (storage.get() instanceof StorageStatus.Refused refused) {
      return new NodeStartException(refused.reason(), failure.getCause(), true);
    }
    return failure;
  }

  /**
   * The actor system's set-up: {@code config} with what Weir's settings imply for Pekko. With
   * {@code weir.cluster.tls}, remoting uses the tls-tcp transport and an SSL engine provider over
   * the key and trust stores Weir opened (their passwords stay out of the configuration); with
   * {@code weir.postgres.tls}, the journal's pools (writes and reads) get the same pgjdbc TLS
   * properties as Weir's own pool.
   */
  static ActorSystemSetup actorSystemSetup(Config config, NodeSettings settings) {
    Config effective = config;
    Map<String, String> pgTls = settings.postgres().tls().jdbcProperties();
    if (!pgTls.isEmpty()) {
      Config journal = ConfigFactory.empty();
      for (String pool : List.of("weir", "weir-reads")) {
        for (Map.Entry<String, String> e : pgTls.entrySet()) {
          journal =
              journal.withValue(
                  "pekko-persistence-jdbc.shared-databases."
                      + pool
                      + ".db.properties."
                      + e.getKey(),
                  ConfigValueFactory.fromAnyRef(e.getValue()));
        }
      }
      effective = journal.withFallback(effective);
    }
    if (settings.clusterTls().isPresent()) {
      effective = settings.clusterTls().get().pekkoConfig().withFallback(effective);
    }
    effective = withRemovalMargin(effective, settings.marks().enabled());
    ActorSystemSetup setup = ActorSystemSetup.create(BootstrapSetup.create(effective));
    if (settings.clusterTls().isPresent()) {
      setup = setup.withSetup(settings.clusterTls().get().engineProviderSetup());
    }
    return setup;
  }

  /**
   * ADR 0045: while the acknowledged marks are on, a removed member's singletons and shards start
   * elsewhere after {@code weir.storage.acknowledged-marks.removal-margin}; with the marks off, or
   * when {@code pekko.cluster.down-removal-margin} is set, {@code config} is left as it is (Pekko's
   * resolver then waits stable-after again).
   */
  static Config withRemovalMargin(Config config, boolean marksOn) {
    String pekko = "pekko.cluster.down-removal-margin";
    if (!marksOn || !config.getString(pekko).equals("off")) {
      return config;
    }
    return config.withValue(
        pekko,
        ConfigValueFactory.fromAnyRef(
            config.getString("weir.storage.acknowledged-marks.removal-margin")));
  }

  private static Behavior<Void> guardian(
      Database database, AtomicReference<StorageStatus> storage, int partitions, int shards) {
    return Behaviors.setup(
        ctx -> {
          ctx.spawn(
              StorageMonitor.create(
                  database,
                  storage,
                  partitions,
                  shards,
                  refused -> CoordinatedShutdown.get(ctx.getSystem()).run(StorageRefused.INSTANCE)),
              "storage-monitor");
          return Behaviors.empty();
        });
  }

  /**
   * Shutdown reason: the cluster's database refuses this node's configuration (partition count).
   */
  public enum StorageRefused implements CoordinatedShutdown.Reason {
    INSTANCE
  }

  private static void joinCluster(ActorSystem<?> system, NodeSettings settings, Database database) {
    Cluster cluster = Cluster.get(system);
    if (settings.bootstrap().isPresent()) {
      NodeSettings.Bootstrap b = settings.bootstrap().get();
      log.info(
          "joining the cluster by bootstrap: discovery {} of service {}, {} contact points required",
          b.discoveryMethod(),
          b.serviceName(),
          b.requiredContactPoints());
      org.apache.pekko.actor.ActorSystem classic = Adapter.toClassic(system);
      try {
        PekkoManagement.get(classic)
            .start()
            .toCompletableFuture()
            .get(settings.bindTimeout().toMillis(), TimeUnit.MILLISECONDS);
      } catch (Exception e) {
        system.terminate();
        throw new NodeStartException(
            "cannot bind the management endpoint on "
                + b.managementHost()
                + ":"
                + b.managementPort(),
            e);
      }
      ClusterBootstrap.get(classic).start();
    } else if (settings.seedNodes().isEmpty()) {
      log.info("no seed nodes configured: forming a single-node cluster");
      cluster.manager().tell(Join.create(cluster.selfMember().address()));
    } else {
      List<Address> seeds =
          settings.seedNodes().stream()
              .map(s -> new Address("pekko", SYSTEM_NAME, s.host(), s.port()))
              .toList();
      log.info("joining the cluster through seed nodes {}", settings.seedNodes());
      MembershipGuard.join(system, database.dataSource(), settings.postgres().schema(), seeds);
    }
  }

  public ActorSystem<Void> system() {
    return system;
  }

  public int httpPort() {
    return binding.localAddress().getPort();
  }

  public StorageStatus storageStatus() {
    return storage.get();
  }

  /** Runs coordinated shutdown and waits for the actor system to terminate. */
  public void stop() {
    system.terminate();
    system.getWhenTerminated().toCompletableFuture().join();
  }

  /** The node could not start; the message names what failed, never a secret. */
  public static final class NodeStartException extends RuntimeException {
    private final boolean refusedByStorage;

    NodeStartException(String message, Throwable cause) {
      this(message, cause, false);
    }

    NodeStartException(String message, Throwable cause, boolean refusedByStorage) {
      super(message, cause);
      this.refusedByStorage = refusedByStorage;
    }

    /**
     * The database refused this node's configuration (the message says why): a configuration error.
     */
    public boolean refusedByStorage() {
      return refusedByStorage;
    }
  }
}
