package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.protocol.token.ChangeCursor;
import io.weir.protocol.token.TokenSigner;
import io.weir.sharding.partition.OutboxReader;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.NotUsed;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.EventEnvelope;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.persistence.query.javadsl.CurrentEventsByPersistenceIdQuery;
import org.apache.pekko.stream.javadsl.Source;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * The visibility rules of the changes feed and of queries, one test per rule that fails when the
 * rule's check is removed from {@code Feeds} (each was seen failing under that mutation): an image
 * needs the row's current ACL and the after image's ACL, a before image also its own; the byte
 * budgets count what the reader receives; a query fails closed while a partition runs another
 * policy version; a cursor from a node with newer grants or policy is retryable; row visibility
 * that moves while a page is read fences the page. Against partitions on the real JDBC journal in
 * PostgreSQL; journal reads can be held back at a gate (they still go to PostgreSQL).
 */
class FeedVisibilityIT extends FeedNodeFixture {
  @Override
  String databaseName() {
    return "feed_visibility_it";
  }

  /** Journal reads of the outbox wait here while it is closed. */
  private final GatedJournal gated = new GatedJournal();

  @Override
  OutboxReader outboxReader(org.apache.pekko.actor.typed.ActorSystem<?> system) {
    gated.real =
        PersistenceQuery.get(system)
            .getReadJournalFor(JdbcReadJournal.class, JdbcReadJournal.Identifier());
    return new OutboxReader(system, gated);
  }

  /** The JDBC read journal, whose queries start only once the gate is open. */
  private static final class GatedJournal implements CurrentEventsByPersistenceIdQuery {
    volatile CurrentEventsByPersistenceIdQuery real;
    volatile CompletableFuture<Void> gate = CompletableFuture.completedFuture(null);
    final AtomicInteger held = new AtomicInteger();

    @Override
    public Source<EventEnvelope, NotUsed> currentEventsByPersistenceId(
        String persistenceId, long fromSequenceNr, long toSequenceNr) {
      CompletableFuture<Void> g = gate;
      if (!g.isDone()) {
        held.incrementAndGet();
      }
      return Source.completionStageSource(
              g.thenApply(
                  v ->
                      real.currentEventsByPersistenceId(
                          persistenceId, fromSequenceNr, toSequenceNr)))
          .mapMaterializedValue(m -> NotUsed.getInstance());
    }
  }

  // ---- the changes feed: which images a reader sees ----

  /** One change as (id, revision, before's v or "-", after's v or "-", deleted). */
  private static String shown(JsonNode c) {
    return c.get("id").asText()
        + "@"
        + c.get("revision").asLong()
        + " before="
        + (c.get("before").isNull() ? "-" : c.get("before").get("v").asText())
        + " after="
        + (c.get("after").isNull() ? "-" : c.get("after").get("v").asText())
        + (c.get("deleted").asBoolean() ? " deleted" : "");
  }

  @Test
  void everyImageNeedsTheRowsCurrentAclAndTheAfterImagesAclAndABeforeImageItsOwn()
      throws Exception {
    String c = "images";
    policy(c, List.of(), "acl", "acl");
    String cur = principal("cur", List.of("readers"), c, "ChangesRead");
    // a1: visible, then not: the row's current ACL hides its whole history.
    ok(put(c, "a1", "{\"acl\":[\"cur\"],\"v\":\"a1r1\"}", ADMIN));
    ok(put(c, "a1", "{\"acl\":[\"other\"],\"v\":\"a1r2\"}", ADMIN));
    // a2: visible, hidden, visible again: the change into the hidden state shows nothing (its
    // before image is visible by its own ACL, not by the after image's); the change back shows its
    // after image only.
    ok(put(c, "a2", "{\"acl\":[\"cur\"],\"v\":\"a2r1\"}", ADMIN));
    ok(put(c, "a2", "{\"acl\":[\"other\"],\"v\":\"a2r2\"}", ADMIN));
    ok(put(c, "a2", "{\"acl\":[\"group:readers\"],\"v\":\"a2r3\"}", ADMIN));
    // a3: hidden, then visible: the first change's after image is hidden by its own ACL although
    // the row is visible now.
    ok(put(c, "a3", "{\"acl\":[\"other\"],\"v\":\"a3r1\"}", ADMIN));
    ok(put(c, "a3", "{\"acl\":[\"cur\"],\"v\":\"a3r2\"}", ADMIN));
    // a4: visible, hidden, deleted: the tombstone keeps the hiding ACL.
    ok(put(c, "a4", "{\"acl\":[\"cur\"],\"v\":\"a4r1\"}", ADMIN));
    ok(put(c, "a4", "{\"acl\":[\"other\"],\"v\":\"a4r2\"}", ADMIN));
    ok(send("DELETE", "/v1/documents/" + c + "/a4", null, ADMIN));
    // a5: visible throughout; a6: visible, then deleted (the deletion shows its before image).
    ok(put(c, "a5", "{\"acl\":[\"cur\"],\"v\":\"a5r1\"}", ADMIN));
    ok(put(c, "a5", "{\"acl\":[\"cur\"],\"v\":\"a5r2\"}", ADMIN));
    ok(put(c, "a6", "{\"acl\":[\"cur\"],\"v\":\"a6r1\"}", ADMIN));
    ok(send("DELETE", "/v1/documents/" + c + "/a6", null, ADMIN));

    List<String> seen =
        drain(c, "beginning", false, cur, new String[1]).stream()
            .map(FeedVisibilityIT::shown)
            .toList();
    assertThat(seen)
        .containsExactlyInAnyOrder(
            "a2@1 before=- after=a2r1",
            "a2@3 before=- after=a2r3",
            "a3@2 before=- after=a3r2",
            "a5@1 before=- after=a5r1",
            "a5@2 before=a5r1 after=a5r2",
            "a6@1 before=- after=a6r1",
            "a6@2 before=a6r1 after=- deleted");
    assertThat(drain(c, "beginning", false, ADMIN, new String[1]))
        .as("an administrator sees every change")
        .hasSize(14);
  }

