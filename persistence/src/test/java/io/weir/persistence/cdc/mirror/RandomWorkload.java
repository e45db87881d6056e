package io.weir.persistence.cdc.mirror;

import io.weir.persistence.cdc.mirror.DifferentialHarness.Scenario;
import io.weir.persistence.cdc.mirror.DifferentialHarness.Source;
import io.weir.persistence.cdc.mirror.DifferentialHarness.Step;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * A random workload from a seed over tables of every identity class the mirror handles: a primary
 * key with a TOASTed column, REPLICA IDENTITY FULL without a key (duplicate rows), FULL with a key,
 * USING INDEX, a composite-type key, an identity column, a TOASTed key column and a partitioned
 * table. Transactions mix inserts, updates (key changes among them), deletes, savepoints rolled
 * back or released, whole rollbacks and the odd truncate. Statements name keys from a small range,
 * so they hit existing rows often; those that could fail (duplicate keys) are guarded, since a
 * failed statement would end the transaction. The same seed gives the same statements.
 */
final class RandomWorkload {
  private RandomWorkload() {}

  private static final List<String> TABLES =
      List.of(
          "CREATE TYPE rpair AS (x int, y text)",
          "CREATE TABLE r_pk (id int PRIMARY KEY, v text, n int, big text)",
          "CREATE TABLE r_full (a int, b text, big text)",
          "ALTER TABLE r_full REPLICA IDENTITY FULL",
          "CREATE TABLE r_fullpk (id int PRIMARY KEY, v text, big text)",
          "ALTER TABLE r_fullpk REPLICA IDENTITY FULL",
          "CREATE TABLE r_idx (id int NOT NULL, code text NOT NULL, v text)",
          "CREATE UNIQUE INDEX r_idx_code ON r_idx (code)",
          "ALTER TABLE r_idx REPLICA IDENTITY USING INDEX r_idx_code",
          "CREATE TABLE r_comp (k rpair PRIMARY KEY, v text)",
          "CREATE TABLE r_ident (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text, big text)",
          "CREATE TABLE r_tkey (a text, b int, v text, PRIMARY KEY (a, b))",
          "CREATE TABLE r_seq (code text PRIMARY KEY, seq int GENERATED ALWAYS AS IDENTITY,"
              + " v text)",
          "CREATE TABLE r_part (id int, region text, v text, PRIMARY KEY (id, region))"
              + " PARTITION BY LIST (region)",
          "CREATE TABLE r_part_a PARTITION OF r_part FOR VALUES IN ('a')",
          "CREATE TABLE r_part_b PARTITION OF r_part FOR VALUES IN ('b')");

  private static List<String> source(String publication) {
    return List.of(
        "ALTER TABLE r_pk ALTER COLUMN big SET STORAGE EXTERNAL",
        "ALTER TABLE r_full ALTER COLUMN big SET STORAGE EXTERNAL",
        "ALTER TABLE r_fullpk ALTER COLUMN big SET STORAGE EXTERNAL",
        "ALTER TABLE r_ident ALTER COLUMN big SET STORAGE EXTERNAL",
        "CREATE PUBLICATION "
            + publication
            + " FOR TABLE r_pk, r_full, r_fullpk, r_idx, r_comp, r_ident, r_tkey, r_part,"
            + " r_seq");
  }

  private static final String[] NAMES = {
    "r_pk", "r_full", "r_fullpk", "r_idx", "r_comp", "r_ident", "r_tkey", "r_part", "r_seq"
  };

  static Scenario scenario(long seed, int transactions) {
    Random r = new Random(seed);
    String publication = "p_random_" + Long.toUnsignedString(seed, 36);
    List<Step> steps = new ArrayList<>();
    for (int t = 0; t < transactions; t++) {
      List<String> statements = new ArrayList<>();
      int ops = 1 + r.nextInt(6);
      int savepoints = 0;
      for (int i = 0; i < ops; i++) {
        if (r.nextInt(8) == 0) {
          String name = "s" + savepoints++;
          statements.add("SAVEPOINT " + name);
          int inner = 1 + r.nextInt(3);
          for (int j = 0; j < inner; j++) {
            statements.add(operation(r));
          }
          statements.add(
              (r.nextBoolean() ? "ROLLBACK TO SAVEPOINT " : "RELEASE SAVEPOINT ") + name);
        } else {
          statements.add(operation(r));
        }
      }
      steps.add(new Source(statements, r.nextInt(12) == 0));
    }
    // Alternate the mirror's batching: multi-row INSERT rewriting and several transactions per
    // sink call.
    return new Scenario(
        "random seed=" + seed + " transactions=" + transactions,
        TABLES,
        source(publication),
        List.of(publication),
        steps,
        r.nextBoolean(),
        r.nextBoolean() ? 1 : 16,
        false);
  }

