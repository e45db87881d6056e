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
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Continuous queries end to end in one node process (in this JVM) on a real PostgreSQL: a
 * continuous pipeline on its own slot, two security scopes with their own login roles under
 * row-level security, registration over HTTP, SSE events and status counters.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@org.junit.jupiter.api.TestMethodOrder(org.junit.jupiter.api.MethodOrderer.OrderAnnotation.class)
class ContinuousQueryIT {
  private static final String ADMIN = "admin-token-for-continuous-it";

  /**
   * How long a wait for the session (a status, an event, the durable result) may take: a second or
   * two on a quiet machine, and the test must pass on one four times slower.
   */
  private static final Duration WAIT = Duration.ofSeconds(90);

  /** How long the pipeline may take to run after the node or the pipeline starts. */
  private static final Duration START_UP = Duration.ofSeconds(120);

  private static final String TOP3 = "SELECT id, tenant, score, name FROM items";
  private final ObjectMapper json = new ObjectMapper();
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
  private final String roleA = "cq_a_" + suffix;
  private final String roleB = "cq_b_" + suffix;
  private TestPostgres.TestDatabase db;
  private WeirNode node;
  private Config config;
  private String base;
  private String aliceToken;

  @BeforeAll
  void start() throws Exception {
    db = TestPostgres.server().freshDatabase("cq_it");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE ROLE " + roleA + " LOGIN PASSWORD 'pw-a-" + suffix + "'");
      s.execute("CREATE ROLE " + roleB + " LOGIN PASSWORD 'pw-b-" + suffix + "'");
      s.execute(
          "CREATE TABLE items (id int PRIMARY KEY, tenant text NOT NULL, score int NOT NULL, name text)");
      s.execute("ALTER TABLE items ENABLE ROW LEVEL SECURITY");
      s.execute("CREATE POLICY own_tenant ON items USING (tenant = current_user)");
      s.execute("CREATE TABLE nodes (id int PRIMARY KEY, label text NOT NULL)");
      s.execute("CREATE TABLE edges (src int NOT NULL, dst int NOT NULL, PRIMARY KEY (src, dst))");
      s.execute("CREATE TABLE unrelated (id int PRIMARY KEY, v int)");
      s.execute("CREATE TABLE unpublished (id int PRIMARY KEY)");
      s.execute("CREATE TABLE ranked (id int PRIMARY KEY, score int NOT NULL, label text)");
      s.execute("INSERT INTO ranked SELECT g, g * 10, 'r' || g FROM generate_series(1, 12) g");
      s.execute(
          "ALTER TABLE ranked REPLICA IDENTITY FULL"); // complete old images: tier 1's condition
      s.execute("CREATE TABLE secrets (id int PRIMARY KEY, owner text NOT NULL)");
      s.execute("ALTER TABLE secrets ENABLE ROW LEVEL SECURITY");
      s.execute("CREATE POLICY own_secret ON secrets USING (owner = current_user)");
      s.execute("INSERT INTO secrets VALUES (1, '" + roleA + "'), (2, '" + roleB + "')");
      s.execute("CREATE TABLE authors (id int PRIMARY KEY, name text NOT NULL)");
      s.execute("CREATE TABLE posts (id int PRIMARY KEY, author_id int, likes int NOT NULL)");
      s.execute(
          "ALTER TABLE posts REPLICA IDENTITY FULL"); // a post moving between authors names both
      s.execute("INSERT INTO authors VALUES (1, 'w1'), (2, 'w2'), (3, 'w3'), (4, 'w4')");
      s.execute(
          "INSERT INTO posts VALUES (1, 1, 5), (2, 1, 6), (3, 1, 7), (4, 2, 8), (5, 2, 9), (6, 3, 1)");
      s.execute("CREATE TABLE vault (id int PRIMARY KEY, owner text NOT NULL)");
      s.execute("ALTER TABLE vault ENABLE ROW LEVEL SECURITY");
      s.execute("CREATE POLICY own_vault ON vault USING (owner = current_user)");
      s.execute("INSERT INTO vault VALUES (1, '" + roleA + "'), (2, '" + roleB + "')");
      s.execute("CREATE TABLE vault_share (id int PRIMARY KEY, grantee text NOT NULL)");
      s.execute("CREATE TABLE two_phase (id int PRIMARY KEY, score int NOT NULL)");
      s.execute("INSERT INTO two_phase VALUES (1, 10), (2, 20), (3, 30)");
      s.execute(
          "CREATE TABLE tags (board int, slug text, weight int NOT NULL, PRIMARY KEY (board, slug))");
      s.execute("INSERT INTO tags VALUES (1, 'a', 10), (1, 'b', 20), (1, 'c', 5), (2, 'a', 99)");
      s.execute("CREATE TABLE fallback_rows (slug text PRIMARY KEY, v int NOT NULL)");
      // Out of line and uncompressed: an UPDATE that leaves the long key alone sends it unchanged.
      s.execute("ALTER TABLE fallback_rows ALTER COLUMN slug SET STORAGE EXTERNAL");
      s.execute(
          "INSERT INTO fallback_rows SELECT 's' || lpad(g::text, 2, '0'), g FROM generate_series(1, 30) g");
      s.execute("INSERT INTO fallback_rows VALUES (repeat('k', 2400), 0)");
      s.execute("CREATE TABLE board_a (id int PRIMARY KEY, points int NOT NULL)");
      s.execute("CREATE TABLE board_b (id int PRIMARY KEY, points int NOT NULL)");
      s.execute("INSERT INTO board_a VALUES (1, 10), (2, 20), (3, 30)");
      s.execute("INSERT INTO board_b VALUES (1, 300), (2, 200), (3, 100)");
      s.execute("CREATE VIEW board AS SELECT id, points FROM board_a");
      s.execute("CREATE TABLE fn_board (id int PRIMARY KEY, points int NOT NULL)");
      s.execute("INSERT INTO fn_board VALUES (1, 10), (2, 20), (3, 30)");
      s.execute(
          "CREATE FUNCTION public.cq_boost(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1'");
      // An enum, a prefix operator and a cast, each swapped by DDL alone in
      // anEnumAnOperatorAndACastChangedByDdlAreReadAgain: both functions of each exist from here.
      s.execute("CREATE TYPE public.cq_mood AS ENUM ('low', 'high')");
      s.execute(
          "CREATE TABLE mood_board (id int PRIMARY KEY, mood public.cq_mood NOT NULL, points int NOT NULL)");
      s.execute("INSERT INTO mood_board VALUES (1, 'low', 10), (2, 'high', 20), (3, 'high', 30)");
      s.execute(
          "CREATE FUNCTION public.cq_up(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1'");
      s.execute(
          "CREATE FUNCTION public.cq_down(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT -$1'");
      s.execute("CREATE OPERATOR public.#^ (RIGHTARG = int, FUNCTION = public.cq_up)");
      s.execute(
          "CREATE FUNCTION public.cq_low_first(public.cq_mood) RETURNS int LANGUAGE sql IMMUTABLE"
              + " AS $$SELECT CASE WHEN $1 = 'low' THEN 1 ELSE 2 END$$");
      s.execute(
          "CREATE FUNCTION public.cq_low_last(public.cq_mood) RETURNS int LANGUAGE sql IMMUTABLE"
              + " AS $$SELECT CASE WHEN $1 = 'low' THEN 2 ELSE 1 END$$");
      s.execute(
          "CREATE CAST (public.cq_mood AS int) WITH FUNCTION public.cq_low_first(public.cq_mood)");
      s.execute("CREATE TABLE gauges (id int PRIMARY KEY, reading numeric, level float8)");
      s.execute("CREATE TABLE standings (id int PRIMARY KEY, score int NOT NULL)");
      s.execute("CREATE TABLE filtered (id int PRIMARY KEY, v int)");
      s.execute("INSERT INTO standings SELECT i, i * 10 FROM generate_series(1, 5) i");
      s.execute("CREATE TABLE grouped (id int PRIMARY KEY, k int NOT NULL, o int NOT NULL)");
      s.execute("ALTER TABLE grouped REPLICA IDENTITY FULL");
      s.execute("INSERT INTO grouped VALUES (1, 1, 1), (2, 2, 5), (3, 2, 5)");
      s.execute(
          "INSERT INTO gauges VALUES (1, 5, 5), (2, 'NaN', 'NaN'), (3, 'Infinity', 'Infinity'),"
              + " (4, '-Infinity', '-Infinity'), (5, 10.25, 10.25)");
      for (String role : List.of(roleA, roleB)) {
        s.execute(
            "GRANT SELECT ON items, nodes, edges, unrelated, unpublished, secrets, tags, gauges, board,"
                + " standings, grouped, filtered,"
                + " fallback_rows,"
                + " board_a, board_b, fn_board, mood_board, ranked, two_phase,"
                + " authors,"
                + " posts, vault, vault_share TO "
                + role);
      }
      s.execute(
          "CREATE PUBLICATION cq_pub FOR TABLE items, nodes, edges, unrelated, secrets, tags, gauges, board_a,"
              + " standings, grouped, filtered WHERE (id > 0),"
              + " fallback_rows,"
              + " board_b, fn_board, mood_board, ranked,"
              + " two_phase,"
              + " authors, posts, vault, vault_share");
      // Tenant A: scores 10..60 (ids 1..6); tenant B: scores 15..65 (ids 101..106).
      for (int i = 1; i <= 6; i++) {
        s.execute(
            "INSERT INTO items VALUES ("
                + i
                + ", '"
                + roleA
                + "', "
                + (i * 10)
                + ", 'a"
                + i
                + "')");
        s.execute(
            "INSERT INTO items VALUES ("
                + (100 + i)
                + ", '"
                + roleB
                + "', "
                + (i * 10 + 5)
                + ", 'b"
                + i
                + "')");
      }
      // A path graph 1-2-3-4-5 plus 1-6.
      for (int i = 1; i <= 8; i++) {
        s.execute("INSERT INTO nodes VALUES (" + i + ", 'n" + i + "')");
      }
      s.execute("INSERT INTO edges VALUES (1,2),(2,3),(3,4),(4,5),(1,6)");
    }
    Map<String, Object> m = new java.util.HashMap<>();
    m.put("weir.admin-token", ADMIN);
    m.put("weir.pipelines.cq.slot", "cq_slot_" + suffix);
    m.put("weir.pipelines.cq.publications", List.of("cq_pub"));
    m.put("weir.pipelines.cq.sink.type", "continuous");
    m.put("weir.continuous.refresh", "200ms");
    // Small, so that one statement exceeds it (no other test changes more than 6 rows at once).
    m.put("weir.continuous.affected-key-limit", 20);
    m.put("weir.continuous.scopes.tenant_a.user", roleA);
    m.put("weir.continuous.scopes.tenant_a.password", "pw-a-" + suffix);
    m.put("weir.continuous.scopes.tenant_b.user", roleB);
    m.put("weir.continuous.scopes.tenant_b.password", "pw-b-" + suffix);
    config =
        ConfigFactory.load(
            ConfigFactory.parseMap(m)
                .withFallback(db.config())
                .withFallback(ConfigFactory.defaultApplication()));
    node = TestNodes.start(config);
    base = "http://127.0.0.1:" + node.httpPort();
    awaitPipelineRunning();
    HttpResponse<String> created =
        call("POST", "/admin/principals", ADMIN, "{\"id\":\"alice-" + suffix + "\"}");
    assertThat(created.statusCode()).as("the principal should be created").isEqualTo(201);
    aliceToken = json.readTree(created.body()).get("token").asText();
    assertThat(
            call(
                    "POST",
                    "/admin/principals/alice-" + suffix + "/grants",
                    ADMIN,
                    "{\"collection\":\"tenant_a\",\"grant\":\"ContinuousQuery\"}")
                .statusCode())
        .isEqualTo(200);
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
        s.execute("DROP ROLE IF EXISTS " + roleA);
        s.execute("DROP ROLE IF EXISTS " + roleB);
      }
    }
  }

  // ---- tests ----

  @Test
  void registrationBodiesAreReadStrictly() throws Exception {
    assertError(call("POST", "/v1/continuous", ADMIN, "{"), 400, "malformed-json");
    assertError(
        call("POST", "/v1/continuous", ADMIN, "{\"scope\":\"tenant_a\",\"scope\":\"tenant_b\"}"),
        400,
        "malformed-json");
    assertError(call("POST", "/v1/continuous", ADMIN, "[]"), 400, "bad-request");
    HttpResponse<String> unknown =
        call("POST", "/v1/continuous", ADMIN, "{\"scope\":\"tenant_a\",\"what\":1}");
    assertError(unknown, 400, "bad-request");
    assertThat(json.readTree(unknown.body()).get("message").asText())
        .as("the unknown field is named")
        .startsWith("unknown field what");
    assertError(
        call("POST", "/v1/continuous", ADMIN, "{\"sql\":\"" + "x".repeat(70_000) + "\"}"),
        400,
        "bad-request");
  }

  @Test
  void registrationErrorsAreTyped() throws Exception {
    assertError(
        register("tenant_a", TOP3 + " LIMIT 3", "[\"id\"]", "score", 3, "{}"),
        400,
        "query-not-allowed");
    assertError(
        register(
            "tenant_a", "SELECT id, row_number() OVER () FROM items", "[\"id\"]", "id", 3, "{}"),
        400,
        "query-not-allowed");
    assertError(
        register("tenant_a", "SELECT id FROM items; DELETE FROM items", "[\"id\"]", "id", 3, "{}"),
        400,
        "query-not-allowed");
    assertError(
        register(
            "tenant_a", "SELECT set_config('role', 'x', true) AS id", "[\"id\"]", "id", 3, "{}"),
        400,
        "query-not-allowed");
    // Volatile calls are refused by the plan check (the text check does not know random()).
    assertError(
        register("tenant_a", "SELECT id, random() AS r FROM items", "[\"id\"]", "id", 3, "{}"),
        400,
        "query-not-allowed");
    assertError(
        register("tenant_a", "SELECT \"pg_advisory_lock\"(1) AS id", "[\"id\"]", "id", 3, "{}"),
        400,
        "query-not-allowed");
    assertError(
        register("tenant_a", "SELECT id FROM no_such_table", "[\"id\"]", "id", 3, "{}"),
        400,
        "invalid-query");
    assertError(
        register("tenant_a", "SELECT id FRM items", "[\"id\"]", "id", 3, "{}"),
        400,
        "invalid-query");
    assertError(register("tenant_a", TOP3, "[\"nope\"]", "score", 3, "{}"), 400, "unknown-column");
    assertError(register("tenant_a", TOP3, "[\"id\"]", "nope", 3, "{}"), 400, "unknown-column");
    assertError(
        register(
            "tenant_a",
            TOP3 + " WHERE score > :min",
            "[\"id\"]",
            "score",
            3,
            "{\"min\":\"not-a-number\"}"),
        400,
        "invalid-parameter");
    assertError(
        register("tenant_a", TOP3 + " WHERE score > :min", "[\"id\"]", "score", 3, "{}"),
        400,
        "invalid-parameter");
    assertError(
        register("tenant_a", TOP3, "[\"id\"]", "score", 3, "{\"unused\":1}"),
        400,
        "invalid-parameter");
    assertError(
        register("tenant_a", TOP3 + " WHERE score > :min", "[\"id\"]", "score", 3, "{\"min\":[1]}"),
        400,
        "invalid-parameter");
    assertError(
        register("no_such_scope", TOP3, "[\"id\"]", "score", 3, "{}"), 400, "unknown-scope");
    assertError(
        register("tenant_a", "SELECT id FROM unpublished", "[\"id\"]", "id", 3, "{}"),
        400,
        "table-not-published");
    // Published only under a row filter: an insert outside it would never arrive.
    assertError(
        register("tenant_a", "SELECT id, v FROM filtered", "[\"id\"]", "id", 3, "{}"),
        400,
        "table-not-published");
    assertError(
        register("tenant_a", "SELECT tenant AS id FROM items", "[\"id\"]", "id", 3, "{}"),
        400,
        "bad-request");
    assertError(register("tenant_a", TOP3, "[\"id\"]", "score", 0, "{}"), 400, "bad-request");
    // Alice holds ContinuousQuery on tenant_a only.
    assertError(
        registerAs(aliceToken, "tenant_b", TOP3, "[\"id\"]", "score", 3, "{}"), 403, "forbidden");
  }

  @Test
  void sameRegistrationGetsTheSameIdAndScopesNeverShare() throws Exception {
    HttpResponse<String> first =
        registerAs(
            aliceToken,
            "tenant_a",
            TOP3 + " WHERE score >= :min",
            "[\"id\"]",
            "score",
            2,
            "{\"min\": 0}");
    HttpResponse<String> again =
        registerAs(
            aliceToken,
            "tenant_a",
            TOP3 + " WHERE score >= :min",
            "[\"id\"]",
            "score",
            2,
            "{\"min\": 0}");
    HttpResponse<String> otherScope =
        register("tenant_b", TOP3 + " WHERE score >= :min", "[\"id\"]", "score", 2, "{\"min\": 0}");
    HttpResponse<String> otherParams =
        registerAs(
            aliceToken,
            "tenant_a",
            TOP3 + " WHERE score >= :min",
            "[\"id\"]",
            "score",
            2,
            "{\"min\": 1}");
    assertThat(first.statusCode()).as(first.body()).isEqualTo(201);
    assertThat(again.statusCode()).as("a repeated registration is not a new one").isEqualTo(200);
    String id = json.readTree(first.body()).get("id").asText();
    assertThat(json.readTree(again.body()).get("id").asText()).isEqualTo(id);
    assertThat(json.readTree(otherScope.body()).get("id").asText())
        .as("another scope is another subscription")
        .isNotEqualTo(id);
    assertThat(json.readTree(otherParams.body()).get("id").asText())
        .as("other parameters are another subscription")
        .isNotEqualTo(id);
    // Alice may not read tenant_b's subscription.
    assertThat(
            call(
                    "GET",
                    "/v1/continuous/"
                        + json.readTree(otherScope.body()).get("id").asText()
                        + "/status",
                    aliceToken,
                    null)
                .statusCode())
        .isEqualTo(403);

    // Row-level security: each scope's login sees its own tenant only.
    try (Sse a = open(id, null);
        Sse b = open(json.readTree(otherScope.body()).get("id").asText(), null)) {
      JsonNode initialA = a.next("InitialResult");
      JsonNode initialB = b.next("InitialResult");
      assertThat(tenants(initialA)).as("scope A sees tenant A's rows only").containsOnly(roleA);
      assertThat(tenants(initialB)).as("scope B sees tenant B's rows only").containsOnly(roleB);
      assertThat(ids(initialA)).containsExactly(6, 5);
      assertThat(ids(initialB)).containsExactly(106, 105);
    }
  }

  @Test
  void changesBecomeEventsWithTailDisplacement() throws Exception {
    String resumeAfter;
    String id =
        created(register("tenant_a", TOP3 + " WHERE score < 1000", "[\"id\"]", "score", 3, "{}"));
    try (Sse sse = open(id, null)) {
      JsonNode initial = sse.next("InitialResult");
      assertThat(ids(initial)).containsExactly(6, 5, 4);
      long seq = initial.get("sequence").asLong();

      // A new leader enters; the tail (4) is displaced.
      sql("INSERT INTO items VALUES (7, '" + roleA + "', 55, 'a7')");
      JsonNode removed = sse.next("RowRemoved");
      resumeAfter = removed.get("_id").asText();
      assertThat(removed.get("key").get(0).asInt()).isEqualTo(4);
      JsonNode added = sse.next("RowAdded");
      assertThat(added.get("key").get(0).asInt()).isEqualTo(7);
      assertThat(added.get("position").asInt()).as("55 ranks between 60 and 50").isEqualTo(1);
      assertThat(added.get("sequence").asLong()).isGreaterThan(seq);

      // An in-place change.
      sql("UPDATE items SET name = 'renamed' WHERE id = 6");
      JsonNode updated = sse.next("RowUpdated");
      assertThat(updated.get("key").get(0).asInt()).isEqualTo(6);
      assertThat(updated.get("row").get("name").asText()).isEqualTo("renamed");

      // A rank change among kept rows.
      sql("UPDATE items SET score = 99 WHERE id = 5");
      sse.next("RowUpdated");
      JsonNode reordered = sse.next("ResultReordered");
      assertThat(reordered.get("keys").toString()).isEqualTo("[[5],[6],[7]]");

      // A visible row is deleted: the next one from below enters.
      sql("DELETE FROM items WHERE id = 7");
      assertThat(sse.next("RowRemoved").get("key").get(0).asInt()).isEqualTo(7);
      JsonNode refill = sse.next("RowAdded");
      assertThat(refill.get("key").get(0).asInt()).isEqualTo(4);
      assertThat(refill.get("position").asInt()).isEqualTo(2);

      // Tenant B's change is read (same table) but changes nothing for A.
      sql("UPDATE items SET score = 500 WHERE id = 101");
      // Resuming from the last event id replays nothing; a foreign id gets a reset and a fresh
      // result.
      // Scoped deltas: the new leader, the in-place change, the rank improvement and tenant B's row
      // (not visible to A: nothing changes); the deleted visible row needs a full read.
      JsonNode status = awaitStatus(id, st -> st.get("incrementalTransactions").asLong() >= 4);
      assertThat(status.get("state").asText()).isEqualTo("current");
      assertThat(status.get("fullReadsOnly").isNull())
          .as("the impact plan has a rule for items")
          .isTrue();
      assertThat(status.get("fallbacksByReason").get("visible-row-left").asLong()).isEqualTo(1);
      assertThat(status.get("fullRepairsByReason").get("fallback-visible-row-left").asLong())
          .isEqualTo(1);
      assertThat(status.get("authoritativeReads").asLong())
          .as("the initial read and the one fallback")
          .isEqualTo(2);
      assertThat(status.get("maintenanceMicros").get("count").asLong()).isEqualTo(5);
      assertThat(status.get("lastLsn").isNull()).isFalse();
    }
    // The event id is a signed replay token: resuming after the first removal replays what
    // followed.
    try (Sse resumed = open(id, resumeAfter)) {
      JsonNode added = resumed.next("RowAdded");
      assertThat(added.get("key").get(0).asInt()).isEqualTo(7);
      assertThat(resumed.next("RowUpdated").get("key").get(0).asInt()).isEqualTo(6);
    }
    // Anything else is refused (typed), and a token of another subscription is not accepted here.
    HttpRequest forged =
        HttpRequest.newBuilder(URI.create(base + "/v1/continuous/" + id + "/events"))
            .header("Authorization", "Bearer " + ADMIN)
            .header("Last-Event-ID", "0-1")
            .build();
    HttpResponse<String> refused = http.send(forged, HttpResponse.BodyHandlers.ofString());
    assertThat(refused.statusCode()).isEqualTo(400);
    assertThat(json.readTree(refused.body()).get("error").asText()).isEqualTo("invalid-token");
    // A padded replay token decodes to the genuine bytes but is not the token: refused too.
    HttpResponse<String> padded =
        http.send(
            HttpRequest.newBuilder(URI.create(base + "/v1/continuous/" + id + "/events"))
                .header("Authorization", "Bearer " + ADMIN)
                .header("Last-Event-ID", resumeAfter + "=")
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(padded.statusCode()).isEqualTo(400);
    assertThat(json.readTree(padded.body()).get("error").asText()).isEqualTo("invalid-token");
    String other =
        created(register("tenant_a", TOP3 + " WHERE score < 999", "[\"id\"]", "score", 3, "{}"));
    awaitStatus(other, st -> st.get("state").asText().equals("current"));
    HttpResponse<String> mismatch =
        http.send(
            HttpRequest.newBuilder(URI.create(base + "/v1/continuous/" + other + "/events"))
                .header("Authorization", "Bearer " + ADMIN)
                .header("Last-Event-ID", resumeAfter)
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(mismatch.statusCode()).isEqualTo(400);
    assertThat(json.readTree(mismatch.body()).get("error").asText()).isEqualTo("token-mismatch");

    // The session entity holds the materialised result its log describes (every event type above
    // applied): the same rows, byte for byte, as the session a fresh subscriber reads from memory.
    JsonNode durable =
        json.readTree(call("GET", "/v1/continuous/" + id + "/result", ADMIN, null).body());
    try (Sse fresh = open(id, null)) {
      JsonNode initial = fresh.next("InitialResult");
      assertThat(durable.get("sequence").asLong()).isEqualTo(initial.get("sequence").asLong());
      assertThat(durable.get("rows")).isEqualTo(initial.get("rows"));
      // The LSN the last logged event named; the session's own moves on with transactions that
      // changed nothing.
      assertThat(io.weir.protocol.Lsn.parse(durable.get("lsn").asText()))
          .isLessThanOrEqualTo(io.weir.protocol.Lsn.parse(initial.get("lsn").asText()));
      assertThat(ids(durable)).containsExactly(5, 6, 4);
    }
    assertError(
        call("GET", "/v1/continuous/cq_" + "f".repeat(32) + "/result", ADMIN, null),
        404,
        "not-found");
  }

  /**
   * Where the session is not maintained (here: the continuous pipeline stopped), streams are served
   * from the session entity and its journal, and go on receiving the session's events once it is
   * maintained again.
   */
  @Test
  void streamsAreServedFromTheJournalWhereTheSessionIsNotMaintained() throws Exception {
    String id =
        created(register("tenant_a", TOP3 + " WHERE score < 900", "[\"id\"]", "score", 3, "{}"));
    String firstId;
    long first;
    int top;
    try (Sse sse = open(id, null)) {
      JsonNode initial = sse.next("InitialResult");
      firstId = initial.get("_id").asText();
      first = initial.get("sequence").asLong();
      top = ids(initial).get(0);
      sql("UPDATE items SET name = 'followed-1' WHERE id = " + top);
      assertThat(sse.next("RowUpdated").get("sequence").asLong()).isEqualTo(first + 1);
    }
    assertThat(call("POST", "/admin/pipelines/cq/stop", ADMIN, null).statusCode()).isEqualTo(200);
    try {
      org.awaitility.Awaitility.await("the session is no longer maintained here")
          .atMost(WAIT)
          .ignoreExceptionsInstanceOf(java.io.IOException.class) // a poll that timed out
          .until(
              () ->
                  call("GET", "/v1/continuous/" + id + "/status", ADMIN, null).statusCode() == 503);
      JsonNode durable =
          json.readTree(call("GET", "/v1/continuous/" + id + "/result", ADMIN, null).body());
      try (Sse fresh = open(id, null);
          Sse resumed = open(id, firstId)) {
        JsonNode initial = fresh.next("InitialResult");
        assertThat(initial.get("sequence").asLong())
            .as("the entity's result at the log's last event")
            .isEqualTo(first + 1);
        assertThat(initial.get("rows")).isEqualTo(durable.get("rows"));
        assertThat(initial.get("rows").get(0).get("row").get("name").asText())
            .isEqualTo("followed-1");
        JsonNode replayed = resumed.next("RowUpdated");
        assertThat(replayed.get("sequence").asLong())
            .as("read back from the journal")
            .isEqualTo(first + 1);

        // Maintained again: the session's next events reach both followed streams, in sequence.
        assertThat(call("POST", "/admin/pipelines/cq/start", ADMIN, null).statusCode())
            .isEqualTo(200);
        awaitPipelineRunning();
        awaitStatus(id, st -> st.get("state").asText().equals("current"));
        sql("UPDATE items SET name = 'followed-2' WHERE id = " + top);
        JsonNode a = fresh.next("RowUpdated");
        JsonNode b = resumed.next("RowUpdated");
        assertThat(a.get("sequence").asLong())
            .isEqualTo(first + 2)
            .isEqualTo(b.get("sequence").asLong());
        assertThat(a.get("row").get("name").asText()).isEqualTo("followed-2");
      }
    } finally {
      call("POST", "/admin/pipelines/cq/start", ADMIN, null);
      awaitPipelineRunning();
    }
  }

  /**
   * A composite key with a text column: PostgreSQL casts the changed values back into result keys.
   */
  @Test
  void scopedDeltaWithACompositeTextKey() throws Exception {
    String id =
        created(
            register(
                "tenant_a",
                "SELECT board, slug, weight FROM tags WHERE board = :board",
                "[\"board\", \"slug\"]",
                "weight",
                2,
                "{\"board\": 1}"));
    try (Sse sse = open(id, null)) {
      JsonNode initial = sse.next("InitialResult");
      assertThat(initial.get("rows").toString())
          .contains("\"slug\":\"b\"")
          .contains("\"slug\":\"a\"");
      sql("UPDATE tags SET weight = 30 WHERE board = 1 AND slug = 'c'"); // a new leader displaces a
      assertThat(sse.next("RowRemoved").get("key").toString()).isEqualTo("[1,\"a\"]");
      JsonNode added = sse.next("RowAdded");
      assertThat(added.get("key").toString()).isEqualTo("[1,\"c\"]");
      assertThat(added.get("position").asInt()).isZero();
      sql("UPDATE tags SET weight = 1000 WHERE board = 2"); // another board: read, nothing changes
      // The key itself changes (old and new key affected). With an equal weight the tie would reach
      // the text key, which Java cannot order as the collation does: a full read. A better weight
      // decides.
      sql("UPDATE tags SET slug = 'bb', weight = 25 WHERE board = 1 AND slug = 'b'");
      assertThat(sse.next("RowRemoved").get("key").toString()).isEqualTo("[1,\"b\"]");
      assertThat(sse.next("RowAdded").get("key").toString()).isEqualTo("[1,\"bb\"]");
      JsonNode status = awaitStatus(id, st -> st.get("incrementalTransactions").asLong() >= 3);
      assertThat(status.get("fullReadsOnly").isNull()).isTrue();
      assertThat(status.get("authoritativeReads").asLong())
          .as("only the initial read")
          .isEqualTo(1);
      assertThat(status.get("fallbacksByReason").size()).isZero();
    }
  }

  /**
   * A changed row outside the result whose new score ranks after its last row is decided without a
   * read (ADR 0044); one that ranks before it is read and enters.
   */
  @Test
  void aRowRankingAfterTheResultNeedsNoRead() throws Exception {
    String id =
        created(
            register("tenant_a", "SELECT id, score FROM standings", "[\"id\"]", "score", 2, "{}"));
    try (Sse sse = open(id, null)) {
      assertThat(sse.next("InitialResult").get("rows").toString())
          .contains("\"score\":50")
          .contains("\"score\":40");
      sql("UPDATE standings SET score = 5 WHERE id = 1"); // was 10: outside, and stays behind 40
      JsonNode unread = awaitStatus(id, st -> st.get("unreadTransactions").asLong() == 1);
      assertThat(unread.get("authoritativeReads").asLong())
          .as("only the initial read")
          .isEqualTo(1);
      sql("UPDATE standings SET score = 45 WHERE id = 2"); // ranks before 40: read, and enters
      assertThat(sse.next("RowRemoved").get("key").toString()).isEqualTo("[4]");
      assertThat(sse.next("RowAdded").get("key").toString()).isEqualTo("[2]");
      JsonNode status = awaitStatus(id, st -> st.get("incrementalTransactions").asLong() == 2);
      assertThat(status.get("unreadTransactions").asLong()).isEqualTo(1);
    }
  }

  /**
   * A grouped row's values come from its whole group: deleting another row of a group outside the
   * result can let it in through HAVING, with values no change carried. Such a plan records no
   * order sources, and the transaction is read (review of ADR 0044).
   */
  @Test
  void aGroupAdmittedThroughHavingByADeleteIsRead() throws Exception {
    String id =
        created(
            register(
                "tenant_a",
                "SELECT k, o FROM grouped GROUP BY k, o HAVING count(*) = 1",
                "[\"k\"]",
                "o",
                1,
                "{}"));
    try (Sse sse = open(id, null)) {
      assertThat(sse.next("InitialResult").get("rows").toString()).contains("\"k\":1");
      sql("DELETE FROM grouped WHERE id = 3"); // group (2, 5) now has one row, and o = 5 leads
      assertThat(sse.next("RowRemoved").get("key").toString()).isEqualTo("[1]");
      assertThat(sse.next("RowAdded").get("key").toString()).isEqualTo("[2]");
      assertThat(awaitStatus(id, st -> true).get("unreadTransactions").asLong()).isZero();
    }
  }

  /**
   * numeric and float8 NaN and +/-Infinity are values like any other, ordered as PostgreSQL orders
   * them (NaN above every number): the registration reads them, and deltas keep the result equal to
   * the query's.
   */
  @Test
  void numericNaNAndInfinityAreValuesInOrder() throws Exception {
    for (String column : List.of("reading", "level")) {
      String id =
          created(
              register(
                  "tenant_a",
                  "SELECT id, " + column + " FROM gauges",
                  "[\"id\"]",
                  column,
                  3,
                  "{}"));
      try (Sse sse = open(id, null)) {
        assertThat(keys(sse.next("InitialResult")))
            .as("NaN, then +Infinity, then the largest number (%s)", column)
            .containsExactly(2, 3, 5);
      }
      JsonNode before = awaitStatus(id, st -> st.get("state").asText().equals("current"));
      sql("UPDATE gauges SET " + column + " = 'NaN' WHERE id = 4"); // a tie with 2 at the top
      sql("UPDATE gauges SET " + column + " = 7 WHERE id = 2");
      sql("UPDATE gauges SET " + column + " = '-Infinity' WHERE id = 3");
      awaitStatus(
          id,
          st ->
              st.get("relevantTransactions").asLong()
                  >= before.get("relevantTransactions").asLong() + 3);
      JsonNode status = awaitStatus(id, st -> st.get("state").asText().equals("current"));
      assertThat(status.get("repairPending").isNull())
          .as("no repair pending (%s): %s", column, status)
          .isTrue();
      List<Integer> expected = new ArrayList<>();
      try (Connection c = db.connect();
          Statement st = c.createStatement();
          ResultSet rs =
              st.executeQuery("SELECT id FROM gauges ORDER BY " + column + " DESC, id LIMIT 3")) {
        while (rs.next()) {
          expected.add(rs.getInt(1));
        }
      }
      try (Sse sse = open(id, null)) {
        assertThat(keys(sse.next("InitialResult")))
            .as("the maintained result equals the query's (%s)", column)
            .isEqualTo(expected);
      }
      sql(
          "UPDATE gauges SET reading = v.r::numeric, level = v.r::float8 FROM (VALUES (1, '5'),"
              + " (2, 'NaN'), (3, 'Infinity'), (4, '-Infinity'), (5, '10.25')) v(i, r) WHERE id = v.i");
    }
  }

  /**
   * A view redefined over another table (DDL, which never reaches the WAL): the session plans and
   * reads again, follows the new table and no longer the old one.
   */
  @Test
  void aViewRedefinedOverAnotherTableIsFollowed() throws Exception {
    String id =
        created(
            register("tenant_a", "SELECT id, points FROM board", "[\"id\"]", "points", 2, "{}"));
    try (Sse sse = open(id, null)) {
      assertThat(keys(sse.next("InitialResult"))).containsExactly(3, 2);
    }
    awaitStatus(id, st -> st.get("tables").toString().equals("[\"public.board_a\"]"));
    // Qualified: the test login is named like Weir's schema, which search_path lists first.
    sql("CREATE OR REPLACE VIEW public.board AS SELECT id, points FROM public.board_b");
    JsonNode replanned =
        awaitStatus(id, st -> st.get("tables").toString().equals("[\"public.board_b\"]"));
    assertThat(replanned.get("fullRepairsByReason").has("catalog-changed"))
        .as("read again for the catalog change: %s", replanned)
        .isTrue();
    try (Sse sse = open(id, null)) {
      assertThat(keys(sse.next("InitialResult"))).containsExactly(1, 2);
    }
    sql("UPDATE board_b SET points = 1000 WHERE id = 3"); // relevant now: a new leader
    sql("UPDATE board_a SET points = 5000 WHERE id = 1"); // the old table: unrelated now
    awaitKeys(id, "the result follows board_b", 3, 1);
  }

  /**
   * A function the query calls, redefined, and a column's type changed (DDL, which never reaches
   * the WAL): each time the session reads again ({@code catalog-changed}) and its result is the
   * query's under the new definition.
   */
  @Test
  void aRedefinedFunctionAndAChangedColumnTypeAreReadAgain() throws Exception {
    String id =
        created(
            register(
                "tenant_a",
                "SELECT id, public.cq_boost(points) AS score FROM fn_board",
                "[\"id\"]",
                "score",
                2,
                "{}"));
    try (Sse sse = open(id, null)) {
      assertThat(keys(sse.next("InitialResult"))).containsExactly(3, 2);
    }
    awaitStatus(id, st -> st.get("state").asText().equals("current"));
    long before = catalogReads(status(id));
    sql(
        "CREATE OR REPLACE FUNCTION public.cq_boost(int) RETURNS int LANGUAGE sql IMMUTABLE"
            + " AS 'SELECT -$1'");
    awaitStatus(id, st -> catalogReads(st) > before);
    awaitKeys(id, "the result follows the new function", 1, 2);
    long afterFunction = catalogReads(status(id));
    sql("ALTER TABLE fn_board ALTER COLUMN points TYPE smallint"); // cq_boost(int) still applies
    awaitStatus(id, st -> catalogReads(st) > afterFunction);
    sql("UPDATE fn_board SET points = -5 WHERE id = 3"); // boosted: 5, the new leader
    awaitKeys(id, "the result is the query's after the type change", 3, 1);
  }

  /**
   * Definitions that change a query's rows without a row change (issue 27): an enum value renamed,
   * an operator recreated over another function, a cast recreated over another function. Every
   * function exists before the registration, so only pg_enum, pg_operator and pg_cast change; each
   * must read the sessions again ({@code catalog-changed}) and their results follow.
   */
  @Test
  void anEnumAnOperatorAndACastChangedByDdlAreReadAgain() throws Exception {
    String enumId =
        created(
            register(
                "tenant_a",
                "SELECT id, mood::text AS mood, points FROM mood_board",
                "[\"id\"]",
                "points",
                2,
                "{}"));
    String operatorId =
        created(
            register(
                "tenant_a",
                "SELECT id, OPERATOR(public.#^) points AS score FROM mood_board",
                "[\"id\"]",
                "score",
                2,
                "{}"));
    String castId =
        created(
            register(
                "tenant_a",
                "SELECT id, mood::int * 100 + points AS score FROM mood_board",
                "[\"id\"]",
                "score",
                2,
                "{}"));
    for (String id : List.of(enumId, operatorId, castId)) {
      awaitStatus(id, st -> st.get("state").asText().equals("current"));
    }
    try (Sse sse = open(operatorId, null)) {
      assertThat(keys(sse.next("InitialResult"))).containsExactly(3, 2);
    }
    try (Sse sse = open(castId, null)) {
      assertThat(keys(sse.next("InitialResult"))).containsExactly(3, 2); // 230, 220, 110
    }

    long enumReads = catalogReads(status(enumId));
    sql("ALTER TYPE public.cq_mood RENAME VALUE 'high' TO 'top'");
    awaitStatus(enumId, st -> catalogReads(st) > enumReads);
    await("the enum's new label is in the result")
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(200))
        .untilAsserted(
            () -> {
              try (Sse sse = open(enumId, null)) {
                List<String> moods = new ArrayList<>();
                for (JsonNode r : sse.next("InitialResult").get("rows")) {
                  moods.add(r.get("row").get("mood").asText());
                }
                assertThat(moods).containsExactly("top", "top");
              }
            });

    long operatorReads = catalogReads(status(operatorId));
    sql(
        "BEGIN; DROP OPERATOR public.#^ (NONE, int);"
            + " CREATE OPERATOR public.#^ (RIGHTARG = int, FUNCTION = public.cq_down); COMMIT");
    awaitStatus(operatorId, st -> catalogReads(st) > operatorReads);
    awaitKeys(operatorId, "the result follows the operator's new function", 1, 2);

    long castReads = catalogReads(status(castId));
    sql(
        "BEGIN; DROP CAST (public.cq_mood AS int);"
            + " CREATE CAST (public.cq_mood AS int) WITH FUNCTION public.cq_low_last(public.cq_mood);"
            + " COMMIT");
    awaitStatus(castId, st -> catalogReads(st) > castReads);
    awaitKeys(castId, "the result follows the cast's new function", 1, 3); // 210, 130, 120
  }

  private static long catalogReads(JsonNode status) {
    return status.path("fullRepairsByReason").path("catalog-changed").asLong(0);
  }

  /**
   * The scoped delta's fallbacks, each a full read with the result kept exact and the reason
   * counted: more affected keys than {@code affected-key-limit} (budget-exceeded), a key column the
   * change does not carry (an unchanged TOAST value: incomplete-tuple), and a TRUNCATE.
   */
  @Test
  void tooManyKeysAnIncompleteTupleAndATruncateFallBackToAFullRead() throws Exception {
    String id =
        created(
            register("tenant_a", "SELECT slug, v FROM fallback_rows", "[\"slug\"]", "v", 3, "{}"));
    awaitStatus(id, st -> st.get("state").asText().equals("current"));
    String[][] steps = {
      {"budget-exceeded", "UPDATE fallback_rows SET v = v + 100 WHERE slug LIKE 's%'"},
      {"incomplete-tuple", "UPDATE fallback_rows SET v = 1000 WHERE length(slug) > 100"},
      {
        "truncate",
        "BEGIN; TRUNCATE fallback_rows; INSERT INTO fallback_rows VALUES ('t1', 7), ('t2', 9),"
            + " ('t3', 8), ('t4', 1); COMMIT"
      },
    };
    for (String[] step : steps) {
      String reason = step[0];
      sql(step[1]);
      JsonNode status =
          awaitStatus(id, st -> st.get("fallbacksByReason").path(reason).asLong() >= 1);
      assertThat(status.get("repairPending").isNull()).as("%s: %s", reason, status).isTrue();
      List<String> expected = new ArrayList<>();
      try (Connection c = db.connect();
          Statement st = c.createStatement();
          ResultSet rs =
              st.executeQuery("SELECT slug FROM fallback_rows ORDER BY v DESC LIMIT 3")) {
        while (rs.next()) {
          expected.add(rs.getString(1));
        }
      }
      await("after " + reason + " the result equals the query's")
          .atMost(WAIT)
          .pollInterval(Duration.ofMillis(200))
          .untilAsserted(
              () -> {
                List<String> got = new ArrayList<>();
                try (Sse sse = open(id, null)) {
                  for (JsonNode r : sse.next("InitialResult").get("rows")) {
                    got.add(r.get("row").get("slug").asText());
                  }
                }
                assertThat(got).isEqualTo(expected);
              });
    }
  }

  /** Waits until the result a new subscriber of {@code id} gets has these keys, in order. */
  private void awaitKeys(String id, String what, Integer... expected) {
    await(what)
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(200))
        .untilAsserted(
            () -> {
              try (Sse sse = open(id, null)) {
                assertThat(keys(sse.next("InitialResult"))).containsExactly(expected);
              }
            });
  }

  private static List<Integer> keys(JsonNode result) {
    List<Integer> ids = new ArrayList<>();
    for (JsonNode r : result.get("rows")) {
      ids.add(r.get("row").get("id").asInt());
    }
    return ids;
  }

  /**
   * Lookup rules: a table joined to the key table by an equality of plain integer columns has one,
   * and its changes are maintained by scoped deltas (the affected keys read from the key table); a
   * join on an expression or with an OR has none.
   */
  @Test
  void joinedTablesWithALookupRuleAreMaintainedByDeltas() throws Exception {
    String counts =
        created(
            register(
                "tenant_a",
                "SELECT a.id, a.name, count(p.id) AS posts FROM authors a"
                    + " LEFT JOIN posts p ON p.author_id = a.id GROUP BY a.id, a.name",
                "[\"id\"]",
                "posts",
                2,
                "{}"));
    String top =
        created(
            register(
                "tenant_a",
                "SELECT p.id, p.likes, a.name FROM posts p JOIN authors a ON a.id = p.author_id",
                "[\"id\"]",
                "likes",
                2,
                "{}"));
    try (Sse sse = open(counts, null);
        Sse likes = open(top, null)) {
      JsonNode initial = sse.next("InitialResult");
      assertThat(ids(initial)).as("author 1 has 3 posts, author 2 has 2").containsExactly(1, 2);
      assertThat(ids(likes.next("InitialResult"))).containsExactly(5, 4);
      // Author 3 gets 3 posts: it ties author 1 (the key orders it second) and displaces author 2.
      sql("INSERT INTO posts VALUES (7, 3, 2), (8, 3, 3)");
      assertThat(sse.next("RowRemoved").get("key").get(0).asInt()).isEqualTo(2);
      JsonNode added = sse.next("RowAdded");
      assertThat(added.get("key").get(0).asInt()).isEqualTo(3);
      assertThat(added.get("row").get("posts").asInt()).isEqualTo(3);
      // Author 2 (outside the result) loses a post: read through the lookup, nothing changes. For
      // `top` the deleted post was visible: a full read brings post 3 in.
      sql("DELETE FROM posts WHERE id = 4");
      assertThat(likes.next("RowRemoved").get("key").get(0).asInt()).isEqualTo(4);
      assertThat(likes.next("RowAdded").get("key").get(0).asInt()).isEqualTo(3);
      // A post moves from author 3 to 4 (old and new author both looked up): author 3 falls to 2
      // posts
      // and stays in the result, but behind the old tail, so the rank rule asks for a full read.
      sql("UPDATE posts SET author_id = 4 WHERE id = 6");
      JsonNode fell = sse.next("RowUpdated");
      assertThat(fell.get("key").get(0).asInt()).isEqualTo(3);
      assertThat(fell.get("row").get("posts").asInt()).isEqualTo(2);
      // An author renamed: the key table of `counts`, a lookup for `top` (its post 5 shows the
      // name).
      sql("UPDATE authors SET name = 'renamed' WHERE id = 2");
      JsonNode renamed = likes.next("RowUpdated");
      assertThat(renamed.get("key").get(0).asInt()).isEqualTo(5);
      assertThat(renamed.get("row").get("name").asText()).isEqualTo("renamed");
      JsonNode status =
          awaitStatus(
              counts,
              st ->
                  st.get("lookupTransactions").asLong() >= 2
                      && st.get("relevantTransactions").asLong() >= 4);
      assertThat(status.get("lookupTables").toString()).isEqualTo("[\"public.posts\"]");
      assertThat(status.get("fallbacksByReason").get("rank-boundary").asLong()).isEqualTo(1);
      assertThat(status.get("authoritativeReads").asLong())
          .as("the initial read and the rank fallback")
          .isEqualTo(2);
      JsonNode topStatus = awaitStatus(top, st -> st.get("lookupTransactions").asLong() >= 1);
      assertThat(topStatus.get("lookupTables").toString()).isEqualTo("[\"public.authors\"]");
      assertThat(topStatus.get("authoritativeReads").asLong())
          .as("the initial read and the visible row that left")
          .isEqualTo(2);
    }
    for (String sql :
        List.of(
            "SELECT p.id, p.likes, a.name FROM posts p JOIN authors a ON a.id = p.author_id + 0",
            "SELECT p.id, p.likes, a.name FROM posts p JOIN authors a ON a.id = p.author_id OR a.name = p.likes::text",
            // An equality inside another expression is not taken as a restriction (here it happens
            // to be one).
            "SELECT p.id, p.likes, a.name FROM posts p JOIN authors a ON COALESCE(a.id = p.author_id, false)")) {
      String id = created(register("tenant_a", sql, "[\"id\"]", "likes", 2, "{}"));
      JsonNode status = awaitStatus(id, st -> st.get("state").asText().equals("current"));
      assertThat(status.has("lookupTables")).as("no lookup rule for: %s", sql).isFalse();
    }
    // The key table on the nullable side of an outer join: rows without a post have a null key and
    // come and go with authors, which no post key names; no impact plan at all.
    String outer =
        created(
            register(
                "tenant_a",
                "SELECT p.id, p.likes, a.name FROM authors a LEFT JOIN posts p"
                    + " ON p.author_id = a.id",
                "[\"id\"]",
                "likes",
                2,
                "{}"));
    assertThat(
            awaitStatus(outer, st -> st.get("state").asText().equals("current"))
                .get("fullReadsOnly")
                .asText())
        .isEqualTo("no-impact-plan");
  }

  /**
   * A policy added after registration that reads another table: the query is planned again, its
   * table set now holds that table, and a change of it (which never touches the key table) reaches
   * the result through a full read.
   */
  @Test
  void aPolicyReadingAnotherTableAddedLaterIsFollowed() throws Exception {
    String id =
        created(register("tenant_a", "SELECT id, owner FROM vault", "[\"id\"]", "id", 5, "{}"));
    try (Sse sse = open(id, null)) {
      assertThat(ids(sse.next("InitialResult"))).containsExactly(1);
      sql(
          "CREATE POLICY shared ON vault USING (EXISTS (SELECT 1 FROM vault_share s WHERE s.id = vault.id"
              + " AND s.grantee = current_user))");
      JsonNode replanned =
          awaitStatus(id, st -> "plan-changed".equals(st.path("fullReadsOnly").asText()));
      assertThat(replanned.get("tables").toString())
          .isEqualTo("[\"public.vault\",\"public.vault_share\"]");
      sql(
          "INSERT INTO vault_share VALUES (2, '"
              + roleA
              + "')"); // row 2 (B's) is now shared with A
      JsonNode added = sse.next("RowAdded");
      assertThat(added.get("key").get(0).asInt()).isEqualTo(2);
      // A policy reading a table the pipeline does not publish: its changes never arrive, so no
      // table set may call other transactions unrelated; every transaction counts.
      sql(
          "CREATE POLICY unseen ON vault USING (EXISTS (SELECT 1 FROM unpublished u WHERE u.id = vault.id))");
      JsonNode unknown = awaitStatus(id, st -> st.get("tables").isNull());
      assertThat(unknown.get("fullReadsOnly").asText()).isEqualTo("plan-changed");
    }
  }

  /**
   * Two-phase commit: a prepared transaction's changes reach the session only with its COMMIT
   * PREPARED (the slot decodes without two_phase, so they arrive then as an ordinary transaction
   * carrying every change) and are maintained like any other; a prepared transaction rolled back,
   * or still prepared, changes nothing.
   */
  @Test
  void twoPhaseTransactionsChangeTheResultOnlyWhenCommitted() throws Exception {
    String id =
        created(
            register("tenant_a", "SELECT id, score FROM two_phase", "[\"id\"]", "score", 2, "{}"));
    String rolledBack = "weir_rb_" + suffix;
    String committed = "weir_cp_" + suffix;
    try (Sse sse = open(id, null);
        Connection c = db.connect();
        Statement s = c.createStatement()) {
      try {
        assertThat(ids(sse.next("InitialResult"))).containsExactly(3, 2);
        s.execute("BEGIN");
        s.execute("UPDATE two_phase SET score = 100 WHERE id = 1");
        s.execute("PREPARE TRANSACTION '" + rolledBack + "'");
        s.execute("ROLLBACK PREPARED '" + rolledBack + "'");
        s.execute("BEGIN");
        s.execute("UPDATE two_phase SET score = 200 WHERE id = 1");
        s.execute("PREPARE TRANSACTION '" + committed + "'");
        // A committed transaction after both: its event comes first, and nothing of the rolled-back
        // or the still prepared one came before it.
        sql("UPDATE two_phase SET score = 25 WHERE id = 2");
        JsonNode updated = sse.next("RowUpdated");
        assertThat(updated.get("key").get(0).asInt()).isEqualTo(2);
        assertThat(updated.get("row").get("score").asInt()).isEqualTo(25);
        s.execute("COMMIT PREPARED '" + committed + "'");
        assertThat(sse.next("RowRemoved").get("key").get(0).asInt())
            .as("2 falls out of the top 2")
            .isEqualTo(2);
        JsonNode added = sse.next("RowAdded");
        assertThat(added.get("key").get(0).asInt()).isEqualTo(1);
        assertThat(added.get("position").asInt()).isZero();
        JsonNode status = awaitStatus(id, st -> st.get("incrementalTransactions").asLong() >= 2);
        assertThat(status.get("authoritativeReads").asLong())
            .as("scoped deltas only, after the initial read")
            .isEqualTo(1);
        assertThat(status.get("fallbacksByReason").size()).isZero();
      } finally {
        // A prepared transaction left behind would outlive the test and block dropping its
        // database.
        try (java.sql.ResultSet rs =
            s.executeQuery(
                "SELECT gid FROM pg_prepared_xacts WHERE gid IN ('"
                    + rolledBack
                    + "', '"
                    + committed
                    + "')")) {
          List<String> left = new java.util.ArrayList<>();
          while (rs.next()) {
            left.add(rs.getString(1));
          }
          for (String gid : left) {
            s.execute("ROLLBACK PREPARED '" + gid + "'");
          }
        }
      }
    }
  }

  @Test
  void transactionsOnUnrelatedTablesOnlyCount() throws Exception {
    String id =
        created(register("tenant_a", "SELECT id, label FROM nodes", "[\"id\"]", "id", 3, "{}"));
    JsonNode before = awaitStatus(id, s -> s.get("state").asText().equals("current"));
    sql("INSERT INTO unrelated VALUES (1, 1)");
    sql("UPDATE unrelated SET v = 2 WHERE id = 1");
    JsonNode after =
        awaitStatus(
            id,
            s ->
                s.get("unrelatedTransactions").asLong()
                    >= before.get("unrelatedTransactions").asLong() + 2);
    assertThat(after.get("authoritativeReads").asLong())
        .as("a transaction on a table the query does not read costs no read")
        .isEqualTo(before.get("authoritativeReads").asLong());
    assertThat(after.get("tables").toString()).isEqualTo("[\"public.nodes\"]");
  }

  @Test
  void recursiveKHopNeighbourhood() throws Exception {
    String sql =
        "WITH RECURSIVE hop(node, depth) AS ("
            + " SELECT :start::int, 0"
            + " UNION SELECT e.dst, h.depth + 1 FROM edges e JOIN hop h ON e.src = h.node WHERE h.depth < :k)"
            + " SELECT n.id, n.label, min(h.depth) AS depth FROM hop h JOIN nodes n ON n.id = h.node"
            + " WHERE h.depth > 0 GROUP BY n.id, n.label";
    String id =
        created(register("tenant_a", sql, "[\"id\"]", "depth", 10, "{\"start\": 1, \"k\": 2}"));
    try (Sse sse = open(id, null)) {
      JsonNode initial = sse.next("InitialResult");
      assertThat(ids(initial))
          .as("2 hops from node 1: 2 and 6 at depth 1, 3 at depth 2")
          .containsExactly(2, 6, 3);
      sql("INSERT INTO edges VALUES (6, 7)");
      JsonNode added = sse.next("RowAdded");
      assertThat(added.get("key").get(0).asInt()).isEqualTo(7);
      assertThat(added.get("row").get("depth").asInt()).isEqualTo(2);
      sql("DELETE FROM edges WHERE src = 1 AND dst = 2");
      // 2 and 3 leave the neighbourhood.
      List<Integer> removed = new ArrayList<>();
      removed.add(sse.next("RowRemoved").get("key").get(0).asInt());
      removed.add(sse.next("RowRemoved").get("key").get(0).asInt());
      assertThat(removed).containsExactlyInAnyOrder(2, 3);
    }
    JsonNode status = status(id);
    assertThat(status.get("tables").toString()).isEqualTo("[\"public.edges\",\"public.nodes\"]");
    assertThat(status.get("fullReadsOnly").asText())
        .as("a recursive CTE has no impact rule")
        .isEqualTo("no-impact-plan");
    assertThat(status.get("incrementalTransactions").asLong()).isZero();
  }

  /**
   * Runs first and leaves an unreadable registration behind (as another version might write it):
   * the others are still maintained, and the revocation test that runs last still sees its stream
   * end.
   */
  @Test
  @org.junit.jupiter.api.Order(1)
  void anUnreadableRegistrationDoesNotStopTheOthers() throws Exception {
    sql(
        "INSERT INTO weir.continuous_query (id, scope, login_role, definition, created_by)"
            + " VALUES ('cq_"
            + "0".repeat(32)
            + "', 'tenant_a', 'nobody', '[\"not a definition\"]', 'test')");
    String id =
        created(
            register(
                "tenant_b",
                "SELECT id, score FROM items WHERE score > 10",
                "[\"id\"]",
                "score",
                2,
                "{}"));
    awaitStatus(id, s -> s.get("state").asText().equals("current"));
    Thread.sleep(2 * 1000); // two refreshes over the unreadable row
    try (Sse sse = open(id, null)) {
      assertThat(sse.next("InitialResult")).isNotNull();
    }
  }

  /**
   * A maintenance that fails with an error nothing catches (an evaluator missing a class) fails the
   * delivery; the sink delivers the transaction again, and the session maintains it then instead of
   * taking it for one it had handled.
   */
  @Test
  void aTransactionWhoseMaintenanceFailedIsMaintainedWhenDeliveredAgain() throws Exception {
    String id = created(registerWith("ranked-fails-once", null));
    awaitStatus(id, st -> st.get("state").asText().equals("current"));
    int thrown = TestEvaluators.FailsOnce.THROWN.get();
    TestEvaluators.FailsOnce.ARMED.set(true);
    sql(
        "UPDATE ranked SET score = (SELECT max(score) + 1000 FROM ranked)"
            + " WHERE id = (SELECT min(id) FROM ranked)");
    await("the evaluator was called and failed")
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(50))
        .until(() -> TestEvaluators.FailsOnce.THROWN.get() != thrown);
    await("the redelivered transaction is maintained")
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(200))
        .untilAsserted(() -> assertRankedResultsCurrent(id));
    assertThat(status(id).get("repairPending").isNull()).isTrue();
  }

  @Test
  void aCustomEvaluatorReplacesTheScopedDeltaUnderTheSameRules() throws Exception {
    assertError(registerWith("no-such", null), 400, "bad-request");
    assertError(registerWith("covers-nothing", null), 400, "query-not-allowed");
    assertError(registerWith("ranked-by-id", "full"), 400, "bad-request");
    String id = created(registerWith("ranked-by-id", null));
    String broken = created(registerWith("broken-shape", null));
    assertThat(broken).as("the evaluator is part of the identity").isNotEqualTo(id);
    awaitStatus(id, st -> st.get("state").asText().equals("current"));
    awaitStatus(broken, st -> st.get("state").asText().equals("current"));

    int transactions = 40;
    randomRankedTransactions(new java.util.Random(42), transactions);
    JsonNode status =
        awaitStatus(id, st -> st.get("relevantTransactions").asLong() >= transactions);
    JsonNode brokenStatus =
        awaitStatus(broken, st -> st.get("relevantTransactions").asLong() >= transactions);
    assertRankedResultsCurrent(id, broken);
    assertThat(status.get("evaluator").asText()).isEqualTo("ranked-by-id");
    assertThat(status.get("evaluatorTransactions").asLong())
        .as("deltas computed by the evaluator")
        .isPositive();
    assertThat(status.get("fallbacksByReason").has("evaluator-failed")).isFalse();
    // How many deltas have no row left depends on how transactions were grouped into deliveries
    // (half of them, or a few more, on a loaded machine with this seed): never all of them.
    assertThat(brokenStatus.get("evaluatorTransactions").asLong())
        .as("only deltas whose keys have no row left")
        .isLessThan(brokenStatus.get("relevantTransactions").asLong());
    assertThat(brokenStatus.get("fallbacksByReason").path("evaluator-failed").asLong())
        .as("rows of another shape are never merged: a full read instead")
        .isPositive();
    System.out.printf(
        "continuous-evaluator: transactions=%d evaluated=%d fallbacks=%s full-reads=%d;"
            + " broken evaluator: fallbacks=%s%n",
        transactions,
        status.get("evaluatorTransactions").asLong(),
        status.get("fallbacksByReason"),
        status.get("authoritativeReads").asLong(),
        brokenStatus.get("fallbacksByReason"));
  }

  @Test
  void aTrustedProjectorMaintainsWithoutReadsOnlyWhileItsConditionsHold() throws Exception {
    assertError(registerRanked("projector", "no-such"), 400, "bad-request");
    TestEvaluators.RankedProjector.fingerprint = "written-for-another-plan";
    assertError(registerRanked("projector", "ranked-projector"), 400, "query-not-allowed");
    // The author copies the plan fingerprint from a session of the same query.
    String plain = created(registerRanked(null, null));
    String fingerprint =
        awaitStatus(plain, st -> st.has("planFingerprint")).get("planFingerprint").asText();
    TestEvaluators.RankedProjector.fingerprint = fingerprint;
    String id = created(registerRanked("projector", "ranked-projector"));
    assertThat(id).as("the projector is part of the identity").isNotEqualTo(plain);
    JsonNode before = awaitStatus(id, st -> st.get("state").asText().equals("current"));
    long reads = before.get("authoritativeReads").asLong();

    int transactions = 40;
    randomRankedTransactions(new java.util.Random(7), transactions);
    long relevant = before.get("relevantTransactions").asLong() + transactions;
    JsonNode status = awaitStatus(id, st -> st.get("relevantTransactions").asLong() >= relevant);
    assertRankedResultsCurrent(id, plain);
    assertThat(status.get("projectedTransactions").asLong())
        .as("decided from the tuples: %s", status)
        .isPositive();
    assertThat(status.get("fallbacksByReason").has("projector-uncertain")).isFalse();
    long projected = status.get("projectedTransactions").asLong();

    // A change whose new image lacks a value (an unchanged TOASTed label) is not given to the
    // projector: the scoped delta reads the row instead. (Changing the replica identity itself
    // halts the pipeline as an incompatible schema change.)
    sql(
        "UPDATE ranked SET label = (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) g)"
            + " WHERE id = (SELECT min(id) FROM ranked)");
    sql("UPDATE ranked SET score = score + 1 WHERE id = (SELECT min(id) FROM ranked)");
    JsonNode after = awaitStatus(id, st -> st.get("relevantTransactions").asLong() >= relevant + 2);
    assertThat(after.get("fallbacksByReason").path("projector-incomplete-tuple").asLong())
        .as("the second update's new image carries the label as unchanged TOAST: %s", after)
        .isEqualTo(1);
    assertThat(after.get("projectedTransactions").asLong()).isEqualTo(projected + 1);
    assertRankedResultsCurrent(id, plain);

    // A catalog change in the scope (here a privilege) voids the registration-time checks: the
    // session stops trusting the projector, and the scoped delta keeps the result.
    sql("REVOKE SELECT ON ranked FROM " + roleB);
    JsonNode off = awaitStatus(id, st -> st.path("projectorOff").isTextual());
    assertThat(off.get("projectorOff").asText()).isEqualTo("catalog-changed");
    sql("UPDATE ranked SET score = score + 3 WHERE id = (SELECT max(id) FROM ranked)");
    JsonNode later = awaitStatus(id, st -> st.get("relevantTransactions").asLong() >= relevant + 3);
    assertThat(later.get("projectedTransactions").asLong())
        .isEqualTo(off.get("projectedTransactions").asLong());
    assertRankedResultsCurrent(id, plain);
    System.out.printf(
        "continuous-projector: transactions=%d projected=%d full-reads=%d (before: %d) fallbacks=%s%n",
        transactions,
        projected,
        status.get("authoritativeReads").asLong(),
        reads,
        status.get("fallbacksByReason"));
  }

  private HttpResponse<String> registerRanked(String field, String name) throws Exception {
    return call("POST", "/v1/continuous", ADMIN, rankedBody(field, name).toString());
  }

  private ObjectNode rankedBody(String field, String name) {
    ObjectNode body = json.createObjectNode();
    body.put("scope", "tenant_a");
    body.put("sql", TestEvaluators.RANKED);
    body.putArray("keyColumns").add("id");
    body.putArray("orderBy").addObject().put("column", "score").put("direction", "desc");
    body.put("limit", 4);
    if (field != null) {
      body.put(field, name);
    }
    return body;
  }

  /**
   * Random single-statement transactions on {@code ranked}, each changing a row (PostgreSQL 15 does
   * not send empty ones).
   */
  private void randomRankedTransactions(java.util.Random random, int transactions)
      throws Exception {
    List<Integer> present = new ArrayList<>();
    try (Connection c = db.connect();
        Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT id FROM ranked")) {
      while (rs.next()) {
        present.add(rs.getInt(1));
      }
    }
    for (int t = 0; t < transactions; t++) {
      int op = random.nextInt(4);
      if (op == 0 || present.size() < 7) {
        int row = 1 + random.nextInt(20);
        sql(
            "INSERT INTO ranked VALUES ("
                + row
                + ", "
                + random.nextInt(200)
                + ", 'n')"
                + " ON CONFLICT (id) DO UPDATE SET score = excluded.score");
        if (!present.contains(row)) {
          present.add(row);
        }
        continue;
      }
      Integer row = present.get(random.nextInt(present.size()));
      switch (op) {
        case 1 -> {
          sql("DELETE FROM ranked WHERE id = " + row);
          present.remove(row);
        }
        case 2 -> sql("UPDATE ranked SET label = 'l" + t + "' WHERE id = " + row);
        default -> sql("UPDATE ranked SET score = " + random.nextInt(200) + " WHERE id = " + row);
      }
    }
  }

  /**
   * Each session's current result (a new stream's InitialResult) equals the full query's top 4,
   * once each has published what its last read found ({@link #awaitStatus} waits until settled).
   */
  private void assertRankedResultsCurrent(String... sessions) throws Exception {
    for (String session : sessions) {
      awaitStatus(session, st -> true);
    }
    List<List<Object>> expected = new ArrayList<>();
    try (Connection c = db.connect();
        Statement st = c.createStatement();
        ResultSet rs =
            st.executeQuery(TestEvaluators.RANKED + " ORDER BY score DESC, id LIMIT 4")) {
      while (rs.next()) {
        expected.add(java.util.Arrays.asList(rs.getInt(1), rs.getInt(2), rs.getString(3)));
      }
    }
    for (String session : sessions) {
      try (Sse sse = open(session, null)) {
        List<List<Object>> got = new ArrayList<>();
        for (JsonNode r : sse.next("InitialResult").get("rows")) {
          JsonNode row = r.get("row");
          got.add(
              java.util.Arrays.asList(
                  row.get("id").asInt(),
                  row.get("score").asInt(),
                  row.get("label").isNull() ? null : row.get("label").asText()));
        }
        assertThat(got)
            .as("the maintained result of %s equals the full query's", session)
            .isEqualTo(expected);
      }
    }
  }

  private HttpResponse<String> registerWith(String evaluator, String maintenance) throws Exception {
    if (maintenance == null) {
      return registerRanked("evaluator", evaluator);
    }
    ObjectNode body = rankedBody("evaluator", evaluator);
    body.put("maintenance", maintenance);
    return call("POST", "/v1/continuous", ADMIN, body.toString());
  }

  /**
   * Runs last: the other tests' sessions, deltas and full reads show in the node's Prometheus
   * metrics.
   */
  @Test
  @org.junit.jupiter.api.Order(Integer.MAX_VALUE)
  void metricsCountSessionsTransactionsFallbacksAndReads() throws Exception {
    HttpResponse<String> scrape = call("GET", "/metrics", ADMIN, null);
    assertThat(scrape.statusCode()).isEqualTo(200);
    Map<String, Double> series = new java.util.HashMap<>();
    scrape
        .body()
        .lines()
        .filter(l -> l.startsWith("weir_continuous_"))
        .forEach(
            l -> {
              int space = l.lastIndexOf(' ');
              series.put(l.substring(0, space), Double.parseDouble(l.substring(space + 1)));
            });
    assertThat(series.get("weir_continuous_sessions"))
        .as("sessions held now")
        .isGreaterThanOrEqualTo(1.0);
    assertThat(series.get("weir_continuous_full_reads_total{cause=\"initial\"}"))
        .isGreaterThanOrEqualTo(1.0);
    assertThat(series.get("weir_continuous_transactions_total{outcome=\"incremental\"}"))
        .isGreaterThanOrEqualTo(1.0);
    assertThat(series.get("weir_continuous_transactions_total{outcome=\"unrelated\"}"))
        .isGreaterThanOrEqualTo(1.0);
    assertThat(series.get("weir_continuous_rows_read_total")).isGreaterThan(0.0);
    for (String reason : ContinuousMetrics.FALLBACK_REASONS) {
      assertThat(series)
          .as("every fallback reason is a series from the start")
          .containsKey("weir_continuous_fallbacks_total{reason=\"" + reason + "\"}");
    }
    assertThat(String.join("\n", series.keySet()))
        .as("no query text, scope or role in a label")
        .doesNotContain("SELECT")
        .doesNotContain("tenant")
        .doesNotContain(roleA);
  }

  @Test
  void unregisterEndsTheSubscription() throws Exception {
    String query = "SELECT id, score FROM items WHERE score > 20";
    String id = created(register("tenant_b", query, "[\"id\"]", "score", 2, "{}"));
    awaitStatus(id, s -> s.get("state").asText().equals("current"));
    sql(
        "INSERT INTO items VALUES (190, '"
            + roleB
            + "', 100000, 'unregister')"); // a new leader: the log goes on
    awaitDurable(id, rows -> rows.contains(190));
    sql("DELETE FROM items WHERE id = 190");
    long last = awaitDurable(id, rows -> !rows.contains(190)).get("sequence").asLong();
    assertThat(call("DELETE", "/v1/continuous/" + id, ADMIN, null).statusCode()).isEqualTo(200);
    assertError(call("GET", "/v1/continuous/" + id + "/status", ADMIN, null), 404, "not-found");
    // The deleted registration's log is cut to its last entry ...
    org.awaitility.Awaitility.await("the deleted log is cut")
        .atMost(WAIT)
        .until(() -> journal(id).equals(List.of(last)));
    // ... so registering the same query again continues after it: no sequence is used twice.
    assertThat(created(register("tenant_b", query, "[\"id\"]", "score", 2, "{}"))).isEqualTo(id);
    assertThat(
            awaitStatus(id, s -> s.get("state").asText().equals("current"))
                .get("sequence")
                .asLong())
        .isEqualTo(last + 1);
    assertThat(journal(id)).containsExactly(last, last + 1);
  }

  /**
   * The durable result ({@code /result}) once its keys (first key column) satisfy {@code
   * condition}.
   */
  private JsonNode awaitDurable(String id, java.util.function.Predicate<List<Integer>> condition)
      throws Exception {
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (true) {
      HttpResponse<String> r = poll("GET", "/v1/continuous/" + id + "/result");
      if (r != null && r.statusCode() == 200) {
        JsonNode result = json.readTree(r.body());
        if (condition.test(ids(result))) {
          return result;
        }
      }
      assertThat(System.nanoTime())
          .as("the durable result should get there within %s", WAIT)
          .isLessThan(deadline);
      Thread.sleep(100);
    }
  }

  /** The replay sequences in subscription {@code id}'s journal (ADR 0025), in journal order. */
  private List<Long> journal(String id) throws Exception {
    List<Long> out = new ArrayList<>();
    try (Connection c = db.connect();
        Statement st = c.createStatement();
        ResultSet rs =
            st.executeQuery(
                "SELECT (convert_from(event_payload, 'UTF8')::jsonb->>'sequence')::bigint"
                    + " FROM weir.event_journal WHERE persistence_id = 'weir-continuous-session|"
                    + id
                    + "' ORDER BY sequence_number")) {
      while (rs.next()) {
        out.add(rs.getLong(1));
      }
    }
    return out;
  }

  @Test
  void aPolicyChangeWithoutAnyRowChangeRepairs() throws Exception {
    String id =
        created(register("tenant_a", "SELECT id, owner FROM secrets", "[\"id\"]", "id", 10, "{}"));
    try (Sse sse = open(id, null)) {
      assertThat(ids(sse.next("InitialResult")))
          .as("the policy shows scope A its own secret only")
          .containsExactly(1);
      sql("ALTER POLICY own_secret ON secrets USING (true)"); // catalog only: nothing reaches the
      // WAL stream
      JsonNode added = sse.next("RowAdded");
      assertThat(added.get("key").get(0).asInt()).isEqualTo(2);
    }
    assertThat(status(id).get("fullRepairsByReason").get("catalog-changed").asLong()).isPositive();
  }

  /** Runs second to last: Alice loses her grant. */
  @Test
  @org.junit.jupiter.api.Order(Integer.MAX_VALUE - 1)
  void revokingTheGrantEndsOpenStreams() throws Exception {
    String id =
        created(
            registerAs(
                aliceToken,
                "tenant_a",
                "SELECT id, score FROM items WHERE score > 30",
                "[\"id\"]",
                "score",
                2,
                "{}"));
    try (Sse sse = open(id, null, aliceToken)) {
      sse.next("InitialResult");
      assertThat(
              call(
                      "POST",
                      "/admin/principals/alice-" + suffix + "/grants/revoke",
                      ADMIN,
                      "{\"collection\":\"tenant_a\",\"grant\":\"ContinuousQuery\"}")
                  .statusCode())
          .isEqualTo(200);
      assertThat(sse.awaitEnd())
          .as("the stream of a principal who lost the grant should end")
          .isTrue();
    }
    assertThat(call("GET", "/v1/continuous/" + id + "/events", aliceToken, null).statusCode())
        .as("and she may not open it again")
        .isEqualTo(403);
    assertThat(status(id).get("streamsClosedOnRevocation").asLong()).isEqualTo(1);
  }

  /** Runs last: the node restarts on the same database and slot. */
  @Test
  @org.junit.jupiter.api.Order(Integer.MAX_VALUE)
  void restartResumesFromTheDurableReplayLogWithAFreshInitialResult() throws Exception {
    String id =
        created(
            register(
                "tenant_b", TOP3 + " WHERE score > :min", "[\"id\"]", "score", 2, "{\"min\": 0}"));
    String lastId;
    long lastSequence;
    try (Sse sse = open(id, null)) {
      JsonNode initial = sse.next("InitialResult");
      lastId = initial.get("_id").asText();
      lastSequence = initial.get("sequence").asLong();
      // One more event the client will have to read back from the durable log after the restart.
      sql("UPDATE items SET name = 'before-stop' WHERE id = " + ids(initial).get(0));
      assertThat(sse.next("RowUpdated").get("sequence").asLong()).isEqualTo(lastSequence + 1);
    }
    // A subscription whose log an earlier version kept in weir.continuous_replay (V14).
    String legacy =
        created(
            register(
                "tenant_b",
                "SELECT id, score FROM items WHERE score > 1",
                "[\"id\"]",
                "score",
                1,
                "{}"));
    awaitStatus(legacy, s -> s.get("state").asText().equals("current"));
    node.stop();
    sql("UPDATE items SET score = 1000 WHERE id = 102"); // while no node runs: streamed after the
    // restart
    sql(
        "DELETE FROM weir.event_journal WHERE persistence_id = 'weir-continuous-session|"
            + legacy
            + "'");
    sql(
        "DELETE FROM weir.snapshot WHERE persistence_id = 'weir-continuous-session|"
            + legacy
            + "'");
    sql(
        "INSERT INTO weir.continuous_replay (id, sequence, type, data)"
            + " SELECT '"
            + legacy
            + "', g, 'RowUpdated', '{}' FROM generate_series(1, 7) AS g");
    node = TestNodes.start(config);
    base = "http://127.0.0.1:" + node.httpPort();
    awaitPipelineRunning();
    assertThat(
            awaitStatus(legacy, s -> s.get("state").asText().equals("current"))
                .get("sequence")
                .asLong())
        .as("a log kept in the earlier table continues after its last sequence")
        .isEqualTo(8);
    assertThat(journal(legacy)).containsExactly(8L);
    try (Sse sse = open(id, lastId)) {
      // The event after the token comes from the session entity's journal (the new session's memory
      // starts later) ...
      assertThat(sse.next("RowUpdated").get("sequence").asLong())
          .as("read back from the durable log")
          .isEqualTo(lastSequence + 1);
      // ... then the new authoritative InitialResult the restarted session appended at the next
      // sequence.
      JsonNode fresh = sse.next("InitialResult");
      assertThat(fresh.get("sequence").asLong())
          .as("no gap and no repeat across the restart")
          .isEqualTo(lastSequence + 2);
      assertThat(ids(fresh).get(0))
          .as("the fresh result includes the change made while the node was down")
          .isEqualTo(102);
      sql("UPDATE items SET name = 'after-restart' WHERE id = 102");
      assertThat(sse.next("RowUpdated").get("sequence").asLong()).isEqualTo(lastSequence + 3);
    }
    try (Connection c = db.connect();
        Statement st = c.createStatement();
        // The log is the session entity's journal (ADR 0025), one JSON event per replay event.
        ResultSet rs =
            st.executeQuery(
                "SELECT count(*), min(s), max(s) FROM (SELECT (convert_from(event_payload, 'UTF8')"
                    + "::jsonb->>'sequence')::bigint AS s FROM weir.event_journal"
                    + " WHERE persistence_id = 'weir-continuous-session|"
                    + id
                    + "') AS log")) {
      rs.next();
      assertThat(rs.getLong(2)).isEqualTo(1);
      assertThat(rs.getLong(1)).as("the durable replay log is contiguous").isEqualTo(rs.getLong(3));
      assertThat(rs.getLong(3)).isEqualTo(lastSequence + 3);
    }
  }

  // ---- helpers ----

  private void awaitPipelineRunning() throws Exception {
    long deadline = System.nanoTime() + START_UP.toNanos();
    while (System.nanoTime() < deadline) {
      HttpResponse<String> r = poll("GET", "/admin/pipelines/cq");
      if (r != null
          && r.statusCode() == 200
          && json.readTree(r.body()).get("state").asText().equals("running")) {
        return;
      }
      Thread.sleep(200);
    }
    throw new AssertionError("the continuous pipeline should be running within " + START_UP);
  }

  /** A GET as the administrator inside a wait: null when it got no answer (asked again). */
  private HttpResponse<String> poll(String method, String path) throws Exception {
    try {
      return call(method, path, ADMIN, null);
    } catch (java.io.IOException e) {
      return null;
    }
  }

  private void sql(String statement) throws Exception {
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute(statement);
    }
  }

  private HttpResponse<String> register(
      String scope, String sql, String keys, String orderColumn, int limit, String params)
      throws Exception {
    return registerAs(ADMIN, scope, sql, keys, orderColumn, limit, params);
  }

  private HttpResponse<String> registerAs(
      String token,
      String scope,
      String sql,
      String keys,
      String orderColumn,
      int limit,
      String params)
      throws Exception {
    ObjectNode body = json.createObjectNode();
    body.put("scope", scope);
    body.put("sql", sql);
    body.set("keyColumns", json.readTree(keys));
    body.putArray("orderBy")
        .addObject()
        .put("column", orderColumn)
        .put("direction", orderColumn.equals("depth") ? "asc" : "desc");
    body.put("limit", limit);
    body.set("parameters", json.readTree(params));
    return call("POST", "/v1/continuous", token, body.toString());
  }

  private String created(HttpResponse<String> r) throws Exception {
    assertThat(r.statusCode()).as("the registration should succeed: %s", r.body()).isIn(200, 201);
    return json.readTree(r.body()).get("id").asText();
  }

  private JsonNode status(String id) throws Exception {
    HttpResponse<String> r = call("GET", "/v1/continuous/" + id + "/status", ADMIN, null);
    assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
    return json.readTree(r.body());
  }

  private JsonNode awaitStatus(String id, java.util.function.Predicate<JsonNode> condition)
      throws Exception {
    long deadline = System.nanoTime() + WAIT.toNanos();
    JsonNode last = null;
    while (System.nanoTime() < deadline) {
      HttpResponse<String> r = poll("GET", "/v1/continuous/" + id + "/status");
      if (r != null && r.statusCode() == 200) {
        last = json.readTree(r.body());
        // Settled: a result read and held for its label (ADR 0042) is published, and counted.
        if (condition.test(last) && !last.path("settling").asBoolean()) {
          return last;
        }
      }
      Thread.sleep(100);
    }
    throw new AssertionError(
        "the status should reach the expected state within " + WAIT + "; last: " + last);
  }

  private void assertError(HttpResponse<String> r, int status, String code) throws Exception {
    assertThat(r.statusCode()).as("status of: %s", r.body()).isEqualTo(status);
    JsonNode body = json.readTree(r.body());
    assertThat(body.get("error").asText()).as(r.body()).isEqualTo(code);
    assertThat(body.has("retryable")).isTrue();
  }

  private HttpResponse<String> call(String method, String path, String token, String body)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(base + path))
            .timeout(Duration.ofSeconds(30))
            .header("Authorization", "Bearer " + token);
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

  private static List<String> tenants(JsonNode initial) {
    List<String> out = new ArrayList<>();
    initial.get("rows").forEach(r -> out.add(r.get("row").get("tenant").asText()));
    return out;
  }

  private static List<Integer> ids(JsonNode initial) {
    List<Integer> out = new ArrayList<>();
    initial.get("rows").forEach(r -> out.add(r.get("key").get(0).asInt()));
    return out;
  }

  private Sse open(String id, String lastEventId) throws Exception {
    return open(id, lastEventId, ADMIN);
  }

  private Sse open(String id, String lastEventId, String token) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(base + "/v1/continuous/" + id + "/events"))
            .header("Authorization", "Bearer " + token)
            .header("Accept", "text/event-stream");
    if (lastEventId != null) {
      b.header("Last-Event-ID", lastEventId);
    }
    // The first read may still be running: the route answers 503 until the session exists.
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (true) {
      HttpResponse<Stream<String>> r;
      try {
        r = http.send(b.build(), HttpResponse.BodyHandlers.ofLines());
      } catch (java.io.IOException e) {
        r = null; // no answer: asked again
      }
      if (r != null && r.statusCode() == 200) {
        return new Sse(r.body());
      }
      if (r != null) {
        r.body().close();
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError(
            "the event stream should open within "
                + WAIT
                + "; "
                + (r == null ? "no answer" : "status " + r.statusCode()));
      }
      Thread.sleep(100);
    }
  }

  /** An SSE client: events are read on a thread of their own into a queue. */
  private final class Sse implements AutoCloseable {
    private final Stream<String> lines;
    private final BlockingQueue<JsonNode> events = new LinkedBlockingQueue<>();
    private final Thread reader;

    Sse(Stream<String> lines) {
      this.lines = lines;
      this.reader =
          new Thread(
              () -> {
                String type = null;
                String id = null;
                StringBuilder data = new StringBuilder();
                try {
                  for (var it = lines.iterator(); it.hasNext(); ) {
                    String line = it.next();
                    if (line.isEmpty()) {
                      if (type != null && data.length() > 0) {
                        ObjectNode e = (ObjectNode) json.readTree(data.toString());
                        e.put("_event", type);
                        e.put("_id", id);
                        events.add(e);
                      }
                      type = null;
                      id = null;
                      data.setLength(0);
                    } else if (line.startsWith("id:")) {
                      id = line.substring(3).trim();
                    } else if (line.startsWith("event:")) {
                      type = line.substring(6).trim();
                    } else if (line.startsWith("data:")) {
                      data.append(line.substring(5).trim());
                    }
                  }
                } catch (Exception ignored) {
                  // closed
                }
              },
              "sse-reader");
      reader.setDaemon(true);
      reader.start();
    }

    JsonNode next(String expectedType) throws InterruptedException {
      JsonNode e = events.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
      assertThat(e)
          .as(
              "an event %s should arrive within %s%s",
              expectedType, WAIT, reader.isAlive() ? "" : " (the node ended the stream)")
          .isNotNull();
      assertThat(e.get("_event").asText()).as("the next event: %s", e).isEqualTo(expectedType);
      assertThat(e.get("type").asText()).isEqualTo(expectedType.toString());
      return e;
    }

    /** Whether the server ended the stream within {@link ContinuousQueryIT#WAIT}. */
    boolean awaitEnd() throws InterruptedException {
      reader.join(WAIT.toMillis());
      return !reader.isAlive();
    }

    @Override
    public void close() {
      lines.close();
    }
  }
}