  @Test
  void theFeedOfACollectionShowsNoChangeOfAnotherCollection() throws Exception {
    // Another collection's documents share the partitions, the outbox and even the ids.
    policy("mine-acl", List.of(), "acl", "acl");
    policy("theirs-acl", List.of(), "acl", "acl");
    String reader = principal("own-reader", List.of(), "mine", "ChangesRead");
    grant("own-reader", "mine-acl", "ChangesRead");
    for (int i = 0; i < 6; i++) {
      ok(put("mine", "x" + i, "{\"v\":\"mine\"}", ADMIN));
      ok(put("theirs", "x" + i, "{\"v\":\"theirs\"}", ADMIN));
      ok(put("mine-acl", "x" + i, "{\"acl\":[\"own-reader\"],\"v\":\"mine\"}", ADMIN));
      ok(put("theirs-acl", "x" + i, "{\"acl\":[\"own-reader\"],\"v\":\"theirs\"}", ADMIN));
    }
    for (String c : List.of("mine", "mine-acl")) {
      List<JsonNode> seen = drain(c, "beginning", false, reader, new String[1]);
      assertThat(seen).as("%s", c).hasSize(6);
      assertThat(seen)
          .as("%s", c)
          .allSatisfy(ch -> assertThat(ch.get("after").get("v").asText()).isEqualTo("mine"));
    }
  }

  // ---- byte budgets count what the reader receives ----

  /**
   * The first page after {@code start} that is not 200, holds changes or ends the feed (other
   * collections' positions may fill earlier pages).
   */
  private HttpResponse<String> firstChanges(
      String c, String start, boolean cursor, String token, long maxBytes) throws Exception {
    String at = start;
    boolean isCursor = cursor;
    for (int pages = 0; pages < 1000; pages++) {
      HttpResponse<String> r = changesRaw(c, at, isCursor, token, 1000, maxBytes);
      if (r.statusCode() != 200) {
        return r;
      }
      JsonNode page = json.readTree(r.body());
      if (!page.get("changes").isEmpty() || !page.get("hasMore").asBoolean()) {
        return r;
      }
      at = page.get("cursor").asText();
      isCursor = true;
    }
    throw new AssertionError("the feed never ended");
  }

