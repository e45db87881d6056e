package io.weir.persistence.cdc.mirror;

import static io.weir.persistence.cdc.mirror.DifferentialHarness.rolledBack;
import static io.weir.persistence.cdc.mirror.DifferentialHarness.scenario;
import static io.weir.persistence.cdc.mirror.DifferentialHarness.source;
import static io.weir.persistence.cdc.mirror.DifferentialHarness.sourceAutocommit;
import static io.weir.persistence.cdc.mirror.DifferentialHarness.targets;
import static org.assertj.core.api.Assertions.assertThat;

import io.weir.persistence.cdc.mirror.DifferentialHarness.Outcome;
import io.weir.persistence.cdc.mirror.DifferentialHarness.Scenario;
import java.util.List;
import java.util.stream.LongStream;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Weir's differential test of the mirror sink: each workload runs against PostgreSQL's built-in
 * logical replication subscriber and against a Weir pipeline into {@link PostgresMirrorSink}, and
 * the two targets' canonical dumps must be equal ({@link DifferentialHarness}).
 *
 * <p>The fixed workloads cover the table classes the mirror once refused or broke on (REPLICA
 * IDENTITY FULL without a key, with duplicate rows; USING INDEX; insert-only keyless tables;
 * identity columns; composite, array, range, domain and enum keys; FULL tables gaining columns;
 * TOASTed key columns in key-changing updates) and partitioned tables (leaf and via the root), row
 * filters, column lists (with target-only columns that key changes and identity replaces must
 * keep), generated columns, TOAST and truncate. Random workloads ({@link RandomWorkload}) add
 * savepoints, rollbacks and key changes over tables of each class: {@value #SEEDS_PROPERTY} seeds
 * (default 2, from the current time) of {@value #TRANSACTIONS_PROPERTY} transactions (default 80);
 * {@value #SEED_PROPERTY} replays one seed; {@value #ONLY_PROPERTY} runs only the scenarios whose
 * name contains it. In a build: {@code -Dweir.test.argLine="-Dweir.diff.seeds=50
 * -Dweir.diff.transactions=300"}. Each run prints {@code mirror-differential: <scenario> rows=…
 * ms=… equal} (a random scenario's name holds its seed).
 */
class MirrorDifferentialIT {
  static final String SEEDS_PROPERTY = "weir.diff.seeds";
  static final String TRANSACTIONS_PROPERTY = "weir.diff.transactions";
  static final String SEED_PROPERTY = "weir.diff.seed";
  static final String ONLY_PROPERTY = "weir.diff.only";

  private static DifferentialHarness harness;

  @BeforeAll
  static void openHarness() throws Exception {
    Assumptions.assumeTrue(
        DifferentialHarness.subscriptionsPossible(),
        "the test login must be a superuser on a server with wal_level = logical and logical"
            + " replication workers");
    harness = new DifferentialHarness();
    harness.prepare(Stream.concat(fixed(), random()).toList());
  }

  @AfterAll
  static void closeHarness() throws Exception {
    if (harness != null) {
      harness.close();
    }
  }

  @ParameterizedTest(name = "{0}", allowZeroInvocations = true)
  @MethodSource("fixed")
  void fixedWorkload(Scenario scenario) throws Exception {
    check(scenario);
  }

  @ParameterizedTest(name = "{0}", allowZeroInvocations = true)
  @MethodSource("random")
  void randomWorkload(Scenario scenario) throws Exception {
    check(scenario);
  }

  /** The random scenarios: made once, since {@link #openHarness} prepares the same objects. */
  private static List<Scenario> randomScenarios;

  static synchronized Stream<Scenario> random() {
    if (randomScenarios == null) {
      int transactions = Integer.getInteger(TRANSACTIONS_PROPERTY, 80);
      Long one = Long.getLong(SEED_PROPERTY);
      int seeds = one != null ? 1 : Integer.getInteger(SEEDS_PROPERTY, 2);
      long base = one != null ? one : System.currentTimeMillis();
      randomScenarios =
          LongStream.range(0, seeds)
              .mapToObj(i -> RandomWorkload.scenario(base + i, transactions))
              .filter(s -> s.name().contains(System.getProperty(ONLY_PROPERTY, "")))
              .toList();
    }
    return randomScenarios.stream();
  }

  private static void check(Scenario scenario) throws Exception {
    Outcome outcome = harness.run(scenario);
    assertThat(outcome.differences())
        .as("%s: the mirror's target must equal the built-in subscriber's", scenario.name())
        .isEmpty();
    if (scenario.streamed()) {
      assertThat(outcome.spilledStreams())
          .as("%s: its large transactions arrived streamed and spilled", scenario.name())
          .isPositive();
    }
    System.out.printf(
        "mirror-differential: %s rows=%d ms=%d spilled-streams=%d equal%n",
        scenario.name(), outcome.rows(), outcome.millis(), outcome.spilledStreams());
  }

  /**
   * A text value stored out of line (compressed, over 2 kB) that a B-tree index still takes
   * (compressed, under 2.7 kB): an incompressible part and a compressible one.
   */
  static String toastedKey(String tag) {
    return "((SELECT string_agg(md5(g::text || '"
        + tag
        + "'), '') FROM generate_series(1, 68) g) || repeat('"
        + tag
        + "', 3000))";
  }

  private static List<String> t(String... statements) {
    return List.of(statements);
  }

  /** The fixed scenarios: made once, since {@link #openHarness} prepares the same objects. */
  private static List<Scenario> fixedScenarios;

  static synchronized Stream<Scenario> fixed() {
    if (fixedScenarios == null) {
      String only = System.getProperty(ONLY_PROPERTY, "");
      fixedScenarios = all().filter(s -> only.isEmpty() || s.name().contains(only)).toList();
    }
    return fixedScenarios.stream();
  }

  private static Stream<Scenario> all() {
    return Stream.of(
        scenario(
            "full-identity-with-duplicates",
            t(
                "CREATE TABLE fd (a int, b text, c numeric, d timestamptz, e jsonb)",
                "ALTER TABLE fd REPLICA IDENTITY FULL"),
            t("CREATE PUBLICATION p_fd FOR TABLE fd"),
            t("p_fd"),
            source(
                "INSERT INTO fd VALUES (1, 'x', 1.5, '2024-01-01 00:00+00', '{\"k\": 1}'),"
                    + " (1, 'x', 1.5, '2024-01-01 00:00+00', '{\"k\": 1}'),"
                    + " (1, 'x', 1.5, '2024-01-01 00:00+00', '{\"k\": 1}'),"
                    + " (2, NULL, NULL, NULL, NULL), (2, NULL, NULL, NULL, NULL),"
                    + " (3, 'y', NULL, '2024-06-30 12:34:56.789+02', '[]')"),
            source("DELETE FROM fd WHERE ctid = (SELECT ctid FROM fd WHERE a = 1 LIMIT 1)"),
            source("UPDATE fd SET b = 'z' WHERE ctid = (SELECT ctid FROM fd WHERE a = 2 LIMIT 1)"),
            source("UPDATE fd SET c = 2 WHERE a = 1"),
            source("DELETE FROM fd WHERE a = 2 AND b IS NULL"),
            source("UPDATE fd SET a = 10, e = '{\"k\": [1, 2]}' WHERE a = 3"),
            source("INSERT INTO fd SELECT * FROM fd", "DELETE FROM fd WHERE a = 10")),
        scenario(
            "replica-identity-using-index",
            t(
                "CREATE TABLE ui (id int NOT NULL, code text NOT NULL, v text)",
                "CREATE UNIQUE INDEX ui_code ON ui (code)",
                "ALTER TABLE ui REPLICA IDENTITY USING INDEX ui_code",
                "CREATE TABLE ui2 (id int PRIMARY KEY, code text NOT NULL, v text)",
                "CREATE UNIQUE INDEX ui2_code ON ui2 (code)",
                "ALTER TABLE ui2 REPLICA IDENTITY USING INDEX ui2_code"),
            t("CREATE PUBLICATION p_ui FOR TABLE ui, ui2"),
            t("p_ui"),
            source(
                "INSERT INTO ui VALUES (1, 'a', 'one'), (1, 'b', 'two'), (2, 'c', NULL)",
                "INSERT INTO ui2 VALUES (1, 'a', 'one'), (2, 'b', 'two'), (3, 'c', NULL)"),
            source("UPDATE ui SET v = 'changed' WHERE code = 'a'", "UPDATE ui2 SET v = 'changed'"),
            source(
                "UPDATE ui SET code = 'z' WHERE code = 'b'",
                "UPDATE ui2 SET code = 'z' WHERE id = 2"),
            source("UPDATE ui2 SET id = 30 WHERE id = 3"),
            source("DELETE FROM ui WHERE code = 'c'", "DELETE FROM ui2 WHERE code = 'a'")),
        scenario(
            "insert-only-keyless",
            t("CREATE TABLE log (at timestamptz, msg text, n int)"),
            t("CREATE PUBLICATION p_log FOR TABLE log WITH (publish = 'insert')"),
            t("p_log"),
            source(
                "INSERT INTO log VALUES ('2024-01-01 00:00+00', 'boot', 1),"
                    + " ('2024-01-01 00:00+00', 'boot', 1), (NULL, NULL, NULL)"),
            source("UPDATE log SET msg = 'not published'", "DELETE FROM log WHERE n = 1"),
            source("INSERT INTO log SELECT now(), 'row ' || g, g FROM generate_series(1, 50) g")),
        scenario(
            "identity-columns",
            t(
                "CREATE TABLE ia (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text, big text)",
                "CREATE TABLE ib (code text PRIMARY KEY, seq bigint GENERATED ALWAYS AS IDENTITY,"
                    + " v text)",
                "CREATE TABLE ic (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, v text)",
                "CREATE TABLE ik (seq int GENERATED ALWAYS AS IDENTITY, v text)",
                "ALTER TABLE ik REPLICA IDENTITY FULL"),
            t(
                "ALTER TABLE ia ALTER COLUMN big SET STORAGE EXTERNAL",
                "CREATE PUBLICATION p_id FOR TABLE ia, ib, ic, ik"),
            t("p_id"),
            source(
                "INSERT INTO ia (v, big) VALUES ('a', repeat('x', 3000)), ('b', NULL), ('c', 'c')",
                "INSERT INTO ib (code, v) VALUES ('k1', 'one'), ('k2', 'two'), ('k3', 'three')",
                "INSERT INTO ic (v) VALUES ('one'), ('two')",
                "INSERT INTO ic VALUES (100, 'explicit')",
                "INSERT INTO ik (v) VALUES ('one'), ('two'), ('two')"),
            source("UPDATE ia SET v = v || '!'", "UPDATE ib SET v = v || '!'"),
            source("UPDATE ia SET id = DEFAULT WHERE v = 'a!'"),
            source("UPDATE ia SET id = DEFAULT, big = 'small' WHERE v = 'b!'"),
            source("UPDATE ib SET seq = DEFAULT WHERE code = 'k1'"),
            source("UPDATE ib SET code = 'k9' WHERE code = 'k2'"),
            source("UPDATE ic SET id = 200 WHERE id = 100", "UPDATE ic SET v = 'x'"),
            source(
                "UPDATE ik SET seq = DEFAULT WHERE v = 'one'",
                "UPDATE ik SET v = 'three' WHERE ctid = (SELECT ctid FROM ik WHERE v = 'two' LIMIT 1)"),
            source(
                "DELETE FROM ia WHERE v = 'c!'",
                "DELETE FROM ib WHERE code = 'k3'",
                "DELETE FROM ik WHERE v = 'two'")),
        scenario(
            "typed-keys",
            t(
                "CREATE TYPE pair AS (x int, y text)",
                "CREATE DOMAIN posint AS int CHECK (VALUE > 0)",
                "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
                "CREATE TABLE ck (k pair PRIMARY KEY, v text)",
                "CREATE TABLE ak (k int[] PRIMARY KEY, v text)",
                "CREATE TABLE rk (k int4range PRIMARY KEY, v text)",
                "CREATE TABLE dk (k posint PRIMARY KEY, v text)",
                "CREATE TABLE ek (k mood PRIMARY KEY, v text)",
                "CREATE TABLE cf (p pair, a int[], v text)",
                "ALTER TABLE cf REPLICA IDENTITY FULL"),
            t("CREATE PUBLICATION p_tk FOR TABLE ck, ak, rk, dk, ek, cf"),
            t("p_tk"),
            source(
                "INSERT INTO ck VALUES (ROW(1, 'a'), 'one'), (ROW(2, NULL), 'two'), (ROW(3, 'c'), 'x')",
                "INSERT INTO ak VALUES ('{1,2}', 'one'), ('{3,NULL}', 'two'), ('{}', 'x')",
                "INSERT INTO rk VALUES ('[1,5)', 'one'), ('[5,)', 'two'), ('empty', 'x')",
                "INSERT INTO dk VALUES (1, 'one'), (2, 'two'), (3, 'x')",
                "INSERT INTO ek VALUES ('sad', 'one'), ('ok', 'two'), ('happy', 'x')",
                "INSERT INTO cf VALUES (ROW(1, NULL), '{1}', 'one'), (ROW(NULL, NULL), NULL, 'two'),"
                    + " (NULL, '{NULL}', 'three'), (ROW(1, NULL), '{1}', 'one')"),
            source(
                "UPDATE ck SET k = ROW(10, 'a') WHERE (k).x = 1",
                "UPDATE ak SET k = '{9}' WHERE k = '{1,2}'",
                "UPDATE rk SET k = '[10,20)' WHERE k = '[1,5)'",
                "UPDATE dk SET k = 10 WHERE k = 1",
                "UPDATE ek SET k = 'happy' WHERE false",
                "UPDATE ck SET v = 'updated' WHERE (k).x = 2"),
            source(
                "DELETE FROM ck WHERE (k).x = 3",
                "DELETE FROM ak WHERE k = '{}'",
                "DELETE FROM rk WHERE isempty(k)",
                "DELETE FROM dk WHERE k = 3",
                "DELETE FROM ek WHERE k = 'happy'",
                "UPDATE ek SET v = 'updated' WHERE k = 'ok'"),
            source(
                "UPDATE cf SET v = 'changed' WHERE v = 'two'",
                "DELETE FROM cf WHERE v = 'three'",
                "DELETE FROM cf WHERE ctid = (SELECT ctid FROM cf WHERE v = 'one' LIMIT 1)")),
        scenario(
            "full-identity-add-column",
            t(
                "CREATE TABLE fa (a int, b text)",
                "ALTER TABLE fa REPLICA IDENTITY FULL",
                "CREATE TABLE fk (id int PRIMARY KEY, b text)",
                "ALTER TABLE fk REPLICA IDENTITY FULL"),
            t("CREATE PUBLICATION p_fa FOR TABLE fa, fk"),
            t("p_fa"),
            source(
                "INSERT INTO fa VALUES (1, 'one'), (2, 'two'), (2, 'two')",
                "INSERT INTO fk VALUES (1, 'one'), (2, 'two')"),
            targets("ALTER TABLE fa ADD COLUMN c int", "ALTER TABLE fk ADD COLUMN c int"),
            source(
                "ALTER TABLE fa ADD COLUMN c int",
                "ALTER TABLE fk ADD COLUMN c int",
                "INSERT INTO fa VALUES (3, 'three', 3)",
                "INSERT INTO fk VALUES (3, 'three', 3)"),
            source(
                "UPDATE fa SET c = 20 WHERE a = 2",
                "UPDATE fk SET c = 10 WHERE id = 1",
                "DELETE FROM fa WHERE a = 1",
                "DELETE FROM fk WHERE c = 3"),
            source("UPDATE fa SET c = NULL, b = 'back' WHERE a = 3")),
        scenario(
            "toast-key-columns",
            t(
                "CREATE TABLE tk (a text, b int, v text, big text, PRIMARY KEY (a, b))",
                "CREATE TABLE tf (a text, b int, v text)",
                "ALTER TABLE tf REPLICA IDENTITY FULL"),
            t(
                "ALTER TABLE tk ALTER COLUMN big SET STORAGE EXTERNAL",
                "ALTER TABLE tf ALTER COLUMN a SET STORAGE EXTERNAL",
                "CREATE PUBLICATION p_toastkey FOR TABLE tk, tf"),
            t("p_toastkey"),
            source(
                "INSERT INTO tk VALUES ("
                    + toastedKey("k")
                    + ", 1, 'v', NULL), ("
                    + toastedKey("l")
                    + ", 1, 'v', repeat('b', 3000)), ('short', 1, 'v', NULL)",
                "INSERT INTO tf VALUES (repeat('k', 3000), 1, 'v'), (repeat('k', 3000), 1, 'v')"),
            source("UPDATE tk SET b = 2 WHERE b = 1"),
            source("UPDATE tk SET v = 'w'"),
            source("UPDATE tf SET b = 2 WHERE ctid = (SELECT ctid FROM tf LIMIT 1)"),
            source("DELETE FROM tk WHERE a = 'short'", "DELETE FROM tf WHERE b = 1")),
        scenario(
            "partitioned-leaves",
            t(
                "CREATE TABLE pl (id int, region text, v text, PRIMARY KEY (id, region))"
                    + " PARTITION BY LIST (region)",
                "CREATE TABLE pl_eu PARTITION OF pl FOR VALUES IN ('eu')",
                "CREATE TABLE pl_us PARTITION OF pl FOR VALUES IN ('us')"),
            t("CREATE PUBLICATION p_pl FOR TABLE pl"),
            t("p_pl"),
            source("INSERT INTO pl VALUES (1, 'eu', 'a'), (2, 'eu', 'b'), (3, 'us', 'c')"),
            source("UPDATE pl SET v = 'changed' WHERE id = 2"),
            source("UPDATE pl SET region = 'us' WHERE id = 1"),
            source("DELETE FROM pl WHERE id = 3"),
            source("TRUNCATE pl_eu"),
            source("INSERT INTO pl VALUES (4, 'eu', 'd')")),
        scenario(
            "partitioned-via-root",
            t(
                "CREATE TABLE pr (id int, region text, v text, PRIMARY KEY (id, region))"
                    + " PARTITION BY LIST (region)",
                "CREATE TABLE pr_eu PARTITION OF pr FOR VALUES IN ('eu')",
                "CREATE TABLE pr_us PARTITION OF pr FOR VALUES IN ('us')"),
            t("CREATE PUBLICATION p_pr FOR TABLE pr WITH (publish_via_partition_root = true)"),
            t("p_pr"),
            source("INSERT INTO pr VALUES (1, 'eu', 'a'), (2, 'eu', 'b'), (3, 'us', 'c')"),
            source("UPDATE pr SET v = 'changed' WHERE id = 2"),
            source("UPDATE pr SET region = 'us' WHERE id = 1"),
            source("DELETE FROM pr WHERE id = 3"),
            source("TRUNCATE pr"),
            source("INSERT INTO pr VALUES (4, 'eu', 'd'), (5, 'us', 'e')")),
        scenario(
            "row-filters",
            t(
                "CREATE TABLE rf (id int PRIMARY KEY, v int, t text)",
                "CREATE TABLE rff (id int, v int, t text)",
                "ALTER TABLE rff REPLICA IDENTITY FULL"),
            t("CREATE PUBLICATION p_rf FOR TABLE rf WHERE (id > 10), rff WHERE (v > 0)"),
            t("p_rf"),
            source(
                "INSERT INTO rf SELECT g, g, 'r' || g FROM generate_series(1, 20) g",
                "INSERT INTO rff VALUES (1, 1, 'a'), (2, -1, 'b'), (3, 5, 'c')"),
            source("UPDATE rf SET id = id + 100 WHERE id IN (5, 15)"),
            source("UPDATE rf SET id = id - 110 WHERE id = 115"),
            source("UPDATE rff SET v = -v"),
            source("UPDATE rff SET t = 'changed'", "DELETE FROM rf WHERE id > 18")),
        scenario(
            "column-lists",
            t(
                "CREATE TABLE cl (id int PRIMARY KEY, a text, secret text DEFAULT 'unpublished')",
                "CREATE TABLE cli (code text PRIMARY KEY, seq int GENERATED ALWAYS AS IDENTITY,"
                    + " big text, secret text DEFAULT 'unpublished')"),
            t(
                "ALTER TABLE cli ALTER COLUMN big SET STORAGE EXTERNAL",
                "CREATE PUBLICATION p_cl FOR TABLE cl (id, a), cli (code, seq, big)"),
            t("p_cl"),
            source(
                "INSERT INTO cl VALUES (1, 'one', 's1'), (2, 'two', 's2'), (3, 'three', 's3')",
                "INSERT INTO cli (code, big) VALUES ('k1', repeat('b', 3000)), ('k2', 'small')"),
            source("UPDATE cl SET secret = 'changed' WHERE id = 1"),
            source(
                "UPDATE cl SET a = 'changed' WHERE id = 2", "UPDATE cl SET id = 30 WHERE id = 3"),
            // Target-only values, which a replaced row must keep.
            targets("UPDATE cli SET secret = 'kept by the target'"),
            source("UPDATE cli SET seq = DEFAULT"),
            source("UPDATE cli SET code = 'k3', seq = DEFAULT WHERE code = 'k2'"),
            source("DELETE FROM cl WHERE id = 1")),
        scenario(
            "generated-columns",
            t(
                "CREATE TABLE gc (id int PRIMARY KEY, a int, g int GENERATED ALWAYS AS (a * 2) STORED)",
                "CREATE TABLE gf (a int, g text GENERATED ALWAYS AS ('g' || a) STORED)",
                "ALTER TABLE gf REPLICA IDENTITY FULL"),
            t("CREATE PUBLICATION p_gc FOR TABLE gc, gf"),
            t("p_gc"),
            source(
                "INSERT INTO gc (id, a) VALUES (1, 1), (2, 2), (3, NULL)",
                "INSERT INTO gf (a) VALUES (1), (1), (2)"),
            source("UPDATE gc SET a = 10 WHERE id = 1", "UPDATE gc SET id = 20 WHERE id = 2"),
            source(
                "UPDATE gf SET a = 5 WHERE ctid = (SELECT ctid FROM gf WHERE a = 1 LIMIT 1)",
                "DELETE FROM gc WHERE id = 3",
                "DELETE FROM gf WHERE a = 2")),
        scenario(
            "toast",
            t(
                "CREATE TABLE tt (id int PRIMARY KEY, big text, small text)",
                "CREATE TABLE ttf (id int, big text, small text)",
                "ALTER TABLE ttf REPLICA IDENTITY FULL"),
            t(
                "ALTER TABLE tt ALTER COLUMN big SET STORAGE EXTERNAL",
                "ALTER TABLE ttf ALTER COLUMN big SET STORAGE EXTERNAL",
                "CREATE PUBLICATION p_tt FOR TABLE tt, ttf"),
            t("p_tt"),
            source(
                "INSERT INTO tt VALUES (1, repeat('a', 5000), 's'), (2, repeat('b', 5000), 's'),"
                    + " (3, repeat('c', 5000), 's')",
                "INSERT INTO ttf VALUES (1, repeat('a', 5000), 's'), (1, repeat('a', 5000), 's')"),
            source("UPDATE tt SET small = 'changed' WHERE id = 1"),
            source("UPDATE tt SET id = 20 WHERE id = 2"),
            source("UPDATE tt SET big = repeat('z', 6000) WHERE id = 3"),
            source(
                "UPDATE ttf SET small = 'changed' WHERE ctid = (SELECT ctid FROM ttf LIMIT 1)",
                "UPDATE ttf SET id = 2 WHERE small = 's'"),
            source("DELETE FROM tt WHERE id = 1", "DELETE FROM ttf WHERE id = 2")),
        scenario(
            "truncate",
            t(
                "CREATE TABLE tr1 (id int PRIMARY KEY)",
                "CREATE TABLE tr2 (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, v text)",
                "CREATE TABLE tr3 (a int, b text)",
                "ALTER TABLE tr3 REPLICA IDENTITY FULL"),
            t("CREATE PUBLICATION p_tr FOR TABLE tr1, tr2, tr3"),
            t("p_tr"),
            source(
                "INSERT INTO tr1 SELECT generate_series(1, 10)",
                "INSERT INTO tr2 (v) SELECT 'v' || g FROM generate_series(1, 10) g",
                "INSERT INTO tr3 VALUES (1, 'a'), (1, 'a')"),
            source("TRUNCATE tr1, tr2"),
            source("INSERT INTO tr1 VALUES (1)", "INSERT INTO tr2 (v) VALUES ('after')"),
            source("TRUNCATE tr2, tr3 RESTART IDENTITY"),
            source("INSERT INTO tr2 (v) VALUES ('restarted')", "INSERT INTO tr3 VALUES (2, 'b')"),
            rolledBack("TRUNCATE tr1"),
            source("INSERT INTO tr1 VALUES (2)")),
        scenario(
                "streamed-large-transactions",
                t(
                    "CREATE TABLE sl (id int PRIMARY KEY, v text, n int)",
                    "CREATE TABLE slf (a int, b text)",
                    "ALTER TABLE slf REPLICA IDENTITY FULL"),
                t("CREATE PUBLICATION p_sl FOR TABLE sl, slf"),
                t("p_sl"),
                source(
                    "INSERT INTO sl SELECT g, md5(g::text), 0 FROM generate_series(1, 3000) g",
                    "INSERT INTO slf SELECT g % 100, 'b' || (g % 7) FROM generate_series(1, 1500) g"),
                source(
                    "UPDATE sl SET n = n + 1",
                    "SAVEPOINT s1",
                    "UPDATE sl SET v = 'rolled back' WHERE id % 3 = 0",
                    "ROLLBACK TO SAVEPOINT s1",
                    "DELETE FROM sl WHERE id % 5 = 0",
                    "UPDATE slf SET b = 'changed' WHERE a < 10"),
                rolledBack(
                    "INSERT INTO sl SELECT g, 'never', 0 FROM generate_series(5001, 8000) g",
                    "DELETE FROM slf"),
                source(
                    "UPDATE sl SET id = id + 10000 WHERE id % 7 = 0",
                    "DELETE FROM slf WHERE a % 2 = 0"))
            .streamedWithSpill(),
        twoPhaseAndMessages());
  }

  /**
   * Prepared transactions (the built-in subscriber without two_phase applies them at COMMIT
   * PREPARED, as the pipeline delivers them) and transactional messages, which neither applies.
   */
  private static Scenario twoPhaseAndMessages() {
    String g =
        "weir_diff_" + java.util.UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    return scenario(
        "two-phase-and-messages",
        t("CREATE TABLE tp (id int PRIMARY KEY, v text)"),
        t("CREATE PUBLICATION p_tp FOR TABLE tp"),
        t("p_tp"),
        source("INSERT INTO tp VALUES (1, 'plain')"),
        source(
            "INSERT INTO tp VALUES (2, 'prepared')",
            "SELECT pg_logical_emit_message(true, 'weir-diff', 'inside')",
            "PREPARE TRANSACTION '" + g + "_1'"),
        source("UPDATE tp SET v = 'after prepare' WHERE id = 1"),
        sourceAutocommit("COMMIT PREPARED '" + g + "_1'"),
        source(
            "INSERT INTO tp VALUES (3, 'rolled back prepared')",
            "PREPARE TRANSACTION '" + g + "_2'"),
        sourceAutocommit("ROLLBACK PREPARED '" + g + "_2'"),
        source(
            "UPDATE tp SET v = 'last' WHERE id = 2",
            "SELECT pg_logical_emit_message(true, 'weir-diff', 'again')"));
  }
}
