package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.node.TestNodes;
import io.weir.node.WeirNode;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.Lsn;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The oracle: random transactions move rows across the rank boundary, delete visible rows, insert
 * new leaders, change join partners and graph edges, and touch an unrelated table; after each one
 * (the writer waits for it), the result a client builds from the SSE events equals the query run
 * directly on PostgreSQL as the scope's role. Three queries: single-table top-N, a join, and a
 * 2-hop neighbourhood by recursive CTE. The seed is printed; WEIR_ORACLE_SEED repeats a run.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ContinuousOracleIT {
  private static final String ADMIN = "admin-token-for-continuous-oracle-it";

  /**
   * How long a wait for the session or the client may take: well under a second on a quiet machine,
   * and the test must pass on one four times slower.
   */
  private static final Duration WAIT = Duration.ofSeconds(90);

  /**
   * Transactions per seed; -Dweir.oracle.transactions=N and -Dweir.oracle.seeds=S run more
   * (docs/testing.md).
   */
  private static final int TRANSACTIONS = Integer.getInteger("weir.oracle.transactions", 150);

  private static final int SEEDS = Integer.getInteger("weir.oracle.seeds", 1);
  private final ObjectMapper json = new ObjectMapper();
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
  private final String role = "cq_o_" + suffix;
  private final String other = "cq_p_" + suffix;
  private final String password = "pw-o-" + suffix;
  private TestPostgres.TestDatabase db;
  private WeirNode node;
  private String base;

  /**
   * One query: its SQL for registration and the same query, ordered and limited, for the oracle.
   */
  /** {@code tier}: null, or {@code evaluator} / {@code projector} with the name {@code plugin}. */
  private record Query(
      String name,
      String sql,
      String orderColumn,
      boolean descending,
      int limit,
      String oracle,
      String tier,
      String plugin) {
    Query(
        String name, String sql, String orderColumn, boolean descending, int limit, String oracle) {
      this(name, sql, orderColumn, descending, limit, oracle, null, null);
    }
  }

  private static final List<Query> QUERIES =
      List.of(
          new Query(
              "top-n",
              "SELECT id, score, name FROM items",
              "score",
              true,
              5,
              "SELECT id, score, name FROM items ORDER BY score DESC, id ASC LIMIT 5"),
          // The same query with its deltas computed by a custom evaluator
          // (TestEvaluators.ItemsById).
          new Query(
              "top-n-evaluated",
              "SELECT id, score, name FROM items",
              "score",
              true,
              5,
              "SELECT id, score, name FROM items ORDER BY score DESC, id ASC LIMIT 5",
              "evaluator",
              "items-by-id"),
          // And by a trusted projector (tier 1) that applies the row-level policy itself.
          new Query(
              "top-n-projected",
              "SELECT id, score, name FROM items",
              "score",
              true,
              5,
              "SELECT id, score, name FROM items ORDER BY score DESC, id ASC LIMIT 5",
              "projector",
              "items-projector"),
          new Query(
              "join",
              "SELECT i.id, i.score, n.label FROM items i JOIN nodes n ON n.id = i.id % 8 + 1",
              "score",
              true,
              5,
              "SELECT i.id, i.score, n.label FROM items i JOIN nodes n ON n.id = i.id % 8 + 1 ORDER BY i.score DESC, i.id ASC LIMIT 5"),
          new Query(
              "2-hop",
              "WITH RECURSIVE hop(node, depth) AS (SELECT 1, 0 UNION SELECT e.dst, h.depth + 1 FROM edges e"
                  + " JOIN hop h ON e.src = h.node WHERE h.depth < 2) SELECT n.id, n.label, min(h.depth) AS depth"
                  + " FROM hop h JOIN nodes n ON n.id = h.node WHERE h.depth > 0 GROUP BY n.id, n.label",
              "depth",
              false,
              6,
              "WITH RECURSIVE hop(node, depth) AS (SELECT 1, 0 UNION SELECT e.dst, h.depth + 1 FROM edges e"
                  + " JOIN hop h ON e.src = h.node WHERE h.depth < 2) SELECT * FROM (SELECT n.id, n.label, min(h.depth) AS depth"
                  + " FROM hop h JOIN nodes n ON n.id = h.node WHERE h.depth > 0 GROUP BY n.id, n.label) b ORDER BY depth ASC, id ASC LIMIT 6"),
          // Many ties on the order column: the key decides, in Java as in PostgreSQL.
          new Query(
              "ties",
              "SELECT id, score / 10 AS bucket, name FROM items",
              "bucket",
              false,
              6,
              "SELECT id, score / 10 AS bucket, name FROM items ORDER BY bucket ASC, id ASC LIMIT 6"),
          // A join whose joined table has a lookup rule (items.id = nodes.id: an items change
          // reaches the
          // node row with that id); items ids above the node ids join nothing.
          new Query(
              "join-lookup",
              "SELECT n.id, n.label, i.score FROM nodes n JOIN items i ON i.id = n.id",
              "score",
              true,
              4,
              "SELECT n.id, n.label, i.score FROM nodes n JOIN items i ON i.id = n.id ORDER BY i.score DESC, n.id ASC LIMIT 4"),
          // An aggregate over an outer join, keyed by the grouped table (edges has a lookup rule:
          // e.src = n.id).
          new Query(
              "degree",
              "SELECT n.id, n.label, count(e.dst) AS degree FROM nodes n LEFT JOIN edges e ON e.src = n.id"
                  + " GROUP BY n.id, n.label",
              "degree",
              true,
              4,
              "SELECT * FROM (SELECT n.id, n.label, count(e.dst) AS degree FROM nodes n LEFT JOIN edges e ON e.src = n.id"
                  + " GROUP BY n.id, n.label) b ORDER BY degree DESC, id ASC LIMIT 4"));

  /**
   * Queries whose impact plan has a rule (maintained by scoped deltas); the others are read in
   * full.
   */
  private static final java.util.Set<String> INCREMENTAL =
      java.util.Set.of(
          "top-n", "top-n-evaluated", "top-n-projected", "join", "ties", "degree", "join-lookup");

  /** Queries whose joined table has a lookup rule, and that table. */
  private static final Map<String, String> LOOKUPS =
      Map.of("degree", "public.edges", "join-lookup", "public.items");

  @BeforeAll
  void start() throws Exception {
    db = TestPostgres.server().freshDatabase("cq_oracle");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE ROLE " + role + " LOGIN PASSWORD '" + password + "'");
      s.execute("CREATE ROLE " + other + " NOLOGIN");
      s.execute(
          "CREATE TABLE items (id int PRIMARY KEY, tenant text NOT NULL, score int NOT NULL, name text)");
      s.execute("ALTER TABLE items ENABLE ROW LEVEL SECURITY");
      s.execute("ALTER TABLE items REPLICA IDENTITY FULL"); // for the trusted projector (tier 1)
      s.execute("CREATE POLICY own_tenant ON items USING (tenant = current_user)");
      s.execute("CREATE TABLE nodes (id int PRIMARY KEY, label text NOT NULL)");
      s.execute("CREATE TABLE edges (src int NOT NULL, dst int NOT NULL, PRIMARY KEY (src, dst))");
      s.execute("CREATE TABLE unrelated (id int PRIMARY KEY, v int)");
      s.execute("GRANT SELECT ON items, nodes, edges, unrelated TO " + role);
      s.execute("CREATE PUBLICATION cq_pub FOR TABLE items, nodes, edges, unrelated");
      for (int i = 1; i <= 12; i++) {
        s.execute("INSERT INTO nodes VALUES (" + i + ", 'n" + i + "')");
      }
      for (int i = 1; i <= 20; i++) {
        s.execute(
            "INSERT INTO items VALUES ("
                + i
                + ", '"
                + (i % 3 == 0 ? other : role)
                + "', "
                + (i * 7 % 50)
                + ", 'i"
                + i
                + "')");
      }
      s.execute("INSERT INTO edges VALUES (1,2),(2,3),(3,4),(1,5),(5,6)");
    }
    Map<String, Object> m = new HashMap<>();
    m.put("weir.admin-token", ADMIN);
    m.put("weir.pipelines.cq.slot", "cq_oracle_" + suffix);
    m.put("weir.pipelines.cq.publications", List.of("cq_pub"));
    m.put("weir.pipelines.cq.sink.type", "continuous");
    m.put("weir.pipelines.cq.batch.max-delay", "10ms");
    m.put("weir.continuous.scopes.oracle.user", role);
    m.put("weir.continuous.scopes.oracle.password", password);
    m.put(
        "weir.continuous.repair-every-transactions",
        "8"); // periodic full reads happen within the run
    Config config =
        ConfigFactory.load(
            ConfigFactory.parseMap(m)
                .withFallback(db.config())
                .withFallback(ConfigFactory.defaultApplication()));
    node = TestNodes.start(config);
    base = "http://127.0.0.1:" + node.httpPort();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (true) {
      HttpResponse<String> r = poll("/admin/pipelines/cq");
      if (r != null
          && r.statusCode() == 200
          && json.readTree(r.body()).get("state").asText().equals("running")) {
        break;
      }
      assertThat(System.nanoTime())
          .as("the continuous pipeline should run within 120 s")
          .isLessThan(deadline);
      Thread.sleep(200);
    }
  }

  @AfterAll
  void stop() throws Exception {
    if (node != null) {
      node.stop();
    }
    if (db != null) {
      db.close();
      try (Connection c = TestPostgres.server().connect("postgres");
          Statement s = c.createStatement()) {
        s.execute("DROP ROLE IF EXISTS " + role);
        s.execute("DROP ROLE IF EXISTS " + other);
      }
    }
  }

  @Test
  void maintainedResultsEqualTheFullQueryAfterEveryTransaction() throws Exception {
    long firstSeed =
        System.getenv("WEIR_ORACLE_SEED") != null
            ? Long.parseLong(System.getenv("WEIR_ORACLE_SEED"))
            : new Random().nextLong();
    List<String> ids = new ArrayList<>();
    List<Client> clients = new ArrayList<>();
    try {
      for (Query q : QUERIES) {
        ObjectNode body =
            json.createObjectNode()
                .put("scope", "oracle")
                .put("sql", q.sql())
                .put("limit", q.limit());
        body.putArray("keyColumns").add("id");
        body.putArray("orderBy")
            .addObject()
            .put("column", q.orderColumn())
            .put("direction", q.descending() ? "desc" : "asc");
        if ("projector".equals(q.tier())) {
          // The author's step: the plan fingerprint of the same query, from a session's status.
          String same = ids.get(QUERIES.stream().map(Query::sql).toList().indexOf(q.sql()));
          TestEvaluators.ItemsProjector.fingerprint =
              json.readTree(call("GET", "/v1/continuous/" + same + "/status", null).body())
                  .get("planFingerprint")
                  .asText();
        }
        if (q.tier() != null) {
          body.put(q.tier(), q.plugin());
        }
        HttpResponse<String> r = call("POST", "/v1/continuous", body.toString());
        assertThat(r.statusCode()).as("registering %s: %s", q.name(), r.body()).isEqualTo(201);
        String id = json.readTree(r.body()).get("id").asText();
        ids.add(id);
        clients.add(new Client(id));
      }
      try (Connection writer = db.connect();
          Connection oracle = DriverManager.getConnection(db.url(), role, password)) {
        for (int run = 0; run < SEEDS; run++) {
          long seed = firstSeed + run;
          System.out.println(
              "ContinuousOracleIT seed " + seed + " (" + TRANSACTIONS + " transactions)");
          Random random = new Random(seed);
          for (int t = 0; t < TRANSACTIONS; t++) {
            writer.setAutoCommit(false);
            try (Statement s = writer.createStatement()) {
              int ops = 1 + random.nextInt(3);
              for (int k = 0; k < ops; k++) {
                s.execute(randomChange(random));
              }
              // Every transaction changes a row, so none is empty (pgoutput does not send those).
              s.execute(
                  "INSERT INTO unrelated VALUES (0, 0) ON CONFLICT (id) DO UPDATE SET v = unrelated.v + 1");
              Lsn beforeCommit;
              try (ResultSet rs = s.executeQuery("SELECT pg_current_wal_lsn()::text")) {
                rs.next();
                beforeCommit = Lsn.parse(rs.getString(1));
              }
              writer.commit();
              for (int q = 0; q < QUERIES.size(); q++) {
                long sequence = awaitProcessed(ids.get(q), beforeCommit);
                clients.get(q).awaitSequence(sequence);
                List<String> expected = expected(oracle, QUERIES.get(q));
                assertThat(clients.get(q).rows())
                    .as(
                        "after transaction %d (seed %d), %s: the result built from events equals the full query",
                        t, seed, QUERIES.get(q).name())
                    .isEqualTo(expected);
                // The session entity's durable result (its log applied) is the same.
                JsonNode durable =
                    json.readTree(
                        call("GET", "/v1/continuous/" + ids.get(q) + "/result", null).body());
                assertThat(durable.get("sequence").asLong()).isEqualTo(sequence);
                assertThat(render(durable.get("rows")))
                    .as(
                        "after transaction %d (seed %d), %s: the session entity's result equals the full query",
                        t, seed, QUERIES.get(q).name())
                    .isEqualTo(expected);
              }
            }
          }
        }
      }
      long periodic = 0;
      for (int q = 0; q < QUERIES.size(); q++) {
        String id = ids.get(q);
        JsonNode status =
            json.readTree(call("GET", "/v1/continuous/" + id + "/status", null).body());
        assertThat(status.get("failedReadsByReason").size())
            .as("no read failed: %s", status)
            .isZero();
        System.out.println(
            "ContinuousOracleIT "
                + QUERIES.get(q).name()
                + ": relevant "
                + status.get("relevantTransactions")
                + ", incremental "
                + status.get("incrementalTransactions")
                + ", unrelated "
                + status.get("unrelatedTransactions")
                + ", full reads "
                + status.get("authoritativeReads")
                + " "
                + status.get("fullRepairsByReason")
                + ", fallbacks "
                + status.get("fallbacksByReason")
                + ", rows read "
                + status.get("rowsRead")
                + ", visibility retries "
                + status.get("visibilityRetries")
                + ", maintenance us "
                + status.get("maintenanceMicros"));
        if (INCREMENTAL.contains(QUERIES.get(q).name())) {
          assertThat(status.get("fullReadsOnly").isNull())
              .as("%s has an impact rule: %s", QUERIES.get(q).name(), status)
              .isTrue();
          assertThat(status.get("incrementalTransactions").asLong())
              .as("%s used scoped deltas", QUERIES.get(q).name())
              .isPositive();
          periodic += status.get("fullRepairsByReason").path("periodic").asLong();
          if ("evaluator".equals(QUERIES.get(q).tier())) {
            assertThat(status.get("evaluatorTransactions").asLong())
                .as("%s: deltas by the evaluator", QUERIES.get(q).name())
                .isPositive();
            assertThat(status.get("fallbacksByReason").has("evaluator-failed")).isFalse();
          }
          String lookup = LOOKUPS.get(QUERIES.get(q).name());
          if (lookup != null) {
            assertThat(status.get("lookupTables").toString())
                .as("%s: lookup rule", QUERIES.get(q).name())
                .isEqualTo("[\"" + lookup + "\"]");
            assertThat(status.get("lookupTransactions").asLong())
                .as("%s: deltas through the lookup", QUERIES.get(q).name())
                .isPositive();
          } else {
            assertThat(status.has("lookupTables"))
                .as("%s has no lookup rule", QUERIES.get(q).name())
                .isFalse();
          }
          if ("projector".equals(QUERIES.get(q).tier())) {
            assertThat(status.get("projectedTransactions").asLong())
                .as("%s: decided by the projector", QUERIES.get(q).name())
                .isPositive();
            assertThat(status.get("fallbacksByReason").has("projector-uncertain")).isFalse();
          }
        } else {
          assertThat(status.get("fullReadsOnly").asText()).isEqualTo("no-impact-plan");
        }
      }
      assertThat(periodic)
          .as("after 8 scoped deltas in a row a session reads in full (periodic repair)")
          .isPositive();
    } finally {
      clients.forEach(Client::close);
    }
  }

  private String randomChange(Random r) {
    int id = 1 + r.nextInt(30);
    String tenant = r.nextInt(4) == 0 ? other : role;
    return switch (r.nextInt(9)) {
      case 0, 1 ->
          "INSERT INTO items VALUES ("
              + id
              + ", '"
              + tenant
              + "', "
              + r.nextInt(100)
              + ", 'x') ON CONFLICT (id) DO UPDATE"
              + " SET score = excluded.score, tenant = excluded.tenant";
      case 2 ->
          "UPDATE items SET score = " + r.nextInt(100) + " WHERE id = " + id; // across the boundary
      case 3 -> "UPDATE items SET score = score + 60 WHERE id = " + id; // a new leader
      case 4 ->
          "DELETE FROM items WHERE id IN (SELECT id FROM items ORDER BY score DESC LIMIT 1)"; // a
      // visible row, often
      case 5 ->
          "UPDATE nodes SET label = 'l" + r.nextInt(1000) + "' WHERE id = " + (1 + r.nextInt(12));
      case 6 ->
          "INSERT INTO edges VALUES ("
              + (1 + r.nextInt(12))
              + ", "
              + (1 + r.nextInt(12))
              + ") ON CONFLICT DO NOTHING";
      case 7 ->
          "DELETE FROM edges WHERE (src, dst) IN (SELECT src, dst FROM edges ORDER BY random() LIMIT 1)";
      default ->
          "INSERT INTO unrelated VALUES ("
              + id
              + ", 1) ON CONFLICT (id) DO UPDATE SET v = unrelated.v + 1";
    };
  }

  /**
   * Waits until the session has handled every transaction up to one committing after {@code lsn}.
   */
  private long awaitProcessed(String id, Lsn lsn) throws Exception {
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (true) {
      HttpResponse<String> r = poll("/v1/continuous/" + id + "/status");
      if (r != null && r.statusCode() == 200) {
        JsonNode s = json.readTree(r.body());
        if (!s.get("lastLsn").isNull()
            && Lsn.parse(s.get("lastLsn").asText()).compareTo(lsn) > 0
            && !s.get("settling").asBoolean()) {
          assertThat(s.get("repairPending").isNull())
              .as("no repair should be pending: %s", s)
              .isTrue();
          return s.get("sequence").asLong();
        }
      }
      assertThat(System.nanoTime())
          .as("the session should handle the transaction within %s", WAIT)
          .isLessThan(deadline);
      Thread.sleep(10);
    }
  }

  /** The rows of a result ({@code [{key, row}]}) as {@link #expected} spells them. */
  private static List<String> render(JsonNode rows) {
    List<String> out = new ArrayList<>();
    for (JsonNode r : rows) {
      StringBuilder b = new StringBuilder();
      for (var it = r.get("row").elements(); it.hasNext(); ) {
        JsonNode v = it.next();
        b.append(b.length() > 0 ? "|" : "").append(v.isNull() ? "null" : v.asText());
      }
      out.add(b.toString());
    }
    return out;
  }

  /** The query run directly as the scope's role: "id|column|column" per row, in order. */
  private static List<String> expected(Connection oracle, Query q) throws Exception {
    List<String> out = new ArrayList<>();
    try (Statement s = oracle.createStatement();
        ResultSet rs = s.executeQuery(q.oracle())) {
      int n = rs.getMetaData().getColumnCount();
      while (rs.next()) {
        StringBuilder b = new StringBuilder();
        for (int i = 1; i <= n; i++) {
          b.append(i > 1 ? "|" : "").append(rs.getString(i));
        }
        out.add(b.toString());
      }
    }
    return out;
  }

  /** A GET inside a wait: null when it got no answer (asked again). */
  private HttpResponse<String> poll(String path) throws Exception {
    try {
      return call("GET", path, null);
    } catch (java.io.IOException e) {
      return null;
    }
  }

  private HttpResponse<String> call(String method, String path, String body) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(base + path))
            .timeout(Duration.ofSeconds(30))
            .header("Authorization", "Bearer " + ADMIN);
    if (body != null) {
      b.header("Content-Type", "application/json");
    }
    b.method(
        method,
        body == null
            ? HttpRequest.BodyPublishers.noBody()
            : HttpRequest.BodyPublishers.ofString(body));
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  /**
   * A client that keeps the result from the events, written here independently of Weir's code:
   * removals, insertions at their position, in-place updates, complete reorders.
   */
  private final class Client implements AutoCloseable {
    private final List<String> keys = new ArrayList<>();
    private final Map<String, JsonNode> rows = new HashMap<>();
    private final Stream<String> lines;
    private final Thread reader;

    Client(String id) throws Exception {
      HttpRequest request =
          HttpRequest.newBuilder(URI.create(base + "/v1/continuous/" + id + "/events"))
              .header("Authorization", "Bearer " + ADMIN)
              .build();
      HttpResponse<Stream<String>> r;
      long deadline = System.nanoTime() + WAIT.toNanos();
      while ((r = open(request)) == null || r.statusCode() != 200) {
        if (r != null) {
          r.body().close();
        }
        assertThat(System.nanoTime()).as("the stream should open").isLessThan(deadline);
        Thread.sleep(100);
      }
      lines = r.body();
      reader =
          new Thread(
              () -> {
                try {
                  for (var it = lines.iterator(); it.hasNext(); ) {
                    String line = it.next();
                    if (line.startsWith("data:") && !line.substring(5).isBlank()) {
                      JsonNode event = json.readTree(line.substring(5).trim());
                      try {
                        apply(event);
                      } catch (RuntimeException e) {
                        throw new IllegalArgumentException(
                            "event " + event + " does not apply to " + keys, e);
                      }
                    }
                  }
                } catch (java.io.UncheckedIOException | IllegalStateException closed) {
                  // the stream was closed
                } catch (Exception e) {
                  failure = e; // an event that does not apply: reported by awaitSequence
                }
              },
              "oracle-client");
      reader.setDaemon(true);
      reader.start();
      long until = System.nanoTime() + WAIT.toNanos();
      while (!initialised) {
        assertThat(System.nanoTime()).as("an initial result should arrive").isLessThan(until);
        Thread.sleep(20);
      }
    }

    /** The event stream, or null when the node did not answer (asked again). */
    private HttpResponse<Stream<String>> open(HttpRequest request) throws InterruptedException {
      try {
        return http.send(request, HttpResponse.BodyHandlers.ofLines());
      } catch (java.io.IOException e) {
        return null;
      }
    }

    private volatile boolean initialised;
    private volatile Exception failure;

    private volatile long sequence;

    /** Waits until the client has applied every event up to {@code target}. */
    void awaitSequence(long target) throws InterruptedException {
      long until = System.nanoTime() + WAIT.toNanos();
      while (sequence < target) {
        assertThat(failure).as("the client applies every event").isNull();
        assertThat(System.nanoTime())
            .as("the events up to sequence %d should arrive", target)
            .isLessThan(until);
        Thread.sleep(5);
      }
    }

    private synchronized void apply(JsonNode e) {
      String type = e.get("type").asText();
      sequence = e.get("sequence").asLong();
      switch (type) {
        case "InitialResult" -> {
          keys.clear();
          rows.clear();
          for (JsonNode r : e.get("rows")) {
            keys.add(r.get("key").toString());
            rows.put(r.get("key").toString(), r.get("row"));
          }
          initialised = true;
        }
        case "RowRemoved" -> {
          keys.remove(e.get("key").toString());
          rows.remove(e.get("key").toString());
        }
        case "RowAdded" -> {
          keys.add(e.get("position").asInt(), e.get("key").toString());
          rows.put(e.get("key").toString(), e.get("row"));
        }
        case "RowUpdated" -> rows.put(e.get("key").toString(), e.get("row"));
        case "ResultReordered" -> {
          keys.clear();
          e.get("keys").forEach(k -> keys.add(k.toString()));
        }
        case "ResultReset" -> initialised = false;
        default -> throw new IllegalArgumentException("unknown event");
      }
    }

    /** "id|column|column" per row, in order, as {@link #expected} writes them. */
    synchronized List<String> rows() {
      List<String> out = new ArrayList<>();
      for (String k : keys) {
        JsonNode row = rows.get(k);
        StringBuilder b = new StringBuilder();
        for (var it = row.elements(); it.hasNext(); ) {
          JsonNode v = it.next();
          b.append(b.length() > 0 ? "|" : "").append(v.isNull() ? "null" : v.asText());
        }
        out.add(b.toString());
      }
      return out;
    }

    @Override
    public void close() {
      lines.close();
    }
  }
}
