package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.typesafe.config.ConfigFactory;
import io.weir.node.NodeSettings;
import io.weir.node.auth.Principal;
import io.weir.node.auth.TokenAuthenticator;
import io.weir.node.cdc.PipelineConfig;
import io.weir.node.documents.Documents;
import io.weir.node.projection.Projections;
import io.weir.protocol.partition.Partitioning;
import io.weir.protocol.token.BatchToken;
import io.weir.protocol.token.TokenSigner;
import io.weir.sharding.partition.PartitionSettings;
import java.net.http.HttpResponse;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The projection API over HTTP against partitions on the real JDBC journal in PostgreSQL: every
 * rule of configure, read, commit, release, status and purge, and each typed error. Each test works
 * in a partition of its own.
 */
class ProjectionApiIT extends FeedNodeFixture {
  private static final String READER = "reader-token-for-projection-api-it";
  private static final int PARTITIONS = 16;

  /** How long after a rotation the previous key may be retired (a node's reload interval). */
  private static final Duration RETIRE_AFTER = Duration.ofSeconds(2);

  /** Small limits so tests can reach them. */
  private static final PartitionSettings LIMITS =
      new PartitionSettings(30, 1L << 30, 256, 20_000).withProjections(3, 4, 1L << 30, 8);

  private static final NodeSettings.Projections READS =
      new NodeSettings.Projections(100, 1000, 4L << 20, 16L << 20, 64 * 1024);

  @Override
  String databaseName() {
    return "projection_api_it";
  }

  @Override
  int partitions() {
    return PARTITIONS;
  }

  @Override
  PartitionSettings partitionLimits() {
    return LIMITS;
  }

  @Override
  List<PipelineConfig> pipelines() {
    return List.of(
        PipelineConfig.all(
                ConfigFactory.parseString(
                        "weir.postgres.url = \"jdbc:postgresql://127.0.0.1/weir\"\n"
                            + "weir.pipelines.orders { slot = orders_slot, publications = [orders_pub], autostart = false,"
                            + " sink { type = partitions, collections { \"public.orders\" = cdcorders } } }")
                    .withFallback(ConfigFactory.load()))
            .get(0));
  }

  @Override
  long maxDocumentBytes() {
    return 4096;
  }

  @Override
  TokenAuthenticator bootstrap() {
    return TokenAuthenticator.withBootstrapAdmin(ADMIN)
        .with(READER, new Principal("reader", false));
  }

  @Override
  Projections projections(Documents documents, io.weir.node.tokens.TokenKeys keys, Clock clock) {
    return projectionsWith(documents, keys, clock, READS, LIMITS.maxEffects());
  }

  // ---- helpers ----

  HttpResponse<String> post(String path, Object body) throws Exception {
    return send("POST", path, body instanceof String s ? s : json.writeValueAsString(body), ADMIN);
  }

  /** The n-th id of {@code collection} that lives in {@code partition}. */
  private static String idIn(String collection, int partition, int n) {
    int found = 0;
    for (int i = 0; ; i++) {
      String id = "k" + i;
      if (Partitioning.partitionOf(collection, id, PARTITIONS) == partition && found++ == n) {
        return id;
      }
    }
  }

  private void put(String collection, String id, String body) throws Exception {
    ok(send("PUT", "/v1/documents/" + collection + "/" + id, body, ADMIN), 200);
  }

  private void delete(String collection, String id) throws Exception {
    ok(send("DELETE", "/v1/documents/" + collection + "/" + id, null, ADMIN), 200);
  }

  private ObjectNode identity(int partition, String consumer) {
    ObjectNode n = json.createObjectNode();
    n.put("partition", partition);
    n.put("consumer", consumer);
    n.put("generation", 1);
    return n;
  }

  private JsonNode configure(
      int partition, String consumer, List<String> collections, List<String> kinds)
      throws Exception {
    ObjectNode n = identity(partition, consumer);
    collections.forEach(n.putArray("collections")::add);
    kinds.forEach(n.putArray("kinds")::add);
    return ok(post("/admin/projections/configure", n), 201);
  }

  private JsonNode read(int partition, String consumer, Integer maxEntries) throws Exception {
    ObjectNode n = identity(partition, consumer);
    if (maxEntries != null) {
      n.put("maxEntries", maxEntries);
    }
    return ok(post("/admin/projections/read", n), 200);
  }

