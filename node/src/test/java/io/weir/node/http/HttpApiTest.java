package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.typesafe.config.ConfigFactory;
import io.weir.node.NodeView;
import io.weir.node.auth.Principal;
import io.weir.node.auth.TokenAuthenticator;
import io.weir.persistence.ClusterIdentity;
import io.weir.persistence.StorageStatus;
import io.weir.persistence.testing.TestPorts;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The HTTP API served on a real port by a real single-node cluster: authentication rules, health,
 * cluster status, typed JSON errors. Storage status is set by the test (no database needed).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class HttpApiTest {
  private static final String ADMIN = "admin-token-for-http-api-test";
  private static final String READER = "reader-token-for-http-api-test";

  private ActorTestKit kit;
  private ServerBinding binding;
  private final AtomicReference<StorageStatus> storage =
      new AtomicReference<>(new StorageStatus.Starting(Instant.now()));
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
    Cluster cluster = Cluster.get(kit.system());
    cluster.manager().tell(Join.create(cluster.selfMember().address()));
    TokenAuthenticator auth =
        TokenAuthenticator.withBootstrapAdmin(ADMIN).with(READER, new Principal("reader", false));
    HttpApi api =
        new HttpApi(
            json,
            ApiServices.builder(
                    auth, new NodeView(kit.system(), storage::get, 64, NodeView.NO_PIPELINES))
                .metrics(() -> "# test metrics\n")
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

  private HttpResponse<String> get(String path, String authorization) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(
            URI.create("http://127.0.0.1:" + binding.localAddress().getPort() + path));
    if (authorization != null) {
      b.header("Authorization", authorization);
    }
    return client.send(b.GET().build(), HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void adminRoutesRequireABearerToken() throws Exception {
    HttpResponse<String> none = get("/admin/cluster", null);
    assertThat(none.statusCode()).as("no token should be 401").isEqualTo(401);
    assertThat(none.headers().firstValue("WWW-Authenticate"))
        .as("401 should name the Bearer scheme")
        .hasValueSatisfying(v -> assertThat(v).startsWith("Bearer"));
    assertThat(json.readTree(none.body()).get("error").asText()).isEqualTo("unauthenticated");

    HttpResponse<String> wrong = get("/admin/cluster", "Bearer not-the-admin-token-at-all");
    assertThat(wrong.statusCode()).as("a wrong token should be 401").isEqualTo(401);
    assertThat(wrong.body())
        .as("the reply must not echo the presented token")
        .doesNotContain("not-the-admin-token-at-all");

    assertThat(get("/admin/cluster", "Basic " + ADMIN).statusCode())
        .as("another scheme should be 401")
        .isEqualTo(401);
    assertThat(get("/admin/nothing-here", null).statusCode())
        .as("auth comes before routing under /admin")
        .isEqualTo(401);
  }

  @Test
  void metricsAreForAdministrators() throws Exception {
    assertThat(get("/admin/metrics", null).statusCode()).isEqualTo(401);
    HttpResponse<String> r = get("/admin/metrics", "Bearer " + ADMIN);
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.body()).isEqualTo("# test metrics\n");
  }

  @Test
  void nonAdministratorsAreForbidden() throws Exception {
    HttpResponse<String> r = get("/admin/cluster", "Bearer " + READER);
    assertThat(r.statusCode())
        .as("an authenticated non-administrator should be 403")
        .isEqualTo(403);
    assertThat(json.readTree(r.body()).get("error").asText()).isEqualTo("forbidden");
  }

  @Test
  void administratorsSeeTheClusterMembership() throws Exception {
    UUID id = UUID.randomUUID();
    storage.set(
        new StorageStatus.Ready(
            Instant.now(), new ClusterIdentity(id, "k1", new byte[32], Instant.now(), 64), "2"));
    HttpResponse<String> r = get("/admin/cluster", "bearer " + ADMIN);
    assertThat(r.statusCode()).as("the scheme name is case-insensitive").isEqualTo(200);
    JsonNode body = json.readTree(r.body());
    assertThat(body.get("clusterId").asText()).isEqualTo(id.toString());
    assertThat(body.get("members")).as("a single-node cluster has one member").hasSize(1);
    JsonNode member = body.get("members").get(0);
    assertThat(member.get("status").asText()).isEqualTo("up");
    assertThat(member.get("address").asText()).isEqualTo(body.get("self").asText());
    assertThat(body.get("leader").asText()).isEqualTo(body.get("self").asText());
    assertThat(body.get("unreachable")).isEmpty();
    // No shard region and no pipeline manager here: the answer still comes, and says it does not
    // know.
    assertThat(member.get("partitions").isNull())
        .as("placement unknown without a shard region")
        .isTrue();
    assertThat(member.get("slots")).isEmpty();
    assertThat(body.get("slotOwner").isNull())
        .as("slot owner unknown without a pipeline manager")
        .isTrue();
  }

  @Test
  void readinessFollowsStorage() throws Exception {
    assertThat(get("/health/alive", null).statusCode()).isEqualTo(200);
    storage.set(new StorageStatus.Unavailable(Instant.now(), "ConnectException"));
    HttpResponse<String> down = get("/health/ready", null);
    assertThat(down.statusCode())
        .as("unavailable storage should make the node not ready")
        .isEqualTo(503);
    assertThat(json.readTree(down.body()).get("checks").get("storage").asText())
        .isEqualTo("unavailable");
    storage.set(
        new StorageStatus.Ready(
            Instant.now(),
            new ClusterIdentity(UUID.randomUUID(), "k1", new byte[32], Instant.now(), 64),
            "2"));
    HttpResponse<String> up = get("/health/ready", null);
    assertThat(up.statusCode())
        .as("an Up member with ready storage should be ready")
        .isEqualTo(200);
    assertThat(json.readTree(up.body()).get("ready").asBoolean()).isTrue();
  }

  @Test
  void unknownPathsAndMethodsGetTypedErrors() throws Exception {
    HttpResponse<String> missing = get("/no/such/path", null);
    assertThat(missing.statusCode()).isEqualTo(404);
    assertThat(json.readTree(missing.body()).get("error").asText()).isEqualTo("not-found");
    assertThat(json.readTree(missing.body()).get("retryable").asBoolean())
        .as("a missing route is not worth a retry")
        .isFalse();
    HttpResponse<String> post =
        client.send(
            HttpRequest.newBuilder(
                    URI.create(
                        "http://127.0.0.1:" + binding.localAddress().getPort() + "/health/alive"))
                .POST(HttpRequest.BodyPublishers.noBody())
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(post.statusCode()).isEqualTo(405);
    assertThat(json.readTree(post.body()).get("error").asText()).isEqualTo("method-not-allowed");
  }
}
