package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
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
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The OpenAPI document against a whole node (in this JVM, every feature on: documents, feeds,
 * projections, tokens, principals, policies, metrics, a continuous pipeline) on a real PostgreSQL.
 * Every documented path is asked with every method, as an administrator, as a principal without
 * grants and without a token (and, where it takes a body, with one that is not JSON): a documented
 * method is served and answers a documented status with a documented error code; any other method
 * is 405. {@code GET /openapi.json} serves the document.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class OpenApiIT {
  private static final String ADMIN = "admin-token-for-openapi-it";

  /** The methods probed on every path (HEAD and OPTIONS are Pekko HTTP's own business). */
  private static final List<String> PROBED = List.of("GET", "PUT", "POST", "DELETE", "PATCH");

  private final ObjectMapper json = new ObjectMapper();
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
  private TestPostgres.TestDatabase db;
  private WeirNode node;
  private String base;
  private String readerToken;
  private OpenApiDocument doc;

  @BeforeAll
  void start() throws Exception {
    db = TestPostgres.server().freshDatabase("openapi_it");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE items (id int PRIMARY KEY, v int)");
      s.execute("CREATE PUBLICATION openapi_pub FOR TABLE items");
    }
    Map<String, Object> m = new HashMap<>();
    m.put("weir.admin-token", ADMIN);
    m.put("weir.pipelines.cq.slot", "openapi_slot_" + suffix);
    m.put("weir.pipelines.cq.publications", List.of("openapi_pub"));
    m.put("weir.pipelines.cq.sink.type", "continuous");
    Config config =
        ConfigFactory.load(
            ConfigFactory.parseMap(m)
                .withFallback(db.config())
                .withFallback(ConfigFactory.defaultApplication()));
    node = TestNodes.start(config);
    base = "http://127.0.0.1:" + node.httpPort();
    awaitReady();
    HttpResponse<String> created =
        call("POST", "/admin/principals", ADMIN, "{\"id\":\"openapi-reader-" + suffix + "\"}");
    assertThat(created.statusCode())
        .as("the principal without grants should be created: %s", created.body())
        .isEqualTo(201);
    readerToken = json.readTree(created.body()).get("token").asText();
    doc = OpenApiDocument.fromClassPath();
  }

  @AfterAll
  void stop() {
    if (node != null) {
      node.stop();
    }
    if (db != null) {
      db.close();
    }
  }

  @Test
  void theNodeServesTheDocumentWithoutAToken() throws Exception {
    HttpResponse<byte[]> r =
        http.send(
            HttpRequest.newBuilder(URI.create(base + "/openapi.json")).GET().build(),
            HttpResponse.BodyHandlers.ofByteArray());
    assertThat(r.statusCode()).as("/openapi.json should need no token").isEqualTo(200);
    assertThat(r.headers().firstValue("Content-Type"))
        .as("the document is JSON")
        .hasValueSatisfying(v -> assertThat(v).startsWith("application/json"));
    assertThat(r.body())
        .as("the served document should be the resource")
        .isEqualTo(OpenApi.document());
    OpenApiDocument served = OpenApiDocument.parse(r.body());
    assertThat(served.problems())
        .as("the served document should be valid OpenAPI 3 in shape")
        .isEmpty();
    assertThat(served.paths())
        .as("the document should describe the node's routes")
        .contains(
            "/v1/documents/{collection}/{id}",
            "/admin/cluster",
            "/health/ready",
            "/metrics",
            "/openapi.json");
  }

  @Test
  void everyDocumentedOperationIsServedAndOtherMethodsAreRefused() throws Exception {
    List<String> checked = new ArrayList<>();
    for (String path : doc.paths()) {
      for (String method : PROBED) {
        HttpResponse<String> r = call(method, filled(path), ADMIN, body(method));
        String where = method + " " + filled(path);
        if (doc.methods(path).contains(method.toLowerCase(Locale.ROOT))) {
          assertThat(r.statusCode())
              .as("%s is documented, so it should be served: %s", where, r.body())
              .isNotEqualTo(405);
          if (r.statusCode() == 404) {
            assertThat(json.readTree(r.body()).path("message").asText())
                .as(
                    "%s is documented, so a 404 should come from its handler, not from routing",
                    where)
                .isNotEqualTo("no such resource");
          }
          assertDocumented(path, method, r);
          checked.add(where + " -> " + r.statusCode());
          if (doc.operation(path, method).has("requestBody")) {
            HttpResponse<String> malformed = call(method, filled(path), ADMIN, "{");
            assertDocumented(path, method, malformed);
            checked.add(where + " {malformed} -> " + malformed.statusCode());
          }
        } else {
          assertThat(r.statusCode())
              .as("%s is not documented, so it should be refused: %s", where, r.body())
              .isEqualTo(405);
          assertThat(json.readTree(r.body()).path("error").asText())
              .isEqualTo("method-not-allowed");
        }
      }
    }
    assertThat(checked.stream().filter(c -> !c.contains("{malformed}")))
        .as("every documented operation should have been asked")
        .hasSize(operations());
    System.out.println("openapi probes (administrator): " + checked);
  }

  @Test
  void answersWithoutATokenOrWithoutGrantsAreDocumented() throws Exception {
    int asked = 0;
    for (String path : doc.paths()) {
      for (String method : doc.methods(path)) {
        String m = method.toUpperCase(Locale.ROOT);
        HttpResponse<String> anonymous = call(m, filled(path), null, body(m));
        assertDocumented(path, m, anonymous);
        OpenApiDocument.Auth auth = doc.auth(path, method);
        if (auth == OpenApiDocument.Auth.REQUIRED) {
          assertThat(anonymous.statusCode()).as("%s %s needs a token", m, path).isEqualTo(401);
        } else if (auth == OpenApiDocument.Auth.NONE) {
          assertThat(anonymous.statusCode()).as("%s %s needs no token", m, path).isNotEqualTo(401);
        }
        if (anonymous.statusCode() == 401) {
          assertThat(anonymous.headers().firstValue("WWW-Authenticate"))
              .as("a 401 names the Bearer scheme")
              .isPresent();
        }
        HttpResponse<String> reader = call(m, filled(path), readerToken, body(m));
        assertDocumented(path, m, reader);
        if (path.startsWith("/admin/")) {
          assertThat(reader.statusCode()).as("%s %s is for administrators", m, path).isEqualTo(403);
        }
        asked++;
      }
    }
    assertThat(asked).isEqualTo(operations());
  }

  @Test
  void aPathNoRouteServesIsATypedNotFound() throws Exception {
    for (String path : List.of("/v1/no-such-route", "/admin/no-such-route", "/no-such-route")) {
      HttpResponse<String> r = call("GET", path, ADMIN, null);
      assertThat(r.statusCode()).as("%s is not a route", path).isEqualTo(404);
      assertThat(json.readTree(r.body()).path("error").asText()).isEqualTo("not-found");
    }
  }

  // ---- helpers ----

  /** The answer's status is documented for the operation, and an error's code under that status. */
  private void assertDocumented(String path, String method, HttpResponse<String> r)
      throws Exception {
    String where = method + " " + path;
    assertThat(doc.statuses(path, method))
        .as("%s answered %s, which the document should list: %s", where, r.statusCode(), r.body())
        .contains(Integer.toString(r.statusCode()));
    if (r.statusCode() >= 400 && !(path.equals("/health/ready") && r.statusCode() == 503)) {
      JsonNode body = json.readTree(r.body());
      assertThat(body.path("message").isTextual() && body.path("retryable").isBoolean())
          .as("%s: an error body has error, message and retryable: %s", where, r.body())
          .isTrue();
      assertThat(doc.errorCodes(path, method, r.statusCode()))
          .as(
              "%s answered %s %s, which the document should list under that status",
              where, r.statusCode(), body.path("error"))
          .contains(body.path("error").asText());
    }
  }

  private int operations() {
    return doc.paths().stream().mapToInt(p -> doc.methods(p).size()).sum();
  }

  /** The path with its placeholders filled with values of the right shape. */
  private static String filled(String template) {
    String id =
        template.startsWith("/v1/continuous/")
            ? "cq_" + "0".repeat(32)
            : template.startsWith("/admin/principals/") ? "openapi-nobody" : "doc-1";
    return template
        .replace("{collection}", "openapi_probe")
        .replace("{name}", "cq")
        .replace("{id}", id)
        .replace("{file}", "console.js")
        .replace("{partition}", "0");
  }

  private static String body(String method) {
    return method.equals("PUT") || method.equals("POST") || method.equals("PATCH") ? "{}" : null;
  }

  private HttpResponse<String> call(String method, String path, String token, String body)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(base + path))
            .timeout(Duration.ofSeconds(30))
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString(body));
    if (body != null) {
      b.header("Content-Type", "application/json");
    }
    if (token != null) {
      b.header("Authorization", "Bearer " + token);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  private void awaitReady() throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
    while (System.nanoTime() < deadline) {
      HttpResponse<String> r;
      try {
        r = call("GET", "/health/ready", null, null);
      } catch (java.io.IOException e) {
        r = null; // no answer in time: asked again
      }
      if (r != null && r.statusCode() == 200) {
        return;
      }
      Thread.sleep(200);
    }
    throw new AssertionError("the node should become ready within 120 s");
  }
}
