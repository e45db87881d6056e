package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Collection policies, the document API under them, the changes feed and live queries over HTTP,
 * against partitions on the real JDBC journal in PostgreSQL. Each test uses collections of its own.
 */
class FeedApiIT extends FeedNodeFixture {
  @Override
  String databaseName() {
    return "feed_api_it";
  }

  // ---- tests ----

  @Test
  void policiesAreValidatedStoredVersionedAndListed() throws Exception {
    for (String bad :
        List.of(
            "{\"visibility\":\"acl\"}",
            "{\"visibility\":\"none\",\"field\":\"a\"}",
            "{\"visibility\":\"everyone\"}",
            "{\"sensitiveFields\":[\"a b\"]}",
            "{\"sensitiveFields\":\"a\"}",
            "{\"visibility\":\"acl\",\"field\":\"acl\",\"sensitiveFields\":[\"acl\"]}",
            "{\"extra\":1}",
            "[]")) {
      error(send("PUT", "/admin/policies/p1", bad, ADMIN), 400, "bad-request");
    }
    error(send("PUT", "/admin/policies/p1", "{", ADMIN), 400, "malformed-json");
    assertThat(ok(send("GET", "/admin/policies/p1", null, ADMIN)).get("version").asLong()).isZero();
    policy("p1", List.of("ssn"), "owner", "owner");
    JsonNode first = ok(send("GET", "/admin/policies/p1", null, ADMIN));
    assertThat(first.get("visibility").asText()).isEqualTo("owner");
    assertThat(first.get("sensitiveFields").get(0).asText()).isEqualTo("ssn");
    policy("p1", List.of(), "none", null);
    JsonNode second = ok(send("GET", "/admin/policies/p1", null, ADMIN));
    assertThat(second.get("version").asLong()).isGreaterThan(first.get("version").asLong());
    assertThat(ok(send("GET", "/admin/policies", null, ADMIN)).get("policies").toString())
        .contains("\"p1\"");
    String reader = principal("p1-reader", List.of(), "p1", "DocumentsRead");
    error(send("GET", "/admin/policies", null, reader), 403, "forbidden");
  }

  @Test
  void theDocumentApiFiltersRowsAndSensitiveFieldsAndChecksWrites() throws Exception {
    policy("notes", List.of("secret"), "acl", "acl");
    String ann =
        principal(
            "ann", List.of("team"), "notes", "DocumentsRead", "DocumentsWrite", "FieldRead:secret");
    String dave = principal("dave", List.of("team"), "notes", "DocumentsRead", "DocumentsWrite");
    String bob = principal("bob", List.of(), "notes", "DocumentsRead", "DocumentsWrite");
    ok(put("notes", "n1", "{\"acl\":[\"ann\"],\"text\":\"a\",\"secret\":\"s1\"}", ann));
    ok(put("notes", "n2", "{\"acl\":[\"group:team\"],\"text\":\"b\",\"secret\":\"s2\"}", ann));
    error(send("GET", "/v1/documents/notes/n1", null, bob), 404, "not-found");
    error(send("GET", "/v1/documents/notes/n1", null, dave), 404, "not-found");
    assertThat(ok(send("GET", "/v1/documents/notes/n1", null, ann)).get("secret").asText())
        .isEqualTo("s1");
    JsonNode seen = ok(send("GET", "/v1/documents/notes/n2", null, dave));
    assertThat(seen.has("secret")).as("a sensitive field without FieldRead is omitted").isFalse();
    assertThat(seen.get("text").asText()).isEqualTo("b");
    // dave rewrites n2 without the field he cannot see: it keeps its value.
    ok(put("notes", "n2", "{\"acl\":[\"group:team\"],\"text\":\"c\"}", dave));
    JsonNode after = ok(send("GET", "/v1/documents/notes/n2", null, ann));
    assertThat(after.get("secret").asText()).isEqualTo("s2");
    assertThat(after.get("text").asText()).isEqualTo("c");
    error(
        put("notes", "n2", "{\"acl\":[\"group:team\"],\"secret\":\"x\"}", dave), 403, "forbidden");
    error(put("notes", "n1", "{\"acl\":[\"bob\"]}", bob), 403, "forbidden");
    error(put("notes", "n3", "{\"acl\":[\"ann\"]}", dave), 403, "forbidden");
    error(send("DELETE", "/v1/documents/notes/n1", null, bob), 404, "not-found");
    assertThat(ok(send("GET", "/v1/documents/notes/n1", null, ann)).get("text").asText())
        .as("still there")
        .isEqualTo("a");
    ok(send("DELETE", "/v1/documents/notes/n2", null, dave));
  }