  private ObjectNode commitBody(String token, Object... effects) {
    ObjectNode n = json.createObjectNode();
    n.put("token", token);
    ArrayNode list = n.putArray("effects");
    for (Object e : effects) {
      list.add(json.valueToTree(e));
    }
    return n;
  }

  private static Map<String, Object> upsert(
      String collection, String id, long expected, Map<String, Object> document) {
    return Map.of(
        "op",
        "upsert",
        "collection",
        collection,
        "id",
        id,
        "expectedRevision",
        expected,
        "document",
        document);
  }

  private JsonNode status(int partition) throws Exception {
    return ok(send("GET", "/admin/outbox/status?partition=" + partition, null, ADMIN), 200);
  }

  private JsonNode consumerStatus(int partition, String consumer) throws Exception {
    for (JsonNode c : status(partition).get("consumers")) {
      if (c.get("consumer").asText().equals(consumer)) {
        return c;
      }
    }
    throw new AssertionError("no consumer " + consumer + " in the status");
  }

  // ---- tests ----

  @Test
  void onlyClusterAdministratorsReachTheProjectionApi() throws Exception {
    for (String op : List.of("configure", "read", "commit", "release")) {
      error(send("POST", "/admin/projections/" + op, "{}", READER), 403, "forbidden");
      error(send("POST", "/admin/projections/" + op, "{}", null), 401, "unauthenticated");
    }
  }

  @Test
  void configureCreatesAnImmutableIdentityWithinTheLimits() throws Exception {
    int p = 1;
    String src = idIn("src", p, 0);
    put("src", src, "{\"v\":1}");
    JsonNode created = configure(p, "idx", List.of("src"), List.of("upsert"));
    assertThat(created.get("created").asBoolean()).isTrue();
    assertThat(created.get("consumer").get("checkpoint").asLong())
        .as("the retained beginning")
        .isZero();
    ObjectNode same = identity(p, "idx");
    same.putArray("collections").add("src");
    same.putArray("kinds").add("upsert");
    assertThat(ok(post("/admin/projections/configure", same), 200).get("created").asBoolean())
        .isFalse();
    ObjectNode other = identity(p, "idx");
    other.putArray("collections").add("other");
    error(post("/admin/projections/configure", other), 409, "conflict");
    configure(p, "second", List.of(), List.of());
    configure(p, "third", List.of(), List.of());
    error(post("/admin/projections/configure", identity(p, "fourth")), 409, "too-many-consumers");
    // Bad input changes nothing.
    error(post("/admin/projections/configure", "{\"partition\":1,"), 400, "malformed-json");
    error(
        post(
            "/admin/projections/configure",
            "{\"partition\":1,\"consumer\":\"x\",\"generation\":1,\"extra\":true}"),
        400,
        "bad-request");
    error(
        post(
            "/admin/projections/configure",
            "{\"partition\":\"1\",\"consumer\":\"x\",\"generation\":1}"),
        400,
        "bad-request");
    error(
        post("/admin/projections/configure", "{\"partition\":1,\"consumer\":12,\"generation\":1}"),
        400,
        "bad-request");
    error(
        post(
            "/admin/projections/configure",
            "{\"partition\":99,\"consumer\":\"x\",\"generation\":1}"),
        400,
        "bad-request");
    error(
        post(
            "/admin/projections/configure",
            "{\"partition\":1,\"consumer\":\"bad name\",\"generation\":1}"),
        400,
        "bad-request");
    error(
        post(
            "/admin/projections/configure",
            "{\"partition\":1,\"consumer\":\"x\",\"generation\":0}"),
        400,
        "bad-request");
    error(
        post(
            "/admin/projections/configure",
            "{\"partition\":1,\"consumer\":\"x\",\"generation\":1,\"kinds\":[\"merge\"]}"),
        400,
        "bad-request");
    error(
        post(
            "/admin/projections/configure",
            "{\"partition\":1,\"consumer\":\"x\",\"generation\":1,\"startAfter\":-1}"),
        400,
        "bad-request");
    assertThat(status(p).get("consumers")).hasSize(3);
  }