  @Test
  void theFeedsByteBudgetCountsImagesWithoutTheFieldsTheReaderMayNotRead() throws Exception {
    String c = "proj-bytes";
    policy(c, List.of("secret"), "none", null);
    String reader = principal("pb-reader", List.of(), c, "ChangesRead");
    String big = "x".repeat(300);
    ok(put(c, "b1", "{\"v\":\"a\",\"secret\":\"" + big + "\"}", ADMIN));
    ok(put(c, "b1", "{\"v\":\"b\",\"secret\":\"" + big + "\"}", ADMIN));
    int image = "{\"v\":\"a\"}".length();
    error(firstChanges(c, "beginning", false, reader, image - 1), 413, "budget-exceeded");
    JsonNode first = ok(firstChanges(c, "beginning", false, reader, image));
    assertThat(first.get("changes")).hasSize(1);
    assertThat(first.get("changes").get(0).get("revision").asLong()).isEqualTo(1);
    assertThat(first.get("changes").get(0).get("after").has("secret")).isFalse();
    String cursor = first.get("cursor").asText();
    // The update carries a before and an after image: both count, projected.
    error(firstChanges(c, cursor, true, reader, 2L * image - 1), 413, "budget-exceeded");
    JsonNode second = ok(firstChanges(c, cursor, true, reader, 2L * image));
    assertThat(second.get("changes")).hasSize(1);
    JsonNode update = second.get("changes").get(0);
    assertThat(update.get("revision").asLong()).isEqualTo(2);
    assertThat(update.get("before").toString()).isEqualTo("{\"v\":\"a\"}");
    assertThat(update.get("after").toString()).isEqualTo("{\"v\":\"b\"}");
  }

  @Test
  void byteLimitsCountUtf8BytesNotCharacters() throws Exception {
    String c = "utf8-bytes";
    // 100 characters of three bytes each: 300 bytes, which a count of characters would take for
    // about 110.
    String body = "{\"v\":\"" + "日".repeat(100) + "\"}";
    long bytes = body.getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
    ok(put(c, "u1", body, ADMIN));
    error(firstChanges(c, "beginning", false, ADMIN, bytes - 1), 413, "budget-exceeded");
    assertThat(ok(firstChanges(c, "beginning", false, ADMIN, bytes)).get("changes")).hasSize(1);
    ObjectNode under = queryBody("{\"collection\":\"" + c + "\"}", null);
    under.put("maxBytes", bytes - 1);
    error(post("/v1/query", under, ADMIN), 413, "result-too-large");
    ObjectNode exact = queryBody("{\"collection\":\"" + c + "\"}", null);
    exact.put("maxBytes", bytes);
    assertThat(ok(post("/v1/query", exact, ADMIN)).get("rows")).hasSize(1);
  }

  @Test
  void aQuerysByteLimitCountsRowsWithoutTheFieldsTheReaderMayNotRead() throws Exception {
    String c = "query-bytes";
    policy(c, List.of("secret"), "none", null);
    String reader =
        principal("qb-reader", List.of(), c, "DocumentsRead", "QueryRead", "ChangesRead");
    ok(put(c, "q1", "{\"k\":1,\"secret\":\"" + "y".repeat(300) + "\"}", ADMIN));
    ok(put(c, "q2", "{\"k\":2,\"secret\":\"" + "y".repeat(300) + "\"}", ADMIN));
    long rows = 2L * "{\"k\":1}".length();
    for (String path : List.of("/v1/query", "/v1/query/live/start")) {
      ObjectNode exact = queryBody("{\"collection\":\"" + c + "\"}", null);
      exact.put("maxBytes", rows);
      JsonNode result = ok(post(path, exact, reader));
      assertThat(result.get("rows")).hasSize(2);
      assertThat(result.get("rows").toString()).doesNotContain("secret");
      ObjectNode under = queryBody("{\"collection\":\"" + c + "\"}", null);
      under.put("maxBytes", rows - 1);
      error(post(path, under, reader), 413, "result-too-large");
    }
  }

  // ---- the grants each read needs ----

  @Test
  void queriesNeedQueryReadAndDocumentsReadAndLiveQueriesAlsoChangesRead() throws Exception {
    String c = "grants";
    ok(put(c, "g1", "{\"k\":1}", ADMIN));
    String q = "{\"collection\":\"" + c + "\"}";
    String queryOnly = principal("g-query", List.of(), c, "QueryRead", "ChangesRead");
    String documentsOnly = principal("g-docs", List.of(), c, "DocumentsRead", "ChangesRead");
    String noChanges = principal("g-nochanges", List.of(), c, "QueryRead", "DocumentsRead");
    String all = principal("g-all", List.of(), c, "QueryRead", "DocumentsRead", "ChangesRead");
    for (String token : List.of(queryOnly, documentsOnly)) {
      error(post("/v1/query", queryBody(q, null), token), 403, "forbidden");
      error(post("/v1/query/live/start", queryBody(q, null), token), 403, "forbidden");
    }
    assertThat(ok(post("/v1/query", queryBody(q, null), noChanges)).get("rows")).hasSize(1);
    error(post("/v1/query/live/start", queryBody(q, null), noChanges), 403, "forbidden");
    JsonNode live = ok(post("/v1/query/live/start", queryBody(q, null), all));
    assertThat(live.get("rows")).hasSize(1);
    ObjectNode read = queryBody(q, null);
    read.put("cursor", live.get("cursor").asText());
    error(post("/v1/query/live/read", read, noChanges), 403, "forbidden");
    assertThat(ok(post("/v1/query/live/read", read, all)).get("deltas")).isEmpty();
  }

