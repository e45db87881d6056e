package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.partition.Partitioning;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The document API of a real node process on a real PostgreSQL journal: create, read, conditional
 * update, stale If-Match, idempotent retry (no outbox entry written), malformed and oversized
 * bodies (never echoed), delete, name rules, a collection fed by a CDC pipeline (read-only through
 * the API, its rows readable), authentication, and the outbox status of a document's partition.
 */
class DocumentApiIT extends EndToEndTest {
  private static final int PARTITIONS = 64;
  private static final String CANARY = "document-canary-5d1e";
  private final ObjectMapper json = new ObjectMapper();

  @Test
  void documentsThroughTheHttpApi() throws Exception {
    db = TestPostgres.server().freshDatabase("document_api");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.orders (id int PRIMARY KEY, note text)");
      s.execute("CREATE PUBLICATION orders_pub FOR TABLE public.orders");
    }
    Path config = Files.createTempFile("weir-documents", ".conf");
    String suffix = db.name().substring(db.name().length() - 8);
    Files.writeString(
        config,
        "weir.pipelines.orders { slot = orders_"
            + suffix
            + ", publications = [orders_pub],"
            + " sink { type = partitions, collections { \"public.orders\" = orders } } }\n");
    NodeProcess node =
        NodeProcess.start(
            new NodeProcess.Spec("documents").database(db).args("--config", config.toString()));
    nodes.add(node);
    await("the node is ready and its partitions run")
        .atMost(START_UP)
        .pollInterval(Duration.ofMillis(500))
        .until(
            () ->
                node.ready()
                    && node.partitions()
                        .map(p -> p.get("running").asInt() == PARTITIONS)
                        .orElse(false));

    // Create, read, update with If-Match, refuse a stale one.
    HttpResponse<String> created =
        write(
            node, "PUT", "/v1/documents/notes/n-1", "{ \"title\": \"first\", \"n\": 1 }", Map.of());
    assertThat(created.statusCode())
        .as("a new document should be created: %s", created.body())
        .isEqualTo(200);
    JsonNode c1 = json.readTree(created.body());
    assertThat(c1.get("revision").asLong()).as("a new document has revision 1").isEqualTo(1);
    assertThat(c1.get("collection").asText()).isEqualTo("notes");
    assertThat(c1.get("id").asText()).isEqualTo("n-1");
    assertThat(created.headers().firstValue("ETag")).hasValue("\"1\"");
    HttpResponse<String> read = read(node, "GET", "/v1/documents/notes/n-1", null, Map.of());
    assertThat(read.statusCode()).isEqualTo(200);
    assertThat(read.body())
        .as("the stored body is the compact form")
        .isEqualTo("{\"title\":\"first\",\"n\":1}");
    assertThat(read.headers().firstValue("ETag")).hasValue("\"1\"");

    HttpResponse<String> updated =
        write(
            node,
            "PUT",
            "/v1/documents/notes/n-1",
            "{\"title\":\"second\"}",
            Map.of("If-Match", "1"));
    assertThat(json.readTree(updated.body()).get("revision").asLong())
        .as("If-Match 1 should give revision 2")
        .isEqualTo(2);
    HttpResponse<String> stale =
        read(
            node,
            "PUT",
            "/v1/documents/notes/n-1",
            "{\"title\":\"lost\"}",
            Map.of("If-Match", "1"));
    assertThat(stale.statusCode()).as("a stale If-Match should be 409").isEqualTo(409);
    assertThat(json.readTree(stale.body()).get("error").asText()).isEqualTo("conflict");
    assertThat(json.readTree(stale.body()).get("actualRevision").asLong()).isEqualTo(2);

    // An idempotent retry: the first reply again, nothing written.
    int partition = Partitioning.partitionOf("notes", "n-2", PARTITIONS);
    Map<String, String> key = Map.of("Idempotency-Key", "client-request-42");
    HttpResponse<String> once = write(node, "PUT", "/v1/documents/notes/n-2", "{\"k\":1}", key);
    assertThat(json.readTree(once.body()).get("revision").asLong()).isEqualTo(1);
    JsonNode before = outbox(node, partition);
    assertThat(before.get("partition").asInt()).isEqualTo(partition);
    assertThat(before.get("outboxEntries").asLong())
        .as("the write should be counted in its partition's outbox")
        .isPositive();
    HttpResponse<String> retry = write(node, "PUT", "/v1/documents/notes/n-2", "{\"k\":1}", key);
    assertThat(retry.statusCode()).isEqualTo(200);
    assertThat(json.readTree(retry.body()).get("revision").asLong())
        .as("the retry gets the first revision")
        .isEqualTo(1);
    assertThat(json.readTree(retry.body()).get("replayed").asBoolean())
        .as("the retry says it was replayed")
        .isTrue();
    JsonNode after = outbox(node, partition);
    assertThat(after.get("outboxEntries").asLong())
        .as("the retry writes no outbox entry")
        .isEqualTo(before.get("outboxEntries").asLong());
    assertThat(after.get("journalEvents").asLong())
        .as("the retry writes no journal event")
        .isEqualTo(before.get("journalEvents").asLong());