  @Test
  void theChangesFeedShowsOnlyVisibleRowsFieldsAndDeletions() throws Exception {
    policy("feed", List.of("secret"), "acl", "acl");
    String writer =
        principal(
            "feed-writer",
            List.of(),
            "feed",
            "DocumentsRead",
            "DocumentsWrite",
            "FieldRead:secret");
    String carol = principal("carol", List.of("g1"), "feed", "ChangesRead");
    String nobody = principal("feed-nobody", List.of(), "feed");
    error(changesRaw("feed", "beginning", false, nobody, null, null), 403, "forbidden");
    for (int i = 0; i < 12; i++) {
      String acl = i % 3 == 0 ? "[\"feed-writer\"]" : "[\"feed-writer\",\"group:g1\"]";
      ok(
          put(
              "feed",
              "d" + i,
              "{\"acl\":" + acl + ",\"n\":" + i + ",\"secret\":\"s" + i + "\"}",
              writer));
    }
    ok(send("DELETE", "/v1/documents/feed/d0", null, writer));
    ok(send("DELETE", "/v1/documents/feed/d1", null, writer));
    String[] last = new String[1];
    List<JsonNode> mine = drain("feed", "beginning", false, carol, last);
    List<String> ids =
        mine.stream()
            .map(c -> c.get("id").asText() + (c.get("deleted").asBoolean() ? "-" : ""))
            .sorted()
            .toList();
    List<String> expected = new ArrayList<>();
    for (int i = 0; i < 12; i++) {
      if (i % 3 != 0) {
        expected.add("d" + i);
      }
    }
    expected.add("d1-");
    assertThat(ids).containsExactlyInAnyOrderElementsOf(expected);
    for (JsonNode c : mine) {
      assertThat(c.toString()).doesNotContain("secret").doesNotContain("\"s1\"");
      if (c.get("deleted").asBoolean()) {
        assertThat(c.get("after").isNull()).isTrue();
        assertThat(c.get("before").get("n").asInt()).isEqualTo(1);
      } else {
        assertThat(c.get("after").get("n").asInt())
            .isEqualTo(Integer.parseInt(c.get("id").asText().substring(1)));
      }
    }
    List<JsonNode> all = drain("feed", "beginning", false, writer, new String[1]);
    assertThat(all).hasSize(14);
    assertThat(
            all.stream()
                .filter(c -> !c.get("deleted").asBoolean())
                .allMatch(c -> c.get("after").has("secret")))
        .isTrue();
    // An empty tail page still returns a cursor; a new write appears after it.
    JsonNode tail = changes("feed", last[0], true, carol, null, null);
    assertThat(tail.get("changes")).isEmpty();
    assertThat(tail.get("hasMore").asBoolean()).isFalse();
    error(put("feed", "d20", "{\"acl\":[\"carol\"],\"n\":20}", writer), 403, "forbidden");
    ok(put("feed", "d20", "{\"acl\":[\"carol\"],\"n\":20}", ADMIN));
    JsonNode next = changes("feed", tail.get("cursor").asText(), true, carol, null, null);
    assertThat(next.get("changes")).hasSize(1);
    assertThat(next.get("changes").get(0).get("id").asText()).isEqualTo("d20");
    // "now" starts at the tail.
    assertThat(changes("feed", "now", false, carol, null, null).get("changes")).isEmpty();
  }

  @Test
  void limitsBoundExaminedPositionsAndSelectedBytes() throws Exception {
    String w = principal("bytes-writer", List.of(), "bytes", "DocumentsWrite", "ChangesRead");
    for (int i = 0; i < 6; i++) {
      ok(put("bytes", "b" + i, "{\"v\":\"" + "x".repeat(100) + "\"}", w));
    }
    JsonNode one = changes("bytes", "beginning", false, w, 1, null);
    assertThat(one.get("changes").size()).isLessThanOrEqualTo(1);
    assertThat(one.get("hasMore").asBoolean()).isTrue();
    int size = "{\"v\":\"\"}".length() + 100;
    error(changesRaw("bytes", "beginning", false, w, 10, (long) size - 1), 413, "budget-exceeded");
    JsonNode exact = changes("bytes", "beginning", false, w, 10, (long) size);
    assertThat(exact.get("changes")).hasSize(1);
    assertThat(exact.get("hasMore").asBoolean()).isTrue();
    JsonNode two = changes("bytes", "beginning", false, w, 10, 2L * size);
    assertThat(two.get("changes")).hasSize(2);
    error(changesRaw("bytes", "beginning", false, w, 0, null), 400, "bad-request");
    error(changesRaw("bytes", "beginning", false, w, 1001, null), 400, "bad-request");
    error(post("/v1/changes/read", "{\"collection\":\"bytes\"}", w), 400, "bad-request");
    error(
        post(
            "/v1/changes/read",
            "{\"collection\":\"bytes\",\"start\":\"beginning\",\"cursor\":\"x\"}",
            w),
        400,
        "bad-request");
    error(
        post(
            "/v1/changes/read", "{\"collection\":\"bytes\",\"start\":\"beginning\",\"what\":1}", w),
        400,
        "bad-request");
  }

