package io.weir.node.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.typesafe.config.ConfigFactory;
import io.weir.node.NodeView;
import io.weir.node.auth.Principal;
import io.weir.node.auth.TokenAuthenticator;
import io.weir.node.http.ApiServices;
import io.weir.node.http.HttpApi;
import io.weir.node.http.TestBindings;
import io.weir.persistence.StorageStatus;
import io.weir.persistence.testing.TestPorts;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * {@code GET /metrics} on a real port: who may scrape it, the HTTP meters by route template and
 * status, the JVM binders, and that distinctive ids and names in request paths never become label
 * values however many there are.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MetricsEndpointTest {
  private static final String ADMIN = "admin-token-for-metrics-test";
  private static final String READER = "reader-token-for-metrics-test";
  private static final String SCRAPE = "scrape-token-for-metrics-test";

  private ActorTestKit kit;
  private ServerBinding guarded;
  private ServerBinding open;
  private NodeMetrics metrics;
  private final HttpClient client =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final AtomicReference<StorageStatus> storage =
      new AtomicReference<>(new StorageStatus.Starting(Instant.now()));

  @BeforeAll
  void start() throws Exception {
    kit =
        TestPorts.kit(
            "weir",
            ConfigFactory.parseString("pekko.actor.provider = cluster\n")
                .withFallback(ConfigFactory.load()));
    TokenAuthenticator auth =
        TokenAuthenticator.withBootstrapAdmin(ADMIN).with(READER, new Principal("reader", false));
    MetricsSettings settings = new MetricsSettings(true, Optional.of(SCRAPE), false, 256);
    metrics = new NodeMetrics(settings);
    HttpApi api =
        new HttpApi(
            new ObjectMapper(),
            ApiServices.builder(
                    auth, new NodeView(kit.system(), storage::get, 64, NodeView.NO_PIPELINES))
                .metrics(metrics::scrape)
                .httpMetrics(metrics.http(RouteTemplates.node()), settings)
                .build());
    guarded = TestBindings.bind(kit.system(), api.routes());
    MetricsSettings anonymous = new MetricsSettings(true, Optional.empty(), true, 256);
    HttpApi openApi =
        new HttpApi(
            new ObjectMapper(),
            ApiServices.builder(
                    auth, new NodeView(kit.system(), storage::get, 64, NodeView.NO_PIPELINES))
                .metrics(metrics::scrape)
                .httpMetrics(null, anonymous)
                .build());
    open = TestBindings.bind(kit.system(), openApi.routes());
  }

  @AfterAll
  void stop() {
    kit.shutdownTestKit();
    metrics.close();
  }

  private HttpResponse<String> send(
      ServerBinding b, String method, String path, String authorization) throws Exception {
    HttpRequest.Builder r =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + b.localAddress().getPort() + path))
            .method(method, HttpRequest.BodyPublishers.noBody());
    if (authorization != null) {
      r.header("Authorization", authorization);
    }
    return client.send(r.build(), HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void theScrapeTokenAndAdministratorsMayScrapeOthersMayNot() throws Exception {
    assertThat(send(guarded, "GET", "/metrics", null).statusCode())
        .as("no token: 401")
        .isEqualTo(401);
    assertThat(send(guarded, "GET", "/metrics", "Bearer wrong-token-0123456789").statusCode())
        .isEqualTo(401);
    assertThat(send(guarded, "GET", "/metrics", "Bearer " + READER).statusCode())
        .as("a non-administrator: 403")
        .isEqualTo(403);
    HttpResponse<String> scraped = send(guarded, "GET", "/metrics", "Bearer " + SCRAPE);
    assertThat(scraped.statusCode()).as("the scrape token opens /metrics").isEqualTo(200);
    assertThat(scraped.headers().firstValue("Content-Type"))
        .hasValueSatisfying(v -> assertThat(v).startsWith("text/plain").contains("version=0.0.4"));
    assertThat(send(guarded, "GET", "/metrics", "Bearer " + ADMIN).statusCode()).isEqualTo(200);
    assertThat(send(guarded, "GET", "/admin/metrics", "Bearer " + ADMIN).statusCode())
        .as("the admin alias")
        .isEqualTo(200);
    assertThat(send(guarded, "GET", "/admin/cluster", "Bearer " + SCRAPE).statusCode())
        .as("the scrape token opens nothing else")
        .isEqualTo(401);
    assertThat(send(guarded, "GET", "/admin/metrics", "Bearer " + SCRAPE).statusCode())
        .isEqualTo(401);
    assertThat(send(open, "GET", "/metrics", null).statusCode())
        .as("anonymous on: no token needed")
        .isEqualTo(200);
  }

  @Test
  void requestsAreCountedByTemplateAndNoPathValueBecomesALabel() throws Exception {
    Set<String> secrets = new java.util.HashSet<>();
    for (int i = 0; i < 60; i++) {
      String coll = "secretcoll" + i + "x7q";
      String id = "secretid" + i + "k2w";
      secrets.add(coll);
      secrets.add(id);
      send(guarded, "GET", "/v1/documents/" + coll + "/" + id, "Bearer " + ADMIN);
      send(guarded, "PUT", "/v1/documents/" + coll + "/" + id, null);
      send(guarded, "POST", "/admin/pipelines/secretpipe" + i + "/start", "Bearer " + ADMIN);
      send(guarded, "GET", "/secretroot" + i + "/x", null);
    }
    secrets.add("secretpipe");
    secrets.add("secretroot");
    send(guarded, "GET", "/health/alive", null);
    String text = send(guarded, "GET", "/metrics", "Bearer " + ADMIN).body();
    for (String s : secrets) {
      assertThat(text).as("no path value in the metrics").doesNotContain(s);
    }
    Exposition e = Exposition.parse(text);
    assertThat(e.labelValues("route"))
        .as("route labels come from the templates only")
        .isSubsetOf(RouteTemplates.node().labels())
        .contains(
            "/v1/documents/{collection}/{id}",
            "/admin/pipelines/{name}/start",
            "/health/alive",
            RouteTemplates.UNMATCHED);
    assertThat(e.labelValues("method"))
        .isSubsetOf("GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "OTHER");
    assertThat(e.labelValues("status")).allSatisfy(s -> assertThat(s).matches("[1-5][0-9][0-9]"));
    assertThat(
            e.value(
                "weir_http_requests_seconds_count",
                Map.of(
                    "method", "GET", "route", "/v1/documents/{collection}/{id}", "status", "404")))
        .as("60 reads of documents (no document API on this node: 404)")
        .hasValue(60.0);
    assertThat(
            e.value(
                "weir_http_requests_seconds_count",
                Map.of(
                    "method", "PUT", "route", "/v1/documents/{collection}/{id}", "status", "401")))
        .as("60 writes without a token: 401")
        .hasValue(60.0);
    assertThat(
            e.value(
                "weir_http_requests_seconds_count",
                Map.of("route", RouteTemplates.UNMATCHED, "status", "404")))
        .hasValue(60.0);
    long series = e.named("weir_http_requests_seconds_count").size();
    assertThat(series)
        .as("240 distinct paths make a handful of series, not hundreds")
        .isLessThan(12);
    assertThat(e.named("weir_http_requests_seconds_bucket"))
        .as("the latency histogram has fixed buckets")
        .isNotEmpty()
        .allSatisfy(s -> assertThat(s.labels()).containsKey("le"));
    assertThat(e.named("jvm_memory_used_bytes")).as("JVM binders").isNotEmpty();
    assertThat(e.named("process_uptime_seconds")).isNotEmpty();
    assertThat(e.named("jvm_threads_live_threads")).isNotEmpty();
  }

  @Test
  void registryHooksTakeBoundedLabelsOnly() throws Exception {
    enum Fallback {
      STALE_EPOCH,
      REPAIR_FAILED
    }
    NodeMetrics.ReasonCounter<Fallback> fallbacks =
        metrics.reasonCounter("weir.test.fallbacks", "test fallbacks", "reason", Fallback.class);
    NodeMetrics.Active sessions = metrics.active("weir.test.sessions", "test sessions");
    fallbacks.increment(Fallback.REPAIR_FAILED);
    sessions.opened();
    sessions.opened();
    sessions.closed();
    Exposition e = Exposition.parse(send(guarded, "GET", "/metrics", "Bearer " + SCRAPE).body());
    assertThat(e.value("weir_test_fallbacks_total", Map.of("reason", "stale-epoch")))
        .as("registered at 0")
        .hasValue(0.0);
    assertThat(e.value("weir_test_fallbacks_total", Map.of("reason", "repair-failed")))
        .hasValue(1.0);
    assertThat(e.value("weir_test_sessions", Map.of())).hasValue(1.0);
  }
}
