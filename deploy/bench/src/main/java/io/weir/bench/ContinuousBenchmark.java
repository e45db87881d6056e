package io.weir.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.node.NodeSettings;
import io.weir.node.WeirNode;
import io.weir.protocol.Lsn;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Continuous top-N maintenance: one node in process, a table of {@code --rows} rows, the same top-N
 * query registered twice on one scope (a login role of its own), once maintained incrementally
 * (scoped deltas, falling back to full reads when a rule demands it) and once by re-running the
 * full query on every transaction ({@code "maintenance": "full"}). A workload of single-row score
 * updates on a set of hot keys ({@code --hot-fraction} of the rows) runs one transaction at a time;
 * both sessions handle every transaction, side by side in the same run. Prints per session the rows
 * read from PostgreSQL, the maintenance time per transaction (p50/p99: the engine's reads, merge
 * and events for that session), full reads by reason and the fallback rate, then the ratios; and
 * one EXPLAIN ANALYZE of each kind of read (rows the server examined). Figures, not assertions.
 */
public final class ContinuousBenchmark {
  private static final String DATABASE = "weir_cbench";
  private static final String ROLE = "weir_cbench_reader";
  private static final String ADMIN = "cbench-admin-" + UUID.randomUUID();
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String BASE = "SELECT id, score, payload FROM items";

  @Command(
      name = "ContinuousBenchmark",
      sortOptions = false,
      usageHelpWidth = 110,
      description =
          "Continuous top-N queries: scoped-delta maintenance against re-running the full query on every"
              + " transaction, side by side. Prints figures; asserts nothing.",
      footer = {
        "",
        "Needs WEIR_PG_URL, WEIR_PG_USER and WEIR_PG_PASSWORD (eval \"$(deploy/bin/pg.sh start)\")."
      })
  static final class Options {
    @Option(
        names = {"-h", "--help"},
        usageHelp = true,
        description = "this help")
    boolean help;

    @Option(
        names = "--rows",
        paramLabel = "N",
        description = "rows of the table (default: ${DEFAULT-VALUE})")
    int rows = 1_000_000;

    @Option(
        names = "--limit",
        paramLabel = "N",
        description = "N of the top-N (default: ${DEFAULT-VALUE})")
    int limit = 100;

    @Option(
        names = "--hot-fraction",
        paramLabel = "F",
        description = "share of rows the updates pick from (default: ${DEFAULT-VALUE})")
    double hotFraction = 0.01;

    @Option(
        names = "--near-top",
        paramLabel = "F",
        description =
            "share of updates whose new score lands around the top-N boundary, moving rows in, out and"
                + " within the result; the others draw a score uniformly (default: ${DEFAULT-VALUE})")
    double nearTop = 0.3;

    @Option(
        names = "--transactions",
        paramLabel = "N",
        description = "update transactions, one at a time (default: ${DEFAULT-VALUE})")
    int transactions = 400;

    @Option(
        names = "--warmup",
        paramLabel = "N",
        description = "transactions before the counters are read (default: ${DEFAULT-VALUE})")
    int warmup = 20;

    @Option(
        names = "--score-index",
        description = "an index on score: the full query reads the top by index, not the table")
    boolean scoreIndex;

    @Option(
        names = "--seed",
        paramLabel = "N",
        description = "workload seed (default: random, printed)")
    Long seed;

    String url;
    String user;
    String password;
  }

  static final String USAGE = BenchArgs.usage(new Options());

  public static void main(String[] args) {
    BenchMain.main(args, ContinuousBenchmark::parse, USAGE, o -> new ContinuousBenchmark(o).run());
  }

  static Options parse(String[] args, Map<String, String> env) throws BenchArgs.UsageException {
    Options o = new Options();
    BenchArgs.parse(o, args);
    if (o.rows < 1000
        || o.rows > 100_000_000
        || o.limit < 1
        || o.limit > 1000
        || o.transactions < 1
        || o.hotFraction <= 0
        || o.hotFraction > 1
        || o.nearTop < 0
        || o.nearTop > 1
        || o.warmup < 0) {
      throw new BenchArgs.UsageException(
          "--rows 1000..1e8, --limit 1..1000, --transactions >= 1, --hot-fraction (0,1],"
              + " --near-top [0,1], --warmup >= 0");
    }
    o.url = BenchArgs.require(env, "WEIR_PG_URL");
    o.user = env.getOrDefault("WEIR_PG_USER", "weir");
    o.password = env.getOrDefault("WEIR_PG_PASSWORD", "");
    return o;
  }

  private final Options o;
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private String base;

  private ContinuousBenchmark(Options o) {
    this.o = o;
  }

