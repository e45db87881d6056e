package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.node.TestNodes;
import io.weir.node.WeirNode;
import io.weir.persistence.testing.TestPorts;
import io.weir.persistence.testing.TestPostgres;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Continuous queries over a source that is not Weir's own database: Weir's journal on a private
 * PostgreSQL server, the pipeline's source and the scope on the shared test server. Transaction ids
 * mean something only on the server that assigned them, so the delivered transactions' visibility
 * must be checked on the source (through the scope's connection), never on Weir's database. The
 * source's xids are made to run ahead of the private server's: checked there, they would look like
 * transactions that have not happened yet, and the pending set would never shrink. The node's short
 * {@code repair-interval} shows the time-based full read after a delta.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ContinuousSourceIT {
  private static final String ADMIN = "admin-token-for-continuous-source-it";
  private static final Duration WAIT = Duration.ofSeconds(120);

  /** More delivered transactions than a scope keeps unchecked (ContinuousQueries.PENDING_PRUNE). */
  private static final int TRANSACTIONS = 1_100;

  private final ObjectMapper json = new ObjectMapper();
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
  private final String role = "cq_source_" + suffix;
  private Map<String, String> pgEnv;
  private TestPostgres.TestDatabase source;
  private WeirNode node;
  private String base;

  @BeforeAll
  void start() throws Exception {
    pgEnv =
        Map.of(
            "WEIR_PG_HOME",
            Files.createTempDirectory("weir-cq-journal-pg").toString(),
            "WEIR_PG_PORT_BASE",
            Integer.toString(TestPorts.freeBlock(4)));
    TestPostgres journalServer = TestPostgres.privateServer(pgEnv);
    TestPostgres.TestDatabase journal = journalServer.freshDatabase("cq_journal");
    source = TestPostgres.server().freshDatabase("cq_source");
    try (Connection c = source.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE ROLE " + role + " LOGIN PASSWORD 'pw-" + suffix + "'");
      s.execute("CREATE TABLE scores (id int PRIMARY KEY, v int NOT NULL)");
      s.execute("INSERT INTO scores SELECT g, g FROM generate_series(1, 5) g");
      s.execute("CREATE TABLE events (id int PRIMARY KEY)");
      s.execute("GRANT SELECT ON scores, events TO " + role);
      s.execute("CREATE PUBLICATION cq_source_pub FOR TABLE scores, events");
    }
    // The source's transaction ids well ahead of the journal server's, whatever ran before.
    long journalXid = currentXid(journal.connect());
    try (Connection c = source.connect();
        Statement s = c.createStatement()) {
      for (int i = 0; i < 200_000 && currentXid(s) < journalXid + 50_000; i++) {
        // each statement its own transaction
      }
    }
    Map<String, Object> m = new HashMap<>();
    m.put("weir.admin-token", ADMIN);
    m.put("weir.pipelines.cq.slot", "cq_source_slot_" + suffix);
    m.put("weir.pipelines.cq.publications", List.of("cq_source_pub"));
    m.put("weir.pipelines.cq.source.url", source.url());
    m.put("weir.pipelines.cq.source.user", source.server().user());
    m.put("weir.pipelines.cq.source.password", source.server().password());
    m.put("weir.pipelines.cq.sink.type", "continuous");
    m.put("weir.continuous.refresh", "200ms");
    // Short, so that the time-based repair shows within the test (the default is 5 minutes).
    m.put("weir.continuous.repair-interval", "2s");
    m.put("weir.continuous.scopes.src.url", source.url());
    m.put("weir.continuous.scopes.src.user", role);
    m.put("weir.continuous.scopes.src.password", "pw-" + suffix);
    Config config =
        ConfigFactory.load(
            ConfigFactory.parseMap(m)
                .withFallback(journal.config())
                .withFallback(ConfigFactory.defaultApplication()));
    node = TestNodes.start(config);
    base = "http://127.0.0.1:" + node.httpPort();
    await(
        "the continuous pipeline runs",
        () -> {
          HttpResponse<String> r = call("GET", "/admin/pipelines/cq", null);
          return r.statusCode() == 200
              && json.readTree(r.body()).get("state").asText().equals("running");
        });
  }

  @AfterAll
  void stop() throws Exception {
    if (node != null) {
      node.stop();
    }
    if (source != null) {
      source.close();
    }
    if (pgEnv != null) {
      TestPostgres.pgScript(pgEnv, "destroy");
    }
  }

  private static long currentXid(Connection c) throws Exception {
    try (c;
        Statement s = c.createStatement()) {
      return currentXid(s);
    }
  }

  private static long currentXid(Statement s) throws Exception {
    try (ResultSet rs = s.executeQuery("SELECT txid_current()")) {
      rs.next();
      return rs.getLong(1);
    }
  }

  @Test
  void deliveredTransactionsAreCheckedOnTheSourceAndADeltaIsRepairedOnTime() throws Exception {
    ObjectNode body = json.createObjectNode();
    body.put("scope", "src");
    body.put("sql", "SELECT id, v FROM scores");
    body.putArray("keyColumns").add("id");
    body.putArray("orderBy").addObject().put("column", "v").put("direction", "desc");
    body.put("limit", 3);
    HttpResponse<String> created = call("POST", "/v1/continuous", body.toString());
    assertThat(created.statusCode()).as(created.body()).isIn(200, 201);
    String id = json.readTree(created.body()).get("id").asText();
    await("the session is current", () -> status(id).get("state").asText().equals("current"));

    // Transactions the query does not read: no read of the scope sees them, so only the bound on
    // the pending set forgets them.
    try (Connection c = source.connect();
        Statement s = c.createStatement()) {
      for (int i = 1; i <= TRANSACTIONS; i++) {
        s.execute("INSERT INTO events VALUES (" + i + ")");
      }
    }
    await(
        "every transaction delivered",
        () -> status(id).get("unrelatedTransactions").asLong() >= TRANSACTIONS);
    JsonNode status = status(id);
    assertThat(status.get("pendingVisibilityChecks").asLong())
        .as("checked on the source and forgotten once past the bound: %s", status)
        .isLessThan(TRANSACTIONS - 1024);

    // The session still reads (and sees) the source.
    try (Connection c = source.connect();
        Statement s = c.createStatement()) {
      s.execute("UPDATE scores SET v = 100 WHERE id = 1");
    }
    await(
        "the change is in the result",
        () -> {
          JsonNode st = status(id);
          return st.get("relevantTransactions").asLong() >= 1
              && st.get("state").asText().equals("current")
              && !st.get("settling").asBoolean();
        });
    assertThat(status(id).get("repairPending").isNull()).isTrue();

    // The change was a scoped delta; repair-interval after the last full read, the refresh reads
    // the query in full once more (and only because a delta ran since).
    assertThat(status(id).get("incrementalTransactions").asLong()).isPositive();
    await(
        "a periodic full read repair-interval after the last one",
        () -> status(id).get("fullRepairsByReason").path("periodic").asLong() >= 1);
  }

  private JsonNode status(String id) throws Exception {
    HttpResponse<String> r = call("GET", "/v1/continuous/" + id + "/status", null);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return json.readTree(r.body());
  }

  /**
   * Waits until {@code condition} holds; a node not answering yet, or not there yet, is asked
   * again.
   */
  private static void await(String what, java.util.concurrent.Callable<Boolean> condition) {
    org.awaitility.Awaitility.await(what)
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(200))
        .ignoreExceptionsMatching(
            e -> e instanceof java.io.IOException || e instanceof AssertionError)
        .until(condition);
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
}
