package io.weir.node;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import io.weir.node.auth.Freshness;
import io.weir.node.cdc.PipelineConfig;
import io.weir.node.documents.BatchLimits;
import io.weir.node.feed.Feeds;
import io.weir.node.feed.LiveStreams;
import io.weir.node.metrics.MetricsSettings;
import io.weir.node.projection.Projections;
import io.weir.node.tls.ClusterTls;
import io.weir.node.tls.HttpTls;
import io.weir.persistence.ConfigValues;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.PrincipalStore;
import io.weir.persistence.SettingsException;
import io.weir.protocol.partition.Partitioning;
import io.weir.sharding.partition.PartitionSettings;
import io.weir.sharding.partition.PartitionShards;
import io.weir.sharding.partition.SnapshotPolicy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A node's validated settings ({@code weir.*}). {@link #create(Config)} throws a {@link
 * SettingsException} naming the first key at fault; a secret's value never appears in it. TLS key
 * and trust stores ({@code weir.http.tls}, {@code weir.cluster.tls}) and PostgreSQL certificate
 * files ({@code weir.postgres.tls}) are opened and checked here, so a node with unusable ones does
 * not start.
 *
 * @param partitionShards how partitions are grouped into shards ({@code weir.partitions.shards},
 *     ADR 0052)
 * @param httpTls HTTPS on the HTTP port; empty: plain HTTP
 * @param clusterTls mutual TLS on Pekko remoting; empty: plain TCP
 * @param metrics the Prometheus endpoint ({@code weir.metrics.*})
 * @param requiredCopies {@code weir.storage.required-copies}: below this many durable copies of a
 *     commit (see {@link io.weir.persistence.StorageCopies}) the node is not ready
 * @param marks where partitions keep what they acknowledged ({@code
 *     weir.storage.acknowledged-marks})
 */