  // ---- queries fail closed while a partition runs another policy version ----

  @Test
  void queriesAndLiveStartsFailClosedWhileAPartitionRunsAnotherPolicyVersion() throws Exception {
    String c = "stale-query";
    policy(c, List.of(), "none", null);
    String ivo =
        principal("ivo", List.of(), c, "DocumentsRead", "QueryRead", "ChangesRead", "FieldUse:*");
    ok(put(c, "s1", "{\"x\":1}", ADMIN));
    String q = "{\"collection\":\"" + c + "\"}";
    assertThat(ok(post("/v1/query", queryBody(q, null), ivo)).get("rows")).hasSize(1);
    // Another node stored an owner rule and installed it in the partitions; this node has not
    // reloaded yet. Under the owner rule s1 (no owner) is hidden.
    long version;
    try (var conn = database.dataSource().getConnection()) {
      version =
          io.weir.persistence.PolicyStore.put(
              conn,
              "weir",
              new io.weir.persistence.PolicyStore.CollectionPolicy(
                  c, 0, List.of(), io.weir.persistence.PolicyStore.Visibility.OWNER, "owner"));
    }
    for (int p = 0; p < partitions(); p++) {
      documents
          .<io.weir.sharding.partition.PartitionProtocol.RowRuleReply>ask(
              p,
              r ->
                  new io.weir.sharding.partition.PartitionProtocol.SetRowRule(
                      c, "owner", version, r))
          .get(10, TimeUnit.SECONDS);
    }
    error(post("/v1/query", queryBody(q, null), ivo), 503, "unavailable");
    Awaitility.await()
        .atMost(Duration.ofSeconds(60))
        .ignoreExceptionsInstanceOf(java.io.IOException.class) // a poll that timed out
        .until(() -> post("/v1/query", queryBody(q, null), ivo).statusCode() == 200);
    assertThat(ok(post("/v1/query", queryBody(q, null), ivo)).get("rows"))
        .as("the owner rule holds now")
        .isEmpty();
    // A policy this node has but the partitions do not (a PUT that reached none of them).
    try (var conn = database.dataSource().getConnection()) {
      io.weir.persistence.PolicyStore.put(
          conn,
          "weir",
          new io.weir.persistence.PolicyStore.CollectionPolicy(
              c, 0, List.of(), io.weir.persistence.PolicyStore.Visibility.NONE, null));
    }
    policies.reload().toCompletableFuture().get(10, TimeUnit.SECONDS);
    error(post("/v1/query/live/start", queryBody(q, null), ivo), 503, "unavailable");
    Awaitility.await()
        .atMost(Duration.ofSeconds(60))
        .ignoreExceptionsInstanceOf(java.io.IOException.class) // a poll that timed out
        .until(() -> post("/v1/query/live/start", queryBody(q, null), ivo).statusCode() == 200);
    assertThat(ok(post("/v1/query/live/start", queryBody(q, null), ivo)).get("rows")).hasSize(1);
  }

  // ---- cursors from a node that knows newer grants or policy ----

