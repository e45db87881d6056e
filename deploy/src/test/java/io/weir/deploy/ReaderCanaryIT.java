package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.persistence.testing.TestPostgres;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.Base64;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Client values never reach logs, errors, metrics or status from the read surfaces (issue 24): the
 * changes feed, Q1 and live queries, the document API and continuous queries. One node (4
 * partitions, a CDC pipeline into them, a continuous pipeline with a scope) holds documents whose
 * ids, bodies and collection names are canaries, CDC rows and continuous-query rows with canary
 * values. Every request that follows carries canaries where a client can put them (cursors, tokens,
 * replay tokens, filter values, query parameters, SQL text, ids, bodies, headers, query strings)
 * and is refused with its typed code: malformed, forged and altered cursors, cursors of another
 * collection or query, a cursor fenced by a policy change and one past a purge, over-budget and
 * malformed filters, results over their limits, live reads with foreign cursors, refused document
 * writes, continuous registrations with bad SQL, parameters, scopes and columns, foreign and forged
 * replay tokens, and a continuous query whose maintenance read fails on a canary row. Then the
 * node's whole log, every error answer, the continuous status bodies, {@code /metrics} and the
 * admin status routes are searched for every canary ({@link Canaries}): 0 hits.
 */
class ReaderCanaryIT extends EndToEndTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int PARTITIONS = 4;
  private static final Map<String, String> JSON_TYPE = Map.of("Content-Type", "application/json");

  private final Canaries canaries = new Canaries("reader-canary");
  private NodeProcess node;

  @Test
  void refusedReadsLeaveNoValueInLogsErrorsMetricsOrStatus() throws Exception {
    long t0 = System.nanoTime();
    String suffix = java.util.UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    String role = "cq_leaks_" + suffix;
    String password = "pw-" + suffix;
    String cdcKey = canaries.next("cdc-key");
    String cdcNote = canaries.next("cdc-row");
    String itemNote = canaries.next("continuous-row");
    String tieNote = canaries.next("continuous-tie-row");
    db = TestPostgres.server().freshDatabase("readleaks");
    try (Connection c = TestPostgres.server().connect("postgres");
        Statement s = c.createStatement()) {
      s.execute("CREATE ROLE " + role + " LOGIN PASSWORD '" + password + "'");
    }
    try {
      try (Connection c = db.connect();
          Statement s = c.createStatement()) {
        s.execute("CREATE TABLE public.cdc_notes (k text PRIMARY KEY, note text)");
        s.execute("CREATE TABLE public.cq_items (id int PRIMARY KEY, note text, score int)");
        s.execute(
            "INSERT INTO public.cq_items SELECT g, '"
                + itemNote
                + "', g FROM generate_series(1, 5) g");
        s.execute("INSERT INTO public.cq_items VALUES (6, '" + tieNote + "', 5)");
        s.execute("CREATE TABLE public.cq_nums (id int PRIMARY KEY, note text)");
        s.execute("INSERT INTO public.cq_nums VALUES (1, '10'), (2, '20')");
        s.execute("CREATE TABLE public.unpublished (id int PRIMARY KEY)");
        s.execute("GRANT SELECT ON public.cq_items, public.cq_nums, public.unpublished TO " + role);
        s.execute("CREATE PUBLICATION cdc_pub FOR TABLE public.cdc_notes");
        s.execute("CREATE PUBLICATION live_pub FOR TABLE public.cq_items, public.cq_nums");
      }
      Path config = Files.createTempFile("weir-readers", ".conf");
      Files.writeString(
          config,
          String.join(
              "\n",
              "weir.partitions.count = " + PARTITIONS,
              "weir.pipelines.cdc { slot = cdc_" + suffix + ", publications = [cdc_pub],",
              "  sink { type = partitions, collections { \"public.cdc_notes\" = cdcnotes } } }",
              "weir.pipelines.live { slot = live_" + suffix + ", publications = [live_pub],",
              "  sink.type = continuous }",
              "weir.continuous.scopes.leaks { user = \""
                  + role
                  + "\", password = \""
                  + password
                  + "\" }",
              "weir.continuous.refresh = 500ms"));
      node = startNode("readleaks", config);
      awaitReady(node, PARTITIONS);
      awaitRunning(node, "cdc");
      awaitRunning(node, "live");

      String reader = principal("reader");
      for (String grant : List.of("ChangesRead", "DocumentsRead", "QueryRead")) {
        for (String collection : List.of("notes", "cdcnotes")) {
          grant("reader", "{\"collection\":\"" + collection + "\",\"grant\":\"" + grant + "\"}");
        }
      }
      grant("reader", "{\"collection\":\"notes\",\"grant\":\"FieldUse\",\"field\":\"*\"}");
      String outsider = principal("outsider");
      call(
          () -> node,
          "PUT",
          "/admin/policies/notes",
          "{\"sensitiveFields\":[\"secret\"],\"visibility\":\"none\"}");

      try (Connection c = db.connect();
          Statement s = c.createStatement()) {
        s.execute("INSERT INTO public.cdc_notes VALUES ('" + cdcKey + "', '" + cdcNote + "')");
      }
      String docBody = canaries.next("document-body");
      String secret = canaries.next("sensitive-value");
      String idBase = canaries.next("document-id");
      for (int i = 0; i < 12; i++) {
        put(
            "notes",
            idBase + i,
            "{\"note\":\"" + docBody + "\",\"n\":" + i + ",\"secret\":\"" + secret + "\"}");
      }
      String collection = canaries.next("collection");
      put(collection, "doc", "{\"v\":\"" + canaries.next("collection-doc") + "\"}");
      await("the CDC row is a document")
          .atMost(Duration.ofSeconds(120))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> node.getUntil("/v1/documents/cdcnotes/" + cdcKey, true).statusCode() == 200);

      changesFeed(reader, outsider, collection, docBody, secret);
      queries(reader, docBody, secret);
      documents(collection);
      continuous(outsider);
      fencedCursors(reader, docBody);

      String log = Canaries.logs(node);
      assertThat(log)
          .as("every refusal left its value-free line")
          .contains("refused method=POST route=/v1/changes/read status=400 reason=invalid-token")
          .contains(
              "refused method=POST route=/v1/changes/read status=409 reason=token-invalidated")
          .contains(
              "refused method=POST route=/v1/changes/read status=410 reason=history-unavailable")
          .contains("refused method=POST route=/v1/query status=400 reason=invalid-query")
          .contains(
              "refused method=POST route=/v1/query/live/read status=400 reason=token-mismatch")
          .contains("refused method=POST route=/v1/continuous status=400 reason=invalid-query")
          .contains(
              "refused method=GET route=/v1/continuous/{id}/events status=400 reason=invalid-token")
          .contains("authoritative read failed (PSQLException[SQLState 22P02]); repair pending");
      String metrics = node.getUntil("/metrics", true).body();
      assertThat(metrics)
          .as("feed refusals are counted by operation and code")
          .contains("weir_feeds_requests_total{operation=\"changes\",outcome=\"invalid-token\"}")
          .contains(
              "weir_feeds_requests_total{operation=\"changes\",outcome=\"token-invalidated\"}")
          .contains("weir_feeds_requests_total{operation=\"live-read\",outcome=\"token-mismatch\"}")
          .contains("weir_feeds_requests_total{operation=\"query\",outcome=\"result-too-large\"}");

      canaries.assertNoLeak(node, nodes, List.of("cdc", "live"));
      System.out.printf("reader-canary: run-s=%.1f%n", (System.nanoTime() - t0) / 1e9);
    } finally {
      nodes.forEach(NodeProcess::close);
      if (db != null) {
        db.close();
        db = null;
      }
      try (Connection c = TestPostgres.server().connect("postgres");
          Statement s = c.createStatement()) {
        s.execute("DROP ROLE IF EXISTS " + role);
      }
    }
  }

  /** The changes feed: bad cursors, bodies, budgets and principals. */
  private void changesFeed(
      String reader, String outsider, String collection, String docBody, String secret)
      throws Exception {
    JsonNode page = feed(reader, changesRequest("notes", null, 1000));
    assertThat(page.get("changes").size()).as("the reader sees the documents").isEqualTo(12);
    assertThat(page.toString()).contains(docBody);
    assertThat(page.toString())
        .as("a sensitive field is omitted for a reader without FieldRead")
        .doesNotContain(secret);
    assertThat(canaries.found(page.toString()))
        .as("the scan finds the canaries where they are by design")
        .isNotEmpty();
    String cursor = page.get("cursor").asText();

    String canary = canaries.next("cursor");
    refusedFeed(
        "a cursor that is not a token",
        reader,
        changesRequest("notes", canary, 10),
        400,
        "invalid-token");
    Base64.Encoder b64 = Base64.getUrlEncoder().withoutPadding();
    String forged =
        b64.encodeToString(canaries.next("forged-payload").getBytes(StandardCharsets.UTF_8))
            + "."
            + b64.encodeToString(canaries.next("forged-mac").getBytes(StandardCharsets.UTF_8));
    refusedFeed(
        "a forged cursor", reader, changesRequest("notes", forged, 10), 400, "invalid-token");
    String altered = cursor.substring(0, cursor.length() - 1) + (cursor.endsWith("A") ? "B" : "A");
    refusedFeed(
        "an altered cursor", reader, changesRequest("notes", altered, 10), 400, "invalid-token");
    refusedFeed(
        "another collection's cursor",
        reader,
        changesRequest("cdcnotes", cursor, 10),
        400,
        "token-mismatch");
    refusedFeed(
        "another principal's cursor",
        NodeProcess.ADMIN_TOKEN,
        changesRequest("notes", cursor, 10),
        400,
        "token-mismatch");
    refusedFeed(
        "a collection name of the wrong shape",
        reader,
        changesRequest(canaries.next("bad-collection") + "!", null, 10),
        400,
        "bad-request");
    refusedFeed(
        "a start that is neither beginning nor now",
        reader,
        "{\"collection\":\"notes\",\"start\":\"" + canaries.next("start") + "\"}",
        400,
        "bad-request");
    refusedFeed(
        "a limit that is not a number",
        reader,
        "{\"collection\":\"notes\",\"start\":\"beginning\",\"limit\":\""
            + canaries.next("limit")
            + "\"}",
        400,
        "bad-request");
    refusedFeed(
        "an unknown field",
        reader,
        "{\"collection\":\"notes\",\"start\":\"now\",\"" + canaries.next("field") + "\":1}",
        400,
        "bad-request");
    refusedFeed(
        "a body that is not JSON",
        reader,
        "{\"collection\":\"notes\",\"cursor\":\"" + canaries.next("truncated-body"),
        400,
        "malformed-json");
    refusedFeed(
        "a change larger than the budget",
        reader,
        "{\"collection\":\"notes\",\"start\":\"beginning\",\"maxBytes\":1}",
        413,
        "budget-exceeded");
    refusedFeed(
        "a token of no principal",
        canaries.next("bearer-token"),
        changesRequest("notes", null, 10),
        401,
        "unauthenticated");
    refusedFeed(
        "a principal without grants",
        outsider,
        changesRequest("notes", cursor, 10),
        403,
        "forbidden");
    refusedFeed(
        "a collection the reader may not read",
        reader,
        changesRequest(collection, null, 10),
        403,
        "forbidden");
    // The administrator reads the canary-named collection: its cursor, used by the reader.
    JsonNode adminPage = feed(NodeProcess.ADMIN_TOKEN, changesRequest(collection, null, 10));
    refusedFeed(
        "the administrator's cursor of another collection",
        reader,
        changesRequest("notes", adminPage.get("cursor").asText(), 10),
        400,
        "token-mismatch");
  }

  /** Q1 queries and live queries: malformed and over-budget filters, results over the limits. */
  private void queries(String reader, String docBody, String secret) throws Exception {
    String prefix = docBody.substring(0, docBody.length() - 4);
    String match = query("notes", eq("note", docBody));
    HttpResponse<String> ok = post(reader, "/v1/query", "{\"query\":" + match + "}");
    assertThat(ok.statusCode()).as(ok.body()).isEqualTo(200);
    assertThat(JSON.readTree(ok.body()).get("rows").size()).isEqualTo(12);

    Map<String, String> invalid = new java.util.LinkedHashMap<>();
    invalid.put(
        "a predicate with an unknown key",
        query(
            "notes",
            "{\"op\":\"eq\",\"field\":\"note\",\"value\":\""
                + canaries.next("filter-value")
                + "\",\"also\":\""
                + canaries.next("filter-extra")
                + "\"}"));
    invalid.put(
        "an unknown operator",
        query("notes", "{\"op\":\"" + canaries.next("operator") + "\",\"field\":\"note\"}"));
    invalid.put(
        "a field path that is not one", query("notes", eq(canaries.next("field-path"), "x")));
    invalid.put(
        "a string over 4,096 characters",
        query("notes", eq("note", canaries.next("long-value") + "v".repeat(5000))));
    ArrayNode values = JSON.createArrayNode();
    String inValue = canaries.next("in-value");
    for (int i = 0; i < 1001; i++) {
      values.add(inValue + i);
    }
    invalid.put(
        "more than 1,000 in values",
        query("notes", "{\"op\":\"in\",\"field\":\"note\",\"values\":" + values + "}"));
    String deep = eq("note", canaries.next("deep-value"));
    for (int i = 0; i < 17; i++) {
      deep = "{\"op\":\"not\",\"arg\":" + deep + "}";
    }
    invalid.put("predicates nested 18 deep", query("notes", deep));
    invalid.put(
        "a value of another type for prefix",
        query(
            "notes",
            "{\"op\":\"prefix\",\"field\":\"note\",\"value\":[\""
                + canaries.next("prefix-array")
                + "\"]}"));
    invalid.put(
        "a collection name of the wrong shape",
        query(canaries.next("query-collection") + "!", eq("note", "x")));
    for (Map.Entry<String, String> q : invalid.entrySet()) {
      refusedPost(
          "query: " + q.getKey(),
          reader,
          "/v1/query",
          "{\"query\":" + q.getValue() + "}",
          400,
          "invalid-query");
      refusedPost(
          "live start: " + q.getKey(),
          reader,
          "/v1/query/live/start",
          "{\"query\":" + q.getValue() + "}",
          400,
          "invalid-query");
    }
    refusedPost(
        "an ordered query",
        reader,
        "/v1/query",
        "{\"query\":{\"collection\":\"notes\",\"orderBy\":\"" + canaries.next("order") + "\"}}",
        400,
        "unsupported-query");
    refusedPost(
        "more rows than the limit",
        reader,
        "/v1/query",
        "{\"query\":" + match + ",\"limit\":1}",
        413,
        "result-too-large");
    refusedPost(
        "more bytes than the budget",
        reader,
        "/v1/query",
        "{\"query\":" + match + ",\"maxBytes\":10}",
        413,
        "result-too-large");
    refusedPost(
        "a live baseline over the limit",
        reader,
        "/v1/query/live/start",
        "{\"query\":" + match + ",\"limit\":1}",
        413,
        "result-too-large");
    refusedPost(
        "a predicate on a sensitive field",
        reader,
        "/v1/query",
        "{\"query\":" + query("notes", eq("secret", secret)) + "}",
        403,
        "forbidden");
    refusedPost(
        "a query of a collection the reader may not read",
        reader,
        "/v1/query",
        "{\"query\":" + query(canaries.next("unreadable-collection"), eq("note", "x")) + "}",
        403,
        "forbidden");

    // Live reads with foreign cursors and budgets.
    String live =
        query("notes", "{\"op\":\"prefix\",\"field\":\"note\",\"value\":\"" + prefix + "\"}");
    HttpResponse<String> started = post(reader, "/v1/query/live/start", "{\"query\":" + live + "}");
    assertThat(started.statusCode()).as(started.body()).isEqualTo(200);
    String liveCursor = JSON.readTree(started.body()).get("cursor").asText();
    String other = query("notes", eq("note", canaries.next("other-query-value")));
    refusedPost(
        "a live read of another query",
        reader,
        "/v1/query/live/read",
        "{\"query\":" + other + ",\"cursor\":\"" + liveCursor + "\"}",
        400,
        "token-mismatch");
    String feedCursor = feed(reader, changesRequest("notes", null, 10)).get("cursor").asText();
    refusedPost(
        "a live read with a feed cursor",
        reader,
        "/v1/query/live/read",
        "{\"query\":" + live + ",\"cursor\":\"" + feedCursor + "\"}",
        400,
        "token-mismatch");
    refusedPost(
        "a live read with a cursor that is not a token",
        reader,
        "/v1/query/live/read",
        "{\"query\":" + live + ",\"cursor\":\"" + canaries.next("live-cursor") + "\"}",
        400,
        "invalid-token");
    refusedPost(
        "a live read without a cursor",
        reader,
        "/v1/query/live/read",
        "{\"query\":" + live + ",\"limit\":\"" + canaries.next("live-limit") + "\"}",
        400,
        "bad-request");
    put("notes", "late", "{\"note\":\"" + docBody + "\",\"n\":99}");
    refusedPost(
        "a live delta larger than the budget",
        reader,
        "/v1/query/live/read",
        "{\"query\":" + live + ",\"cursor\":\"" + liveCursor + "\",\"maxBytes\":1}",
        413,
        "budget-exceeded");
  }

  /** The document API: refused reads and writes with canary ids, bodies and headers. */
  private void documents(String collection) throws Exception {
    String id = canaries.next("missing-id");
    canaries.refused(
        "a document that does not exist",
        node.sendIdempotent(
            "GET",
            "/v1/documents/notes/"
                + id
                + "?"
                + canaries.next("query-name")
                + "="
                + canaries.next("query-value"),
            null,
            Map.of("X-Weir-Canary", canaries.next("header-value"))),
        404,
        "not-found");
    String body = "{\"note\":\"" + canaries.next("conflict-body") + "\"}";
    canaries.refused(
        "an If-Match that is not a revision",
        node.sendOnce(
            "PUT",
            "/v1/documents/" + collection + "/doc",
            body,
            Map.of("Content-Type", "application/json", "If-Match", canaries.next("if-match"))),
        400,
        "bad-request");
    canaries.refused(
        "an Idempotency-Key of the wrong shape",
        node.sendOnce(
            "PUT",
            "/v1/documents/" + collection + "/doc",
            body,
            Map.of(
                "Content-Type",
                "application/json",
                "Idempotency-Key",
                canaries.next("idempotency-key") + "k".repeat(300))),
        400,
        "bad-request");
    canaries.refused(
        "a write expecting another revision",
        node.sendOnce(
            "PUT",
            "/v1/documents/" + collection + "/doc",
            body,
            Map.of("Content-Type", "application/json", "If-Match", "7")),
        409,
        "conflict");
    canaries.refused(
        "a body that is not JSON",
        node.sendOnce(
            "PUT",
            "/v1/documents/" + collection + "/" + canaries.next("put-id"),
            "{\"note\":\"" + canaries.next("malformed-body"),
            JSON_TYPE),
        400,
        "malformed-json");
    canaries.refused(
        "a body larger than 1 MiB",
        node.sendOnce(
            "PUT",
            "/v1/documents/notes/" + canaries.next("large-id"),
            "{\"note\":\"" + canaries.next("large-body") + "x".repeat(1 << 20) + "\"}",
            JSON_TYPE),
        413,
        "document-too-large");
    canaries.refused(
        "an id with a control character",
        node.sendOnce(
            "PUT", "/v1/documents/notes/" + canaries.next("control-id") + "%01", body, JSON_TYPE),
        400,
        "invalid-name");
    canaries.refused(
        "a write into a CDC collection",
        node.sendOnce("PUT", "/v1/documents/cdcnotes/" + canaries.next("cdc-id"), body, JSON_TYPE),
        409,
        "collection-fed-by-cdc");
    canaries.refused(
        "a delete of a document that does not exist",
        node.sendOnce(
            "DELETE", "/v1/documents/notes/" + canaries.next("delete-id"), null, Map.of()),
        404,
        "not-found");
  }

  /**
   * Continuous queries: registrations with bad SQL, parameters, scopes and columns; forged and
   * foreign replay tokens; a maintenance read that fails on a canary row.
   */
  private void continuous(String outsider) throws Exception {
    String skip = canaries.next("continuous-parameter");
    String top =
        register(
            "SELECT id, note, score FROM cq_items WHERE note <> :skip",
            new String[] {"id"},
            "score",
            10,
            Map.of("skip", skip));
    String nums =
        register("SELECT id, note::int AS n FROM cq_nums", new String[] {"id"}, "n", 10, Map.of());
    awaitCurrent(top);
    awaitCurrent(nums);

    record Bad(String what, ObjectNode body, String code) {}
    List<Bad> bad =
        List.of(
            new Bad(
                "SQL that does not parse",
                registration(
                    "SELECT id FRM cq_items WHERE note = '" + canaries.next("sql-literal") + "'",
                    "id"),
                "invalid-query"),
            new Bad(
                "two statements",
                registration(
                    "SELECT id FROM cq_items; DELETE FROM cq_items WHERE note = '"
                        + canaries.next("sql-second")
                        + "'",
                    "id"),
                "query-not-allowed"),
            new Bad(
                "a forbidden function",
                registration(
                    "SELECT set_config('" + canaries.next("sql-setting") + "', 'x', true) AS id",
                    "id"),
                "query-not-allowed"),
            new Bad(
                "an unknown relation",
                registration("SELECT id FROM \"" + canaries.next("sql-relation") + "\"", "id"),
                "invalid-query"),
            new Bad(
                "a parameter that does not convert",
                withParameter(
                    registration("SELECT id, score FROM cq_items WHERE score > :min", "id"),
                    "min",
                    canaries.next("parameter-value")),
                "invalid-parameter"),
            new Bad(
                "a parameter not given",
                registration(
                    "SELECT id, score FROM cq_items WHERE note = :missing OR note = '"
                        + canaries.next("sql-or")
                        + "'",
                    "id"),
                "invalid-parameter"),
            new Bad(
                "an unknown scope",
                registration("SELECT id FROM cq_items", "id")
                    .put("scope", canaries.identifier("scope")),
                "unknown-scope"),
            new Bad(
                "a key column the result lacks",
                registration("SELECT id FROM cq_items", canaries.identifier("key")),
                "unknown-column"),
            new Bad(
                "a table outside the publications",
                registration("SELECT id FROM unpublished", "id"),
                "table-not-published"),
            new Bad(
                "keys that repeat in the result",
                registration("SELECT score AS k, note FROM cq_items", "k"),
                "bad-request"),
            new Bad(
                "SQL over 32,768 characters",
                registration(
                    "SELECT id FROM cq_items WHERE note <> '"
                        + canaries.next("long-sql")
                        + "x".repeat(33_000)
                        + "'",
                    "id"),
                "bad-request"),
            new Bad(
                "an order direction that is not one",
                withOrder(
                    registration("SELECT id, score FROM cq_items", "id"),
                    "score",
                    canaries.next("direction")),
                "bad-request"),
            new Bad(
                "an evaluator that is not installed",
                registration("SELECT id, score FROM cq_items", "id")
                    .put("evaluator", canaries.next("evaluator")),
                "bad-request"),
            new Bad(
                "a projector that is not installed",
                registration("SELECT id, score FROM cq_items", "id")
                    .put("projector", canaries.next("projector")),
                "bad-request"),
            new Bad(
                "a limit that is not a number",
                registration("SELECT id FROM cq_items", "id").put("limit", canaries.next("limit")),
                "bad-request"));
    for (Bad b : bad) {
      canaries.refused(
          "registration: " + b.what(),
          node.sendIdempotent("POST", "/v1/continuous", b.body().toString(), JSON_TYPE),
          400,
          b.code());
    }
    canaries.refused(
        "registration with an unknown field",
        node.sendIdempotent(
            "POST",
            "/v1/continuous",
            registration("SELECT id FROM cq_items", "id")
                .put(canaries.next("registration-field"), 1)
                .toString(),
            JSON_TYPE),
        400,
        "bad-request");
    canaries.refused(
        "registration by a principal without the grant",
        node.sendIdempotent(
            "POST",
            "/v1/continuous",
            withParameter(
                    registration("SELECT id FROM cq_items WHERE note <> :p", "id"),
                    "p",
                    canaries.next("outsider-parameter"))
                .toString(),
            Map.of("Content-Type", "application/json", "Authorization", "Bearer " + outsider)),
        403,
        "forbidden");

    // Replay tokens: not a token, forged, another subscription's.
    canaries.refused(
        "events after an id that is not a replay token",
        events(top, Map.of("Last-Event-ID", canaries.next("last-event-id")), ""),
        400,
        "invalid-token");
    canaries.refused(
        "events after a token query parameter that is not one",
        events(top, Map.of(), "?token=" + canaries.next("token-parameter")),
        400,
        "invalid-token");
    String numsToken = firstEventId(nums);
    canaries.refused(
        "events after another subscription's token",
        events(top, Map.of("Last-Event-ID", numsToken), ""),
        400,
        "token-mismatch");
    for (String path :
        List.of(
            "/v1/continuous/" + canaries.next("continuous-id") + "/status",
            "/v1/continuous/" + canaries.next("continuous-id") + "/result",
            "/v1/continuous/" + canaries.next("continuous-id") + "/events")) {
      canaries.refused("an id that is not one", node.getUntil(path, true), 404, "not-found");
    }
    canaries.refused(
        "a delete of an id that is not one",
        node.sendIdempotent(
            "DELETE", "/v1/continuous/" + canaries.next("delete-continuous-id"), null, Map.of()),
        404,
        "not-found");
    canaries.refused(
        "status for a principal without the grant",
        node.sendIdempotent(
            "GET",
            "/v1/continuous/" + top + "/status",
            null,
            Map.of("Authorization", "Bearer " + outsider)),
        403,
        "forbidden");

    // The maintenance read of `nums` fails on a row whose text is not a number (the server's error
    // quotes it); the result stays, a repair is pending.
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("INSERT INTO public.cq_nums VALUES (3, '" + canaries.next("uncastable-row") + "')");
    }
    JsonNode failed =
        await("the read of nums fails")
            .atMost(Duration.ofSeconds(120))
            .pollInterval(Duration.ofMillis(200))
            .until(
                () -> status(nums),
                s -> s != null && s.path("failedReadsByReason").has("sqlstate-22P02"));
    assertThat(failed.get("repairPending").isNull()).as(failed.toString()).isFalse();
    canaries.keep("status of nums", failed.toString());
    JsonNode current = status(top);
    assertThat(current.get("state").asText()).isEqualTo("current");
    canaries.keep("status of top", current.toString());
    HttpResponse<String> result = node.getUntil("/v1/continuous/" + top + "/result", true);
    assertThat(result.statusCode()).as(result.body()).isEqualTo(200);
    assertThat(result.body()).as("the result holds the rows").contains("\"score\":5");
    assertThat(canaries.found(result.body()))
        .as("the scan finds the rows' canaries in the result, where they are by design")
        .isNotEmpty();
  }

  /**
   * Cursors fenced after their issue: a policy change (409 token-invalidated) and a purge of the
   * history after them (410 history-unavailable).
   */
  private void fencedCursors(String reader, String docBody) throws Exception {
    String live = query("notes", eq("note", docBody));
    HttpResponse<String> started = post(reader, "/v1/query/live/start", "{\"query\":" + live + "}");
    assertThat(started.statusCode()).as(started.body()).isEqualTo(200);
    String liveCursor = JSON.readTree(started.body()).get("cursor").asText();
    String cursor = feed(reader, changesRequest("notes", null, 1)).get("cursor").asText();
    call(
        () -> node,
        "PUT",
        "/admin/policies/notes",
        "{\"sensitiveFields\":[\"secret\",\"n\"],\"visibility\":\"none\"}");
    refusedFeed(
        "a cursor issued before a policy change",
        reader,
        changesRequest("notes", cursor, 10),
        409,
        "token-invalidated");
    refusedPost(
        "a live cursor issued before a policy change",
        reader,
        "/v1/query/live/read",
        "{\"query\":" + live + ",\"cursor\":\"" + liveCursor + "\"}",
        409,
        "token-invalidated");

    String early = feed(reader, changesRequest("notes", null, 1)).get("cursor").asText();
    for (JsonNode p : node.jsonUntil("/admin/outbox/status", NodeProcess.ANSWER_DEADLINE)) {
      long next = p.get("outboxNext").asLong();
      if (next > 1) {
        call(
            () -> node,
            "POST",
            "/admin/outbox/purge",
            "{\"partition\":" + p.get("partition").asInt() + ",\"through\":" + (next - 1) + "}");
      }
    }
    refusedFeed(
        "a cursor whose next changes were purged",
        reader,
        changesRequest("notes", early, 10),
        410,
        "history-unavailable");
  }

  // ---- helpers ----

  private String principal(String id) throws Exception {
    return callOnce(node, "POST", "/admin/principals", "{\"id\":\"" + id + "\"}")
        .get("token")
        .asText();
  }

  private void grant(String id, String body) throws Exception {
    call(() -> node, "POST", "/admin/principals/" + id + "/grants", body);
  }

  private void put(String collection, String id, String body) {
    HttpResponse<String> r =
        node.sendIdempotent(
            "PUT",
            "/v1/documents/" + collection + "/" + id,
            body,
            Map.of("Content-Type", "application/json", "Idempotency-Key", "k-" + id.hashCode()));
    assertThat(r.statusCode()).as("PUT %s", r.body()).isBetween(200, 201);
  }

  private HttpResponse<String> post(String token, String path, String body) {
    return node.sendIdempotent(
        "POST",
        path,
        body,
        Map.of("Content-Type", "application/json", "Authorization", "Bearer " + token));
  }

  private JsonNode feed(String token, String request) throws Exception {
    HttpResponse<String> r = post(token, "/v1/changes/read", request);
    assertThat(r.statusCode()).as("changes: %s", r.body()).isEqualTo(200);
    return JSON.readTree(r.body());
  }

  private void refusedFeed(String what, String token, String request, int status, String code) {
    canaries.refused("changes: " + what, post(token, "/v1/changes/read", request), status, code);
  }

  private void refusedPost(
      String what, String token, String path, String body, int status, String code) {
    canaries.refused(what, post(token, path, body), status, code);
  }

  private static String query(String collection, String where) {
    return "{\"collection\":\"" + collection + "\",\"where\":" + where + "}";
  }

  private static String eq(String field, String value) {
    return "{\"op\":\"eq\",\"field\":\"" + field + "\",\"value\":\"" + value + "\"}";
  }

  private static ObjectNode registration(String sql, String key) {
    ObjectNode body =
        JSON.createObjectNode().put("scope", "leaks").put("sql", sql).put("limit", 10);
    body.putArray("keyColumns").add(key);
    return body;
  }

  private static ObjectNode withOrder(ObjectNode body, String column, String direction) {
    body.putArray("orderBy").addObject().put("column", column).put("direction", direction);
    return body;
  }

  private static ObjectNode withParameter(ObjectNode body, String name, String value) {
    body.putObject("parameters").put(name, value);
    return body;
  }

  /** Registers a continuous query as the administrator; its id. */
  private String register(
      String sql, String[] keys, String orderBy, int limit, Map<String, String> parameters)
      throws Exception {
    ObjectNode body =
        JSON.createObjectNode().put("scope", "leaks").put("sql", sql).put("limit", limit);
    ArrayNode k = body.putArray("keyColumns");
    for (String key : keys) {
      k.add(key);
    }
    body.putArray("orderBy").addObject().put("column", orderBy).put("direction", "desc");
    ObjectNode p = body.putObject("parameters");
    parameters.forEach(p::put);
    HttpResponse<String> r =
        node.sendIdempotent("POST", "/v1/continuous", body.toString(), JSON_TYPE, START_UP);
    assertThat(r.statusCode()).as("registration: %s", r.body()).isBetween(200, 201);
    return JSON.readTree(r.body()).get("id").asText();
  }

  private JsonNode status(String id) throws Exception {
    HttpResponse<String> r = node.getUntil("/v1/continuous/" + id + "/status", true);
    return r.statusCode() == 200 ? JSON.readTree(r.body()) : null;
  }

  private void awaitCurrent(String id) {
    await("continuous query " + id + " is current")
        .atMost(START_UP)
        .pollInterval(Duration.ofMillis(200))
        .until(() -> status(id), s -> s != null && s.get("state").asText().equals("current"));
  }

  /** GET the events of {@code id} when they are refused (an answer before any stream). */
  private HttpResponse<String> events(String id, Map<String, String> headers, String query) {
    return node.send("GET", "/v1/continuous/" + id + "/events" + query, null, headers)
        .orElseThrow(() -> new AssertionError("events: no answer"));
  }

  /** The id (a replay token) of the first event of {@code id}'s stream. */
  private String firstEventId(String id) throws Exception {
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    HttpRequest request =
        HttpRequest.newBuilder(
                URI.create(
                    "http://127.0.0.1:" + node.httpPort() + "/v1/continuous/" + id + "/events"))
            .timeout(Duration.ofSeconds(60))
            .header("Authorization", "Bearer " + NodeProcess.ADMIN_TOKEN)
            .build();
    HttpResponse<Stream<String>> r = http.send(request, HttpResponse.BodyHandlers.ofLines());
    try (Stream<String> lines = r.body()) {
      assertThat(r.statusCode()).as("events of %s", id).isEqualTo(200);
      for (Iterator<String> it = lines.iterator(); it.hasNext(); ) {
        String line = it.next();
        if (line.startsWith("id:") && line.length() > 3) {
          return line.substring(3).trim();
        }
      }
    }
    throw new AssertionError("the stream of " + id + " ended without an event id");
  }
}