  @Test
  void startAfterMustBeARetainedCut() throws Exception {
    int p = 2;
    for (int i = 0; i < 4; i++) {
      put("src", idIn("src", p, i), "{}");
    }
    ok(post("/admin/outbox/purge", Map.of("partition", p, "through", 2)), 200);
    ObjectNode old = identity(p, "old");
    old.put("startAfter", 1);
    error(post("/admin/projections/configure", old), 410, "history-unavailable");
    ObjectNode past = identity(p, "past");
    past.put("startAfter", 9);
    error(post("/admin/projections/configure", past), 400, "bad-request");
    ObjectNode cut = identity(p, "cut");
    cut.put("startAfter", 3);
    assertThat(
            ok(post("/admin/projections/configure", cut), 201)
                .get("consumer")
                .get("checkpoint")
                .asLong())
        .isEqualTo(3);
    assertThat(
            configure(p, "default", List.of(), List.of())
                .get("consumer")
                .get("checkpoint")
                .asLong())
        .as("the default is the retained beginning")
        .isEqualTo(2);
  }

  @Test
  void readReturnsAContiguousFilteredBatchAndChangesNothing() throws Exception {
    int p = 3;
    String a = idIn("src", p, 0);
    String b = idIn("noise", p, 0);
    put("src", a, "{\"v\":1}");
    put("noise", b, "{\"n\":1}");
    put("src", a, "{\"v\":2}");
    delete("src", a);
    configure(p, "upserts", List.of("src"), List.of("upsert"));
    JsonNode batch = read(p, "upserts", null);
    assertThat(batch.get("start").asLong()).isZero();
    assertThat(batch.get("through").asLong())
        .as("filtered positions advance the batch")
        .isEqualTo(4);
    assertThat(batch.get("hasMore").asBoolean()).isFalse();
    assertThat(batch.get("entries"))
        .extracting(e -> e.get("sequence").asLong())
        .containsExactly(1L, 3L);
    JsonNode second = batch.get("entries").get(1);
    assertThat(second.get("before")).as("images are JSON").isEqualTo(json.readTree("{\"v\":1}"));
    assertThat(second.get("after")).isEqualTo(json.readTree("{\"v\":2}"));
    assertThat(second.get("revision").asLong()).isEqualTo(2);
    assertThat(second.get("kind").asText()).isEqualTo("upsert");
    assertThat(second.get("commitLsn").isNull()).as("API writes have no commit LSN").isTrue();
    JsonNode again = read(p, "upserts", null);
    assertThat(again.get("through").asLong()).as("reading changes no checkpoint").isEqualTo(4);
    assertThat(consumerStatus(p, "upserts").get("checkpoint").asLong()).isZero();
    assertThat(consumerStatus(p, "upserts").get("lag").asLong()).isEqualTo(4);
    JsonNode small = read(p, "upserts", 2);
    assertThat(small.get("through").asLong()).isEqualTo(2);
    assertThat(small.get("hasMore").asBoolean()).isTrue();
    assertThat(small.get("entries")).hasSize(1);
    // Budgets.
    ObjectNode tiny = identity(p, "upserts");
    tiny.put("maxBytes", 3);
    error(post("/admin/projections/read", tiny), 413, "budget-exceeded");
    ObjectNode fits = identity(p, "upserts");
    fits.put("maxBytes", 7);
    JsonNode one = ok(post("/admin/projections/read", fits), 200);
    assertThat(one.get("entries")).as("stops before the entry that does not fit").hasSize(1);
    assertThat(one.get("through").asLong()).isEqualTo(2);
    for (String bad :
        List.of(
            "\"maxEntries\":0",
            "\"maxEntries\":-1",
            "\"maxEntries\":1001",
            "\"maxBytes\":0",
            "\"maxBytes\":16777217",
            "\"maxEntries\":1.5")) {
      error(
          post(
              "/admin/projections/read",
              "{\"partition\":3,\"consumer\":\"upserts\",\"generation\":1," + bad + "}"),
          400,
          "bad-request");
    }
    error(post("/admin/projections/read", identity(p, "nobody")), 404, "not-found");
  }