  private int run() throws Exception {
    long seed = o.seed != null ? o.seed : new SplittableRandom().nextLong();
    BenchDatabase db = new BenchDatabase(o.url, o.user, o.password, DATABASE);
    String rolePassword = "pw-" + UUID.randomUUID();
    db.recreateEmpty();
    try (Connection c = DriverManager.getConnection(o.url, o.user, o.password);
        Statement s = c.createStatement()) {
      s.execute("DROP ROLE IF EXISTS " + ROLE);
      s.execute("CREATE ROLE " + ROLE + " LOGIN PASSWORD '" + rolePassword + "'");
    }
    long t0 = System.nanoTime();
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("SELECT setseed(0.42)");
      s.execute(
          "CREATE TABLE items (id bigint PRIMARY KEY, score int NOT NULL, payload text NOT NULL)");
      s.execute(
          "INSERT INTO items SELECT g, (random() * 1000000)::int, md5(g::text) FROM generate_series(1, "
              + o.rows
              + ") g");
      if (o.scoreIndex) {
        s.execute("CREATE INDEX items_score ON items (score DESC, id)");
      }
      s.execute("VACUUM ANALYZE items");
      s.execute("GRANT SELECT ON items TO " + ROLE);
      s.execute("CREATE PUBLICATION cbench_pub FOR TABLE items");
    }
    System.out.printf(
        Locale.ROOT,
        "continuous top-N benchmark: %,d rows loaded in %.1f s; top-%d of \"%s\" by score desc;"
            + " score index: %s; seed %d%n",
        o.rows,
        (System.nanoTime() - t0) / 1e9,
        o.limit,
        BASE,
        o.scoreIndex ? "yes" : "no",
        seed);