  private TokenSigner signer() throws Exception {
    io.weir.node.tokens.TokenKeys other =
        new io.weir.node.tokens.TokenKeys(
            database.dataSource(),
            "weir",
            java.util.concurrent.ForkJoinPool.commonPool(),
            Duration.ofSeconds(2));
    return other.reload().toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  @Test
  void aCursorIssuedUnderNewerGrantsOrPolicyIsRetryableAndAnotherPartitionCountIsAMismatch()
      throws Exception {
    String c = "newer";
    policy(c, List.of(), "none", null);
    String kim = principal("kim", List.of(), c, "ChangesRead");
    ok(put(c, "n1", "{\"v\":1}", ADMIN));
    TokenSigner signer = signer();
    String genuine = changes(c, "beginning", false, kim, null, null).get("cursor").asText();
    ChangeCursor cursor = ChangeCursor.verify(signer, genuine, System.currentTimeMillis());
    long expiry = System.currentTimeMillis() + 60_000;
    // Another node had loaded a grant change (a higher policy epoch) this one has not.
    String newerGrants =
        new ChangeCursor(
                c,
                "kim",
                cursor.policyEpoch() + 1,
                cursor.policyVersion(),
                cursor.queryHash(),
                cursor.fence(),
                cursor.positions())
            .sign(signer, expiry);
    error(changesRaw(c, newerGrants, true, kim, null, null), 503, "unavailable");
    String newerPolicy =
        new ChangeCursor(
                c,
                "kim",
                cursor.policyEpoch(),
                cursor.policyVersion() + 1,
                cursor.queryHash(),
                cursor.fence(),
                cursor.positions())
            .sign(signer, expiry);
    error(changesRaw(c, newerPolicy, true, kim, null, null), 503, "unavailable");
    // A cursor bound to an older policy version is fenced even where its fence still matches.
    String olderPolicy =
        new ChangeCursor(
                c,
                "kim",
                cursor.policyEpoch(),
                cursor.policyVersion() - 1,
                cursor.queryHash(),
                cursor.fence(),
                cursor.positions())
            .sign(signer, expiry);
    error(changesRaw(c, olderPolicy, true, kim, null, null), 409, "token-invalidated");
    long[] more = java.util.Arrays.copyOf(cursor.positions(), cursor.positions().length + 1);
    String otherCount =
        new ChangeCursor(
                c,
                "kim",
                cursor.policyEpoch(),
                cursor.policyVersion(),
                cursor.queryHash(),
                cursor.fence(),
                more)
            .sign(signer, expiry);
    error(changesRaw(c, otherCount, true, kim, null, null), 400, "token-mismatch");
    assertThat(changes(c, genuine, true, kim, null, null).has("cursor"))
        .as("the genuine cursor still reads")
        .isTrue();
  }

  @Test
  void aCursorSignedWithAKeyThisNodeHasNotLoadedYetIsReadAfterAReload() throws Exception {
    String c = "rotated";
    String ray = principal("ray", List.of(), c, "ChangesRead");
    ok(put(c, "r1", "{\"v\":1}", ADMIN));
    String genuine = changes(c, "beginning", false, ray, null, null).get("cursor").asText();
    // Another node rotated the keys and signed this cursor with the new one.
    io.weir.node.tokens.TokenKeys other =
        new io.weir.node.tokens.TokenKeys(
            database.dataSource(),
            "weir",
            java.util.concurrent.ForkJoinPool.commonPool(),
            Duration.ofSeconds(2));
    other.reload().toCompletableFuture().get(10, TimeUnit.SECONDS);
    ChangeCursor fields =
        ChangeCursor.verify(other.signer().orElseThrow(), genuine, System.currentTimeMillis());
    TokenSigner rotated = other.rotate().toCompletableFuture().get(10, TimeUnit.SECONDS);
    String resigned = fields.sign(rotated, System.currentTimeMillis() + 60_000);
    assertThat(resigned).isNotEqualTo(genuine);
    assertThat(changes(c, resigned, true, ray, null, null).has("cursor")).isTrue();
  }

  // ---- row visibility that moves while a page is read ----

  @Test
  void anAclChangeWhileAPageIsReadFencesThePage() throws Exception {
    String c = "moving";
    policy(c, List.of(), "acl", "acl");
    String lee = principal("lee", List.of(), c, "ChangesRead");
    String cursor = changes(c, "now", false, lee, null, null).get("cursor").asText();
    ok(put(c, "m1", "{\"acl\":[\"lee\"],\"v\":1}", ADMIN));
    // The page's journal read waits at the gate; meanwhile an administrator changes m1's ACL.
    gated.held.set(0);
    gated.gate = new CompletableFuture<>();
    AtomicReference<HttpResponse<String>> answer = new AtomicReference<>();
    String from = cursor;
    CompletableFuture<Void> reading =
        CompletableFuture.runAsync(
            () -> {
              try {
                answer.set(changesRaw(c, from, true, lee, null, null));
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            });
    try {
      Awaitility.await().atMost(Duration.ofSeconds(60)).until(() -> gated.held.get() > 0);
      ok(put(c, "m1", "{\"acl\":[\"someone-else\"],\"v\":2}", ADMIN));
    } finally {
      gated.gate.complete(null);
    }
    reading.get(60, TimeUnit.SECONDS);
    error(answer.get(), 409, "token-invalidated");
    assertThat(drain(c, "beginning", false, lee, new String[1])).as("m1 is hidden now").isEmpty();
  }
}
