package io.weir.node;

import com.typesafe.config.Config;
import io.micrometer.core.instrument.Gauge;
import io.weir.node.auth.Policies;
import io.weir.node.auth.Principals;
import io.weir.node.auth.PrincipalsChanged;
import io.weir.node.auth.TokenAuthenticator;
import io.weir.node.cdc.DownedMembers;
import io.weir.node.cdc.PipelineAdmin;
import io.weir.node.cdc.PipelineConfig;
import io.weir.node.cdc.PipelineManager;
import io.weir.node.cdc.SlotLag;
import io.weir.node.continuous.ContinuousQueries;
import io.weir.node.continuous.ContinuousSettings;
import io.weir.node.documents.Documents;
import io.weir.node.feed.Feeds;
import io.weir.node.feed.LiveStreams;
import io.weir.node.feed.TailSignals;
import io.weir.node.feed.TailsAdvanced;
import io.weir.node.gateway.GatewayEndpoint;
import io.weir.node.gateway.GatewaySettings;
import io.weir.node.http.ApiServices;
import io.weir.node.http.NodeHttpServer;
import io.weir.node.metrics.NodeMetrics;
import io.weir.node.metrics.RouteTemplates;
import io.weir.node.tokens.TokenKeys;
import io.weir.persistence.Database;
import io.weir.persistence.SafeErrors;
import io.weir.persistence.StorageStatus;
import io.weir.protocol.http.OutboxSettings;
import io.weir.sharding.continuous.ContinuousLog;
import io.weir.sharding.partition.JournalEntries;
import io.weir.sharding.partition.OutboxReader;
import io.weir.sharding.partition.PartitionSettings;
import io.weir.sharding.partition.PartitionSharding;
import io.weir.sharding.partition.SqlJournalPruner;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.security.cert.X509Certificate;
import java.time.Clock;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiPredicate;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.apache.pekko.Done;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.pubsub.Topic;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.ClusterSingleton;
import org.apache.pekko.cluster.typed.ClusterSingletonSettings;
import org.apache.pekko.cluster.typed.SingletonActor;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.http.javadsl.ServerBuilder;
import org.apache.pekko.http.javadsl.server.Route;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The start of a node after its actor system exists: one method per area, in the order the next one
 * needs it ({@link WeirNode#start} calls them), with what every area is built with.
 */
final class NodeStartup {
  // The node's own logger name: operators and tests read "Weir node started" under it.
  private static final Logger log = LoggerFactory.getLogger(WeirNode.class);

  final ActorSystem<Void> system;
  final NodeSettings settings;
  final AtomicReference<StorageStatus> storage;
  final Database database;
  final NodeMetrics metrics;
  final Executor blockingIo;

  /**
   * Outboxes of this node's partitions that grew: pushed live queries read on ({@link
   * #liveStreams}).
   */
  final TailSignals tailSignals = new TailSignals();

  NodeStartup(
      ActorSystem<Void> system,
      NodeSettings settings,
      AtomicReference<StorageStatus> storage,
      Database database,
      NodeMetrics metrics) {
    this.system = system;
    this.settings = settings;
    this.storage = storage;
    this.database = database;
    this.metrics = metrics;
    this.blockingIo =
        system.dispatchers().lookup(DispatcherSelector.fromConfig("weir.blocking-io-dispatcher"));
  }

  /** The database pool and the meters close as the actor system ends. */
  void closeOnShutdown() {
    Gauge.builder(
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
    onShutdown(
        CoordinatedShutdown.PhaseBeforeActorSystemTerminate(),
        "close-weir-database",
        () -> {
          database.close();
          metrics.close();
        });
  }

  private void onShutdown(String phase, String task, Runnable action) {
    CoordinatedShutdown.get(system)
        .addTask(
            phase,
            task,
            () -> {
              action.run();
              return CompletableFuture.completedFuture(Done.getInstance());
            });
  }

  /**
   * The node's one outbox reader (every feed, live query and projection read shares its cache of
   * decoded events): journal events read by SQL on a pool of {@code weir.postgres.read-pool-size}
   * connections and threads of their own, so reads never wait behind journal writes (ADR 0058).
   */
  OutboxReader outboxReader() {
    BlockingPool reads =
        BlockingPool.open(
            system,
            settings.postgres(),
            system.settings().config().getInt("weir.postgres.read-pool-size"),
            "weir-outbox-reads");
    return new OutboxReader(
        system,
        JournalEntries.sql(
            system, reads.database().dataSource(), settings.postgres().schema(), reads.threads()),
        OutboxReader.DEFAULT_CACHE_BYTES);
  }

  /** The partitions ({@link PartitionStart}). */
  void partitions(SqlJournalPruner journalPruner) {
    PartitionStart.start(system, settings, journalPruner, storage, metrics, tailSignals);
  }

  /**
   * Continuous queries: an engine on every node, fed only where the continuous pipeline runs; their
   * sessions' replay logs are sharded entities on the server nodes (ADR 0025). Null when no
   * pipeline has a continuous sink.
   */
  ContinuousQueries continuousQueries(
      ContinuousSettings continuousSettings, SqlJournalPruner journalPruner) {
    ContinuousLog.init(system, PartitionSharding.ROLE, continuousSettings.replayRetained());
    ContinuousQueries continuous =
        settings.pipelines().stream()
            .filter(PipelineConfig::continuous)
            .findFirst()
            .map(
                p ->
                    new ContinuousQueries(
                        continuousSettings,
                        settings.postgres(),
                        database.dataSource(),
                        p.settings().publications(),
                        ContinuousLog.jdbc(system, journalPruner, ContinuousQueries.LOG_TIMEOUT)))
            .orElse(null);
    if (continuous != null) {
      onShutdown(
          CoordinatedShutdown.PhaseServiceStop(), "close-continuous-queries", continuous::close);
      if (settings.metrics().enabled()) {
        continuous.bindMetrics(metrics.registry());
      }
    }
    return continuous;
  }

  /**
   * One pipeline manager per cluster: each slot has exactly one consumer. Its replication
   * connections name this member; a slot a downed member's walsender still holds is taken over.
   */
  PipelineAdmin pipelines(ContinuousQueries continuous) {
    DownedMembers downedMembers = DownedMembers.start(system);
    ActorRef<PipelineManager.Command> manager =
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
    return new PipelineAdmin(manager, system, settings.pipelines());
  }

  /**
   * The principals kept in PostgreSQL, reloaded on schedule and at once when another node announces
   * a change; open continuous-query streams end when their principal loses the right.
   */
  Principals principals(ContinuousQueries continuous) {
    Principals principals =
        new Principals(
            TokenAuthenticator.withBootstrapAdmin(
                settings.adminToken(), settings.adminTokenPrevious()),
            database.dataSource(),
            settings.postgres().schema(),
            blockingIo,
            Clock.systemUTC(),
            settings.principalRotationGrace(),
            settings.principalFreshness());
    AtomicBoolean loaded = new AtomicBoolean();
    scheduleReload(
        system,
        storage,
        settings.principalRefresh(),
        loaded::get,
        () -> principals.reload().thenRun(() -> loaded.set(true)),
        "principals");
    if (continuous != null) {
      continuous.accessCheck(continuousAccess(principals));
    }
    announcePrincipalChanges(system, principals, loaded);
    return principals;
  }

  /**
   * Whether a principal may still follow a continuous query of a scope: a bootstrap administrator,
   * or a stored principal not revoked that is an administrator or holds {@code ContinuousQuery} on
   * the scope.
   */
  private BiPredicate<String, String> continuousAccess(Principals principals) {
    Set<String> bootstrapAdmins = new HashSet<>();
    TokenAuthenticator.withBootstrapAdmin(settings.adminToken(), settings.adminTokenPrevious())
        .authenticate(settings.adminToken())
        .ifPresent(p -> bootstrapAdmins.add(p.id()));
    return (principal, scope) ->
        bootstrapAdmins.contains(principal)
            || principals.all().stream()
                .filter(p -> p.id().equals(principal))
                .findFirst()
                .map(
                    p ->
                        p.revokedAt() == null
                            && (p.administrator()
                                || p.grants()
                                    .getOrDefault(scope, Set.of())
                                    .contains("ContinuousQuery")))
                .orElse(false);
  }

  /** The cluster's token-signing keys, reloaded on schedule; continuous cursors sign with them. */
  TokenKeys tokenKeys(ContinuousQueries continuous) {
    TokenKeys tokenKeys =
        new TokenKeys(
            database.dataSource(),
            settings.postgres().schema(),
            blockingIo,
            settings.tokens().keyRefresh().plusSeconds(5));
    if (continuous != null) {
      continuous.tokenSigner(tokenKeys::signer);
    }
    scheduleReload(
        system,
        storage,
        settings.tokens().keyRefresh(),
        () -> tokenKeys.signer().isPresent(),
        tokenKeys::reload,
        "token keys");
    return tokenKeys;
  }

  /** The collection policies, reloaded on schedule. */
  Policies policies(Documents documents) {
    Policies policies =
        new Policies(database.dataSource(), settings.postgres().schema(), blockingIo, documents);
    scheduleReload(
        system,
        storage,
        settings.policyRefresh(),
        policies::loaded,
        policies::reload,
        "collection policies");
    return policies;
  }

  /**
   * Pushed live queries: every node tells all nodes, on the cluster topic {@code weir-tails}, that
   * an outbox of one of its partitions grew (at most once per {@code signal-interval}, and only
   * then), and each node's open streams read their next page. A signal lost with a message is
   * covered by each stream's safety read ({@code recheck}).
   */
  LiveStreams liveStreams(Feeds feeds, Principals principals) {
    LiveStreams streams =
        new LiveStreams(
            feeds::readLive,
            settings.liveStreams(),
            principals::current,
            principals::fresh,
            (principal, query) -> feeds.refusal(principal, query, true));
    ActorRef<Topic.Command<TailsAdvanced>> topic =
        system.systemActorOf(
            Topic.create(TailsAdvanced.class, "weir-tails"), "weir-tails-topic", Props.empty());
    ActorRef<TailsAdvanced> listener =
        system.systemActorOf(
            Behaviors.receiveMessage(
                advanced -> {
                  try {
                    streams.wake();
                  } catch (RuntimeException e) {
                    log.warn("waking live-query streams failed: {}", SafeErrors.describe(e));
                  }
                  return Behaviors.same();
                }),
            "weir-tails-listener",
            Props.empty());
    topic.tell(Topic.subscribe(listener));
    TailsAdvanced signal = new TailsAdvanced(Cluster.get(system).selfMember().address().toString());
    Duration every = settings.liveSignalInterval();
    system
        .scheduler()
        .scheduleWithFixedDelay(
            every,
            every,
            () -> {
              if (tailSignals.takeGrown()) {
                topic.tell(Topic.publish(signal));
              }
            },
            system.executionContext());
    onShutdown(CoordinatedShutdown.PhaseServiceUnbind(), "close-weir-live-streams", streams::close);
    return streams;
  }

  /** The changes feed and queries, with their meters. */
  Feeds feeds(Documents documents, OutboxReader outbox, TokenKeys tokenKeys, Policies policies) {
    Feeds feeds =
        new Feeds(
            documents,
            outbox,
            tokenKeys,
            policies,
            settings.feeds(),
            settings.feedDeadline(),
            Clock.systemUTC());
    if (settings.metrics().enabled()) {
      feeds.bindMetrics(metrics.registry());
    }
    return feeds;
  }

  /** The HTTP API's services that do not depend on the documents. */
  ApiServices.Builder apiServices(
      PipelineAdmin pipelines, Principals principals, ContinuousQueries continuous) {
    PartitionSettings limits = settings.partitionLimits();
    return ApiServices.builder(
            principals,
            new NodeView(
                system,
                storage::get,
                settings.partitions(),
                pipelines::list,
                settings.requiredCopies()))
        .pipelines(pipelines)
        .principals(principals)
        .continuous(continuous)
        .metrics(metrics::scrape)
        .slotLag(
            new SlotLag(settings.pipelines(), blockingIo, Duration.ofSeconds(2), Clock.systemUTC()))
        .outboxSettings(
            new OutboxSettings(
                settings.partitions(),
                limits.maxOutboxEntries(),
                limits.maxOutboxBytes(),
                limits.reserveEntries(),
                limits.reserveBytes(),
                settings.outboxRetention().map(Duration::toMillis).orElse(null)))
        .httpMetrics(
            settings.metrics().enabled() ? metrics.http(RouteTemplates.node()) : null,
            settings.metrics());
  }

  /** Binds the HTTP API (HTTPS only when TLS is set); a failed bind stops the node. */
  ServerBinding serveHttp(Route routes) {
    ServerBinding binding;
    try {
      ServerBuilder server = NodeHttpServer.at(system, settings.httpHost(), settings.httpPort());
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
      throw WeirNode.refusedOr(
          storage,
          new WeirNode.NodeStartException(
              "cannot bind HTTP on " + settings.httpHost() + ":" + settings.httpPort(), e));
    }
    binding.addToCoordinatedShutdown(Duration.ofSeconds(5), system);
    return binding;
  }

  /** Protocol clients reach the same routes through the gateway, on a port of its own. */
  void serveGateway(Config config, GatewaySettings gateway, Route routes) {
    if (!gateway.enabled()) {
      return;
    }
    try {
      GatewayEndpoint.start(system, config, gateway, routes);
    } catch (RuntimeException e) {
      system.terminate();
      throw WeirNode.refusedOr(
          storage,
          new WeirNode.NodeStartException(
              "cannot bind the protocol gateway on " + gateway.host() + ":" + gateway.port(), e));
    }
  }

  /** The start-up line, a warning for plain TCP remoting off loopback, the certificates. */
  void logStarted(InetSocketAddress http) {
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
              + " reaches the cluster port can act as a node; enable weir.cluster.tls or admit"
              + " only the nodes to that port (docs/operations.md, Cluster)");
    }
    settings.httpTls().ifPresent(t -> logCertificate("HTTP", t.certificate()));
    settings.clusterTls().ifPresent(t -> logCertificate("cluster remoting", t.certificate()));
    if (settings.postgres().tls().isSet()) {
      log.info("PostgreSQL connections: sslmode {}", settings.postgres().tls().mode());
    }
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
      BooleanSupplier loaded,
      Supplier<CompletionStage<?>> reload,
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
                              SafeErrors.describe(error));
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
      ActorSystem<?> system, Principals principals, AtomicBoolean loaded) {
    ActorRef<Topic.Command<PrincipalsChanged>> topic =
        system.systemActorOf(
            Topic.create(PrincipalsChanged.class, "weir-principals"),
            "weir-principals-topic",
            Props.empty());
    String self = Cluster.get(system).selfMember().address().toString();
    ActorRef<PrincipalsChanged> listener =
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
                                    SafeErrors.describe(e));
                              }
                            });
                  }
                  return Behaviors.same();
                }),
            "weir-principals-listener",
            Props.empty());
    topic.tell(Topic.subscribe(listener));
    principals.onChange(() -> topic.tell(Topic.publish(new PrincipalsChanged(self))));
  }

  /** Singletons run on server nodes only: a protocol client (role client) hosts nothing. */
  static ClusterSingletonSettings serverSingleton(ActorSystem<?> system) {
    return ClusterSingletonSettings.create(system).withRole(PartitionSharding.ROLE);
  }

  /** Daemon threads named {@code prefix-N}. */
  static ThreadFactory daemonThreads(String prefix) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  private static boolean loopback(String host) {
    try {
      return InetAddress.getByName(host).isLoopbackAddress();
    } catch (UnknownHostException e) {
      return false;
    }
  }

  private static void logCertificate(String what, X509Certificate certificate) {
    if (certificate != null) {
      log.info(
          "{} TLS certificate: subject {}, issuer {}, valid until {}",
          what,
          certificate.getSubjectX500Principal().getName(),
          certificate.getIssuerX500Principal().getName(),
          certificate.getNotAfter().toInstant());
    }
  }
}
