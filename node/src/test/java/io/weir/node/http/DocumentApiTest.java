package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.typesafe.config.ConfigFactory;
import io.weir.node.NodeView;
import io.weir.node.auth.Principal;
import io.weir.node.auth.TokenAuthenticator;
import io.weir.node.cdc.PipelineConfig;
import io.weir.node.documents.Documents;
import io.weir.persistence.StorageStatus;
import io.weir.persistence.testing.TestPorts;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.PartitionSettings;
import io.weir.sharding.partition.PartitionSharding;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * The document API and outbox status on a real port, served by a single-node cluster whose
 * partitions run on Pekko's in-memory journal (no database): revisions, If-Match, idempotency keys,
 * name rules, CDC collections, size limit, malformed bodies, the outbox quota.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class DocumentApiTest {
  private static final String ADMIN = "admin-token-for-document-api-test";
  private static final String READER = "reader-token-for-document-api-test";
  private static final String OTHER_ADMIN = "other-admin-token-for-document-api-test";
  private static final int PARTITIONS = 8;
  private static final long MAX_BYTES = 4096;

  /** The outbox quota of each partition: small, so a test can fill one. */
  private static final int MAX_OUTBOX_ENTRIES = 20;

  private ActorTestKit kit;
  private ServerBinding binding;
  private Documents documents;
  private final HttpClient client =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final ObjectMapper json = new ObjectMapper();

  @BeforeAll
  void start() throws Exception {
    Path snapshots = Files.createTempDirectory("document-api-test");
    kit =
        TestPorts.kit(
            "weir",
            ConfigFactory.parseString(
                    "pekko.actor.provider = cluster\n"
                        + "pekko.persistence.journal.plugin = \"pekko.persistence.journal.inmem\"\n"
                        + "pekko.persistence.snapshot-store.plugin = \"pekko.persistence.snapshot-store.local\"\n"
                        + "pekko.persistence.snapshot-store.local.dir = \""
                        + snapshots.toString().replace("\\", "/")
                        + "\"\n")
                .withFallback(ConfigFactory.load()));
    Cluster cluster = Cluster.get(kit.system());
    cluster.manager().tell(Join.create(cluster.selfMember().address()));
    PartitionSharding.init(
        kit.system(), new PartitionSettings(MAX_OUTBOX_ENTRIES, 1L << 30, 256, 20_000));
    PipelineConfig cdc =
        PipelineConfig.all(
                ConfigFactory.parseString(
                        "weir.postgres.url = \"jdbc:postgresql://127.0.0.1/weir\"\n"
                            + "weir.pipelines.orders { slot = orders_slot, publications = [orders_pub], autostart = false,"
                            + " sink { type = partitions, collections { \"public.orders\" = orders },"
                            + " partition-keys { \"public.tenants\" = [tenant] } } }")
                    .withFallback(ConfigFactory.load()))
            .get(0);
    documents = new Documents(kit.system(), PARTITIONS, List.of(cdc), Duration.ofSeconds(10));
    TokenAuthenticator auth =
        TokenAuthenticator.withBootstrapAdmin(ADMIN)
            .with(READER, new Principal("reader", false))
            .with(OTHER_ADMIN, new Principal("other-admin", true));
    StorageStatus storage = new StorageStatus.Starting(Instant.now());
    HttpApi api =
        new HttpApi(
            json,
            ApiServices.builder(
                    auth,
                    new NodeView(kit.system(), () -> storage, PARTITIONS, NodeView.NO_PIPELINES))
                .documents(documents, MAX_BYTES)
                .build());
    binding = TestBindings.bind(kit.system(), api.routes());
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (cluster.selfMember().status() != MemberStatus.up() && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
    assertThat(cluster.selfMember().status())
        .as("the test node should become Up")
        .isEqualTo(MemberStatus.up());
  }

  @AfterAll
  void stop() {
    kit.shutdownTestKit();
  }

  private HttpResponse<String> send(
      String method, String path, String body, Map<String, String> headers) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + binding.localAddress().getPort() + path))
            .timeout(Duration.ofSeconds(20))
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString(body));
    headers.forEach(b::header);
    if (!headers.containsKey("Authorization")) {
      b.header("Authorization", "Bearer " + ADMIN);
    }
    return client.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  private HttpResponse<String> put(String path, String body, Map<String, String> headers)
      throws Exception {
    return send("PUT", path, body, headers);
  }

  private HttpResponse<String> get(String path) throws Exception {
    return send("GET", path, null, Map.of());
  }

  private JsonNode body(HttpResponse<String> r) throws Exception {
    return json.readTree(r.body());
  }

  private long outboxEntries(String collection, String id) throws Exception {
    HttpResponse<String> r =
        get("/admin/outbox/status?partition=" + documents.partitionOf(collection, id));
    assertThat(r.statusCode()).as("outbox status should answer 200").isEqualTo(200);
    return body(r).get("outboxEntries").asLong();
  }

  @Test
  void revisionsIfMatchAndCanonicalBodies() throws Exception {
    HttpResponse<String> created =
        put("/v1/documents/things/a1", "{ \"b\" : 1,\n \"a\": [1.50, \"x\"] }", Map.of());
    assertThat(created.statusCode())
        .as("a new document should be created: %s", created.body())
        .isEqualTo(200);
    assertThat(body(created).get("revision").asLong())
        .as("a new document has revision 1")
        .isEqualTo(1);
    assertThat(body(created).get("replayed").asBoolean()).isFalse();
    assertThat(created.headers().firstValue("ETag"))
        .as("the ETag should carry the revision")
        .hasValue("\"1\"");

    HttpResponse<String> read = get("/v1/documents/things/a1");
    assertThat(read.statusCode()).isEqualTo(200);
    assertThat(read.body())
        .as("the body should be stored compact, in field order, numbers exact")
        .isEqualTo("{\"b\":1,\"a\":[1.50,\"x\"]}");
    assertThat(read.headers().firstValue("ETag")).hasValue("\"1\"");

    HttpResponse<String> second =
        put("/v1/documents/things/a1", "{\"v\":2}", Map.of("If-Match", "1"));
    assertThat(body(second).get("revision").asLong())
        .as("If-Match 1 on revision 1 should give revision 2")
        .isEqualTo(2);
    HttpResponse<String> third =
        put("/v1/documents/things/a1", "{\"v\":3}", Map.of("If-Match", "\"2\""));
    assertThat(body(third).get("revision").asLong())
        .as("the quoted ETag form should be accepted")
        .isEqualTo(3);

    HttpResponse<String> stale =
        put("/v1/documents/things/a1", "{\"v\":4}", Map.of("If-Match", "2"));
    assertThat(stale.statusCode()).as("a stale If-Match should be refused").isEqualTo(409);
    assertThat(body(stale).get("error").asText()).isEqualTo("conflict");
    assertThat(body(stale).get("actualRevision").asLong()).isEqualTo(3);
    assertThat(body(stale).get("retryable").asBoolean()).isFalse();

    HttpResponse<String> mustNotExist =
        put("/v1/documents/things/a1", "{}", Map.of("If-Match", "0"));
    assertThat(mustNotExist.statusCode())
        .as("If-Match 0 should refuse an existing document")
        .isEqualTo(409);
    assertThat(put("/v1/documents/things/fresh", "{}", Map.of("If-Match", "0")).statusCode())
        .as("If-Match 0 should create a missing document")
        .isEqualTo(200);
    assertThat(put("/v1/documents/things/a1", "{}", Map.of("If-Match", "W/\"3\"")).statusCode())
        .as("a weak or other malformed If-Match should be a bad request")
        .isEqualTo(400);
    assertThat(get("/v1/documents/things/a1").body())
        .as("refused writes change nothing")
        .isEqualTo("{\"v\":3}");
  }

  @Test
  void idempotencyKeysReplayWithoutWriting() throws Exception {
    Map<String, String> key = Map.of("Idempotency-Key", "retry-me-1");
    HttpResponse<String> first = put("/v1/documents/things/idem", "{\"n\":1}", key);
    assertThat(body(first).get("revision").asLong()).isEqualTo(1);
    long entries = outboxEntries("things", "idem");

    HttpResponse<String> retry = put("/v1/documents/things/idem", "{\"n\":1}", key);
    assertThat(retry.statusCode()).isEqualTo(200);
    assertThat(body(retry).get("revision").asLong())
        .as("a retry should get the first revision")
        .isEqualTo(1);
    assertThat(body(retry).get("replayed").asBoolean())
        .as("a retry should say it was replayed")
        .isTrue();
    assertThat(outboxEntries("things", "idem"))
        .as("a retry should write no outbox entry")
        .isEqualTo(entries);

    Map<String, String> deleteKey = Map.of("Idempotency-Key", "delete-once");
    HttpResponse<String> deleted = send("DELETE", "/v1/documents/things/idem", null, deleteKey);
    assertThat(deleted.statusCode()).isEqualTo(200);
    assertThat(body(deleted).get("deleted").asBoolean()).isTrue();
    assertThat(body(deleted).get("revision").asLong())
        .as("a delete is a revision of its own")
        .isEqualTo(2);
    long afterDelete = outboxEntries("things", "idem");
    HttpResponse<String> deleteRetry = send("DELETE", "/v1/documents/things/idem", null, deleteKey);
    assertThat(deleteRetry.statusCode())
        .as("a retried delete should get its first reply, not 404")
        .isEqualTo(200);
    assertThat(body(deleteRetry).get("replayed").asBoolean()).isTrue();
    assertThat(body(deleteRetry).get("revision").asLong()).isEqualTo(2);
    assertThat(
            send("DELETE", "/v1/documents/things/idem", null, Map.of("Idempotency-Key", "another"))
                .statusCode())
        .as("a new delete of a deleted document should be 404")
        .isEqualTo(404);
    assertThat(outboxEntries("things", "idem"))
        .as("neither the retry nor the 404 should write")
        .isEqualTo(afterDelete);
  }

  /**
   * A receipt binds the caller and the request: the same key with another body, If-Match, method or
   * document of the partition is 409 idempotency-key-reused (nothing written, nothing of the first
   * answer shown); another principal's key never matches.
   */
  @Test
  void idempotencyKeysBindThePrincipalAndTheRequest() throws Exception {
    Map<String, String> key = Map.of("Idempotency-Key", "bound-1");
    String doc = "/v1/documents/things/bound";
    HttpResponse<String> first = put(doc, "{\"n\":1}", key);
    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(body(first).get("revision").asLong()).isEqualTo(1);
    long entries = outboxEntries("things", "bound");

    for (HttpResponse<String> reused :
        List.of(
            put(doc, "{\"n\":2}", key),
            put(doc, "{\"n\":1}", Map.of("Idempotency-Key", "bound-1", "If-Match", "1")),
            send("DELETE", doc, null, key),
            put("/v1/documents/things/" + samePartition("bound"), "{\"n\":1}", key))) {
      assertThat(reused.statusCode()).as(reused.request().method()).isEqualTo(409);
      assertThat(body(reused).get("error").asText()).isEqualTo("idempotency-key-reused");
      assertThat(body(reused).has("revision")).as("the first answer is not shown").isFalse();
    }
    assertThat(outboxEntries("things", "bound"))
        .as("a reused key writes nothing")
        .isEqualTo(entries);

    HttpResponse<String> stranger =
        put(
            doc,
            "{\"n\":1}",
            Map.of("Idempotency-Key", "bound-1", "Authorization", "Bearer " + OTHER_ADMIN));
    assertThat(stranger.statusCode()).isEqualTo(200);
    assertThat(body(stranger).get("replayed").asBoolean())
        .as("another principal's key never matches")
        .isFalse();
    assertThat(body(stranger).get("revision").asLong()).isEqualTo(2);

    HttpResponse<String> retry = put(doc, "{\"n\":1}", key);
    assertThat(body(retry).get("replayed").asBoolean()).isTrue();
    assertThat(body(retry).get("revision").asLong())
        .as("the first caller's retry still gets its own answer")
        .isEqualTo(1);
  }

  /** An id whose document lives in the same partition as {@code id}'s. */
  private String samePartition(String id) {
    int partition = documents.partitionOf("things", id);
    for (int i = 0; ; i++) {
      String candidate = id + "-" + i;
      if (documents.partitionOf("things", candidate) == partition) {
        return candidate;
      }
    }
  }

  @Test
  void deleteLeavesNothingToRead() throws Exception {
    assertThat(put("/v1/documents/things/gone", "{\"x\":1}", Map.of()).statusCode()).isEqualTo(200);
    assertThat(
            send("DELETE", "/v1/documents/things/gone", null, Map.of("If-Match", "5")).statusCode())
        .as("a delete with a stale If-Match should be refused")
        .isEqualTo(409);
    HttpResponse<String> deleted = send("DELETE", "/v1/documents/things/gone", null, Map.of());
    assertThat(deleted.statusCode()).isEqualTo(200);
    HttpResponse<String> read = get("/v1/documents/things/gone");
    assertThat(read.statusCode()).as("a deleted document should read as 404").isEqualTo(404);
    assertThat(body(read).get("error").asText()).isEqualTo("not-found");
    long entries = outboxEntries("things", "gone");
    assertThat(send("DELETE", "/v1/documents/things/gone", null, Map.of()).statusCode())
        .isEqualTo(404);
    assertThat(send("DELETE", "/v1/documents/things/never-was", null, Map.of()).statusCode())
        .isEqualTo(404);
    assertThat(outboxEntries("things", "gone"))
        .as("deleting a deleted document writes nothing")
        .isEqualTo(entries);
    HttpResponse<String> again = put("/v1/documents/things/gone", "{\"x\":2}", Map.of());
    assertThat(body(again).get("revision").asLong())
        .as("a document written after its delete continues the revisions")
        .isEqualTo(3);
  }

  @Test
  void malformedAndOversizedBodiesAreRefusedWithoutEchoingThem() throws Exception {
    String secret = "canary-value-7f3a";
    for (String bad :
        List.of(
            "{\"a\": \"" + secret + "\"",
            "[\"" + secret + "\"]",
            "\"" + secret + "\"",
            "{\"a\":1} {\"" + secret + "\":2}",
            "{\"a\":1,\"a\":\"" + secret + "\"}",
            secret)) {
      HttpResponse<String> r = put("/v1/documents/things/bad", bad, Map.of());
      assertThat(r.statusCode())
          .as("a body that is not one JSON object should be 400")
          .isEqualTo(400);
      assertThat(body(r).get("error").asText()).isEqualTo("malformed-json");
      assertThat(r.body()).as("the reply must not echo the body").doesNotContain(secret);
    }
    assertThat(get("/v1/documents/things/bad").statusCode())
        .as("nothing should have been written")
        .isEqualTo(404);

    String big = "{\"a\":\"" + "x".repeat((int) MAX_BYTES) + "\"}";
    HttpResponse<String> tooLarge = put("/v1/documents/things/big", big, Map.of());
    assertThat(tooLarge.statusCode())
        .as("a body over weir.documents.max-bytes should be 413")
        .isEqualTo(413);
    assertThat(body(tooLarge).get("error").asText()).isEqualTo("document-too-large");
    HttpResponse<String> chunked =
        client.send(
            HttpRequest.newBuilder(
                    URI.create(
                        "http://127.0.0.1:"
                            + binding.localAddress().getPort()
                            + "/v1/documents/things/big"))
                .header("Authorization", "Bearer " + ADMIN)
                .PUT(
                    HttpRequest.BodyPublishers.ofInputStream(
                        () ->
                            new java.io.ByteArrayInputStream(big.getBytes(StandardCharsets.UTF_8))))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(chunked.statusCode())
        .as("a chunked body over the limit should be 413 as well")
        .isEqualTo(413);
    String fits = "{\"a\":\"" + "x".repeat((int) MAX_BYTES - 8) + "\"}";
    assertThat(put("/v1/documents/things/big", fits, Map.of()).statusCode())
        .as("a body at the limit should be accepted")
        .isEqualTo(200);
  }

  @Test
  void namesAreChecked() throws Exception {
    String longCollection = "c".repeat(129);
    String longId = "i".repeat(513);
    for (String path :
        List.of(
            "/v1/documents/" + longCollection + "/x",
            "/v1/documents/has%20space/x",
            "/v1/documents/public.things/x",
            "/v1/documents/things/" + longId,
            "/v1/documents/things/a%01b")) {
      HttpResponse<String> r = put(path, "{}", Map.of());
      assertThat(r.statusCode())
          .as(
              "an invalid name should be 400 (%s)",
              path.length() > 60 ? path.substring(0, 60) : path)
          .isEqualTo(400);
      assertThat(body(r).get("error").asText()).isEqualTo("invalid-name");
    }
    assertThat(put("/v1/documents/things/" + "i".repeat(512), "{}", Map.of()).statusCode())
        .isEqualTo(200);
    String unicodeId = "Zoë/🙂 ok";
    String path =
        "/v1/documents/things/"
            + URLEncoder.encode(unicodeId, StandardCharsets.UTF_8).replace("+", "%20");
    assertThat(put(path, "{\"u\":true}", Map.of()).statusCode())
        .as("ids may hold any non-control character")
        .isEqualTo(200);
    assertThat(get(path).body()).isEqualTo("{\"u\":true}");
    assertThat(get("/v1/documents/public.things/x").statusCode())
        .as("CDC names may be read")
        .isEqualTo(404);
    assertThat(
            put("/v1/documents/things/x", "{}", Map.of("Idempotency-Key", "k".repeat(256)))
                .statusCode())
        .as("an over-long idempotency key should be 400")
        .isEqualTo(400);
  }

  @Test
  void collectionsFedByCdcAreReadOnly() throws Exception {
    HttpResponse<String> r = put("/v1/documents/orders/1", "{}", Map.of());
    assertThat(r.statusCode())
        .as("a collection a pipeline writes should be refused")
        .isEqualTo(409);
    assertThat(body(r).get("error").asText()).isEqualTo("collection-fed-by-cdc");
    assertThat(send("DELETE", "/v1/documents/orders/1", null, Map.of()).statusCode())
        .isEqualTo(409);
    assertThat(get("/v1/documents/orders/1").statusCode())
        .as("reading it is allowed")
        .isEqualTo(404);
  }

  @Test
  void aCollectionRoutedByAnotherKeyIsFoundInWhicheverPartitionHoldsIt() throws Exception {
    // As the partition sink would route it: by the tenant, not by the id.
    String id = "42";
    int byId = documents.partitionOf("public.tenants", id);
    int holder = (byId + 1) % PARTITIONS;
    FrameReply moved =
        PartitionSharding.partition(kit.system(), holder)
            .<FrameReply>ask(
                r ->
                    new ApplyFrame(
                        null,
                        List.of(
                            new Upsert(
                                "public.tenants",
                                id,
                                "{\"id\":42,\"tenant\":\"t7\"}",
                                Optional.empty())),
                        Optional.of(new SourcePosition("test/1", 100)),
                        r),
                Duration.ofSeconds(10))
            .toCompletableFuture()
            .get();
    assertThat(moved).isInstanceOf(Applied.class);
    HttpResponse<String> read = get("/v1/documents/public.tenants/" + id);
    assertThat(read.statusCode())
        .as("found outside partitionOf(collection, id): %s", read.body())
        .isEqualTo(200);
    assertThat(read.body()).isEqualTo("{\"id\":42,\"tenant\":\"t7\"}");
    assertThat(get("/v1/documents/public.tenants/43").statusCode()).isEqualTo(404);
  }

  @Test
  void onlyAdministratorsUseTheDocumentApi() throws Exception {
    assertThat(
            send(
                    "GET",
                    "/v1/documents/things/a1",
                    null,
                    Map.of("Authorization", "Bearer nope-nope-nope"))
                .statusCode())
        .isEqualTo(401);
    HttpResponse<String> none =
        client.send(
            HttpRequest.newBuilder(
                    URI.create(
                        "http://127.0.0.1:"
                            + binding.localAddress().getPort()
                            + "/v1/documents/things/a1"))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(none.statusCode()).as("no token should be 401").isEqualTo(401);
    assertThat(
            send(
                    "PUT",
                    "/v1/documents/things/a1",
                    "{}",
                    Map.of("Authorization", "Bearer " + READER))
                .statusCode())
        .as("a non-administrator should be 403 until principals have grants")
        .isEqualTo(403);
    assertThat(send("POST", "/v1/documents/things/a1", "{}", Map.of()).statusCode()).isEqualTo(405);
  }

  // Last: it fills a partition's outbox, which refuses every later write to that partition.
  @Test
  @Order(Integer.MAX_VALUE)
  void outboxStatusAndQuota() throws Exception {
    HttpResponse<String> all = get("/admin/outbox/status");
    assertThat(all.statusCode()).isEqualTo(200);
    assertThat(body(all)).as("without a partition, every partition is listed").hasSize(PARTITIONS);
    assertThat(body(all).get(3).get("partition").asInt()).isEqualTo(3);
    assertThat(get("/admin/outbox/status?partition=" + PARTITIONS).statusCode()).isEqualTo(400);
    assertThat(get("/admin/outbox/status?partition=x").statusCode()).isEqualTo(400);

    // Fill one partition's outbox: ids of the same partition until the quota refuses.
    String first = "quota-0";
    int target = documents.partitionOf("quota", first);
    long before = outboxEntries("quota", first);
    int status = 200;
    int written = 0;
    for (int i = 0; status == 200 && i < 10_000; i++) {
      String id = "quota-" + i;
      if (documents.partitionOf("quota", id) != target) {
        continue;
      }
      HttpResponse<String> r = put("/v1/documents/quota/" + id, "{}", Map.of());
      status = r.statusCode();
      if (status == 200) {
        written++;
      } else {
        assertThat(body(r).get("error").asText()).isEqualTo("quota-exceeded");
        assertThat(body(r).get("retryable").asBoolean()).as("a full outbox is retryable").isTrue();
      }
    }
    assertThat(status).as("the outbox quota should refuse a write").isEqualTo(429);
    assertThat(before + written).as("writes stop at the quota").isEqualTo(MAX_OUTBOX_ENTRIES);
    JsonNode partition = body(get("/admin/outbox/status?partition=" + target));
    assertThat(partition.get("outboxEntries").asLong()).isEqualTo(MAX_OUTBOX_ENTRIES);
    assertThat(partition.get("outboxNext").asLong() - partition.get("outboxFirst").asLong())
        .isEqualTo(MAX_OUTBOX_ENTRIES);
    assertThat(partition.get("outboxBytes").asLong()).isPositive();

    // Purge frees the quota: a bounded prefix, refused past the end, bad bodies refused.
    long next = partition.get("outboxNext").asLong();
    assertThat(
            send(
                    "POST",
                    "/admin/outbox/purge",
                    "{\"partition\": " + target + ", \"through\": " + next + "}",
                    Map.of())
                .statusCode())
        .as("entries not written yet cannot be purged")
        .isEqualTo(400);
    assertThat(send("POST", "/admin/outbox/purge", "{\"partition\": \"x\"}", Map.of()).statusCode())
        .isEqualTo(400);
    assertThat(
            send(
                    "POST",
                    "/admin/outbox/purge",
                    "{\"partition\": " + PARTITIONS + ", \"through\": 1}",
                    Map.of())
                .statusCode())
        .isEqualTo(400);
    HttpResponse<String> purged =
        send(
            "POST",
            "/admin/outbox/purge",
            "{\"partition\": " + target + ", \"through\": " + (next - 1) + "}",
            Map.of());
    assertThat(purged.statusCode()).as("purge: %s", purged.body()).isEqualTo(200);
    assertThat(body(purged).get("outboxFirst").asLong()).isEqualTo(next);
    assertThat(body(purged).get("purged").asLong()).isEqualTo(MAX_OUTBOX_ENTRIES);
    assertThat(body(purged).get("more").asBoolean()).isFalse();
    assertThat(outboxEntries("quota", first)).isZero();
    assertThat(put("/v1/documents/quota/" + first, "{\"again\":1}", Map.of()).statusCode())
        .as("room again after the purge")
        .isEqualTo(200);
    assertThat(
            send("POST", "/admin/outbox/purge", "{}", Map.of("Authorization", "Bearer " + READER))
                .statusCode())
        .isEqualTo(403);
  }
}