  private static String operation(Random r) {
    if (r.nextInt(60) == 0) {
      return "TRUNCATE " + NAMES[r.nextInt(NAMES.length)];
    }
    int k = r.nextInt(25);
    int k2 = r.nextInt(25);
    String text = "'" + word(r) + "'";
    String big =
        r.nextInt(3) == 0 ? "repeat('" + word(r) + "', " + (700 + r.nextInt(700)) + ")" : text;
    int kind = r.nextInt(10); // 0-3 insert, 4-7 update, 8-9 delete
    return switch (r.nextInt(NAMES.length)) {
      case 0 ->
          switch (kind) {
            case 0, 1, 2, 3 ->
                "INSERT INTO r_pk VALUES ("
                    + k
                    + ", "
                    + text
                    + ", "
                    + r.nextInt(100)
                    + ", "
                    + big
                    + ") ON CONFLICT (id) DO NOTHING";
            case 4 -> "UPDATE r_pk SET v = " + text + " WHERE id = " + k;
            case 5 -> "UPDATE r_pk SET n = n + 1 WHERE id % 5 = " + (k % 5);
            case 6 ->
                "UPDATE r_pk SET id = "
                    + k2
                    + " WHERE id = "
                    + k
                    + " AND NOT EXISTS (SELECT 1 FROM r_pk WHERE id = "
                    + k2
                    + ")";
            case 7 -> "UPDATE r_pk SET big = " + big + " WHERE id = " + k;
            default -> "DELETE FROM r_pk WHERE id = " + k;
          };
      case 1 ->
          switch (kind) {
            case 0, 1, 2, 3 ->
                "INSERT INTO r_full VALUES ("
                    + (k % 8)
                    + ", "
                    + (r.nextInt(4) == 0 ? "NULL" : "'" + (k % 3) + "'")
                    + ", "
                    + (r.nextInt(4) == 0 ? big : "NULL")
                    + ")";
            case 4 -> "UPDATE r_full SET b = " + text + " WHERE a = " + (k % 8);
            case 5 ->
                "UPDATE r_full SET a = "
                    + (k2 % 8)
                    + " WHERE ctid = (SELECT ctid FROM r_full WHERE a = "
                    + (k % 8)
                    + " LIMIT 1)";
            case 6 -> "UPDATE r_full SET b = NULL WHERE a = " + (k % 8);
            case 7 -> "UPDATE r_full SET big = " + big + " WHERE a = " + (k % 8);
            case 8 ->
                "DELETE FROM r_full WHERE ctid = (SELECT ctid FROM r_full WHERE a = "
                    + (k % 8)
                    + " LIMIT 1)";
            default -> "DELETE FROM r_full WHERE a = " + (k % 8) + " AND b IS NULL";
          };
      case 2 ->
          switch (kind) {
            case 0, 1, 2, 3 ->
                "INSERT INTO r_fullpk VALUES ("
                    + k
                    + ", "
                    + text
                    + ", "
                    + big
                    + ") ON CONFLICT (id) DO NOTHING";
            case 4, 5 -> "UPDATE r_fullpk SET v = " + text + " WHERE id = " + k;
            case 6 ->
                "UPDATE r_fullpk SET id = "
                    + k2
                    + " WHERE id = "
                    + k
                    + " AND NOT EXISTS (SELECT 1 FROM r_fullpk WHERE id = "
                    + k2
                    + ")";
            case 7 -> "UPDATE r_fullpk SET big = " + big + " WHERE id = " + k;
            default -> "DELETE FROM r_fullpk WHERE id = " + k;
          };
      case 3 ->
          switch (kind) {
            case 0, 1, 2, 3 ->
                "INSERT INTO r_idx VALUES ("
                    + (k % 4)
                    + ", 'c"
                    + k
                    + "', "
                    + text
                    + ") ON CONFLICT (code) DO NOTHING";
            case 4, 5 -> "UPDATE r_idx SET v = " + text + ", id = id + 1 WHERE code = 'c" + k + "'";
            case 6, 7 ->
                "UPDATE r_idx SET code = 'c"
                    + k2
                    + "' WHERE code = 'c"
                    + k
                    + "' AND NOT EXISTS (SELECT 1 FROM r_idx WHERE code = 'c"
                    + k2
                    + "')";
            default -> "DELETE FROM r_idx WHERE code = 'c" + k + "'";
          };
      case 4 ->
          switch (kind) {
            case 0, 1, 2, 3 ->
                "INSERT INTO r_comp VALUES (ROW("
                    + (k % 5)
                    + ", "
                    + (k % 2 == 0 ? "NULL" : "'y" + (k % 5) + "'")
                    + "), "
                    + text
                    + ") ON CONFLICT (k) DO NOTHING";
            case 4, 5 -> "UPDATE r_comp SET v = " + text + " WHERE (k).x = " + (k % 5);
            case 6, 7 ->
                "UPDATE r_comp SET k = ROW((k).x + 5, (k).y) WHERE (k).x = "
                    + (k % 5)
                    + " AND NOT EXISTS (SELECT 1 FROM r_comp c WHERE (c.k).x = "
                    + (k % 5 + 5)
                    + ")";
            default -> "DELETE FROM r_comp WHERE (k).x = " + (k % 10);
          };
      case 5 ->
          switch (kind) {
            case 0, 1, 2 -> "INSERT INTO r_ident (v, big) VALUES (" + text + ", " + big + ")";
            case 3, 4 -> "UPDATE r_ident SET v = " + text + " WHERE id % 7 = " + (k % 7);
            case 5, 6 -> "UPDATE r_ident SET id = DEFAULT WHERE id % 11 = " + (k % 11);
            case 7 -> "UPDATE r_ident SET big = " + big + " WHERE id % 7 = " + (k % 7);
            default -> "DELETE FROM r_ident WHERE id % 13 = " + (k % 13);
          };
      case 6 -> {
        String a =
            k % 3 == 0
                ? "'short" + (k % 4) + "'"
                : MirrorDifferentialIT.toastedKey("key" + (k % 4));
        yield switch (kind) {
          case 0, 1, 2, 3 ->
              "INSERT INTO r_tkey VALUES ("
                  + a
                  + ", "
                  + (k2 % 3)
                  + ", "
                  + text
                  + ") ON CONFLICT (a, b) DO NOTHING";
          case 4, 5 -> "UPDATE r_tkey SET v = " + text + " WHERE a = " + a;
          case 6, 7 ->
              "UPDATE r_tkey t SET b = b + 3 WHERE a = "
                  + a
                  + " AND b = "
                  + (k2 % 3)
                  + " AND NOT EXISTS (SELECT 1 FROM r_tkey u WHERE u.a = t.a AND u.b = t.b + 3)";
          default -> "DELETE FROM r_tkey WHERE a = " + a + " AND b >= " + (k2 % 3);
        };
      }
      case 8 ->
          switch (kind) {
            case 0, 1, 2, 3 ->
                "INSERT INTO r_seq (code, v) VALUES ('s"
                    + k
                    + "', "
                    + text
                    + ") ON CONFLICT (code) DO NOTHING";
            case 4 -> "UPDATE r_seq SET v = " + text + " WHERE code = 's" + k + "'";
            case 5, 6 -> "UPDATE r_seq SET seq = DEFAULT WHERE code = 's" + k + "'";
            case 7 ->
                "UPDATE r_seq SET code = 's"
                    + k2
                    + "' WHERE code = 's"
                    + k
                    + "' AND NOT EXISTS (SELECT 1 FROM r_seq WHERE code = 's"
                    + k2
                    + "')";
            default -> "DELETE FROM r_seq WHERE code = 's" + k + "'";
          };
      default -> {
        String region = k % 2 == 0 ? "'a'" : "'b'";
        String other = k % 2 == 0 ? "'b'" : "'a'";
        yield switch (kind) {
          case 0, 1, 2, 3 ->
              "INSERT INTO r_part VALUES ("
                  + k
                  + ", "
                  + region
                  + ", "
                  + text
                  + ") ON CONFLICT (id, region) DO NOTHING";
          case 4, 5 -> "UPDATE r_part SET v = " + text + " WHERE id = " + k;
          case 6, 7 ->
              "UPDATE r_part p SET region = "
                  + other
                  + " WHERE id = "
                  + k
                  + " AND region = "
                  + region
                  + " AND NOT EXISTS (SELECT 1 FROM r_part q WHERE q.id = p.id AND q.region = "
                  + other
                  + ")";
          default -> "DELETE FROM r_part WHERE id = " + k;
        };
      }
    };
  }

  private static String word(Random r) {
    StringBuilder b = new StringBuilder();
    int n = 1 + r.nextInt(6);
    for (int i = 0; i < n; i++) {
      b.append((char) ('a' + r.nextInt(26)));
    }
    return b.toString();
  }
}
