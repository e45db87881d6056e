package io.weir.persistence;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

class SchemaAndIdentityIT {

  /**
   * The highest V<n>__ script among the module's migrations (tests run in the module's directory).
   */
  private static int latestMigration() throws Exception {
    java.nio.file.Path dir = java.nio.file.Path.of("src/main/resources/db/migration");
    try (var files = java.nio.file.Files.list(dir)) {
      int latest =
          files
              .map(f -> f.getFileName().toString())
              .filter(n -> n.matches("V[0-9]+__.*\\.sql"))
              .mapToInt(n -> Integer.parseInt(n.substring(1, n.indexOf("__"))))
              .max()
              .orElse(0);
      assertThat(latest).as("the migrations are found").isGreaterThanOrEqualTo(14);
      return latest;
    }
  }

  @Test
  void migrationIsIdempotentAndCreatesTheJournalInWeirsSchema() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("schema_it");
        Database database =
            Database.create(PostgresSettings.create(withDefaults(db)), "schema-it")) {
      String v1 = SchemaMigrator.migrate(database.dataSource(), "weir");
      String v2 = SchemaMigrator.migrate(database.dataSource(), "weir");
      assertThat(v2)
          .as("a second migration should find nothing to do and report the same version")
          .isEqualTo(v1);
      assertThat(v1)
          .as("every migration should be applied")
          .isEqualTo(String.valueOf(latestMigration()));
      try (Connection c = db.connect();
          ResultSet rs =
              c.createStatement()
                  .executeQuery(
                      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'weir' ORDER BY 1")) {
        List<String> tables = new ArrayList<>();
        while (rs.next()) {
          tables.add(rs.getString(1));
        }
        assertThat(tables)
            .as(
                "the journal, snapshot, durable state and cluster tables should live in schema weir")
            .contains(
                "event_journal", "event_tag", "snapshot", "durable_state", "cluster", "token_keys");
      }
    }
  }

  @Test
  void tokenKeysStartWithTheIdentityKeyRotateAndRetire() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("token_keys_it");
        Database database =
            Database.create(PostgresSettings.create(withDefaults(db)), "token-keys-it");
        Connection c = migrated(database)) {
      ClusterIdentity identity = ClusterIdentityStore.loadOrCreate(c, "weir", 64);
      TokenKeyStore.KeyRing first = TokenKeyStore.load(c, "weir");
      assertThat(first.activeKid()).isEqualTo(identity.signingKid());
      assertThat(first.keys().get(identity.signingKid())).isEqualTo(identity.signingKey());
      ClusterIdentityStore.loadOrCreate(c, "weir", 64);
      assertThat(TokenKeyStore.load(c, "weir").info()).as("a second start adds no key").hasSize(1);
      TokenKeyStore.KeyRing rotated = TokenKeyStore.rotate(c, "weir");
      assertThat(rotated.activeKid()).isNotEqualTo(first.activeKid());
      assertThat(rotated.keys()).containsKeys(first.activeKid(), rotated.activeKid());
      assertThat(rotated.keys().get(rotated.activeKid())).hasSize(32);
      java.time.Duration none = java.time.Duration.ZERO;
      assertThatThrownBy(() -> TokenKeyStore.retire(c, "weir", rotated.activeKid(), none))
          .isInstanceOfSatisfying(
              TokenKeyStore.KeyRefused.class, e -> assertThat(e.notFound()).isFalse());
      assertThatThrownBy(() -> TokenKeyStore.retire(c, "weir", "unknown", none))
          .isInstanceOfSatisfying(
              TokenKeyStore.KeyRefused.class, e -> assertThat(e.notFound()).isTrue());
      assertThatThrownBy(
              () ->
                  TokenKeyStore.retire(
                      c, "weir", first.activeKid(), java.time.Duration.ofMinutes(5)))
          .as("the previous key may still sign on nodes that have not reloaded")
          .isInstanceOfSatisfying(
              TokenKeyStore.KeyRefused.class, e -> assertThat(e.notFound()).isFalse());
      TokenKeyStore.KeyRing retired = TokenKeyStore.retire(c, "weir", first.activeKid(), none);
      assertThat(retired.keys()).containsOnlyKeys(rotated.activeKid());
      assertThat(retired.info())
          .hasSize(2)
          .first()
          .satisfies(
              k -> {
                assertThat(k.kid()).isEqualTo(first.activeKid());
                assertThat(k.retiredAt()).isNotNull();
                assertThat(k.active()).isFalse();
              });
      assertThat(retired.toString())
          .doesNotContain(
              java.util.HexFormat.of().formatHex(retired.keys().get(retired.activeKid())));
    }
  }

  @Test
  void nodesStartingTogetherShareOneClusterIdentity() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("identity_it")) {
      PostgresSettings settings = PostgresSettings.create(withDefaults(db));
      ExecutorService pool = Executors.newFixedThreadPool(4);
      try {
        List<Callable<ClusterIdentity>> nodes = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
          nodes.add(
              () -> {
                // Each caller stands for a node with a pool of its own.
                try (Database database = Database.create(settings, "identity-it");
                    Connection c = migrated(database)) {
                  return ClusterIdentityStore.loadOrCreate(c, "weir", 64);
                }
              });
        }
        List<ClusterIdentity> seen = new ArrayList<>();
        for (Future<ClusterIdentity> f : pool.invokeAll(nodes)) {
          seen.add(f.get());
        }
        ClusterIdentity first = seen.get(0);
        assertThat(first.signingKey()).as("the signing key should be 256 bits").hasSize(32);
        for (ClusterIdentity id : seen) {
          assertThat(id.clusterId())
              .as("every node should read the same cluster id")
              .isEqualTo(first.clusterId());
          assertThat(id.signingKey())
              .as("every node should read the same signing key")
              .isEqualTo(first.signingKey());
        }
        assertThat(first.toString())
            .as("the identity's toString must not reveal the key")
            .doesNotContain("signingKey=");
        assertThat(first.partitionCount()).isEqualTo(64);
      } finally {
        pool.shutdownNow();
      }
    }
  }

  @Test
  void theClusterKeepsThePartitionCountItWasCreatedWith() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("partitions_it");
        Database database =
            Database.create(PostgresSettings.create(withDefaults(db)), "partitions-it");
        Connection c = migrated(database)) {
      assertThat(ClusterIdentityStore.loadOrCreate(c, "weir", 32).partitionCount()).isEqualTo(32);
      assertThat(ClusterIdentityStore.loadOrCreate(c, "weir", 32).partitionCount()).isEqualTo(32);
      assertThatThrownBy(() -> ClusterIdentityStore.loadOrCreate(c, "weir", 64))
          .isInstanceOfSatisfying(
              ClusterIdentityStore.PartitionCountMismatch.class,
              e -> {
                assertThat(e.configured()).isEqualTo(64);
                assertThat(e.cluster()).isEqualTo(32);
                assertThat(e.getMessage()).contains("weir.partitions.count = 32");
              });
      // A cluster created before partition counts were recorded adopts the first node's.
      try (java.sql.Statement s = c.createStatement()) {
        s.execute("UPDATE weir.cluster SET partition_count = NULL");
      }
      assertThat(ClusterIdentityStore.loadOrCreate(c, "weir", 16).partitionCount()).isEqualTo(16);
    }
  }

  @Test
  void theClusterKeepsTheShardLayoutItWasCreatedWith() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("shards_it");
        Database database =
            Database.create(PostgresSettings.create(withDefaults(db)), "shards-it");
        Connection c = migrated(database)) {
      assertThat(ClusterIdentityStore.loadOrCreate(c, "weir", 32, 16).partitionCount())
          .isEqualTo(32);
      ClusterIdentityStore.loadOrCreate(c, "weir", 32, 16);
      for (int other : new int[] {8, 32, ClusterIdentityStore.LEGACY_SHARDS}) {
        assertThatThrownBy(() -> ClusterIdentityStore.loadOrCreate(c, "weir", 32, other))
            .isInstanceOf(ClusterIdentityStore.PartitionShardsMismatch.class)
            .hasMessageContaining("weir.partitions.shards = 16");
      }
    }
  }

  @Test
  void aClusterCreatedBeforeLayoutsWereRecordedKeepsPekkosOwn() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("shards_old_it");
        Database database =
            Database.create(PostgresSettings.create(withDefaults(db)), "shards-old-it")) {
      // The schema and identity as the release before the layout left them (migration 18).
      org.flywaydb.core.Flyway.configure(SchemaMigrator.class.getClassLoader())
          .dataSource(database.dataSource())
          .schemas("weir")
          .defaultSchema("weir")
          .createSchemas(true)
          .locations("classpath:db/migration")
          .target("18")
          .load()
          .migrate();
      try (Connection c = database.connection();
          java.sql.PreparedStatement insert =
              c.prepareStatement(
                  "INSERT INTO weir.cluster (cluster_id, signing_kid, signing_key, partition_count)"
                      + " VALUES (gen_random_uuid(), 'k1', ?, 64)")) {
        insert.setBytes(1, new byte[32]);
        insert.executeUpdate();
      }
      try (Connection c = migrated(database)) {
        // Its nodes ran Pekko's default layout: a node of this release must too.
        assertThatThrownBy(() -> ClusterIdentityStore.loadOrCreate(c, "weir", 64, 16))
            .isInstanceOf(ClusterIdentityStore.PartitionShardsMismatch.class)
            .hasMessageContaining("weir.partitions.shards = legacy");
        assertThat(
                ClusterIdentityStore.loadOrCreate(c, "weir", 64, ClusterIdentityStore.LEGACY_SHARDS)
                    .partitionCount())
            .isEqualTo(64);
      }
    }
  }

  private static Connection migrated(Database database) throws java.sql.SQLException {
    SchemaMigrator.migrate(database.dataSource(), "weir");
    return database.connection();
  }

  static com.typesafe.config.Config withDefaults(TestPostgres.TestDatabase db) {
    return db.config().withFallback(com.typesafe.config.ConfigFactory.load()).resolve();
  }
}
