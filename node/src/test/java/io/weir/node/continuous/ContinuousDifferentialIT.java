package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.node.TestNodes;
import io.weir.node.WeirNode;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.Lsn;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The differential test of continuous queries (issue 27): four writers commit random transactions
 * at once, none waiting for the engine. A {@code test_decoding} slot, created before the first row,
 * records the source's commit order (PostgreSQL's own decoder, none of Weir's code). Afterwards
 * every result a session published, that is the state its events describe at each transaction
 * label, is compared with the query run as the scope's role (row-level security included) on a
 * scratch database into which the recorded transactions are replayed one by one, up to the
 * transaction the result is labelled with. What the oracle ({@link ContinuousOracleIT}) cannot see
 * shows here: a read at a snapshot that holds commits the engine has not been delivered yet.
 *
 * <p>The seed is printed; {@code WEIR_DIFFERENTIAL_SEED} repeats a run, {@code
 * -Dweir.differential.seeds=S} and {@code -Dweir.differential.transactions=N} (per writer) run
 * more.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ContinuousDifferentialIT {
  private static final Logger log = LoggerFactory.getLogger(ContinuousDifferentialIT.class);
  private static final String ADMIN = "admin-token-for-continuous-differential-it";
  private static final Duration WAIT = Duration.ofSeconds(120);
  private static final int WRITERS = 4;
  private static final int TRANSACTIONS = Integer.getInteger("weir.differential.transactions", 60);
  private static final int SEEDS = Integer.getInteger("weir.differential.seeds", 1);

  /** The tables the writers change and their key columns, in the source and in the replay. */
  private static final Map<String, List<String>> KEYS =
      Map.of(
          "public.items", List.of("id"),
          "public.nodes", List.of("id"),
          "public.edges", List.of("src", "dst"),
          "public.unrelated", List.of("id"));

  private record Query(String name, String sql, String orderColumn, boolean descending, int limit) {
    String oracle() {
      return "SELECT * FROM ("
          + sql
          + ") q ORDER BY "
          + orderColumn
          + (descending ? " DESC" : " ASC")
          + ", id ASC LIMIT "
          + limit;
    }
  }

  private static final List<Query> QUERIES =
      List.of(
          new Query("top-n", "SELECT id, score, name FROM items", "score", true, 5),
          new Query(
              "join",
              "SELECT i.id, i.score, n.label FROM items i JOIN nodes n ON n.id = i.id % 8 + 1",
              "score",
              true,
              5),
          new Query("ties", "SELECT id, score / 10 AS bucket, name FROM items", "bucket", false, 6),
          new Query(
              "join-lookup",
              "SELECT n.id, n.label, i.score FROM nodes n JOIN items i ON i.id = n.id",
              "score",
              true,
              4),
          new Query(
              "degree",
              "SELECT n.id, n.label, count(e.dst) AS degree FROM nodes n LEFT JOIN edges e"
                  + " ON e.src = n.id GROUP BY n.id, n.label",
              "degree",
              true,
              4),
          new Query(
              "2-hop",
              "WITH RECURSIVE hop(node, depth) AS (SELECT 1, 0 UNION SELECT e.dst, h.depth + 1"
                  + " FROM edges e JOIN hop h ON e.src = h.node WHERE h.depth < 2) SELECT n.id,"
                  + " n.label, min(h.depth) AS depth FROM hop h JOIN nodes n ON n.id = h.node"
                  + " WHERE h.depth > 0 GROUP BY n.id, n.label",
              "depth",
              false,
              6));

  private final ObjectMapper json = new ObjectMapper();
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
  private final String role = "cq_d_" + suffix;
  private final String other = "cq_e_" + suffix;
  private final String password = "pw-d-" + suffix;
  private final String recorder = "cq_order_" + suffix;

  /** Transactions the writers committed so far. */
  private final AtomicInteger committed = new AtomicInteger();

  private TestPostgres.TestDatabase source;
  private TestPostgres.TestDatabase replay;
  private WeirNode node;
  private String base;

  @BeforeAll
  void start() throws Exception {
    source = TestPostgres.server().freshDatabase("cq_diff");
    replay = TestPostgres.server().freshDatabase("cq_replay");
    try (Connection c = source.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE ROLE " + role + " LOGIN PASSWORD '" + password + "'");
      s.execute("CREATE ROLE " + other + " NOLOGIN");
    }
    for (TestPostgres.TestDatabase db : List.of(source, replay)) {
      try (Connection c = db.connect();
          Statement s = c.createStatement()) {
        s.execute(
            "CREATE TABLE items (id int PRIMARY KEY, tenant text NOT NULL, score int NOT NULL,"
                + " name text)");
        s.execute("ALTER TABLE items ENABLE ROW LEVEL SECURITY");
        s.execute("CREATE POLICY own_tenant ON items USING (tenant = current_user)");
        s.execute("CREATE TABLE nodes (id int PRIMARY KEY, label text NOT NULL)");
        s.execute(
            "CREATE TABLE edges (src int NOT NULL, dst int NOT NULL, PRIMARY KEY (src, dst))");
        s.execute("CREATE TABLE unrelated (id int PRIMARY KEY, v int)");
        s.execute("GRANT SELECT ON items, nodes, edges, unrelated TO " + role);
      }
    }
    try (Connection c = source.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE PUBLICATION cq_pub FOR TABLE items, nodes, edges, unrelated");
      // Before the first row: the replay starts from the same empty tables.
      s.execute("SELECT pg_create_logical_replication_slot('" + recorder + "', 'test_decoding')");
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
    m.put("weir.pipelines.cq.slot", "cq_diff_" + suffix);
    m.put("weir.pipelines.cq.publications", List.of("cq_pub"));
    m.put("weir.pipelines.cq.sink.type", "continuous");
    m.put("weir.pipelines.cq.batch.max-delay", "10ms");
    m.put("weir.continuous.scopes.diff.user", role);
    m.put("weir.continuous.scopes.diff.password", password);
    m.put("weir.continuous.repair-every-transactions", "8");
    Config config =
        ConfigFactory.load(
            ConfigFactory.parseMap(m)
                .withFallback(source.config())
                .withFallback(ConfigFactory.defaultApplication()));
    node = TestNodes.start(config);
    base = "http://127.0.0.1:" + node.httpPort();
    await("the pipeline runs")
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> {
              HttpResponse<String> r = poll("/admin/pipelines/cq");
              return r != null
                  && r.statusCode() == 200
                  && json.readTree(r.body()).get("state").asText().equals("running");
            });
  }

  @AfterAll
  void stop() throws Exception {
    if (node != null) {
      node.stop();
    }
    for (TestPostgres.TestDatabase db : new TestPostgres.TestDatabase[] {source, replay}) {
      if (db != null) {
        db.close();
      }
    }
    try (Connection c = TestPostgres.server().connect("postgres");
        Statement s = c.createStatement()) {
      s.execute("DROP ROLE IF EXISTS " + role);
      s.execute("DROP ROLE IF EXISTS " + other);
    }
  }

  @Test
  void everyPublishedResultEqualsTheQueryAtTheTransactionItIsLabelledWith() throws Exception {
    long firstSeed =
        System.getenv("WEIR_DIFFERENTIAL_SEED") != null
            ? Long.parseLong(System.getenv("WEIR_DIFFERENTIAL_SEED"))
            : new Random().nextLong();
    List<Query> queries = new ArrayList<>(QUERIES);
    List<String> ids = new ArrayList<>();
    List<LabelledResults> clients = new ArrayList<>();
    try {
      for (Query q : QUERIES) {
        ids.add(register(q));
        clients.add(new LabelledResults(ids.get(ids.size() - 1)));
      }
      AtomicInteger aborted = new AtomicInteger();
      for (int run = 0; run < SEEDS; run++) {
        long seed = firstSeed + run;
        log.info(
            "ContinuousDifferentialIT seed "
                + seed
                + " ("
                + WRITERS
                + " writers x "
                + TRANSACTIONS
                + " transactions)");
        ExecutorService writers = Executors.newFixedThreadPool(WRITERS);
        try {
          List<Future<?>> done = new ArrayList<>();
          for (int w = 0; w < WRITERS; w++) {
            Random random = new Random(seed * 31 + w);
            done.add(writers.submit(() -> write(random, aborted)));
          }
          if (run == 0) {
            // One query registered while the writers run: its first result is read and held while
            // transactions arrive, and one of them releases it.
            await("the writers have started").atMost(WAIT).until(() -> committed.get() >= 10);
            Query late =
                new Query("top-n-late", "SELECT id, score, name FROM items", "score", true, 7);
            queries.add(late);
            ids.add(register(late));
            clients.add(new LabelledResults(ids.get(ids.size() - 1)));
          }
          for (Future<?> f : done) {
            f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
          }
        } finally {
          writers.shutdownNow();
        }
      }
      Lsn last;
      try (Connection c = source.connect();
          Statement s = c.createStatement()) {
        // One more transaction, after all the writers': its commit is past this position.
        c.setAutoCommit(false);
        s.execute("UPDATE nodes SET label = label WHERE id = 1");
        try (ResultSet rs = s.executeQuery("SELECT pg_current_wal_insert_lsn()::text")) {
          rs.next();
          last = Lsn.parse(rs.getString(1));
        }
        c.commit();
      }
      for (int q = 0; q < queries.size(); q++) {
        long sequence = awaitProcessed(ids.get(q), last);
        clients.get(q).awaitSequence(sequence);
      }
      List<Recorded> order = recordedOrder();
      log.info(
          "ContinuousDifferentialIT: recorded "
              + order.size()
              + " transactions ("
              + order.stream().filter(t -> !t.changes().isEmpty()).count()
              + " of the writers' tables), from "
              + (order.isEmpty() ? "-" : order.get(0).end())
              + " to "
              + (order.isEmpty() ? "-" : order.get(order.size() - 1).end()));
      for (int q = 0; q < queries.size(); q++) {
        log.info(
            "ContinuousDifferentialIT: "
                + queries.get(q).name()
                + " published at "
                + clients.get(q).results().keySet());
      }
      int checked = compare(queries, clients, order);
      log.info(
          "ContinuousDifferentialIT: "
              + order.size()
              + " recorded transactions, "
              + aborted.get()
              + " aborted by deadlocks, "
              + checked
              + " published results compared");
      assertThat(checked)
          .as("the sessions published results labelled with the writers' transactions")
          .isGreaterThanOrEqualTo(QUERIES.size() * 2);
    } finally {
      clients.forEach(LabelledResults::close);
    }
  }

  /** Registers {@code q} on the test's scope; its id. */
  private String register(Query q) throws Exception {
    ObjectNode body =
        json.createObjectNode().put("scope", "diff").put("sql", q.sql()).put("limit", q.limit());
    body.putArray("keyColumns").add("id");
    body.putArray("orderBy")
        .addObject()
        .put("column", q.orderColumn())
        .put("direction", q.descending() ? "desc" : "asc");
    HttpResponse<String> r = call("POST", "/v1/continuous", body.toString());
    assertThat(r.statusCode()).as("registering %s: %s", q.name(), r.body()).isEqualTo(201);
    return json.readTree(r.body()).get("id").asText();
  }

  /** One writer: random transactions, without waiting for the engine. */
  private Void write(Random random, AtomicInteger aborted) throws Exception {
    try (Connection c = source.connect()) {
      c.setAutoCommit(false);
      for (int t = 0; t < TRANSACTIONS; t++) {
        try (Statement s = c.createStatement()) {
          int ops = 1 + random.nextInt(3);
          for (int k = 0; k < ops; k++) {
            s.execute(randomChange(random));
          }
          c.commit();
          committed.incrementAndGet();
          // Bursts and pauses: the engine is sometimes behind by many commits, sometimes by none.
          Thread.sleep(random.nextInt(8) == 0 ? 0 : 5 + random.nextInt(40));
        } catch (SQLException e) {
          c.rollback();
          if (!"40P01".equals(e.getSQLState()) && !"40001".equals(e.getSQLState())) {
            throw e;
          }
          aborted.incrementAndGet();
        }
      }
    }
    return null;
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
      case 2 -> "UPDATE items SET score = " + r.nextInt(100) + " WHERE id = " + id;
      case 3 -> "UPDATE items SET score = score + 60 WHERE id = " + id;
      case 4 -> "DELETE FROM items WHERE id = " + id;
      case 5 ->
          "UPDATE nodes SET label = 'l" + r.nextInt(1000) + "' WHERE id = " + (1 + r.nextInt(12));
      case 6 ->
          "INSERT INTO edges VALUES ("
              + (1 + r.nextInt(12))
              + ", "
              + (1 + r.nextInt(12))
              + ") ON CONFLICT DO NOTHING";
      case 7 -> "DELETE FROM edges WHERE src = " + (1 + r.nextInt(12));
      default ->
          "INSERT INTO unrelated VALUES ("
              + id
              + ", 1) ON CONFLICT (id) DO UPDATE SET v = unrelated.v + 1";
    };
  }

  /** A committed transaction as PostgreSQL's decoder recorded it: its row changes, its end. */
  private record Recorded(Lsn end, List<TestDecoding.Change> changes) {}

  /** The source's transactions in commit order, from the {@code test_decoding} slot. */
  private List<Recorded> recordedOrder() throws SQLException {
    List<Recorded> out = new ArrayList<>();
    try (Connection c = source.connect();
        Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT lsn::text, data FROM pg_logical_slot_get_changes('"
                    + recorder
                    + "', NULL, NULL, 'skip-empty-xacts', '1')")) {
      List<TestDecoding.Change> open = null;
      while (rs.next()) {
        String data = rs.getString(2);
        if (data.startsWith("BEGIN")) {
          open = new ArrayList<>();
        } else if (data.startsWith("COMMIT")) {
          out.add(new Recorded(Lsn.parse(rs.getString(1)), List.copyOf(open)));
          open = null;
        } else if (data.startsWith("table ")) {
          TestDecoding.Change change = TestDecoding.parse(data, KEYS.keySet());
          if (change != null) {
            open.add(change);
          }
        }
      }
    }
    return out;
  }

  /**
   * Replays {@code order} into the scratch database and compares each client's results at the
   * transaction they are labelled with; returns how many were compared.
   */
  private int compare(List<Query> queries, List<LabelledResults> clients, List<Recorded> order)
      throws SQLException {
    // By transaction index: (query, published rows) to compare once it is replayed.
    TreeMap<Integer, List<Map.Entry<Query, List<String>>>> due = new TreeMap<>();
    int checked = 0;
    for (int q = 0; q < queries.size(); q++) {
      for (Map.Entry<Lsn, List<List<String>>> published : clients.get(q).results().entrySet()) {
        int index = transactionAt(order, published.getKey());
        assertThat(index)
            .as("a result is labelled with a recorded transaction (%s)", published.getKey())
            .isGreaterThanOrEqualTo(0);
        for (List<String> rows : published.getValue()) {
          due.computeIfAbsent(index, k -> new ArrayList<>()).add(Map.entry(queries.get(q), rows));
        }
      }
    }
    List<String> mismatches = new ArrayList<>();
    try (Connection c = replay.connect()) {
      c.setAutoCommit(false);
      for (int i = 0; i < order.size() && !due.isEmpty(); i++) {
        for (TestDecoding.Change change : order.get(i).changes()) {
          apply(c, change);
        }
        c.commit();
        List<Map.Entry<Query, List<String>>> now = due.remove(i);
        if (now == null) {
          continue;
        }
        for (Map.Entry<Query, List<String>> check : now) {
          checked++;
          List<String> expected = asRole(c, check.getKey());
          if (!expected.equals(check.getValue())) {
            mismatches.add(
                check.getKey().name()
                    + " at transaction "
                    + i
                    + " (end "
                    + order.get(i).end()
                    + "): published "
                    + check.getValue()
                    + ", the query on the replay "
                    + expected);
          }
        }
      }
    }
    assertThat(mismatches)
        .as("results that no snapshot at their label had (%d of %d)", mismatches.size(), checked)
        .isEmpty();
    return checked;
  }

  /**
   * The index of the transaction whose commit record starts at {@code label}: the first whose
   * commit record ends after it (transactions decode in the order of their commit records).
   */
  private static int transactionAt(List<Recorded> order, Lsn label) {
    int lo = 0;
    int hi = order.size();
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (order.get(mid).end().compareTo(label) > 0) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo < order.size() ? lo : -1;
  }

  /** Deletes the row the change replaces (by its key), then inserts its new row, if any. */
  private static void apply(Connection c, TestDecoding.Change change) throws SQLException {
    List<String> key = KEYS.get(change.table());
    Map<String, Object> old = change.before() != null ? change.before() : change.after();
    {
      StringBuilder where = new StringBuilder();
      for (String k : key) {
        where.append(where.length() == 0 ? "" : " AND ").append(k).append(" = ?");
      }
      try (PreparedStatement p =
          c.prepareStatement("DELETE FROM " + change.table() + " WHERE " + where)) {
        for (int i = 0; i < key.size(); i++) {
          p.setObject(i + 1, old.get(key.get(i)));
        }
        p.executeUpdate();
      }
    }
    if (change.after() != null) {
      List<String> columns = new ArrayList<>(change.after().keySet());
      try (PreparedStatement p =
          c.prepareStatement(
              "INSERT INTO "
                  + change.table()
                  + " ("
                  + String.join(", ", columns)
                  + ") VALUES ("
                  + String.join(", ", columns.stream().map(x -> "?").toList())
                  + ")")) {
        for (int i = 0; i < columns.size(); i++) {
          p.setObject(i + 1, change.after().get(columns.get(i)));
        }
        p.executeUpdate();
      }
    }
  }

  /** The query as the scope's role on the replay: "column|column" per row, in order. */
  private List<String> asRole(Connection c, Query q) throws SQLException {
    List<String> out = new ArrayList<>();
    try (Statement s = c.createStatement()) {
      s.execute("SET ROLE " + role);
      try (ResultSet rs = s.executeQuery(q.oracle())) {
        int n = rs.getMetaData().getColumnCount();
        while (rs.next()) {
          StringBuilder b = new StringBuilder();
          for (int i = 1; i <= n; i++) {
            b.append(i > 1 ? "|" : "").append(rs.getString(i));
          }
          out.add(b.toString());
        }
      } finally {
        s.execute("RESET ROLE");
      }
    }
    c.commit();
    return out;
  }

  /** The session's sequence once it handled a transaction at or past {@code lsn} and settled. */
  private long awaitProcessed(String id, Lsn lsn) {
    return await("the session handles every transaction and settles")
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(20))
        .until(
            () -> {
              HttpResponse<String> r = poll("/v1/continuous/" + id + "/status");
              if (r == null || r.statusCode() != 200) {
                return -1L;
              }
              JsonNode s = json.readTree(r.body());
              boolean done =
                  !s.get("lastLsn").isNull()
                      && Lsn.parse(s.get("lastLsn").asText()).compareTo(lsn) >= 0
                      && s.get("repairPending").isNull()
                      && !s.get("settling").asBoolean();
              return done ? s.get("sequence").asLong() : -1L;
            },
            sequence -> sequence >= 0);
  }

  private HttpResponse<String> poll(String path) throws Exception {
    try {
      return call("GET", path, null);
    } catch (IOException e) {
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
   * A client of a session's events that keeps, for every transaction label, the results the events
   * describe once all events of that label are applied (written here independently of Weir's code,
   * as the oracle's client).
   */
  private final class LabelledResults implements AutoCloseable {
    private final List<String> keys = new ArrayList<>();
    private final Map<String, JsonNode> rows = new HashMap<>();
    private final Map<Lsn, List<List<String>>> results = new LinkedHashMap<>();
    private final Stream<String> lines;
    private volatile boolean initialised;
    private volatile long sequence;
    private volatile Exception failure;
    private String label;

    LabelledResults(String id) throws Exception {
      HttpRequest request =
          HttpRequest.newBuilder(URI.create(base + "/v1/continuous/" + id + "/events"))
              .header("Authorization", "Bearer " + ADMIN)
              .build();
      HttpResponse<Stream<String>> r = http.send(request, HttpResponse.BodyHandlers.ofLines());
      assertThat(r.statusCode()).isEqualTo(200);
      lines = r.body();
      Thread reader =
          new Thread(
              () -> {
                try {
                  for (var it = lines.iterator(); it.hasNext(); ) {
                    String line = it.next();
                    if (line.startsWith("data:") && !line.substring(5).isBlank()) {
                      apply(json.readTree(line.substring(5).trim()));
                    }
                  }
                } catch (UncheckedIOException | IllegalStateException closed) {
                  // the stream was closed
                } catch (Exception e) {
                  failure = e;
                }
              },
              "differential-client");
      reader.setDaemon(true);
      reader.start();
      await("an initial result arrives").atMost(WAIT).until(() -> initialised);
    }

    void awaitSequence(long target) {
      await("events up to " + target)
          .atMost(WAIT)
          .pollInterval(Duration.ofMillis(5))
          .until(
              () -> {
                assertThat(failure).as("the client applies every event").isNull();
                return sequence >= target;
              });
    }

    /** Published results by label, the last state included. */
    synchronized Map<Lsn, List<List<String>>> results() {
      record();
      return results;
    }

    private synchronized void apply(JsonNode e) {
      String next = e.hasNonNull("lsn") ? e.get("lsn").asText() : null;
      String type = e.get("type").asText();
      if (!Objects.equals(next, label) || type.equals("InitialResult")) {
        record(); // every event of the previous label is applied: that is a published result
      }
      label = next;
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
        default -> throw new IllegalArgumentException("unknown event type " + type);
      }
    }

    /** The state now, as the result at the current label (unless unlabelled or unknown). */
    private void record() {
      if (label == null || !initialised) {
        return;
      }
      List<String> out = new ArrayList<>();
      for (String k : keys) {
        StringBuilder b = new StringBuilder();
        for (var it = rows.get(k).elements(); it.hasNext(); ) {
          JsonNode v = it.next();
          b.append(b.length() > 0 ? "|" : "").append(v.isNull() ? "null" : v.asText());
        }
        out.add(b.toString());
      }
      List<List<String>> at = results.computeIfAbsent(Lsn.parse(label), k -> new ArrayList<>());
      if (at.isEmpty() || !at.get(at.size() - 1).equals(out)) {
        at.add(out);
      }
    }

    @Override
    public void close() {
      lines.close();
    }
  }
}