  @Test
  void cursorsAreFencedByAclChangesPolicyChangesAndGrantChanges() throws Exception {
    policy("fence", List.of(), "owner", "owner");
    String ed =
        principal("ed", List.of(), "fence", "DocumentsWrite", "DocumentsRead", "ChangesRead");
    ok(put("fence", "f1", "{\"owner\":\"ed\",\"v\":1}", ed));
    String cursor = changes("fence", "now", false, ed, null, null).get("cursor").asText();
    ok(put("fence", "f2", "{\"owner\":\"ed\",\"v\":1}", ed));
    cursor = changes("fence", cursor, true, ed, null, null).get("cursor").asText();
    assertThat(cursor).as("creating a document with an ACL does not fence").isNotNull();
    ok(put("fence", "f1", "{\"owner\":\"ed\",\"v\":2}", ed));
    cursor = changes("fence", cursor, true, ed, null, null).get("cursor").asText();
    // An ACL change of an existing document (by an administrator) fences every cursor of the
    // collection.
    ok(put("fence", "f2", "{\"owner\":\"someone-else\"}", ADMIN));
    error(changesRaw("fence", cursor, true, ed, null, null), 409, "token-invalidated");
    String fresh = changes("fence", "now", false, ed, null, null).get("cursor").asText();
    grant("ed", "fence", "QueryRead");
    error(changesRaw("fence", fresh, true, ed, null, null), 409, "token-invalidated");
    String again = changes("fence", "now", false, ed, null, null).get("cursor").asText();
    policy("fence", List.of("v"), "owner", "owner");
    error(changesRaw("fence", again, true, ed, null, null), 409, "token-invalidated");
    String valid = changes("fence", "now", false, ed, null, null).get("cursor").asText();
    assertThat(changes("fence", valid, true, ed, null, null).get("changes")).isEmpty();
  }

  @Test
  void forgedTamperedForeignExpiredAndRevokedCursorsAreRefused() throws Exception {
    String fay = principal("fay", List.of(), "forge", "DocumentsWrite", "ChangesRead");
    String gus = principal("gus", List.of(), "forge", "ChangesRead");
    grant("fay", "forge-other", "ChangesRead");
    ok(put("forge", "x", "{\"a\":1}", fay));
    String cursor = changes("forge", "beginning", false, fay, null, null).get("cursor").asText();
    int dot = cursor.indexOf('.');
    byte[] payload = Base64.getUrlDecoder().decode(cursor.substring(0, dot));
    payload[payload.length - 1] ^= 1;
    String tampered =
        Base64.getUrlEncoder().withoutPadding().encodeToString(payload) + cursor.substring(dot);
    error(changesRaw("forge", tampered, true, fay, null, null), 400, "invalid-token");
    // Padding, or a last character differing only in unused bits, decodes to the genuine bytes:
    // refused all the same.
    error(changesRaw("forge", cursor + "=", true, fay, null, null), 400, "invalid-token");
    String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    String unusedBits =
        cursor.substring(0, cursor.length() - 1)
            + alphabet.charAt(alphabet.indexOf(cursor.charAt(cursor.length() - 1)) ^ 1);
    error(changesRaw("forge", unusedBits, true, fay, null, null), 400, "invalid-token");
    error(changesRaw("forge", "not-a-cursor", true, fay, null, null), 400, "invalid-token");
    error(changesRaw("forge", cursor, true, gus, null, null), 400, "token-mismatch");
    error(changesRaw("forge-other", cursor, true, fay, null, null), 400, "token-mismatch");
    // A batch token (another kind) signed by the same keys is not a cursor.
    String batch =
        new io.weir.protocol.token.BatchToken("i", 0, "c", 1, 0, 0)
            .sign(signer(), System.currentTimeMillis() + 60_000);
    error(changesRaw("forge", batch, true, fay, null, null), 400, "invalid-token");
    clockOffset.set(Duration.ofHours(24).plusMinutes(1).toMillis());
    try {
      error(changesRaw("forge", cursor, true, fay, null, null), 400, "token-expired");
    } finally {
      clockOffset.set(0);
    }
    assertThat(changes("forge", cursor, true, fay, null, null).has("cursor")).isTrue();
    ok(post("/admin/principals/fay/revoke", "{}", ADMIN));
    error(changesRaw("forge", cursor, true, fay, null, null), 401, "unauthenticated");
  }