  @Test
  void commitAppliesEffectsCheckpointAndReceiptTogether() throws Exception {
    int p = 4;
    String a = idIn("src", p, 0);
    String d = idIn("derived", p, 0);
    put("src", a, "{\"v\":1}");
    put("src", a, "{\"v\":2}");
    configure(p, "idx", List.of("src"), List.of());
    JsonNode batch = read(p, "idx", null);
    String token = batch.get("token").asText();
    JsonNode done =
        ok(
            post(
                "/admin/projections/commit",
                commitBody(token, upsert("derived", d, 0, Map.of("latest", 2)))),
            200);
    assertThat(done.get("alreadyProcessed").asBoolean()).isFalse();
    assertThat(done.get("checkpoint").asLong()).isEqualTo(2);
    assertThat(done.get("receipt").get("revisions"))
        .extracting(JsonNode::asLong)
        .containsExactly(1L);
    JsonNode doc = json.readTree(send("GET", "/v1/documents/derived/" + d, null, ADMIN).body());
    assertThat(doc).isEqualTo(json.readTree("{\"latest\":2}"));
    assertThat(consumerStatus(p, "idx").get("checkpoint").asLong()).isEqualTo(2);

    // The same batch and effects under another command id: the original receipt, nothing written.
    ObjectNode retry = commitBody(token, upsert("derived", d, 0, Map.of("latest", 2)));
    retry.put("commandId", "another-id");
    JsonNode replay = ok(post("/admin/projections/commit", retry), 200);
    assertThat(replay.get("alreadyProcessed").asBoolean()).isTrue();
    assertThat(replay.get("receipt")).isEqualTo(done.get("receipt"));
    long entries = status(p).get("outboxEntries").asLong();
    // Changed effects for the committed batch conflict.
    error(
        post(
            "/admin/projections/commit",
            commitBody(token, upsert("derived", d, 0, Map.of("latest", 3)))),
        409,
        "conflict");
    assertThat(status(p).get("outboxEntries").asLong()).isEqualTo(entries);

    // A batch read before the checkpoint moved is stale (positions: 1-2 src, 3 the effect, 4 src).
    put("src", a, "{\"v\":3}");
    String narrow = read(p, "idx", 1).get("token").asText();
    JsonNode wide = read(p, "idx", null);
    assertThat(wide.get("through").asLong()).isEqualTo(4);
    ok(post("/admin/projections/commit", commitBody(wide.get("token").asText())), 200);
    error(post("/admin/projections/commit", commitBody(narrow)), 409, "stale-batch");
    assertThat(consumerStatus(p, "idx").get("checkpoint").asLong()).isEqualTo(4);
  }