    Map<String, Object> m = new HashMap<>();
    m.put("weir.postgres.url", db.url());
    m.put("weir.postgres.user", o.user);
    m.put("weir.postgres.password", o.password);
    m.put("weir.http.port", 0);
    m.put("weir.cluster.port", 0);
    m.put("weir.admin-token", ADMIN);
    m.put("weir.pipelines.cq.slot", "cbench_slot");
    m.put("weir.pipelines.cq.publications", List.of("cbench_pub"));
    m.put("weir.pipelines.cq.sink.type", "continuous");
    m.put("weir.pipelines.cq.batch.max-delay", "1ms");
    m.put("weir.continuous.scopes.bench.user", ROLE);
    m.put("weir.continuous.scopes.bench.password", rolePassword);
    m.put("weir.continuous.statement-timeout", "60s");
    Config config =
        ConfigFactory.load(
            ConfigFactory.parseMap(m).withFallback(ConfigFactory.defaultApplication()));
    WeirNode node = WeirNode.start(config, NodeSettings.create(config));
    try {
      base = "http://127.0.0.1:" + node.httpPort();
      awaitRunning();
      String incremental = register("incremental");
      String full = register("full");
      awaitCurrent(incremental);
      awaitCurrent(full);

      // The workload: hot keys, one single-row update per transaction.
      SplittableRandom random = new SplittableRandom(seed);
      int hot = Math.max(1, (int) (o.rows * o.hotFraction));
      long[] hotKeys = new long[hot];
      for (int i = 0; i < hot; i++) {
        hotKeys[i] = 1 + random.nextLong(o.rows);
      }
      JsonNode[] before = null;
      long started = 0;
      try (Connection w = db.connect();
          PreparedStatement up = w.prepareStatement("UPDATE items SET score = ? WHERE id = ?");
          PreparedStatement top =
              w.prepareStatement(
                  "SELECT min(score), max(score) FROM (SELECT score FROM items"
                      + " ORDER BY score DESC LIMIT "
                      + o.limit
                      + ") t")) {
        w.setAutoCommit(true);
        int[] bounds = bounds(top);
        for (int t = 0; t < o.warmup + o.transactions; t++) {
          if (t == o.warmup) {
            before = new JsonNode[] {status(incremental), status(full)};
            started = System.nanoTime();
          }
          if (t % 50 == 0) {
            w.setAutoCommit(true);
            bounds = bounds(top);
          }
          int score =
              random.nextDouble() < o.nearTop
                  ? bounds[0] - 50 + random.nextInt(Math.max(100, bounds[1] - bounds[0] + 100))
                  : random.nextInt(1_000_001);
          up.setInt(1, score);
          up.setLong(2, hotKeys[random.nextInt(hot)]);
          w.setAutoCommit(false);
          up.executeUpdate();
          Lsn lsn; // where the commit record will start (nothing else writes in between here): the
          // commit LSN is at or past it
          try (Statement s = w.createStatement();
              ResultSet rs = s.executeQuery("SELECT pg_current_wal_insert_lsn()::text")) {
            rs.next();
            lsn = Lsn.parse(rs.getString(1));
          }
          w.commit();
          try {
            awaitHandled(incremental, lsn);
            awaitHandled(full, lsn);
          } catch (IllegalStateException e) {
            throw new IllegalStateException(
                "transaction " + t + " awaited past " + lsn + ": " + e.getMessage());
          }
        }
      }
      double seconds = (System.nanoTime() - started) / 1e9;
      JsonNode[] after = {status(incremental), status(full)};
      System.out.printf(
          Locale.ROOT,
          "%d transactions measured (after %d warm-up) in %.1f s, each awaited by both sessions%n",
          o.transactions,
          o.warmup,
          seconds);
      System.out.printf(
          Locale.ROOT,
          "%-12s %9s %9s %9s %11s %13s %11s %11s %11s  %s%n",
          "maintenance",
          "relevant",
          "deltas",
          "full",
          "rows read",
          "rows/txn",
          "p50 ms",
          "p99 ms",
          "max ms",
          "full reads by reason");
      double[] rowsPerTxn = new double[2];
      double[] p50 = new double[2];
      double[] p99 = new double[2];
      double[] workP50 = new double[2];
      double[] workP99 = new double[2];
      double[] appendP50 = new double[2];
      long[] retries = new long[2];
      String[] names = {"incremental", "full"};
      for (int i = 0; i < 2; i++) {
        JsonNode a = after[i];
        JsonNode b = before[i];
        long relevant =
            a.get("relevantTransactions").asLong() - b.get("relevantTransactions").asLong();
        long deltas =
            a.get("incrementalTransactions").asLong() - b.get("incrementalTransactions").asLong();
        long reads = a.get("authoritativeReads").asLong() - b.get("authoritativeReads").asLong();
        long rowsRead = a.get("rowsRead").asLong() - b.get("rowsRead").asLong();
        rowsPerTxn[i] = relevant == 0 ? 0 : (double) rowsRead / relevant;
        // The histograms cover warm-up too (a few percent of the transactions).
        p50[i] = a.get("maintenanceMicros").get("p50").asLong() / 1000.0;
        p99[i] = a.get("maintenanceMicros").get("p99").asLong() / 1000.0;
        workP50[i] = a.get("workMicros").get("p50").asLong() / 1000.0;
        workP99[i] = a.get("workMicros").get("p99").asLong() / 1000.0;
        appendP50[i] = a.get("appendMicros").get("p50").asLong() / 1000.0;
        retries[i] = a.get("visibilityRetries").asLong() - b.get("visibilityRetries").asLong();
        System.out.printf(
            Locale.ROOT,
            "%-12s %9d %9d %9d %,11d %13.1f %11.2f %11.2f %11.2f  %s%n",
            names[i],
            relevant,
            deltas,
            reads,
            rowsRead,
            rowsPerTxn[i],
            p50[i],
            p99[i],
            a.get("maintenanceMicros").get("max").asLong() / 1000.0,
            a.get("fullRepairsByReason"));
      }
      long relevant =
          after[0].get("relevantTransactions").asLong()
              - before[0].get("relevantTransactions").asLong();
      long fallbacks = 0;
      for (var it = after[0].get("fallbacksByReason").fields(); it.hasNext(); ) {
        var e = it.next();
        fallbacks +=
            e.getValue().asLong() - before[0].get("fallbacksByReason").path(e.getKey()).asLong();
      }
      long periodic =
          after[0].get("fullRepairsByReason").path("periodic").asLong()
              - before[0].get("fullRepairsByReason").path("periodic").asLong();
      System.out.printf(
          Locale.ROOT,
          "fallback rate (incremental): %.1f%% (%d of %d transactions: %s), periodic full reads %d%n",
          relevant == 0 ? 0 : 100.0 * fallbacks / relevant,
          fallbacks,
          relevant,
          after[0].get("fallbacksByReason"),
          periodic);
      System.out.printf(
          Locale.ROOT,
          "ratios full / incremental: rows read %.1fx, p50 %.1fx, p99 %.1fx%n",
          rowsPerTxn[1] / Math.max(rowsPerTxn[0], 1e-9),
          p50[1] / Math.max(p50[0], 1e-9),
          p99[1] / Math.max(p99[0], 1e-9));
      // The maintenance itself (reads, merge, diff) apart from the durable append both pay.
      System.out.printf(
          Locale.ROOT,
          "work without the append: p50 incremental %.2f ms, full %.2f ms (incremental/full %.2f);"
              + " p99 %.2f / %.2f ms; append p50 %.2f / %.2f ms; visibility retries %d / %d%n",
          workP50[0],
          workP50[1],
          workP50[0] / Math.max(workP50[1], 1e-9),
          workP99[0],
          workP99[1],
          appendP50[0],
          appendP50[1],
          retries[0],
          retries[1]);
      explain(db, rolePassword);
    } finally {
      node.stop();
      db.drop();
      try (Connection c = DriverManager.getConnection(o.url, o.user, o.password);
          Statement s = c.createStatement()) {
        s.execute("DROP ROLE IF EXISTS " + ROLE);
      }
    }
    return 0;
  }

  /**
   * Rows PostgreSQL examined for one full read and one single-key delta (EXPLAIN ANALYZE as the
   * scope's role).
   */
  private void explain(BenchDatabase db, String rolePassword) throws Exception {
    try (Connection c = DriverManager.getConnection(db.url(), ROLE, rolePassword);
        Statement s = c.createStatement()) {
      String fullSql =
          "SELECT * FROM (" + BASE + ") AS weir_base ORDER BY score DESC, id ASC LIMIT " + o.limit;
      String deltaSql = "SELECT * FROM (" + BASE + ") AS weir_base WHERE id IN (42)";
      for (String[] q :
          new String[][] {{"full read", fullSql}, {"scoped delta (1 key)", deltaSql}}) {
        try (ResultSet rs = s.executeQuery("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + q[1])) {
          rs.next();
          JsonNode plan = JSON.readTree(rs.getString(1)).get(0);
          long[] scanned = {0};
          scanRows(plan.get("Plan"), scanned);
          System.out.printf(
              Locale.ROOT,
              "EXPLAIN ANALYZE %-21s rows examined by scans %,d, shared buffers %,d, %.2f ms%n",
              q[0] + ":",
              scanned[0],
              plan.get("Plan").path("Shared Hit Blocks").asLong()
                  + plan.get("Plan").path("Shared Read Blocks").asLong(),
              plan.path("Execution Time").asDouble());
        }
      }
    }
  }

  private static void scanRows(JsonNode node, long[] total) {
    String type = node.path("Node Type").asText();
    if (type.endsWith("Scan") && !type.startsWith("Bitmap Index")) {
      long loops = Math.max(1, node.path("Actual Loops").asLong());
      total[0] +=
          (node.path("Actual Rows").asLong() + node.path("Rows Removed by Filter").asLong())
              * loops;
    }
    for (JsonNode child : node.path("Plans")) {
      scanRows(child, total);
    }
  }

  private static int[] bounds(PreparedStatement top) throws Exception {
    try (ResultSet rs = top.executeQuery()) {
      rs.next();
      return new int[] {rs.getInt(1), rs.getInt(2)};
    }
  }

  private String register(String maintenance) throws Exception {
    ObjectNode body =
        JSON.createObjectNode()
            .put("scope", "bench")
            .put("sql", BASE)
            .put("limit", o.limit)
            .put("maintenance", maintenance);
    body.putArray("keyColumns").add("id");
    body.putArray("orderBy").addObject().put("column", "score").put("direction", "desc");
    HttpResponse<String> r = call("POST", "/v1/continuous", body.toString());
    if (r.statusCode() != 201 && r.statusCode() != 200) {
      throw new IllegalStateException("registration refused: " + r.statusCode() + " " + r.body());
    }
    return JSON.readTree(r.body()).get("id").asText();
  }

  private JsonNode status(String id) throws Exception {
    HttpResponse<String> r = call("GET", "/v1/continuous/" + id + "/status", null);
    return r.statusCode() == 200 ? JSON.readTree(r.body()) : null;
  }

  private void awaitRunning() throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (System.nanoTime() < deadline) {
      HttpResponse<String> r = call("GET", "/admin/pipelines/cq", null);
      if (r.statusCode() == 200
          && JSON.readTree(r.body()).path("state").asText().equals("running")) {
        return;
      }
      Thread.sleep(200);
    }
    throw new IllegalStateException("the continuous pipeline did not start within 120 s");
  }

  private void awaitCurrent(String id) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(300);
    while (System.nanoTime() < deadline) {
      JsonNode s = status(id);
      if (s != null && s.get("state").asText().equals("current")) {
        return;
      }
      Thread.sleep(100);
    }
    throw new IllegalStateException("a session did not read its initial result within 300 s");
  }

  private void awaitHandled(String id, Lsn lsn) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (System.nanoTime() < deadline) {
      JsonNode s = status(id);
      if (s != null
          && !s.get("lastLsn").isNull()
          && Lsn.parse(s.get("lastLsn").asText()).compareTo(lsn) >= 0) {
        return;
      }
      Thread.sleep(2);
    }
    throw new IllegalStateException(
        "a transaction was not handled within 120 s; status "
            + status(id)
            + "; pipeline "
            + call("GET", "/admin/pipelines/cq", null).body());
  }

  private HttpResponse<String> call(String method, String path, String body) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(base + path))
            .timeout(Duration.ofSeconds(30))
            .header("Authorization", "Bearer " + ADMIN);
    if (body != null) {
      b.header("Content-Type", "application/json")
          .method(method, HttpRequest.BodyPublishers.ofString(body));
    } else {
      b.method(method, HttpRequest.BodyPublishers.noBody());
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }
}
