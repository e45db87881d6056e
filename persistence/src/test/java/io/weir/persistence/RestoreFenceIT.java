package io.weir.persistence;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/**
 * The restore fence on PostgreSQL. A "backup" state is built in schema weir and the state after it
 * (a rotated key, a revoked principal, a new principal, a policy, another pipeline) in the replaced
 * schema, as restore.sh leaves them; two nodes then start at once.
 */
class RestoreFenceIT {
  private static final String PREVIOUS = "weir_pre_restore_20261130t120000z";

  @Test
  void theFenceRetiresEveryKeyCarriesAccessControlOverAndMarksPipelinesOnce() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("restore_fence_it");
        Database database =
            Database.create(
                PostgresSettings.create(SchemaAndIdentityIT.withDefaults(db)), "fence-it")) {
      String[] tokens = restoredWithPrevious(database, db, true);
      String k1 = tokens[0];
      String k2 = tokens[1];

      // Two nodes start together: the fence runs once.
      ExecutorService pool = Executors.newFixedThreadPool(2);
      List<Future<Optional<RestoreFence.Applied>>> runs = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        runs.add(
            pool.submit(
                () -> {
                  try (Connection c = database.connection()) {
                    return RestoreFence.applyIfPending(c, "weir");
                  }
                }));
      }
      List<RestoreFence.Applied> applied = new ArrayList<>();
      for (Future<Optional<RestoreFence.Applied>> f : runs) {
        f.get().ifPresent(applied::add);
      }
      pool.shutdown();
      assertThat(applied).as("exactly one node applies the fence").hasSize(1);
      RestoreFence.Applied a = applied.get(0);
      assertThat(a.restoreEpoch()).isEqualTo(1);
      assertThat(a.keysInvalidated()).isEqualTo(2);
      assertThat(a.previousSchema()).contains(PREVIOUS);
      assertThat(a.pipelinesMarked()).isEqualTo(2);

      try (Connection c = database.connection()) {
        assertThat(RestoreFence.pending(c, "weir")).isFalse();
        assertThat(RestoreFence.applyIfPending(c, "weir")).as("nothing pending any more").isEmpty();
        TokenKeyStore.KeyRing ring = TokenKeyStore.load(c, "weir");
        assertThat(ring.activeKid()).isEqualTo(a.newKid()).isNotIn(k1, k2);
        assertThat(ring.keys()).containsOnlyKeys(a.newKid());
        assertThat(ring.fenced()).containsOnlyKeys(k1, k2);
        assertThat(ring.restoreEpoch()).isEqualTo(1);
        assertThat(ring.restoredAt()).isNotNull();
        assertThat(ring.info()).filteredOn(TokenKeyStore.KeyInfo::invalidatedByRestore).hasSize(2);
        assertThat(ring.toString())
            .doesNotContain(java.util.HexFormat.of().formatHex(ring.fenced().get(k1)));
        // Access control is the replaced schema's: p1 stays revoked, p3 exists, the policy is
        // there.
        assertThat(
                strings(
                    c,
                    "SELECT id || ':' || (revoked_at IS NOT NULL) FROM weir.principals ORDER BY id"))
            .containsExactly("p1:true", "p3:false");
        assertThat(strings(c, "SELECT principal_id || ':' || grant_name FROM weir.grants"))
            .containsExactly("p3:ChangesRead");
        assertThat(strings(c, "SELECT collection || ':' || version FROM weir.collection_policies"))
            .containsExactly("notes:5");
        assertThat(strings(c, "SELECT nextval('weir.policy_versions')::text")).containsExactly("6");
        assertThat(
                strings(
                    c,
                    "SELECT pipeline || ':' || (restored_at IS NOT NULL) FROM weir.cdc_slot ORDER BY 1"))
            .containsExactly("a:true", "b:true");
        assertThat(
                strings(
                    c,
                    "SELECT count(*)::text FROM pg_namespace WHERE nspname = '" + PREVIOUS + "'"))
            .as("the replaced schema is kept for the operator")
            .containsExactly("1");
        // A node then loads the identity as usual: no key is added back.
        ClusterIdentityStore.loadOrCreate(c, "weir", 8);
        assertThat(TokenKeyStore.load(c, "weir").keys()).containsOnlyKeys(a.newKid());
      }
    }
  }

  @Test
  void rewindAccessTakesAccessControlFromTheBackup() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("restore_rewind_it");
        Database database =
            Database.create(
                PostgresSettings.create(SchemaAndIdentityIT.withDefaults(db)), "rewind-it")) {
      restoredWithPrevious(database, db, false);
      try (Connection c = database.connection()) {
        RestoreFence.Applied a = RestoreFence.applyIfPending(c, "weir").orElseThrow();
        assertThat(a.previousSchema()).isEmpty();
        assertThat(a.keysInvalidated())
            .as("only the backup's key: the other is unknown")
            .isEqualTo(1);
        assertThat(a.pipelinesMarked()).isEqualTo(1);
        assertThat(
                strings(
                    c,
                    "SELECT id || ':' || (revoked_at IS NOT NULL) FROM weir.principals ORDER BY id"))
            .containsExactly("p1:false");
      }
    }
  }

  /**
   * Builds the state restore.sh leaves: weir holds the "backup" (key k1, principal p1 active,
   * pipeline a), {@link #PREVIOUS} the live state after it (keys k1 and k2, p1 revoked, p3 with a
   * grant, a policy of version 5, pipelines a and b), and the marker. Returns k1 and k2.
   */
  private static String[] restoredWithPrevious(
      Database database, TestPostgres.TestDatabase db, boolean carry) throws Exception {
    SchemaMigrator.migrate(database.dataSource(), "weir");
    String k1;
    String k2;
    try (Connection c = database.connection();
        Statement s = c.createStatement()) {
      ClusterIdentityStore.loadOrCreate(c, "weir", 8);
      k1 = TokenKeyStore.load(c, "weir").activeKid();
      PrincipalStore.create(c, "weir", "p1", false);
      s.execute(
          "INSERT INTO weir.cdc_slot (pipeline, slot_name, incarnation, system_identifier, timeline)"
              + " VALUES ('a', 'slot_a', gen_random_uuid(), 1, 1)");
      // The backup is this state: copy it aside.
      s.execute("CREATE SCHEMA backup_copy");
      for (String t :
          List.of(
              "cluster", "token_keys", "principals", "grants", "cdc_slot", "collection_policies")) {
        s.execute("CREATE TABLE backup_copy." + t + " AS SELECT * FROM weir." + t);
      }
      // After the backup.
      k2 = TokenKeyStore.rotate(c, "weir").activeKid();
      PrincipalStore.revoke(c, "weir", "p1");
      PrincipalStore.create(c, "weir", "p3", false);
      PrincipalStore.changeGrant(c, "weir", "p3", "notes", "ChangesRead", true);
      s.execute("SELECT setval('weir.policy_versions', 5)");
      s.execute(
          "INSERT INTO weir.collection_policies (collection, version, visibility) VALUES ('notes', 5, 'none')");
      s.execute(
          "INSERT INTO weir.cdc_slot (pipeline, slot_name, incarnation, system_identifier, timeline)"
              + " VALUES ('b', 'slot_b', gen_random_uuid(), 1, 1)");
      // restore.sh: the live schema renamed, the backup restored as weir, the marker.
      s.execute("ALTER SCHEMA weir RENAME TO " + PREVIOUS);
    }
    SchemaMigrator.migrate(database.dataSource(), "weir");
    try (Connection c = database.connection();
        Statement s = c.createStatement()) {
      for (String t :
          List.of(
              "cluster", "token_keys", "principals", "grants", "cdc_slot", "collection_policies")) {
        s.execute("INSERT INTO weir." + t + " SELECT * FROM backup_copy." + t);
      }
      s.execute("DROP SCHEMA backup_copy CASCADE");
      s.execute(
          "CREATE TABLE weir.restore_pending (previous_schema TEXT, requested_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())");
      s.execute(
          "INSERT INTO weir.restore_pending (previous_schema) VALUES ("
              + (carry ? "'" + PREVIOUS + "'" : "NULL")
              + ")");
      assertThat(RestoreFence.pending(c, "weir")).isTrue();
    }
    return new String[] {k1, k2};
  }

  private static List<String> strings(Connection c, String query) throws Exception {
    List<String> out = new ArrayList<>();
    try (Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(query)) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }
}