public record NodeSettings(
    String httpHost,
    int httpPort,
    Duration bindTimeout,
    String clusterHost,
    int clusterPort,
    List<HostPort> seedNodes,
    List<String> roles,
    String adminToken,
    Optional<String> adminTokenPrevious,
    PostgresSettings postgres,
    List<PipelineConfig> pipelines,
    int partitions,
    PartitionShards partitionShards,
    Duration partitionKeepAlive,
    PartitionSettings partitionLimits,
    long documentMaxBytes,
    BatchLimits documentBatches,
    Duration documentAskTimeout,
    Tokens tokens,
    Projections projections,
    Optional<Duration> outboxRetention,
    Duration principalRefresh,
    Duration principalRotationGrace,
    Freshness principalFreshness,
    Duration policyRefresh,
    Feeds.Limits feeds,
    Duration feedDeadline,
    LiveStreams.Settings liveStreams,
    Duration liveSignalInterval,
    Optional<HttpTls> httpTls,
    Optional<ClusterTls> clusterTls,
    Optional<Bootstrap> bootstrap,
    MetricsSettings metrics,
    int requiredCopies,
    int documentsPoolSize,
    int snapshotUpgrades,
    Marks marks) {

  /**
   * The partitions' acknowledged marks ({@code weir.storage.acknowledged-marks.*}, ADR 0036).
   *
   * @param enabled whether partitions keep and check them
   * @param timeout how long a majority write or read of a mark may take
   * @param settleTimeout how long a recovered partition waits for the standbys to flush the
   *     primary's WAL before it recovers again
   */
  public record Marks(boolean enabled, Duration timeout, Duration settleTimeout) {}

  /** Minimum length of a bootstrap admin token. */
  public static final int MIN_ADMIN_TOKEN_LENGTH = 16;

  private static final Map<String, String> ENV =
      Map.of(
          "weir.http.host", "WEIR_HTTP_HOST",
          "weir.http.port", "WEIR_HTTP_PORT",
          "weir.cluster.host", "WEIR_CLUSTER_HOST",
          "weir.cluster.port", "WEIR_CLUSTER_PORT",
          "weir.cluster.seed-nodes", "WEIR_SEED_NODES",
          "weir.admin-token", "WEIR_ADMIN_TOKEN",
          "weir.admin-token-previous", "WEIR_ADMIN_TOKEN_PREVIOUS",
          "weir.partitions.count", "WEIR_PARTITIONS",
          "weir.partitions.shards", "WEIR_PARTITION_SHARDS");

  public NodeSettings {
    seedNodes = List.copyOf(seedNodes);
    roles = List.copyOf(roles);
    pipelines = List.copyOf(pipelines);
  }

  /**
   * Signed tokens ({@code weir.tokens.*}). The keys themselves are the cluster's, kept in
   * PostgreSQL ({@link io.weir.persistence.TokenKeyStore}).
   *
   * @param batchTtl how long a projection batch token is valid
   * @param keyRefresh how often a node reloads the keys (rotations and retirements by other nodes)
   */
  public record Tokens(Duration batchTtl, Duration keyRefresh) {}

  /**
   * Projection consumers ({@code weir.projections.*}).
   *
   * @param defaultReadEntries entries a read examines unless it asks for another number
   * @param maxReadEntries entries a read may examine at most
   * @param defaultReadBytes bytes of selected payload a read returns unless it asks for another
   *     budget
   * @param maxReadBytes the largest byte budget a read may ask for
   * @param maxEffectBytes document bytes one commit's effects may hold in total
   */
  public record Projections(
      int defaultReadEntries,
      int maxReadEntries,
      long defaultReadBytes,
      long maxReadBytes,
      long maxEffectBytes,
      int maxConcurrentReads,
      Duration readDeadline) {
    /** Budgets as given, with the default admission: 64 reads at once, 30 s each. */
    public Projections(
        int defaultReadEntries,
        int maxReadEntries,
        long defaultReadBytes,
        long maxReadBytes,
        long maxEffectBytes) {
      this(
          defaultReadEntries,
          maxReadEntries,
          defaultReadBytes,
          maxReadBytes,
          maxEffectBytes,
          64,
          Duration.ofSeconds(30));
    }
  }

  /**
   * Cluster bootstrap through Pekko Management ({@code weir.cluster.bootstrap.*}), used instead of
   * seed nodes when a discovery method is set.
   *
   * @param discoveryMethod the Pekko Discovery method, e.g. {@code kubernetes-api} or {@code
   *     config}
   * @param serviceName the name discovery looks up
   * @param requiredContactPoints contact points that must be seen before a cluster is formed
   * @param managementHost host of this node's Pekko Management HTTP endpoint
   * @param managementPort its port
   */
  public record Bootstrap(
      String discoveryMethod,
      String serviceName,
      int requiredContactPoints,
      String managementHost,
      int managementPort) {}

  /** A host and port, e.g. one seed node. */
  public record HostPort(String host, int port) {
    @Override
    public String toString() {
      return host + ":" + port;
    }
  }

  public static NodeSettings create(Config config) {
    ConfigValues v = new ConfigValues(config, ENV);
    String adminToken = v.optionalString("weir.admin-token");
    if (adminToken == null || adminToken.isBlank()) {
      throw new SettingsException(
          "weir.admin-token",
          "is required (environment variable WEIR_ADMIN_TOKEN): the bootstrap administrator's bearer token");
    }
    if (adminToken.length() < MIN_ADMIN_TOKEN_LENGTH
        || adminToken.chars().anyMatch(Character::isWhitespace)) {
      throw new SettingsException(
          "weir.admin-token",
          "must be at least " + MIN_ADMIN_TOKEN_LENGTH + " characters without white space");
    }
    String previous = v.optionalString("weir.admin-token-previous");
    Optional<String> adminTokenPrevious = Optional.empty();
    if (previous != null && !previous.isEmpty()) {
      if (previous.length() < MIN_ADMIN_TOKEN_LENGTH
          || previous.chars().anyMatch(Character::isWhitespace)) {
        throw new SettingsException(
            "weir.admin-token-previous",
            "must be at least "
                + MIN_ADMIN_TOKEN_LENGTH
                + " characters without white space (environment variable"
                + " WEIR_ADMIN_TOKEN_PREVIOUS), or empty");
      }
      if (previous.equals(adminToken)) {
        throw new SettingsException(
            "weir.admin-token-previous", "must differ from weir.admin-token (or be empty)");
      }
      adminTokenPrevious = Optional.of(previous);
    }
    List<String> roles;
    try {
      roles = config.getStringList("weir.cluster.roles");
    } catch (ConfigException e) {
      throw new SettingsException("weir.cluster.roles", "must be a list of role names");
    }
    return new NodeSettings(
        v.requiredString("weir.http.host"),
        v.port("weir.http.port", true),
        v.positiveDuration("weir.http.bind-timeout"),
        v.requiredString("weir.cluster.host"),
        v.port("weir.cluster.port", true),
        parseSeedNodes(v.optionalString("weir.cluster.seed-nodes")),
        roles,
        adminToken,
        adminTokenPrevious,
        PostgresSettings.create(config),
        PipelineConfig.all(config),
        partitions(v),
        partitionShards(v, partitions(v)),
        v.positiveDuration("weir.partitions.keep-alive-interval"),
        new PartitionSettings(
                v.positiveInt("weir.partitions.outbox.max-entries"),
                v.bytes("weir.partitions.outbox.max-bytes", 1),
                v.positiveInt("weir.partitions.group-commit.max-frames"),
                v.positiveInt("weir.partitions.group-commit.max-mutations"))
            .withProjections(
                v.positiveInt("weir.projections.max-consumers"),
                v.bytes("weir.projections.reserve.entries", 0),
                v.bytes("weir.projections.reserve.bytes", 0),
                v.positiveInt("weir.projections.max-effects"))
            .withBodyCache(v.bytes("weir.partitions.documents.body-cache", 0))
            .withFrames(v.positiveInt("weir.partitions.frame.max-entries"), frameBytes(v))
            .withReceipts(
                v.positiveDuration("weir.partitions.receipts.ttl").toMillis(),
                v.positiveInt("weir.partitions.receipts.heap"))
            .withSnapshots(
                new SnapshotPolicy(
                    v.positiveInt("weir.partitions.snapshots.after-events"),
                    v.bytes("weir.partitions.snapshots.after-bytes", 1))),
        v.bytes("weir.documents.max-bytes", 2),
        batchLimits(v),
        v.positiveDuration("weir.documents.ask-timeout"),
        tokens(v),
        projections(v),
        retention(v, config),
        v.positiveDuration("weir.principals.refresh"),
        rotationGrace(config),
        principalFreshness(v),
        v.positiveDuration("weir.policies.refresh"),
        feeds(v),
        v.positiveDuration("weir.feeds.deadline"),
        liveStreams(v),
        v.positiveDuration("weir.feeds.live-streams.signal-interval"),
        HttpTls.create(config),
        ClusterTls.create(config),
        bootstrap(v),
        MetricsSettings.create(config, adminToken),
        v.positiveInt("weir.storage.required-copies"),
        v.positiveInt("weir.partitions.documents.pool-size"),
        v.positiveInt("weir.partitions.documents.upgrades"),
        new Marks(
            config.getBoolean("weir.storage.acknowledged-marks.enabled"),
            v.positiveDuration("weir.storage.acknowledged-marks.timeout"),
            v.positiveDuration("weir.storage.acknowledged-marks.settle-timeout")));
  }

  /**
   * {@code weir.partitions.frame.max-bytes}: at least what an API write of the largest document
   * takes (its before and after image), or such a write could never go.
   */
  private static long frameBytes(ConfigValues v) {
    long bytes = v.bytes("weir.partitions.frame.max-bytes", 1);
    long document = v.bytes("weir.documents.max-bytes", 2);
    if (bytes < 2 * document + 1024) {
      throw new SettingsException(
          "weir.partitions.frame.max-bytes",
          "must be at least twice weir.documents.max-bytes plus 1KiB (a document's before and"
              + " after image)");
    }
    return bytes;
  }

  /**
   * {@code weir.documents.batch}: a batch's items of one partition travel as one message, to
   * another node too, and are one journal row: a batch may be at most half the remote frame size
   * ({@code pekko.remote.artery.advanced.maximum-frame-size}, room for the message's own bytes) and
   * no larger than a journal row ({@code weir.partitions.frame.max-bytes}).
   */
  private static BatchLimits batchLimits(ConfigValues v) {
    long bytes = v.bytes("weir.documents.batch.max-bytes", 1024);
    if (bytes > v.bytes("weir.partitions.frame.max-bytes", 1)
        || bytes > v.bytes("pekko.remote.artery.advanced.maximum-frame-size", 1) / 2) {
      throw new SettingsException(
          "weir.documents.batch.max-bytes",
          "must be at most weir.partitions.frame.max-bytes and half of"
              + " pekko.remote.artery.advanced.maximum-frame-size (a partition's share of a batch"
              + " is one message and one journal row)");
    }
    return new BatchLimits(v.positiveInt("weir.documents.batch.max-items"), bytes);
  }

  private static Optional<Bootstrap> bootstrap(ConfigValues v) {
    String method = v.optionalString("weir.cluster.bootstrap.discovery-method");
    if (method == null || method.isBlank()) {
      return Optional.empty();
    }
    if (!method.matches("[a-z][a-z0-9-]{0,63}")) {
      throw new SettingsException(
          "weir.cluster.bootstrap.discovery-method",
          "must be a Pekko Discovery method name such as kubernetes-api or config");
    }
    String seeds = v.optionalString("weir.cluster.seed-nodes");
    if (seeds != null && !seeds.isBlank()) {
      throw new SettingsException(
          "weir.cluster.bootstrap.discovery-method",
          "cannot be used together with weir.cluster.seed-nodes: choose seed nodes or bootstrap");
    }
    String service = v.requiredString("weir.cluster.bootstrap.service-name");
    if (!service.matches("[A-Za-z0-9][A-Za-z0-9.-]{0,252}")) {
      throw new SettingsException(
          "weir.cluster.bootstrap.service-name", "must be a DNS-style name");
    }
    return Optional.of(
        new Bootstrap(
            method,
            service,
            v.positiveInt("weir.cluster.bootstrap.required-contact-points"),
            v.requiredString("weir.cluster.bootstrap.management-host"),
            v.port("weir.cluster.bootstrap.management-port", true)));
  }

  /**
   * A read budget: {@code <prefix>.default-entries|max-entries|default-bytes|max-bytes}, defaults
   * within maxima.
   */
  private record ReadBudget(int defaultEntries, int maxEntries, long defaultBytes, long maxBytes) {
    static ReadBudget of(ConfigValues v, String prefix) {
      int defaultEntries = v.positiveInt(prefix + ".default-entries");
      int maxEntries = v.positiveInt(prefix + ".max-entries");
      long defaultBytes = v.bytes(prefix + ".default-bytes", 1);
      long maxBytes = v.bytes(prefix + ".max-bytes", 1);
      if (defaultEntries > maxEntries) {
        throw new SettingsException(
            prefix + ".default-entries", "must not exceed " + prefix + ".max-entries");
      }
      if (defaultBytes > maxBytes) {
        throw new SettingsException(
            prefix + ".default-bytes", "must not exceed " + prefix + ".max-bytes");
      }
      return new ReadBudget(defaultEntries, maxEntries, defaultBytes, maxBytes);
    }
  }

  private static LiveStreams.Settings liveStreams(ConfigValues v) {
    LiveStreams.Settings s =
        new LiveStreams.Settings(
            v.positiveInt("weir.feeds.live-streams.max-per-node"),
            v.positiveInt("weir.feeds.live-streams.max-per-principal"),
            v.positiveInt("weir.feeds.live-streams.max-reads"),
            v.positiveDuration("weir.feeds.live-streams.recheck"),
            v.positiveDuration("weir.feeds.live-streams.retry-for"),
            v.positiveInt("weir.feeds.live-streams.buffer"),
            v.positiveDuration("weir.feeds.live-streams.heartbeat"));
    if (s.maxReads() >= v.positiveInt("weir.feeds.max-concurrent")) {
      throw new SettingsException(
          "weir.feeds.live-streams.max-reads",
          "must be below weir.feeds.max-concurrent (request reads are admitted while streams"
              + " read)");
    }
    return s;
  }

  private static Feeds.Limits feeds(ConfigValues v) {
    ReadBudget read = ReadBudget.of(v, "weir.feeds.read");
    return new Feeds.Limits(
        read.defaultEntries(),
        read.maxEntries(),
        read.defaultBytes(),
        read.maxBytes(),
        v.bytes("weir.feeds.query.candidate-bytes", 1),
        v.positiveInt("weir.feeds.query.max-rows"),
        v.positiveInt("weir.feeds.max-concurrent"),
        v.positiveDuration("weir.feeds.cursor-ttl"));
  }

  /**
   * {@code weir.partitions.outbox.auto-purge-interval}: {@code off} (the default) or a duration.
   */
  private static Optional<Duration> retention(ConfigValues v, Config config) {
    String key = "weir.partitions.outbox.auto-purge-interval";
    try {
      if (config.getString(key).equals("off")) {
        return Optional.empty();
      }
    } catch (ConfigException e) {
      throw new SettingsException(key, "must be off or a duration");
    }
    return Optional.of(v.positiveDuration(key));
  }

  private static Tokens tokens(ConfigValues v) {
    return new Tokens(
        v.positiveDuration("weir.tokens.batch-ttl"), v.positiveDuration("weir.tokens.key-refresh"));
  }

  private static Projections projections(ConfigValues v) {
    ReadBudget read = ReadBudget.of(v, "weir.projections.read");
    return new Projections(
        read.defaultEntries(),
        read.maxEntries(),
        read.defaultBytes(),
        read.maxBytes(),
        v.bytes("weir.projections.max-effect-bytes", 1),
        v.positiveInt("weir.projections.read.max-concurrent"),
        v.positiveDuration("weir.projections.read.deadline"));
  }

  private static Duration rotationGrace(Config config) {
    String key = "weir.principals.rotation-grace";
    Duration max = PrincipalStore.MAX_ROTATION_GRACE;
    try {
      Duration d = config.getDuration(key);
      if (d.isNegative() || d.compareTo(max) > 0) {
        throw new SettingsException(key, "must be a duration from 0s to " + max.toDays() + "d");
      }
      return d;
    } catch (ConfigException.Missing e) {
      throw new SettingsException(key, "is required");
    } catch (ConfigException.BadValue | ConfigException.WrongType e) {
      throw new SettingsException(key, "must be a duration such as 1h or 10m");
    }
  }

  /**
   * {@code weir.principals.max-staleness} (above 0, at most 5s: a longer bound is refused, not
   * capped) and {@code weir.principals.check-timeout} (above 0, at most 30s).
   */
  private static Freshness principalFreshness(ConfigValues v) {
    String staleness = "weir.principals.max-staleness";
    Duration bound = v.positiveDuration(staleness);
    if (bound.compareTo(Freshness.MAX_STALENESS) > 0) {
      throw new SettingsException(
          staleness,
          "must be at most "
              + Freshness.MAX_STALENESS.toSeconds()
              + "s (the bound on how stale a node's principals may be)");
    }
    String timeout = "weir.principals.check-timeout";
    Duration check = v.positiveDuration(timeout);
    if (check.compareTo(Freshness.MAX_CHECK_TIMEOUT) > 0) {
      throw new SettingsException(
          timeout, "must be at most " + Freshness.MAX_CHECK_TIMEOUT.toSeconds() + "s");
    }
    return new Freshness(bound, check);
  }

  private static int partitions(ConfigValues v) {
    int p = v.positiveInt("weir.partitions.count");
    if (p > Partitioning.MAX_PARTITIONS) {
      throw new SettingsException(
          "weir.partitions.count",
          "must be at most "
              + Partitioning.MAX_PARTITIONS
              + " (environment variable WEIR_PARTITIONS)");
    }
    return p;
  }

  /**
   * {@code weir.partitions.shards}: {@code auto} (min(16, P)), {@code legacy} (Pekko's one shard
   * per partition) or a number of shards from 1 to P.
   */
  private static PartitionShards partitionShards(ConfigValues v, int partitions) {
    String key = "weir.partitions.shards";
    String value = v.requiredString(key).trim();
    if (value.equals("auto")) {
      return PartitionShards.auto(partitions);
    }
    if (value.equals("legacy")) {
      return PartitionShards.LEGACY_LAYOUT;
    }
    int shards;
    try {
      shards = Integer.parseInt(value);
    } catch (NumberFormatException e) {
      shards = -1;
    }
    if (shards < 1 || shards > partitions) {
      throw new SettingsException(
          key,
          "must be auto, legacy or a number of shards from 1 to weir.partitions.count"
              + " (environment variable WEIR_PARTITION_SHARDS)");
    }
    return new PartitionShards(shards);
  }

  static List<HostPort> parseSeedNodes(String list) {
    List<HostPort> seeds = new ArrayList<>();
    if (list == null || list.isBlank()) {
      return seeds;
    }
    for (String raw : list.split(",")) {
      String entry = raw.trim();
      int colon = entry.lastIndexOf(':');
      if (entry.isEmpty() || colon <= 0 || colon == entry.length() - 1) {
        throw seedError();
      }
      int port;
      try {
        port = Integer.parseInt(entry.substring(colon + 1));
      } catch (NumberFormatException e) {
        throw seedError();
      }
      if (port < 1 || port > 65535) {
        throw seedError();
      }
      seeds.add(new HostPort(entry.substring(0, colon), port));
    }
    return seeds;
  }

  private static SettingsException seedError() {
    return new SettingsException(
        "weir.cluster.seed-nodes",
        "must be a comma-separated list of host:port (environment variable WEIR_SEED_NODES)");
  }

  @Override
  public String toString() {
    return "NodeSettings[http="
        + httpHost
        + ":"
        + httpPort
        + ", cluster="
        + clusterHost
        + ":"
        + clusterPort
        + ", seedNodes="
        + seedNodes
        + ", roles="
        + roles
        + ", adminToken=<hidden>, adminTokenPrevious="
        + (adminTokenPrevious.isPresent() ? "<hidden>" : "none")
        + ", tokens="
        + tokens
        + ", postgres="
        + postgres
        + ", pipelines="
        + pipelines.stream().map(PipelineConfig::name).toList()
        + ", httpTls="
        + httpTls.map(Object::toString).orElse("off")
        + ", clusterTls="
        + clusterTls.map(Object::toString).orElse("off")
        + "]";
  }
}