  private String incarnationOf(String token) {
    try {
      return BatchToken.verify(keys.signer().orElseThrow(), token, System.currentTimeMillis())
          .incarnation();
    } catch (TokenSigner.InvalidToken e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void aFailingEffectRollsBackEffectsAndCheckpoint() throws Exception {
    int p = 5;
    String a = idIn("src", p, 0);
    String d0 = idIn("derived", p, 0);
    String d1 = idIn("derived", p, 1);
    put("src", a, "{}");
    put("derived", d1, "{\"exists\":true}");
    configure(p, "idx", List.of("src"), List.of());
    String token = read(p, "idx", null).get("token").asText();
    long entries = status(p).get("outboxEntries").asLong();
    error(
        post(
            "/admin/projections/commit",
            commitBody(
                token,
                upsert("derived", d0, 0, Map.of("a", 1)),
                upsert("derived", d1, 0, Map.of("a", 1)))),
        409,
        "conflict");
    assertThat(send("GET", "/v1/documents/derived/" + d0, null, ADMIN).statusCode())
        .as("rolled back")
        .isEqualTo(404);
    assertThat(consumerStatus(p, "idx").get("checkpoint").asLong()).isZero();
    assertThat(status(p).get("outboxEntries").asLong()).isEqualTo(entries);
    // Effects must stay in the batch's partition, off CDC collections, and be well formed.
    String elsewhere = idIn("derived", p + 1, 0);
    error(
        post(
            "/admin/projections/commit",
            commitBody(token, upsert("derived", elsewhere, 0, Map.of()))),
        400,
        "cross-partition-effect");
    error(
        post(
            "/admin/projections/commit",
            commitBody(token, upsert("cdcorders", idIn("cdcorders", p, 0), 0, Map.of()))),
        409,
        "collection-fed-by-cdc");
    error(
        post("/admin/projections/commit", commitBody(token, upsert("derived", d0, -1, Map.of()))),
        400,
        "bad-request");
    error(
        post(
            "/admin/projections/commit",
            commitBody(
                token,
                Map.of("op", "merge", "collection", "derived", "id", d0, "expectedRevision", 0))),
        400,
        "bad-request");
    error(
        post(
            "/admin/projections/commit",
            commitBody(token, Map.of("op", "upsert", "collection", "derived", "id", d0))),
        400,
        "bad-request");
    List<Object> many = new ArrayList<>();
    for (int i = 0; i < LIMITS.maxEffects() + 1; i++) {
      many.add(upsert("derived", idIn("derived", p, i), 0, Map.of()));
    }
    error(
        post("/admin/projections/commit", commitBody(token, many.toArray())),
        413,
        "effects-too-large");
    error(
        post(
            "/admin/projections/commit",
            commitBody(token, upsert("derived", d0, 0, Map.of("big", "x".repeat(5000))))),
        413,
        "document-too-large");
    error(
        post("/admin/projections/commit", "{\"token\":\"" + token + "\",\"unknown\":1}"),
        400,
        "bad-request");
    // Text fields take text only.
    error(post("/admin/projections/commit", "{\"token\":123}"), 400, "bad-request");
    error(post("/admin/projections/commit", "{\"token\":true}"), 400, "bad-request");
    error(
        post(
            "/admin/projections/commit",
            "{\"token\":\""
                + token
                + "\",\"effects\":[{\"op\":\"upsert\","
                + "\"collection\":5,\"id\":7,\"expectedRevision\":0,\"document\":{}}]}"),
        400,
        "bad-request");
    error(
        post(
            "/admin/projections/commit",
            "{\"token\":\""
                + token
                + "\",\"effects\":[{\"op\":\"delete\","
                + "\"collection\":\"derived\",\"id\":\""
                + d0
                + "\",\"expectedRevision\":\"1\"}]}"),
        400,
        "bad-request");
    error(
        post(
            "/admin/projections/commit",
            "{\"token\":\"" + token + "\",\"token\":\"" + token + "\"}"),
        400,
        "malformed-json");
    assertThat(consumerStatus(p, "idx").get("checkpoint").asLong()).as("nothing changed").isZero();
    // And the same batch still commits.
    ok(
        post(
            "/admin/projections/commit",
            commitBody(token, upsert("derived", d0, 0, Map.of("a", 1)))),
        200);
  }

  @Test
  void aBatchTokenSignedWithAKeyThisNodeHasNotLoadedYetCommitsAfterAReload() throws Exception {
    int p = 11;
    put("rot-src", idIn("rot-src", p, 0), "{}");
    configure(p, "rot-idx", List.of("rot-src"), List.of());
    String token = read(p, "rot-idx", null).get("token").asText();
    // Another node rotated the keys and signed this batch with the new one.
    io.weir.node.tokens.TokenKeys other =
        new io.weir.node.tokens.TokenKeys(
            database.dataSource(),
            "weir",
            java.util.concurrent.ForkJoinPool.commonPool(),
            Duration.ofSeconds(2));
    other.reload().toCompletableFuture().get(10, java.util.concurrent.TimeUnit.SECONDS);
    BatchToken fields =
        BatchToken.verify(other.signer().orElseThrow(), token, System.currentTimeMillis());
    TokenSigner rotated =
        other.rotate().toCompletableFuture().get(10, java.util.concurrent.TimeUnit.SECONDS);
    String resigned = fields.sign(rotated, System.currentTimeMillis() + 60_000);
    assertThat(resigned).isNotEqualTo(token);
    assertThat(
            ok(post("/admin/projections/commit", commitBody(resigned)), 200)
                .get("checkpoint")
                .asLong())
        .isEqualTo(fields.end());
  }

  @Test
  void forgedTamperedExpiredAndMisdirectedTokensAreRefused() throws Exception {
    int p = 6;
    put("src", idIn("src", p, 0), "{}");
    configure(p, "idx", List.of(), List.of());
    configure(p, "other", List.of(), List.of());
    String token = read(p, "idx", null).get("token").asText();
    byte[] otherKey = new byte[32];
    new java.security.SecureRandom().nextBytes(otherKey);
    String forged =
        new BatchToken(incarnationOf(token), p, "idx", 1, 0, 1)
            .sign(
                TokenSigner.of(keys.signer().orElseThrow().activeKeyId(), otherKey),
                System.currentTimeMillis() + 60_000);
    error(post("/admin/projections/commit", commitBody(forged)), 400, "invalid-token");
    byte[] payload = Base64.getUrlDecoder().decode(token.substring(0, token.indexOf('.')));
    payload[payload.length - 1] ^= 1;
    String tampered =
        Base64.getUrlEncoder().withoutPadding().encodeToString(payload)
            + token.substring(token.indexOf('.'));
    error(post("/admin/projections/commit", commitBody(tampered)), 400, "invalid-token");
    // Padding, or a last character differing only in unused bits, decodes to the genuine bytes:
    // refused all the same (only the exact spelling the node issued is a token).
    error(post("/admin/projections/commit", commitBody(token + "=")), 400, "invalid-token");
    String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    String unusedBits =
        token.substring(0, token.length() - 1)
            + alphabet.charAt(alphabet.indexOf(token.charAt(token.length() - 1)) ^ 1);
    error(post("/admin/projections/commit", commitBody(unusedBits)), 400, "invalid-token");
    error(
        post("/admin/projections/commit", commitBody(token.substring(0, token.length() - 3))),
        400,
        "invalid-token");
    error(post("/admin/projections/commit", commitBody("garbage")), 400, "invalid-token");
    ObjectNode crossConsumer = commitBody(token);
    crossConsumer.put("consumer", "other");
    error(post("/admin/projections/commit", crossConsumer), 400, "token-mismatch");
    ObjectNode crossPartition = commitBody(token);
    crossPartition.put("partition", p + 1);
    error(post("/admin/projections/commit", crossPartition), 400, "token-mismatch");
    String otherIncarnation =
        new BatchToken("not-this-incarnation", p, "idx", 1, 0, 1)
            .sign(keys.signer().orElseThrow(), System.currentTimeMillis() + 60_000);
    error(
        post("/admin/projections/commit", commitBody(otherIncarnation)), 409, "token-invalidated");
    clockOffset.set(Duration.ofHours(2).toMillis());
    try {
      error(post("/admin/projections/commit", commitBody(token)), 400, "token-expired");
    } finally {
      clockOffset.set(0);
    }
    assertThat(consumerStatus(p, "idx").get("checkpoint").asLong()).as("nothing changed").isZero();
    assertThat(
            ok(post("/admin/projections/commit", commitBody(token)), 200)
                .get("checkpoint")
                .asLong())
        .isEqualTo(1);
  }

  @Test
  void anEmptyTailBatchCannotCarryEffects() throws Exception {
    int p = 7;
    configure(p, "idx", List.of(), List.of());
    JsonNode tail = read(p, "idx", null);
    assertThat(tail.get("entries")).isEmpty();
    assertThat(tail.get("through").asLong()).isZero();
    assertThat(tail.get("token").asText()).as("even an empty tail has a token").isNotEmpty();
    error(
        post(
            "/admin/projections/commit",
            commitBody(
                tail.get("token").asText(), upsert("derived", idIn("derived", p, 0), 0, Map.of()))),
        400,
        "bad-request");
    assertThat(
            ok(post("/admin/projections/commit", commitBody(tail.get("token").asText())), 200)
                .get("checkpoint")
                .asLong())
        .isZero();
  }

  @Test
  void releaseFencesTokensAndPurgeStopsAtTheLowestActiveCheckpoint() throws Exception {
    int p = 8;
    for (int i = 0; i < 5; i++) {
      put("src", idIn("src", p, i), "{}");
    }
    configure(p, "slow", List.of(), List.of());
    configure(p, "fast", List.of(), List.of());
    ok(
        post("/admin/projections/commit", commitBody(read(p, "fast", null).get("token").asText())),
        200);
    ok(
        post("/admin/projections/commit", commitBody(read(p, "slow", 2).get("token").asText())),
        200);
    JsonNode pinned = ok(post("/admin/outbox/purge", Map.of("partition", p, "through", 5)), 200);
    assertThat(pinned.get("pinned").asBoolean()).isTrue();
    assertThat(pinned.get("outboxFirst").asLong())
        .as("purged through slow's checkpoint 2")
        .isEqualTo(3);
    String slowToken = read(p, "slow", null).get("token").asText();
    JsonNode released = ok(post("/admin/projections/release", identity(p, "slow")), 200);
    assertThat(released.get("consumer").get("released").asBoolean()).isTrue();
    assertThat(
            ok(post("/admin/projections/release", identity(p, "slow")), 200)
                .get("alreadyReleased")
                .asBoolean())
        .isTrue();
    error(post("/admin/projections/commit", commitBody(slowToken)), 409, "token-invalidated");
    error(post("/admin/projections/read", identity(p, "slow")), 409, "token-invalidated");
    error(post("/admin/projections/configure", identity(p, "slow")), 409, "consumer-released");
    error(post("/admin/projections/release", identity(p, "never")), 404, "not-found");
    JsonNode all = ok(post("/admin/outbox/purge", Map.of("partition", p, "through", 5)), 200);
    assertThat(all.get("pinned").asBoolean()).as("a released consumer pins nothing").isFalse();
    assertThat(all.get("outboxFirst").asLong()).isEqualTo(6);
    assertThat(consumerStatus(p, "slow").get("released").asBoolean()).isTrue();
  }

  @Test
  void principalsAndTheirGrantsGateTheDocumentApi() throws Exception {
    error(send("POST", "/admin/principals", "{\"id\":\"alice\"}", READER), 403, "forbidden");
    JsonNode created = ok(post("/admin/principals", Map.of("id", "alice")), 201);
    String alice = created.get("token").asText();
    assertThat(alice).startsWith("wp_").hasSizeGreaterThan(40);
    error(post("/admin/principals", Map.of("id", "alice")), 409, "conflict");
    error(post("/admin/principals", Map.of("id", "bad id")), 400, "bad-request");
    error(post("/admin/principals", "{\"id\":\"x\",\"extra\":1}"), 400, "bad-request");
    error(post("/admin/principals", "{\"id\":"), 400, "malformed-json");
    String id = idIn("shared", 11, 0);
    put("shared", id, "{\"v\":1}");
    error(send("GET", "/v1/documents/shared/" + id, null, alice), 403, "forbidden");
    ok(
        post(
            "/admin/principals/alice/grants",
            Map.of("collection", "shared", "grant", "DocumentsRead")),
        200);
    assertThat(json.readTree(send("GET", "/v1/documents/shared/" + id, null, alice).body()))
        .isEqualTo(json.readTree("{\"v\":1}"));
    error(send("PUT", "/v1/documents/shared/" + id, "{\"v\":2}", alice), 403, "forbidden");
    error(send("GET", "/v1/documents/other/" + id, null, alice), 403, "forbidden");
    ok(
        post(
            "/admin/principals/alice/grants",
            Map.of("collection", "shared", "grant", "DocumentsWrite")),
        200);
    assertThat(send("PUT", "/v1/documents/shared/" + id, "{\"v\":2}", alice).statusCode())
        .isEqualTo(200);
    error(send("GET", "/admin/outbox/status?partition=11", null, alice), 403, "forbidden");
    error(
        post(
            "/admin/principals/alice/grants",
            Map.of("collection", "shared", "grant", "Everything")),
        400,
        "bad-request");
    error(
        post(
            "/admin/principals/nobody/grants",
            Map.of("collection", "shared", "grant", "DocumentsRead")),
        404,
        "not-found");
    ok(
        post(
            "/admin/principals/alice/grants/revoke",
            Map.of("collection", "shared", "grant", "DocumentsWrite")),
        200);
    error(send("PUT", "/v1/documents/shared/" + id, "{\"v\":3}", alice), 403, "forbidden");
    JsonNode listed = ok(send("GET", "/admin/principals", null, ADMIN), 200);
    assertThat(listed.toString())
        .as("no token and no hash in the listing")
        .doesNotContain(alice)
        .doesNotContain("token");
    JsonNode entry = null;
    for (JsonNode p : listed.get("principals")) {
      if (p.get("id").asText().equals("alice")) {
        entry = p;
      }
    }
    assertThat(entry).isNotNull();
    assertThat(entry.get("policyEpoch").asLong())
        .as("every grant change advances the epoch")
        .isEqualTo(4);
    assertThat(entry.get("grants").get("shared"))
        .extracting(JsonNode::asText)
        .containsExactly("DocumentsRead");
    try (var c = database.dataSource().getConnection();
        var s =
            c.prepareStatement(
                "SELECT count(*) FROM weir.principals WHERE position(convert_to(?, 'UTF8') in token_hash) > 0"
                    + " OR encode(token_hash, 'escape') = ?")) {
      s.setString(1, alice);
      s.setString(2, alice);
      try (var rs = s.executeQuery()) {
        rs.next();
        assertThat(rs.getLong(1)).as("the token is stored hashed only").isZero();
      }
    }
    ok(post("/admin/principals/alice/revoke", ""), 200);
    error(send("GET", "/v1/documents/shared/" + id, null, alice), 401, "unauthenticated");
    error(post("/admin/principals/nobody/revoke", ""), 404, "not-found");
  }

  @Test
  void keysRotateWhileOlderTokensStillVerifyUntilRetired() throws Exception {
    int p = 10;
    put("src", idIn("src", p, 0), "{}");
    put("src", idIn("src", p, 1), "{}");
    configure(p, "idx", List.of(), List.of());
    String before = read(p, "idx", 1).get("token").asText();
    JsonNode listed = ok(send("GET", "/admin/tokens/keys", null, ADMIN), 200);
    String oldKid = listed.get("active").asText();
    assertThat(listed.toString()).as("no key material").doesNotContain("\"key\"");
    error(send("POST", "/admin/tokens/rotate", null, READER), 403, "forbidden");
    JsonNode rotated = ok(post("/admin/tokens/rotate", ""), 200);
    String newKid = rotated.get("active").asText();
    assertThat(newKid).isNotEqualTo(oldKid);
    assertThat(rotated.get("keys")).hasSize(listed.get("keys").size() + 1);
    error(post("/admin/tokens/retire", Map.of("kid", newKid)), 409, "conflict");
    error(post("/admin/tokens/retire", Map.of("kid", "no-such-key")), 404, "not-found");
    error(post("/admin/tokens/retire", "{\"kid\":"), 400, "malformed-json");
    // A token signed before the rotation still commits; tokens now carry the new key.
    assertThat(
            ok(post("/admin/projections/commit", commitBody(before)), 200)
                .get("checkpoint")
                .asLong())
        .isEqualTo(1);
    String after = read(p, "idx", 1).get("token").asText();
    assertThat(
            BatchToken.verify(
                    TokenSigner.of(newKid, keyBytes(newKid)), after, System.currentTimeMillis())
                .end())
        .isEqualTo(2);
    error(post("/admin/tokens/retire", Map.of("kid", oldKid)), 409, "conflict");
    Thread.sleep(RETIRE_AFTER.toMillis() + 200);
    ok(post("/admin/tokens/retire", Map.of("kid", oldKid)), 200);
    String oldKey =
        new BatchToken(incarnationOf(after), p, "idx", 1, 1, 2)
            .sign(TokenSigner.of(oldKid, keyBytes(oldKid)), System.currentTimeMillis() + 60_000);
    error(post("/admin/projections/commit", commitBody(oldKey)), 400, "invalid-token");
    assertThat(
            ok(post("/admin/projections/commit", commitBody(after)), 200)
                .get("checkpoint")
                .asLong())
        .isEqualTo(2);
  }

  /** A key's bytes, read from PostgreSQL as a node does (the API never shows them). */
  private byte[] keyBytes(String kid) throws Exception {
    try (var c = database.dataSource().getConnection();
        var s = c.prepareStatement("SELECT key FROM weir.token_keys WHERE kid = ?")) {
      s.setString(1, kid);
      try (var rs = s.executeQuery()) {
        assertThat(rs.next()).isTrue();
        return rs.getBytes(1);
      }
    }
  }

  @Test
  void theProgressReserveLetsAConsumerDrainAFullOutbox() throws Exception {
    int p = 9;
    configure(p, "idx", List.of("src"), List.of());
    for (int i = 0; i < LIMITS.maxOutboxEntries(); i++) {
      put("src", idIn("src", p, i), "{}");
    }
    error(
        send("PUT", "/v1/documents/src/" + idIn("src", p, 99), "{}", ADMIN), 429, "quota-exceeded");
    JsonNode batch = read(p, "idx", 10);
    JsonNode done =
        ok(
            post(
                "/admin/projections/commit",
                commitBody(
                    batch.get("token").asText(),
                    upsert("derived", idIn("derived", p, 0), 0, Map.of("n", 10)))),
            200);
    assertThat(done.get("checkpoint").asLong()).isEqualTo(10);
    JsonNode next = read(p, "idx", 10);
    error(
        post(
            "/admin/projections/commit",
            commitBody(
                next.get("token").asText(), upsert("derived", idIn("derived", p, 1), 0, Map.of()))),
        429,
        "quota-exceeded");
    ok(post("/admin/projections/commit", commitBody(next.get("token").asText())), 200);
    // A purge of one entry leaves the outbox over its quota but makes a new reservation available.
    ok(post("/admin/outbox/purge", Map.of("partition", p, "through", 1)), 200);
    JsonNode third = read(p, "idx", 10);
    ok(
        post(
            "/admin/projections/commit",
            commitBody(
                third.get("token").asText(),
                upsert("derived", idIn("derived", p, 1), 0, Map.of()))),
        200);
  }
}
