package io.weir.node;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.weir.persistence.SettingsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class NodeSettingsTest {
  private static final String TOKEN = "an-admin-token-of-sufficient-length";
  private static final String PASSWORD = "canary-password-7f3a";

  private static Config with(Map<String, Object> overrides) {
    Map<String, Object> base = new HashMap<>();
    base.put("weir.admin-token", TOKEN);
    base.put("weir.postgres.url", "jdbc:postgresql://127.0.0.1:5432/weir");
    base.put("weir.postgres.password", PASSWORD);
    base.putAll(overrides);
    // Parse the reference files without the process environment, so WEIR_* variables of the
    // machine running the tests do not leak in.
    return ConfigFactory.parseMap(base)
        .withFallback(ConfigFactory.parseResources("reference.conf"))
        .resolve(ConfigResolveOptions.noSystem());
  }

  @Test
  void validSettingsAreRead() {
    NodeSettings s =
        NodeSettings.create(
            with(Map.of("weir.cluster.seed-nodes", "10.0.0.1:25520, node-b:25521")));
    assertThat(s.seedNodes())
        .as("seed nodes should be parsed in order, trimmed")
        .containsExactly(
            new NodeSettings.HostPort("10.0.0.1", 25520),
            new NodeSettings.HostPort("node-b", 25521));
    assertThat(s.roles()).containsExactly("server");
    assertThat(s.partitions()).as("default partition count").isEqualTo(64);
    assertThat(s.documentMaxBytes()).as("default document size limit").isEqualTo(1024 * 1024);
    assertThat(s.documentAskTimeout())
        .as("default document ask timeout")
        .isEqualTo(java.time.Duration.ofSeconds(10));
    assertThat(s.toString())
        .as("toString must hide secrets")
        .doesNotContain(TOKEN)
        .doesNotContain(PASSWORD);
    assertThat(s.projections().defaultReadEntries()).isEqualTo(100);
    assertThat(s.projections().maxReadBytes()).isEqualTo(16L << 20);
    assertThat(s.projections().maxConcurrentReads()).isEqualTo(64);
    assertThat(s.projections().readDeadline()).isEqualTo(java.time.Duration.ofSeconds(30));
    assertThat(s.partitionLimits().maxConsumers()).isEqualTo(64);
    assertThat(s.partitionLimits().reserveEntries()).isEqualTo(16_384);
    assertThat(s.partitionLimits().reserveBytes()).isEqualTo(2L << 30);
    assertThat(s.tokens().batchTtl()).isEqualTo(java.time.Duration.ofHours(24));
    assertThat(s.partitionLimits().snapshots())
        .isEqualTo(io.weir.sharding.partition.SnapshotPolicy.DEFAULT);
    assertThat(
            NodeSettings.create(
                    with(
                        Map.of(
                            "weir.partitions.snapshots.after-events", "100",
                            "weir.partitions.snapshots.after-bytes", "1MiB")))
                .partitionLimits()
                .snapshots())
        .isEqualTo(new io.weir.sharding.partition.SnapshotPolicy(100, 1L << 20));
    assertThatThrownBy(
            () -> NodeSettings.create(with(Map.of("weir.partitions.snapshots.after-events", "0"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.partitions.snapshots.after-events"));
    assertThat(s.outboxRetention()).as("automatic retention is off by default").isEmpty();
    assertThat(
            NodeSettings.create(with(Map.of("weir.partitions.outbox.auto-purge-interval", "5m")))
                .outboxRetention())
        .contains(java.time.Duration.ofMinutes(5));
    assertThatThrownBy(
            () ->
                NodeSettings.create(
                    with(Map.of("weir.partitions.outbox.auto-purge-interval", "sometimes"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.partitions.outbox.auto-purge-interval"));
  }

  @Test
  void projectionBudgetsMustBeConsistent() {
    assertThatThrownBy(
            () -> NodeSettings.create(with(Map.of("weir.projections.read.default-entries", 2000))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.projections.read.default-entries"));
  }

  @Test
  void missingAdminTokenNamesTheKeyAndItsEnvironmentVariable() {
    assertThatThrownBy(() -> NodeSettings.create(with(Map.of("weir.admin-token", ""))))
        .isInstanceOfSatisfying(
            SettingsException.class, e -> assertThat(e.key()).isEqualTo("weir.admin-token"))
        .hasMessageContaining("WEIR_ADMIN_TOKEN");
  }

  @Test
  void aJournalRowBoundTooSmallForTheLargestDocumentIsRefused() {
    assertThat(NodeSettings.create(with(Map.of())).partitionLimits().maxFrameBytes())
        .isEqualTo(8L << 20);
    assertThatThrownBy(
            () -> NodeSettings.create(with(Map.of("weir.partitions.frame.max-bytes", "1MiB"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.partitions.frame.max-bytes"));
  }

  @Test
  void aBatchIsBoundedByAJournalRowAndHalfTheRemoteFrame() {
    NodeSettings defaults = NodeSettings.create(with(Map.of()));
    assertThat(defaults.documentBatches().maxItems()).isEqualTo(1000);
    assertThat(defaults.documentBatches().maxBytes()).isEqualTo(4L << 20);
    for (String size : java.util.List.of("5MiB", "9MiB")) {
      assertThatThrownBy(
              () -> NodeSettings.create(with(Map.of("weir.documents.batch.max-bytes", size))))
          .isInstanceOfSatisfying(
              SettingsException.class,
              e -> assertThat(e.key()).isEqualTo("weir.documents.batch.max-bytes"));
    }
  }

  @Test
  void liveStreamReadsStayBelowTheRequestReads() {
    NodeSettings defaults = NodeSettings.create(with(Map.of()));
    assertThat(defaults.liveStreams().maxPerNode()).isEqualTo(2048);
    assertThat(defaults.liveStreams().maxReads()).isEqualTo(16);
    assertThat(defaults.liveSignalInterval()).isEqualTo(java.time.Duration.ofMillis(25));
    assertThatThrownBy(
            () -> NodeSettings.create(with(Map.of("weir.feeds.live-streams.max-reads", "64"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.feeds.live-streams.max-reads"));
  }

  @Test
  void shortAdminTokenIsRefusedWithoutEchoingIt() {
    assertThatThrownBy(() -> NodeSettings.create(with(Map.of("weir.admin-token", "short-secret"))))
        .isInstanceOf(SettingsException.class)
        .hasMessageContaining("weir.admin-token")
        .hasMessageNotContaining("short-secret");
  }

  @Test
  void aPreviousAdminTokenIsOptionalAndCheckedLikeTheToken() {
    assertThat(NodeSettings.create(with(Map.of())).adminTokenPrevious()).isEmpty();
    String previous = "the-previous-admin-token-0123";
    NodeSettings s = NodeSettings.create(with(Map.of("weir.admin-token-previous", previous)));
    assertThat(s.adminTokenPrevious()).contains(previous);
    assertThat(s.toString()).doesNotContain(previous);
    assertThatThrownBy(
            () -> NodeSettings.create(with(Map.of("weir.admin-token-previous", "short-old"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.admin-token-previous"))
        .hasMessageContaining("WEIR_ADMIN_TOKEN_PREVIOUS")
        .hasMessageNotContaining("short-old");
    assertThatThrownBy(() -> NodeSettings.create(with(Map.of("weir.admin-token-previous", TOKEN))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.admin-token-previous"))
        .hasMessageNotContaining(TOKEN);
  }

  @Test
  void rotationGraceIsZeroToSevenDays() {
    assertThat(NodeSettings.create(with(Map.of())).principalRotationGrace())
        .isEqualTo(java.time.Duration.ofHours(1));
    assertThat(
            NodeSettings.create(with(Map.of("weir.principals.rotation-grace", "0s")))
                .principalRotationGrace())
        .isZero();
    for (String bad : new String[] {"8d", "-1s", "soon"}) {
      assertThatThrownBy(
              () -> NodeSettings.create(with(Map.of("weir.principals.rotation-grace", bad))))
          .as(bad)
          .isInstanceOfSatisfying(
              SettingsException.class,
              e -> assertThat(e.key()).isEqualTo("weir.principals.rotation-grace"));
    }
  }

  @Test
  void badPortNamesTheKey() {
    assertThatThrownBy(() -> NodeSettings.create(with(Map.of("weir.http.port", "eighty"))))
        .isInstanceOfSatisfying(
            SettingsException.class, e -> assertThat(e.key()).isEqualTo("weir.http.port"))
        .hasMessageNotContaining("eighty");
    assertThatThrownBy(() -> NodeSettings.create(with(Map.of("weir.cluster.port", 70000))))
        .isInstanceOfSatisfying(
            SettingsException.class, e -> assertThat(e.key()).isEqualTo("weir.cluster.port"));
  }

  @Test
  void partitionCountMustBeBetweenOneAnd65536() {
    assertThat(NodeSettings.create(with(Map.of("weir.partitions.count", 128))).partitions())
        .isEqualTo(128);
    for (Object bad : new Object[] {0, -1, 65_537, "many"}) {
      assertThatThrownBy(() -> NodeSettings.create(with(Map.of("weir.partitions.count", bad))))
          .isInstanceOfSatisfying(
              SettingsException.class, e -> assertThat(e.key()).isEqualTo("weir.partitions.count"));
    }
  }

  @Test
  void partitionShardsAreAutoLegacyOrANumberUpToThePartitions() {
    assertThat(NodeSettings.create(with(Map.of())).partitionShards().shards())
        .as("auto: min(16, 64)")
        .isEqualTo(16);
    assertThat(
            NodeSettings.create(with(Map.of("weir.partitions.count", 4)))
                .partitionShards()
                .shards())
        .as("auto: min(16, 4)")
        .isEqualTo(4);
    assertThat(
            NodeSettings.create(with(Map.of("weir.partitions.shards", "legacy")))
                .partitionShards()
                .legacy())
        .isTrue();
    assertThat(
            NodeSettings.create(with(Map.of("weir.partitions.shards", 32)))
                .partitionShards()
                .shards())
        .isEqualTo(32);
    for (Object bad : new Object[] {0, -1, 65, "some"}) {
      assertThatThrownBy(() -> NodeSettings.create(with(Map.of("weir.partitions.shards", bad))))
          .isInstanceOfSatisfying(
              SettingsException.class, e -> assertThat(e.key()).isEqualTo("weir.partitions.shards"))
          .hasMessageNotContaining("some");
    }
  }

  @Test
  void malformedSeedNodesAreRefused() {
    for (String bad : new String[] {"host-only", "h:", ":25520", "h:0", "h:99999", "h:port"}) {
      assertThatThrownBy(() -> NodeSettings.create(with(Map.of("weir.cluster.seed-nodes", bad))))
          .as("seed list '%s' should be refused", bad)
          .isInstanceOfSatisfying(
              SettingsException.class,
              e -> assertThat(e.key()).isEqualTo("weir.cluster.seed-nodes"));
    }
  }

  @Test
  void bootstrapIsOffByDefaultValidatedAndExclusiveWithSeeds() {
    assertThat(NodeSettings.create(with(Map.of())).bootstrap()).isEmpty();
    NodeSettings.Bootstrap b =
        NodeSettings.create(
                with(
                    Map.of(
                        "weir.cluster.bootstrap.discovery-method",
                        "kubernetes-api",
                        "weir.cluster.bootstrap.management-port",
                        7700)))
            .bootstrap()
            .orElseThrow();
    assertThat(b)
        .isEqualTo(new NodeSettings.Bootstrap("kubernetes-api", "weir", 3, "127.0.0.1", 7700));
    assertThatThrownBy(
            () ->
                NodeSettings.create(
                    with(Map.of("weir.cluster.bootstrap.discovery-method", "Kube API!"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.cluster.bootstrap.discovery-method"));
    assertThatThrownBy(
            () ->
                NodeSettings.create(
                    with(
                        Map.of(
                            "weir.cluster.bootstrap.discovery-method",
                            "config",
                            "weir.cluster.seed-nodes",
                            "h:25520"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.getMessage()).contains("weir.cluster.seed-nodes"));
    assertThatThrownBy(
            () ->
                NodeSettings.create(
                    with(
                        Map.of(
                            "weir.cluster.bootstrap.discovery-method",
                            "config",
                            "weir.cluster.bootstrap.required-contact-points",
                            0))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.cluster.bootstrap.required-contact-points"));
  }

  @Test
  void missingOrForeignPostgresUrlIsRefused() {
    Config noUrl = with(Map.of()).withoutPath("weir.postgres.url");
    assertThatThrownBy(() -> NodeSettings.create(noUrl))
        .isInstanceOfSatisfying(
            SettingsException.class, e -> assertThat(e.key()).isEqualTo("weir.postgres.url"))
        .hasMessageContaining("WEIR_PG_URL");
    assertThatThrownBy(
            () -> NodeSettings.create(with(Map.of("weir.postgres.url", "jdbc:mysql://x/y"))))
        .isInstanceOfSatisfying(
            SettingsException.class, e -> assertThat(e.key()).isEqualTo("weir.postgres.url"));
  }

  @Test
  void badDurationsNameTheKey() {
    assertThatThrownBy(
            () -> NodeSettings.create(with(Map.of("weir.postgres.max-backoff", "100ms"))))
        .as("max-backoff below min-backoff should be refused")
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.postgres.max-backoff"));
    assertThatThrownBy(
            () -> NodeSettings.create(with(Map.of("weir.postgres.connect-timeout", "soon"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.postgres.connect-timeout"));
    assertThatThrownBy(() -> NodeSettings.create(with(Map.of("weir.documents.max-bytes", "huge"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.documents.max-bytes"));
  }

  @Test
  void configFileOverridesDefaultsAndBrokenFilesAreReportedByPosition(@TempDir Path dir)
      throws Exception {
    Path good = dir.resolve("node.conf");
    Files.writeString(good, "weir.http.port = 9123\nweir.cluster.port = 25600\n");
    Config config = NodeConfig.load(good);
    assertThat(config.getInt("weir.http.port"))
        .as("the --config file should override the default")
        .isEqualTo(9123);
    assertThat(config.getInt("pekko.remote.artery.canonical.port"))
        .as("weir.cluster.port should reach Pekko's remoting port through weir-node.conf")
        .isEqualTo(25600);

    Path broken = dir.resolve("broken.conf");
    Files.writeString(
        broken, "weir.http.port = 9123\nweir.admin-token = \"secret-value-in-broken-file\n");
    assertThatThrownBy(() -> NodeConfig.load(broken))
        .isInstanceOfSatisfying(
            SettingsException.class, e -> assertThat(e.key()).isEqualTo("--config"))
        .hasMessageNotContaining("secret-value-in-broken-file");

    assertThatThrownBy(() -> NodeConfig.load(dir.resolve("missing.conf")))
        .isInstanceOfSatisfying(
            SettingsException.class, e -> assertThat(e.key()).isEqualTo("--config"));
  }
}
