package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.typesafe.config.ConfigFactory;
import io.weir.node.NodeView;
import io.weir.node.auth.Principal;
import io.weir.node.auth.TokenAuthenticator;
import io.weir.persistence.StorageStatus;
import io.weir.persistence.testing.TestPorts;
import io.weir.protocol.http.OutboxSettings;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * {@code /console} and {@code /admin/outbox/settings} on a real port: the console's three files
 * with their content types and security headers, typed errors for anything else, and page sources
 * that the strict Content-Security-Policy lets run (no inline script, style or handler) and that
 * never put fetched text into the page as HTML. The browser test is ConsoleIT (deploy module).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ConsoleRoutesTest {
  private static final String ADMIN = "admin-token-for-console-test";
  private static final String READER = "reader-token-for-console-test";

  private ActorTestKit kit;
  private ServerBinding binding;
  private final HttpClient client =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final ObjectMapper json = new ObjectMapper();

  @BeforeAll
  void start() throws Exception {
    kit =
        TestPorts.kit(
            "weir",
            ConfigFactory.parseString("pekko.actor.provider = cluster\n")
                .withFallback(ConfigFactory.load()));
    TokenAuthenticator auth =
        TokenAuthenticator.withBootstrapAdmin(ADMIN).with(READER, new Principal("reader", false));
    HttpApi api =
        new HttpApi(
            json,
            ApiServices.builder(
                    auth,
                    new NodeView(
                        kit.system(),
                        () -> new StorageStatus.Starting(Instant.now()),
                        16,
                        NodeView.NO_PIPELINES))
                .outboxSettings(new OutboxSettings(16, 40, 1L << 30, 16_384, 2L << 30, 1500L))
                .build());
    binding = TestBindings.bind(kit.system(), api.routes());
  }

  @AfterAll
  void stop() {
    kit.shutdownTestKit();
  }

  private HttpResponse<String> send(String method, String path, Map<String, String> headers)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + binding.localAddress().getPort() + path))
            .method(method, HttpRequest.BodyPublishers.noBody());
    headers.forEach(b::header);
    return client.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  private HttpResponse<String> get(String path) throws Exception {
    return send("GET", path, Map.of());
  }

  @Test
  void theFilesAreServedWithTheirTypesAndAStrictPolicy() throws Exception {
    Map<String, String> types =
        Map.of(
            "/console", "text/html; charset=UTF-8",
            "/console/", "text/html; charset=UTF-8",
            "/console/console.js", "text/javascript; charset=UTF-8",
            "/console/console.css", "text/css; charset=UTF-8");
    for (Map.Entry<String, String> e : types.entrySet()) {
      HttpResponse<String> r = get(e.getKey());
      assertThat(r.statusCode()).as("GET %s needs no token", e.getKey()).isEqualTo(200);
      assertThat(r.headers().firstValue("Content-Type"))
          .as("type of %s", e.getKey())
          .hasValue(e.getValue());
      assertSecurityHeaders(r, e.getKey());
      assertThat(r.body()).as("%s is not empty", e.getKey()).isNotBlank();
    }
    assertThat(get("/console").body())
        .isEqualTo(get("/console/").body())
        .contains("<title>Weir console</title>");
  }

  @Test
  void anythingElseUnderConsoleIsATypedError() throws Exception {
    for (String path :
        new String[] {
          "/console/index.html",
          "/console/secret.txt",
          "/console/console.js/x",
          "/console/..%2Fapplication.conf",
          "/consolex"
        }) {
      HttpResponse<String> r = get(path);
      assertThat(r.statusCode()).as("GET %s", path).isEqualTo(404);
      assertThat(r.headers().firstValue("Content-Type")).hasValue("application/json");
      assertThat(json.readTree(r.body()).get("error").asText()).isEqualTo("not-found");
    }
    HttpResponse<String> post = send("POST", "/console", Map.of());
    assertThat(post.statusCode()).as("the console is read-only").isEqualTo(405);
    assertThat(json.readTree(post.body()).get("error").asText()).isEqualTo("method-not-allowed");
  }

  @Test
  void outboxSettingsAreForAdministrators() throws Exception {
    assertThat(get("/admin/outbox/settings").statusCode()).isEqualTo(401);
    assertThat(
            send("GET", "/admin/outbox/settings", Map.of("Authorization", "Bearer " + READER))
                .statusCode())
        .isEqualTo(403);
    HttpResponse<String> r =
        send("GET", "/admin/outbox/settings", Map.of("Authorization", "Bearer " + ADMIN));
    assertThat(r.statusCode()).isEqualTo(200);
    JsonNode body = json.readTree(r.body());
    assertThat(body.get("partitions").asInt()).isEqualTo(16);
    assertThat(body.get("maxEntries").asLong()).isEqualTo(40);
    assertThat(body.get("maxBytes").asLong()).isEqualTo(1L << 30);
    assertThat(body.get("reserveEntries").asLong()).isEqualTo(16_384);
    assertThat(body.get("reserveBytes").asLong()).isEqualTo(2L << 30);
    assertThat(body.get("autoPurgeIntervalMillis").asLong()).isEqualTo(1500);
  }

  /**
   * What the policy forbids would be refused by the browser, not by the server: so the sources are
   * checked here. The HTML loads one script and one style sheet from the node, with no inline
   * script, style or event handler; the script writes text and SVG attributes only.
   */
  @Test
  void theSourcesRunUnderThePolicy() throws Exception {
    String html = resource("index.html");
    assertThat(
            Pattern.compile(
                    "<script(?![^>]*\\ssrc=\"/console/console\\.js\")", Pattern.CASE_INSENSITIVE)
                .matcher(html)
                .find())
        .as("every <script> loads /console/console.js")
        .isFalse();
    assertThat(Pattern.compile("<script").matcher(html).results().count()).isEqualTo(1);
    assertThat(Pattern.compile("\\son[a-z]+\\s*=", Pattern.CASE_INSENSITIVE).matcher(html).find())
        .as("no inline handler")
        .isFalse();
    assertThat(
            Pattern.compile("\\sstyle\\s*=|<style", Pattern.CASE_INSENSITIVE).matcher(html).find())
        .as("no inline style")
        .isFalse();
    assertThat(html)
        .contains("href=\"/console/console.css\"")
        .doesNotContain("http://")
        .doesNotContain("https://");
    String js = resource("console.js");
    for (String banned :
        new String[] {
          "innerHTML",
          "outerHTML",
          "insertAdjacentHTML",
          "document.write",
          "eval(",
          "new Function",
          "localStorage",
          "setAttribute('style'",
          ".style."
        }) {
      assertThat(js).as("console.js does not use %s", banned).doesNotContain(banned);
    }
    assertThat(js)
        .as("the token goes in the Authorization header, from sessionStorage")
        .contains("'Authorization': 'Bearer ' + token")
        .contains("sessionStorage");
  }

  private static void assertSecurityHeaders(HttpResponse<String> r, String path) {
    assertThat(r.headers().firstValue("Content-Security-Policy"))
        .as("CSP of %s", path)
        .hasValue(ConsoleRoutes.CONTENT_SECURITY_POLICY);
    String csp = ConsoleRoutes.CONTENT_SECURITY_POLICY;
    assertThat(csp)
        .contains("default-src 'none'", "script-src 'self'", "frame-ancestors 'none'")
        .doesNotContain("unsafe-inline")
        .doesNotContain("unsafe-eval");
    assertThat(r.headers().firstValue("X-Content-Type-Options")).hasValue("nosniff");
    assertThat(r.headers().firstValue("Referrer-Policy")).hasValue("no-referrer");
    assertThat(r.headers().firstValue("Cache-Control")).hasValue("no-store");
  }

  private static String resource(String name) throws Exception {
    try (InputStream in =
        ConsoleRoutes.class.getResourceAsStream(ConsoleRoutes.RESOURCE_DIR + name)) {
      assertThat(in).as("%s is in the jar", name).isNotNull();
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }
}
