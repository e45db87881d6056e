package io.weir.node;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.typesafe.config.Config;
import io.weir.node.auth.TokenAuthenticator;
import io.weir.node.cdc.PipelineAdmin;
import io.weir.node.cdc.PipelineManager;
import io.weir.node.http.HttpApi;
import io.weir.persistence.Database;
import io.weir.persistence.StorageMonitor;
import io.weir.persistence.StorageStatus;
import io.weir.sharding.partition.PartitionSharding;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.Done;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.ClusterSingleton;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.cluster.typed.SingletonActor;
import org.apache.pekko.http.javadsl.ServerBinding;
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
   * Loads a view kept from PostgreSQL ({@code what}: token keys, principals) once storage is ready,
   * checked every second until {@code loaded} holds, then reloads it every {@code refresh}. A
   * failed load is logged (value-free) and tried again at the next tick; loads never overlap.
   */
  private static void scheduleReload(
      ActorSystem<?> system,
      AtomicReference<StorageStatus> storage,
      Duration refresh,
      java.util.function.BooleanSupplier loaded,
      java.util.function.Supplier<java.util.concurrent.CompletionStage<?>> reload,
      String what) {
    AtomicLong lastLoad = new AtomicLong();
    AtomicBoolean loading = new AtomicBoolean();
    system
        .scheduler()
        .scheduleAtFixedRate(
            Duration.ofSeconds(1),
            Duration.ofSeconds(1),
            () -> {
              boolean due =
                  !loaded.getAsBoolean() || System.nanoTime() - lastLoad.get() >= refresh.toNanos();
              if (!due || !storage.get().isReady() || !loading.compareAndSet(false, true)) {
                return;
              }
              reload
                  .get()
                  .whenComplete(
                      (done, error) -> {
                        if (error == null) {
                          lastLoad.set(System.nanoTime());
                        } else {
                          log.warn(
                              "loading the {} failed; retrying: {}",
                              what,
                              io.weir.persistence.SafeErrors.describe(error));
                        }
                        loading.set(false);
                      });
            },
            system.executionContext());
  }

  /**
   * Changes to principals made through this node are announced on the cluster topic {@code
   * weir-principals}; on hearing of one made through another node, this node reloads at once. A
   * revocation or a grant then takes effect everywhere within a message round trip and a load, not
   * at the next scheduled reload (which still runs and covers a lost message).
   */
  private static void announcePrincipalChanges(
      ActorSystem<?> system, io.weir.node.auth.Principals principals, AtomicBoolean loaded) {
    ActorRef<org.apache.pekko.actor.typed.pubsub.Topic.Command<io.weir.node.auth.PrincipalsChanged>>
        topic =
            system.systemActorOf(
                org.apache.pekko.actor.typed.pubsub.Topic.create(
                    io.weir.node.auth.PrincipalsChanged.class, "weir-principals"),
                "weir-principals-topic",
                org.apache.pekko.actor.typed.Props.empty());
    String self =
        org.apache.pekko.cluster.typed.Cluster.get(system).selfMember().address().toString();
    ActorRef<io.weir.node.auth.PrincipalsChanged> listener =
        system.systemActorOf(
            Behaviors.receiveMessage(
                changed -> {
                  if (!self.equals(changed.origin()) && loaded.get()) {
                    principals
                        .reload()
                        .whenComplete(
                            (v, e) -> {
                              if (e != null) {
                                log.warn(
                                    "reloading the principals after a change on another node failed: {}",
                                    io.weir.persistence.SafeErrors.describe(e));
                              }
                            });
                  }
                  return Behaviors.same();
                }),
            "weir-principals-listener",
            org.apache.pekko.actor.typed.Props.empty());
    topic.tell(org.apache.pekko.actor.typed.pubsub.Topic.subscribe(listener));
    principals.onChange(
        () ->
            topic.tell(
                org.apache.pekko.actor.typed.pubsub.Topic.publish(
                    new io.weir.node.auth.PrincipalsChanged(self))));
  }

  /** Singletons run on server nodes only: a protocol client (role client) hosts nothing. */
  private static org.apache.pekko.cluster.typed.ClusterSingletonSettings serverSingleton(
      ActorSystem<?> system) {
    return org.apache.pekko.cluster.typed.ClusterSingletonSettings.create(system)
        .withRole(PartitionSharding.ROLE);
  }

  /**
   * What this node's partitions are built with: the documents table on a pool and threads of its
   * own (ADR 0032), old snapshots upgraded a few at a time, the JDBC journal's query to catch the
   * table up, the journal pruner, metrics and the storage gate.
   */
  private static io.weir.sharding.partition.PartitionWiring partitionWiring(
      ActorSystem<Void> system,
      NodeSettings settings,
      io.weir.sharding.partition.JournalPruner pruner,
      AtomicReference<StorageStatus> storage,
      io.weir.node.metrics.NodeMetrics metrics) {
    String schema = settings.postgres().schema();
    Database documents =
        Database.create(
            settings.postgres().withPoolSize(settings.documentsPoolSize()), "weir-documents");
    java.util.concurrent.ExecutorService documentsIo =
        java.util.concurrent.Executors.newFixedThreadPool(
            settings.documentsPoolSize(), daemonThreads("weir-documents"));
    java.util.concurrent.ExecutorService upgrades =
        java.util.concurrent.Executors.newFixedThreadPool(
            settings.snapshotUpgrades(), daemonThreads("weir-snapshot-upgrade"));
    CoordinatedShutdown.get(system)
        .addTask(
            CoordinatedShutdown.PhaseBeforeActorSystemTerminate(),
            "close-weir-documents",
            () -> {
              documentsIo.shutdownNow();
              upgrades.shutdownNow();
              documents.close();
              return CompletableFuture.completedFuture(Done.getInstance());
            });
    return io.weir.sharding.partition.PartitionWiring.jdbc(
            settings.partitionLimits(), documents.dataSource(), schema, documentsIo, upgrades)
        .withPruner(pruner)
        .withObserver(
            settings.metrics().enabled()
                ? metrics.partitions(settings.partitions())
                : io.weir.sharding.partition.PartitionObserver.NONE)
        .withGate(
            new NodeStorageGate(
                storage,
                settings.requiredCopies(),
                documents.dataSource(),
                documentsIo,
                settings.marks().settleTimeout()))
        .withMarks(
            settings.marks().enabled()
                ? new io.weir.sharding.storage.DistributedMarks(
                    system, marksScope(storage), settings.marks().timeout())
                : io.weir.sharding.storage.AcknowledgedMarks.NONE);
  }

  /**
   * The scope of the acknowledged marks: the cluster's identity and restore epoch (a restore
   * rewinds the journal on purpose and starts new marks; nodes are stopped during one), as last
   * seen; null before storage was reached.
   */
  private static java.util.function.Supplier<String> marksScope(
      AtomicReference<StorageStatus> storage) {
    AtomicReference<String> seen = new AtomicReference<>();
    return () -> {
      if (storage.get() instanceof StorageStatus.Ready r) {
        seen.set(r.identity().clusterId() + "-" + r.identity().restoreEpoch());
      }
      return seen.get();
    };
  }

  /** Daemon threads named {@code prefix-N}. */
  private static java.util.concurrent.ThreadFactory daemonThreads(String prefix) {
    java.util.concurrent.atomic.AtomicInteger n = new java.util.concurrent.atomic.AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  /**
   * Starts a node and waits until its HTTP port is bound.
   *
   * @throws NodeStartException when the HTTP port cannot be bound (the actor system is stopped)
   */
  public static WeirNode start(Config config, NodeSettings settings) {
    AtomicReference<StorageStatus> storage =
        new AtomicReference<>(new StorageStatus.Starting(Instant.now()));
    // Before anything starts: a bad scope is a configuration error.
    io.weir.node.continuous.ContinuousSettings continuousSettings =
        io.weir.node.continuous.ContinuousSettings.create(config);
    io.weir.node.gateway.GatewaySettings gateway =
        io.weir.node.gateway.GatewaySettings.create(config);
    Database database = Database.create(settings.postgres(), "weir");
    ActorSystem<Void> system =
        ActorSystem.create(
            guardian(database, storage, settings.partitions()),
            SYSTEM_NAME,
            actorSystemSetup(config, settings));
    io.weir.node.metrics.NodeMetrics metrics =
        new io.weir.node.metrics.NodeMetrics(settings.metrics());
    io.micrometer.core.instrument.Gauge.builder(
            "weir.storage.copies",
            storage,
            s ->
                s.get() instanceof StorageStatus.Ready r && r.copies().known()
                    ? r.copies().copies()
                    : -1)
        .description(
            "copies a journal commit is durable on before it is acknowledged (-1: unknown or"
                + " storage not ready)")
        .register(metrics.registry());
    try {
      CoordinatedShutdown.get(system)
          .addTask(
              CoordinatedShutdown.PhaseBeforeActorSystemTerminate(),
              "close-weir-database",
              () -> {
                database.close();
                metrics.close();
                return CompletableFuture.completedFuture(Done.getInstance());
              });
      ServerMembersOnly.watch(system);
      joinCluster(system, settings, database);

      // The partitions: sharded over the server nodes, all kept running by one keeper per cluster.
      java.util.concurrent.Executor blockingIo =
          system
              .dispatchers()
              .lookup(
                  org.apache.pekko.actor.typed.DispatcherSelector.fromConfig(
                      "weir.blocking-io-dispatcher"));
      io.weir.sharding.partition.SqlJournalPruner journalPruner =
          new io.weir.sharding.partition.SqlJournalPruner(
              database.dataSource(), settings.postgres().schema(), blockingIo);
      PartitionSharding.init(
          system, partitionWiring(system, settings, journalPruner, storage, metrics));
      ClusterSingleton.get(system)
          .init(
              SingletonActor.of(
                      PartitionSharding.keeper(
                          settings.partitions(),
                          () -> storage.get().isReady(),
                          settings.partitionKeepAlive()),
                      "weir-partition-keeper")
                  .withSettings(serverSingleton(system)));
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
                              .withSettings(serverSingleton(system))));

      // Continuous queries: an engine on every node, fed only where the continuous pipeline runs;
      // their sessions' replay logs are sharded entities on the server nodes (ADR 0025).
      io.weir.sharding.continuous.ContinuousLog.init(
          system, PartitionSharding.ROLE, continuousSettings.replayRetained());
      io.weir.node.continuous.ContinuousQueries continuous =
          settings.pipelines().stream()
              .filter(io.weir.node.cdc.PipelineConfig::continuous)
              .findFirst()
              .map(
                  p ->
                      new io.weir.node.continuous.ContinuousQueries(
                          continuousSettings,
                          settings.postgres(),
                          database.dataSource(),
                          p.settings().publications(),
                          io.weir.sharding.continuous.ContinuousLog.jdbc(
                              system,
                              journalPruner,
                              io.weir.node.continuous.ContinuousQueries.LOG_TIMEOUT)))
              .orElse(null);
      if (continuous != null) {
        CoordinatedShutdown.get(system)
            .addTask(
                CoordinatedShutdown.PhaseServiceStop(),
                "close-continuous-queries",
                () -> {
                  continuous.close();
                  return CompletableFuture.completedFuture(Done.getInstance());
                });
      }
      // One pipeline manager per cluster: each slot has exactly one consumer. Its replication
      // connections name this member; a slot a downed member's walsender still holds is taken over.
      io.weir.node.cdc.DownedMembers downedMembers = io.weir.node.cdc.DownedMembers.start(system);
      ActorRef<PipelineManager.Command> pipelineManager =
          ClusterSingleton.get(system)
              .init(
                  SingletonActor.of(
                          PipelineManager.create(
                              settings.pipelines(),
                              settings.postgres(),
                              storage::get,
                              metrics.registry(),
                              settings.partitions(),
                              continuous,
                              downedMembers.holders()),
                          "weir-pipelines")
                      .withSettings(serverSingleton(system)));
      PipelineAdmin pipelineAdmin =
          new PipelineAdmin(pipelineManager, system, settings.pipelines());

      io.weir.node.auth.Principals authenticator =
          new io.weir.node.auth.Principals(
              TokenAuthenticator.withBootstrapAdmin(
                  settings.adminToken(), settings.adminTokenPrevious()),
              database.dataSource(),
              settings.postgres().schema(),
              system
                  .dispatchers()
                  .lookup(
                      org.apache.pekko.actor.typed.DispatcherSelector.fromConfig(
                          "weir.blocking-io-dispatcher")),
              java.time.Clock.systemUTC(),
              settings.principalRotationGrace(),
              settings.principalFreshness());
      AtomicBoolean principalsLoaded = new AtomicBoolean();
      scheduleReload(
          system,
          storage,
          settings.principalRefresh(),
          principalsLoaded::get,
          () -> authenticator.reload().thenRun(() -> principalsLoaded.set(true)),
          "principals");
      if (continuous != null) {
        // Open SSE streams end when their principal is revoked or loses ContinuousQuery on the
        // scope.
        java.util.Set<String> bootstrapAdmins = new java.util.HashSet<>();
        TokenAuthenticator.withBootstrapAdmin(settings.adminToken(), settings.adminTokenPrevious())
            .authenticate(settings.adminToken())
            .ifPresent(p -> bootstrapAdmins.add(p.id()));
        continuous.accessCheck(
            (principal, scope) -> {
              if (bootstrapAdmins.contains(principal)) {
                return true;
              }
              return authenticator.all().stream()
                  .filter(p -> p.id().equals(principal))
                  .findFirst()
                  .map(
                      p ->
                          p.revokedAt() == null
                              && (p.administrator()
                                  || p.grants()
                                      .getOrDefault(scope, java.util.Set.of())
                                      .contains("ContinuousQuery")))
                  .orElse(false);
            });
      }
      announcePrincipalChanges(system, authenticator, principalsLoaded);
      Documents documents =
          new Documents(
              system, settings.partitions(), settings.pipelines(), settings.documentAskTimeout());
      TokenKeys tokenKeys =
          new TokenKeys(
              database.dataSource(),
              settings.postgres().schema(),
              system
                  .dispatchers()
                  .lookup(
                      org.apache.pekko.actor.typed.DispatcherSelector.fromConfig(
                          "weir.blocking-io-dispatcher")),
              settings.tokens().keyRefresh().plusSeconds(5));
      if (continuous != null) {
        continuous.tokenSigner(tokenKeys::signer);
        if (settings.metrics().enabled()) {
          continuous.bindMetrics(metrics.registry());
        }
      }
      scheduleReload(
          system,
          storage,
          settings.tokens().keyRefresh(),
          () -> tokenKeys.signer().isPresent(),
          tokenKeys::reload,
          "token keys");
      // One reader for every outbox read of this node: they share its cache of decoded events.
      io.weir.sharding.partition.OutboxReader outbox =
          io.weir.sharding.partition.OutboxReader.jdbc(system);
      Projections projections =
          new Projections(
              documents,
              outbox,
              tokenKeys,
              settings.projections(),
              settings.partitionLimits().maxEffects(),
              settings.tokens().batchTtl(),
              java.time.Clock.systemUTC());
      io.weir.node.auth.Policies policies =
          new io.weir.node.auth.Policies(
              database.dataSource(),
              settings.postgres().schema(),
              system
                  .dispatchers()
                  .lookup(
                      org.apache.pekko.actor.typed.DispatcherSelector.fromConfig(
                          "weir.blocking-io-dispatcher")),
              documents);
      scheduleReload(
          system,
          storage,
          settings.policyRefresh(),
          policies::loaded,
          policies::reload,
          "collection policies");
      Feeds feeds =
          new Feeds(
              documents,
              outbox,
              tokenKeys,
              policies,
              settings.feeds(),
              settings.feedDeadline(),
              java.time.Clock.systemUTC());
      if (settings.metrics().enabled()) {
        feeds.bindMetrics(metrics.registry());
      }
      HttpApi api =
          new HttpApi(
              new ObjectMapper(),
              authenticator,
              new NodeView(
                  system,
                  storage::get,
                  settings.partitions(),
                  pipelineAdmin::list,
                  settings.requiredCopies()),
              pipelineAdmin,
              metrics::scrape,
              documents,
              settings.documentMaxBytes(),
              projections,
              tokenKeys,
              authenticator,
              policies,
              feeds,
              continuous);
      api.withSlotLag(
          new io.weir.node.cdc.SlotLag(
              settings.pipelines(),
              system
                  .dispatchers()
                  .lookup(
                      org.apache.pekko.actor.typed.DispatcherSelector.fromConfig(
                          "weir.blocking-io-dispatcher")),
              Duration.ofSeconds(2),
              java.time.Clock.systemUTC()));
      io.weir.sharding.partition.PartitionSettings limits = settings.partitionLimits();
      api.withOutboxSettings(
          new io.weir.protocol.http.OutboxSettings(
              settings.partitions(),
              limits.maxOutboxEntries(),
              limits.maxOutboxBytes(),
              limits.reserveEntries(),
              limits.reserveBytes(),
              settings.outboxRetention().map(Duration::toMillis).orElse(null)));
      if (settings.metrics().enabled()) {
        api.withMetrics(
            metrics.http(io.weir.node.metrics.RouteTemplates.node()), settings.metrics());
      } else {
        api.withMetrics(null, settings.metrics());
      }
      org.apache.pekko.http.javadsl.server.Route routes = api.routes();
      ServerBinding binding;
      try {
        org.apache.pekko.http.javadsl.ServerBuilder server =
            io.weir.node.http.NodeHttpServer.at(system, settings.httpHost(), settings.httpPort());
        if (settings.httpTls().isPresent()) {
          // HTTPS only: a plain HTTP request on this port fails its (TLS) handshake.
          server = server.enableHttps(settings.httpTls().get().connectionContext());
        }
        binding =
            server
                .bind(routes)
                .toCompletableFuture()
                .get(settings.bindTimeout().toMillis(), TimeUnit.MILLISECONDS);
      } catch (Exception e) {
        system.terminate();
        throw refusedOr(
            storage,
            new NodeStartException(
                "cannot bind HTTP on " + settings.httpHost() + ":" + settings.httpPort(), e));
      }
      binding.addToCoordinatedShutdown(Duration.ofSeconds(5), system);
      if (gateway.enabled()) {
        // Protocol clients reach the same routes through the gateway, on a port of its own.
        try {
          io.weir.node.gateway.GatewayEndpoint.start(system, config, gateway, routes);
        } catch (RuntimeException e) {
          system.terminate();
          throw refusedOr(
              storage,
              new NodeStartException(
                  "cannot bind the protocol gateway on " + gateway.host() + ":" + gateway.port(),
                  e));
        }
      }
      InetSocketAddress http = binding.localAddress();
      log.info(
          "Weir node started: HTTP on {}://{}:{}, cluster address {} ({}), roles {}",
          settings.httpTls().isPresent() ? "https" : "http",
          http.getHostString(),
          http.getPort(),
          Cluster.get(system).selfMember().address(),
          settings.clusterTls().map(t -> "mutual TLS, " + t.protocol()).orElse("plain TCP"),
          settings.roles());
      if (settings.clusterTls().isEmpty() && !loopback(settings.clusterHost())) {
        log.warn(
            "cluster remoting is plain TCP on an address other hosts may reach: any process that"
                + " reaches the cluster port can act as a node; enable weir.cluster.tls or admit only"
                + " the nodes to that port (docs/operations.md, Cluster)");
      }
      settings.httpTls().ifPresent(t -> logCertificate("HTTP", t.certificate()));
      settings.clusterTls().ifPresent(t -> logCertificate("cluster remoting", t.certificate()));
      if (settings.postgres().tls().isSet()) {
        log.info("PostgreSQL connections: sslmode {}", settings.postgres().tls().mode());
      }
      return new WeirNode(system, binding, storage);
    } catch (NodeStartException e) {
      throw e;
    } catch (RuntimeException | LinkageError e) {
      // Never leave a half-started node running: its actor system would keep the JVM alive.
      system.terminate();
      throw refusedOr(storage, new NodeStartException("start-up failed", e));
    }
  }

  /**
   * The storage monitor may refuse the node (partition count, PostgreSQL's certificate) while
   * start-up is still going, and its shutdown then fails what start-up does next (e.g. the HTTP
   * bind): the refusal is the cause to report, not that failure.
   */
  private static NodeStartException refusedOr(
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
  static org.apache.pekko.actor.setup.ActorSystemSetup actorSystemSetup(
      Config config, NodeSettings settings) {
    Config effective = config;
    java.util.Map<String, String> pgTls = settings.postgres().tls().jdbcProperties();
    if (!pgTls.isEmpty()) {
      Config journal = com.typesafe.config.ConfigFactory.empty();
      for (String pool : List.of("weir", "weir-reads")) {
        for (java.util.Map.Entry<String, String> e : pgTls.entrySet()) {
          journal =
              journal.withValue(
                  "pekko-persistence-jdbc.shared-databases."
                      + pool
                      + ".db.properties."
                      + e.getKey(),
                  com.typesafe.config.ConfigValueFactory.fromAnyRef(e.getValue()));
        }
      }
      effective = journal.withFallback(effective);
    }
    if (settings.clusterTls().isPresent()) {
      effective = settings.clusterTls().get().pekkoConfig().withFallback(effective);
    }
    org.apache.pekko.actor.setup.ActorSystemSetup setup =
        org.apache.pekko.actor.setup.ActorSystemSetup.create(
            org.apache.pekko.actor.BootstrapSetup.create(effective));
    if (settings.clusterTls().isPresent()) {
      setup = setup.withSetup(settings.clusterTls().get().engineProviderSetup());
    }
    return setup;
  }

  private static boolean loopback(String host) {
    try {
      return java.net.InetAddress.getByName(host).isLoopbackAddress();
    } catch (java.net.UnknownHostException e) {
      return false;
    }
  }

  private static void logCertificate(String what, java.security.cert.X509Certificate certificate) {
    if (certificate != null) {
      log.info(
          "{} TLS certificate: subject {}, issuer {}, valid until {}",
          what,
          certificate.getSubjectX500Principal().getName(),
          certificate.getIssuerX500Principal().getName(),
          certificate.getNotAfter().toInstant());
    }
  }

  private static Behavior<Void> guardian(
      Database database, AtomicReference<StorageStatus> storage, int partitions) {
    return Behaviors.setup(
        ctx -> {
          ctx.spawn(
              StorageMonitor.create(
                  database,
                  storage,
                  partitions,
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
      org.apache.pekko.actor.ActorSystem classic =
          org.apache.pekko.actor.typed.javadsl.Adapter.toClassic(system);
      try {
        org.apache.pekko.management.javadsl.PekkoManagement.get(classic)
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
      org.apache.pekko.management.cluster.bootstrap.ClusterBootstrap.get(classic).start();
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