  private io.weir.protocol.token.TokenSigner signer() throws Exception {
    io.weir.node.tokens.TokenKeys keys =
        new io.weir.node.tokens.TokenKeys(
            database.dataSource(),
            "weir",
            java.util.concurrent.ForkJoinPool.commonPool(),
            Duration.ofSeconds(2));
    return keys.reload().toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  @Test
  void aCursorPastPurgedHistoryIsHistoryUnavailable() throws Exception {
    String h = principal("hal", List.of(), "purged", "DocumentsWrite", "ChangesRead");
    String cursor = changes("purged", "now", false, h, null, null).get("cursor").asText();
    ok(put("purged", "a", "{}", h));
    ok(put("purged", "b", "{}", h));
    for (int p = 0; p < partitions(); p++) {
      JsonNode status = ok(send("GET", "/admin/outbox/status?partition=" + p, null, ADMIN));
      long through = status.get("outboxNext").asLong() - 1;
      if (through > 0) {
        ok(post("/admin/outbox/purge", Map.of("partition", p, "through", through), ADMIN));
      }
    }
    error(changesRaw("purged", cursor, true, h, null, null), 410, "history-unavailable");
    assertThat(changes("purged", "beginning", false, h, null, null).get("changes")).isEmpty();
  }

  // ---- queries ----

  @Test
  void queriesAreValidatedAuthorisedAndComplete() throws Exception {
    policy("q", List.of("salary"), "none", null);
    String w =
        principal(
            "q-writer",
            List.of(),
            "q",
            "DocumentsWrite",
            "DocumentsRead",
            "QueryRead",
            "FieldUse:*");
    String nofield = principal("q-nofield", List.of(), "q", "DocumentsRead", "QueryRead");
    for (int i = 0; i < 10; i++) {
      ok(
          put(
              "q",
              "e" + i,
              "{\"dept\":\""
                  + (i % 2 == 0 ? "eng" : "ops")
                  + "\",\"salary\":"
                  + (i * 10)
                  + ",\"name\":\"n"
                  + i
                  + "\"}",
              ADMIN));
    }
    String q =
        "{\"collection\":\"q\",\"where\":{\"op\":\"eq\",\"field\":\"dept\",\"value\":\"eng\"},\"select\":[\"name\",\"salary\"]}";
    JsonNode rows = ok(post("/v1/query", queryBody(q, null), w)).get("rows");
    assertThat(rows).hasSize(5);
    assertThat(rows.get(0).get("row").has("salary"))
        .as("a sensitive field stays omitted")
        .isFalse();
    assertThat(rows.get(0).get("row").has("name")).isTrue();
    error(post("/v1/query", queryBody(q, null), nofield), 403, "forbidden");
    String bySalary =
        "{\"collection\":\"q\",\"where\":{\"op\":\"ge\",\"field\":\"salary\",\"value\":50}}";
    error(post("/v1/query", queryBody(bySalary, null), w), 403, "forbidden");
    grant("q-writer", "q", "FieldUse:salary");
    JsonNode rich = ok(post("/v1/query", queryBody(bySalary, null), w)).get("rows");
    assertThat(rich).as("a granted predicate may use a protected field").hasSize(5);
    assertThat(rich.toString()).doesNotContain("salary");
    error(post("/v1/query", queryBody("{\"collection\":\"q\"}", 3), w), 413, "result-too-large");
    error(
        post("/v1/query", queryBody("{\"collection\":\"q\",\"orderBy\":[\"name\"]}", null), w),
        400,
        "unsupported-query");
    error(
        post(
            "/v1/query",
            queryBody(
                "{\"collection\":\"q\",\"where\":{\"op\":\"like\",\"field\":\"a\",\"value\":1}}",
                null),
            w),
        400,
        "invalid-query");
    String deep = "{\"op\":\"exists\",\"field\":\"a\"}";
    for (int i = 0; i < 40; i++) {
      deep = "{\"op\":\"not\",\"arg\":" + deep + "}";
    }
    error(
        post("/v1/query", queryBody("{\"collection\":\"q\",\"where\":" + deep + "}", null), w),
        400,
        "invalid-query");
    HttpResponse<String> secret =
        post(
            "/v1/query",
            queryBody(
                "{\"collection\":\"q\",\"where\":{\"op\":\"in\",\"field\":\"a\",\"values\":[{\"x\":\"TOPSECRET\"}]}}",
                null),
            w);
    error(secret, 400, "invalid-query");
    assertThat(secret.body()).doesNotContain("TOPSECRET");
  }

  @Test
  void liveQueriesStartCompleteAndDeliverUpsertsAndRemoves() throws Exception {
    String w =
        principal(
            "live-writer",
            List.of(),
            "live",
            "DocumentsWrite",
            "DocumentsRead",
            "QueryRead",
            "ChangesRead",
            "FieldUse:*");
    for (int i = 0; i < 6; i++) {
      ok(
          put(
              "live",
              "l" + i,
              "{\"state\":\"" + (i < 3 ? "open" : "closed") + "\",\"n\":" + i + "}",
              w));
    }
    String q =
        "{\"collection\":\"live\",\"where\":{\"op\":\"eq\",\"field\":\"state\",\"value\":\"open\"}}";
    JsonNode start = ok(post("/v1/query/live/start", queryBody(q, null), w));
    Map<String, JsonNode> view = new HashMap<>();
    start.get("rows").forEach(r -> view.put(r.get("id").asText(), r.get("row")));
    assertThat(view.keySet()).containsExactlyInAnyOrder("l0", "l1", "l2");
    ok(put("live", "l3", "{\"state\":\"open\",\"n\":3}", w)); // enters
    ok(put("live", "l0", "{\"state\":\"closed\",\"n\":0}", w)); // leaves
    ok(send("DELETE", "/v1/documents/live/l1", null, w)); // deleted
    ok(put("live", "l4", "{\"state\":\"closed\",\"n\":44}", w)); // never matches
    ok(put("live", "l2", "{\"state\":\"open\",\"n\":22}", w)); // changes inside
    String cursor = start.get("cursor").asText();
    int upserts = 0;
    int removes = 0;
    boolean more = true;
    while (more) {
      ObjectNode read = queryBody(q, null);
      read.put("cursor", cursor);
      read.put("limit", 2);
      JsonNode page = ok(post("/v1/query/live/read", read, w));
      for (JsonNode d : page.get("deltas")) {
        if (d.get("op").asText().equals("upsert")) {
          upserts++;
          view.put(d.get("id").asText(), d.get("row"));
        } else {
          removes++;
          assertThat(d.has("row")).isFalse();
          view.remove(d.get("id").asText());
        }
      }
      cursor = page.get("cursor").asText();
      more = page.get("hasMore").asBoolean();
    }
    assertThat(upserts).isEqualTo(2);
    assertThat(removes).isEqualTo(2);
    assertThat(view.keySet()).containsExactlyInAnyOrder("l2", "l3");
    assertThat(view.get("l2").get("n").asInt()).isEqualTo(22);
    Map<String, JsonNode> fresh = new HashMap<>();
    ok(post("/v1/query", queryBody(q, null), w))
        .get("rows")
        .forEach(r -> fresh.put(r.get("id").asText(), r.get("row")));
    assertThat(view).isEqualTo(fresh);
    // Another predicate cannot continue this cursor; neither can the changes feed.
    ObjectNode other =
        queryBody(
            "{\"collection\":\"live\",\"where\":{\"op\":\"eq\",\"field\":\"state\",\"value\":\"closed\"}}",
            null);
    other.put("cursor", cursor);
    error(post("/v1/query/live/read", other, w), 400, "token-mismatch");
    error(changesRaw("live", cursor, true, w, null, null), 400, "token-mismatch");
    error(post("/v1/query/live/start", queryBody(q, 1), w), 413, "result-too-large");
  }

  @Test
  void aPolicyNotYetOnThisNodeOrAPartitionFailsClosedAndHeals() throws Exception {
    policy("stale", List.of("secret"), "none", null);
    String ivy =
        principal("ivy", List.of(), "stale", "DocumentsRead", "DocumentsWrite", "ChangesRead");
    ok(put("stale", "s1", "{\"secret\":1,\"x\":1}", ADMIN));
    assertThat(ok(send("GET", "/v1/documents/stale/s1", null, ivy)).has("secret")).isFalse();
    // Another node changed the policy: stored, and installed in the partitions, but this node's
    // view is older until its next reload.
    long version;
    try (var c = database.dataSource().getConnection()) {
      version =
          io.weir.persistence.PolicyStore.put(
              c,
              "weir",
              new io.weir.persistence.PolicyStore.CollectionPolicy(
                  "stale",
                  0,
                  List.of("secret"),
                  io.weir.persistence.PolicyStore.Visibility.OWNER,
                  "owner"));
    }
    for (int p = 0; p < partitions(); p++) {
      documents
          .<io.weir.sharding.partition.PartitionProtocol.RowRuleReply>ask(
              p,
              r ->
                  new io.weir.sharding.partition.PartitionProtocol.SetRowRule(
                      "stale", "owner", version, r))
          .get(10, TimeUnit.SECONDS);
    }
    error(send("GET", "/v1/documents/stale/s1", null, ivy), 503, "unavailable");
    // The mismatch made the node reload: now the owner rule holds (s1 has no owner: hidden).
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(60))
        .ignoreExceptionsInstanceOf(java.io.IOException.class) // a poll that timed out
        .until(() -> send("GET", "/v1/documents/stale/s1", null, ivy).statusCode() == 404);
    // A policy this node has but the partitions do not (a PUT that reached none of them).
    try (var c = database.dataSource().getConnection()) {
      io.weir.persistence.PolicyStore.put(
          c,
          "weir",
          new io.weir.persistence.PolicyStore.CollectionPolicy(
              "stale", 0, List.of(), io.weir.persistence.PolicyStore.Visibility.NONE, null));
    }
    policies.reload().toCompletableFuture().get(10, TimeUnit.SECONDS);
    error(changesRaw("stale", "beginning", false, ivy, null, null), 503, "unavailable");
    // The read sent the rule to the partitions again.
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(60))
        .ignoreExceptionsInstanceOf(java.io.IOException.class) // a poll that timed out
        .until(() -> changesRaw("stale", "beginning", false, ivy, null, null).statusCode() == 200);
    assertThat(ok(send("GET", "/v1/documents/stale/s1", null, ivy)).get("secret").asInt())
        .isEqualTo(1);
  }

  @Test
  void aGuardedWriteNeverAppliesToARevisionItDidNotCheck() throws Exception {
    policy("guard", List.of(), "owner", "owner");
    String jo = principal("jo", List.of(), "guard", "DocumentsRead", "DocumentsWrite");
    JsonNode first = ok(put("guard", "g1", "{\"owner\":\"jo\",\"v\":1}", jo));
    long revision = first.get("revision").asLong();
    HttpResponse<String> stale =
        send(
            "PUT",
            "/v1/documents/guard/g1",
            "{\"owner\":\"jo\",\"v\":2}",
            jo,
            Map.of("If-Match", String.valueOf(revision + 1)));
    assertThat(stale.statusCode()).as("%s", stale.body()).isEqualTo(409);
    Map<String, String> keyed =
        Map.of("If-Match", String.valueOf(revision), "Idempotency-Key", "k1");
    JsonNode done =
        ok(send("PUT", "/v1/documents/guard/g1", "{\"owner\":\"jo\",\"v\":2}", jo, keyed));
    JsonNode again =
        ok(send("PUT", "/v1/documents/guard/g1", "{\"owner\":\"jo\",\"v\":2}", jo, keyed));
    assertThat(again.get("replayed").asBoolean())
        .as("a retry with the same key gets its receipt")
        .isTrue();
    assertThat(again.get("revision").asLong()).isEqualTo(done.get("revision").asLong());
    ok(put("guard", "g1", "{\"owner\":\"someone-else\"}", ADMIN));
    error(send("DELETE", "/v1/documents/guard/g1", null, jo), 404, "not-found");
    error(
        send(
            "PUT",
            "/v1/documents/guard/g1",
            "{\"owner\":\"jo\"}",
            jo,
            Map.of("If-Match", String.valueOf(done.get("revision").asLong() + 1))),
        403,
        "forbidden");
    assertThat(ok(send("GET", "/v1/documents/guard/g1", null, ADMIN)).get("owner").asText())
        .isEqualTo("someone-else");
  }
}