    // Malformed and oversized bodies.
    HttpResponse<String> malformed =
        read(node, "PUT", "/v1/documents/notes/bad", "{\"x\": \"" + CANARY + "\", ", Map.of());
    assertThat(malformed.statusCode()).isEqualTo(400);
    assertThat(json.readTree(malformed.body()).get("error").asText()).isEqualTo("malformed-json");
    assertThat(malformed.body()).as("the reply must not echo the body").doesNotContain(CANARY);
    HttpResponse<String> array =
        read(node, "PUT", "/v1/documents/notes/bad", "[\"" + CANARY + "\"]", Map.of());
    assertThat(array.statusCode()).as("a JSON array is not a document").isEqualTo(400);
    assertThat(array.body()).doesNotContain(CANARY);
    String big = "{\"a\":\"" + "x".repeat(1024 * 1024) + "\"}";
    HttpResponse<String> tooLarge = read(node, "PUT", "/v1/documents/notes/big", big, Map.of());
    assertThat(tooLarge.statusCode()).as("a body over 1 MiB should be 413").isEqualTo(413);
    assertThat(json.readTree(tooLarge.body()).get("error").asText())
        .isEqualTo("document-too-large");

    // Delete, then the document reads as absent.
    HttpResponse<String> deleted = write(node, "DELETE", "/v1/documents/notes/n-1", null, Map.of());
    assertThat(deleted.statusCode()).isEqualTo(200);
    assertThat(json.readTree(deleted.body()).get("deleted").asBoolean()).isTrue();
    assertThat(json.readTree(deleted.body()).get("revision").asLong())
        .as("the delete is revision 3")
        .isEqualTo(3);
    assertThat(read(node, "GET", "/v1/documents/notes/n-1", null, Map.of()).statusCode())
        .isEqualTo(404);
    assertThat(read(node, "DELETE", "/v1/documents/notes/n-1", null, Map.of()).statusCode())
        .as("deleting it again is 404")
        .isEqualTo(404);

    // Names.
    for (String path :
        List.of(
            "/v1/documents/public.notes/x",
            "/v1/documents/" + "c".repeat(129) + "/x",
            "/v1/documents/notes/" + "i".repeat(513),
            "/v1/documents/no%20tes/x")) {
      HttpResponse<String> r = read(node, "PUT", path, "{}", Map.of());
      assertThat(r.statusCode()).as("an invalid name should be 400").isEqualTo(400);
      assertThat(json.readTree(r.body()).get("error").asText()).isEqualTo("invalid-name");
    }

    // A collection fed by CDC: read-only through the API, its rows readable.
    HttpResponse<String> cdcWrite = read(node, "PUT", "/v1/documents/orders/1", "{}", Map.of());
    assertThat(cdcWrite.statusCode())
        .as("a collection a pipeline writes should be refused")
        .isEqualTo(409);
    assertThat(json.readTree(cdcWrite.body()).get("error").asText())
        .isEqualTo("collection-fed-by-cdc");
    await("the pipeline runs")
        .atMost(START_UP)
        .until(
            () ->
                node.pipeline("orders")
                    .map(s -> s.get("state").asText().equals("running"))
                    .orElse(false));
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("INSERT INTO public.orders VALUES (7, 'from-cdc')");
    }
    await("the CDC row becomes a readable document")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(250))
        .until(
            () ->
                node.send("GET", "/v1/documents/orders/7", null, Map.of())
                    .map(r -> r.statusCode() == 200)
                    .orElse(false));
    assertThat(
            json.readTree(read(node, "GET", "/v1/documents/orders/7", null, Map.of()).body())
                .get("note")
                .asText())
        .isEqualTo("from-cdc");

    // Authentication.
    assertThat(
            read(
                    node,
                    "GET",
                    "/v1/documents/notes/n-2",
                    null,
                    Map.of("Authorization", "Bearer wrong-token-wrong-token"))
                .statusCode())
        .as("an unknown token should be 401")
        .isEqualTo(401);
    assertThat(node.getUntil("/v1/documents/notes/n-2", false).statusCode())
        .as("no token should be 401")
        .isEqualTo(401);

    // Every partition's status in one call.
    HttpResponse<String> all = node.getUntil("/admin/outbox/status", true);
    assertThat(all.statusCode()).isEqualTo(200);
    assertThat(json.readTree(all.body()))
        .as("every partition should be listed")
        .hasSize(PARTITIONS);
    assertThat(node.getUntil("/admin/outbox/status?partition=" + PARTITIONS, true).statusCode())
        .isEqualTo(400);

    assertThat(node.log())
        .as("the node's log must not contain a document value")
        .doesNotContain(CANARY)
        .doesNotContain("from-cdc");
  }

  /**
   * A request that may be repeated: a read, or one the node refuses without an effect (or, as a
   * stale If-Match or a second delete, whose repetition has none); retried while the node does not
   * answer or answers 503.
   */
  private static HttpResponse<String> read(
      NodeProcess node, String method, String path, String body, Map<String, String> headers) {
    return node.sendIdempotent(method, path, body, headers);
  }

  /**
   * A write whose effect the test counts (a revision, an outbox entry, the replay of a receipt):
   * sent once.
   */
  private static HttpResponse<String> write(
      NodeProcess node, String method, String path, String body, Map<String, String> headers) {
    return node.sendOnce(method, path, body, headers);
  }

  private JsonNode outbox(NodeProcess node, int partition) throws Exception {
    HttpResponse<String> r = node.getUntil("/admin/outbox/status?partition=" + partition, true);
    assertThat(r.statusCode()).as("outbox status should answer 200").isEqualTo(200);
    return json.readTree(r.body());
  }
}
