package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Credential rotation without downtime on a two-node cluster: a principal's token rotated through
 * one node works on both (the other within {@code weir.principals.refresh}) while the previous
 * token keeps working on both for the grace period and is refused on both after it; revoking kills
 * both tokens; a rotation without grace ends the previous token at once. The bootstrap
 * administrator is accepted by {@code weir.admin-token} and {@code weir.admin-token-previous}
 * alike. Prints what it checked.
 */
class CredentialRotationIT extends EndToEndTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String PREVIOUS_ADMIN = "e2e-previous-admin-token-0123";

  /**
   * The rotation's grace: every check that both tokens work on both nodes falls inside it, also on
   * a machine four times slower than a quiet one (about 2 s of them there).
   */
  private static final int GRACE_SECONDS = 20;

  @Test
  void rotatedTokensOverlapForTheGracePeriodOnEveryNode() throws Exception {
    db = TestPostgres.server().freshDatabase("rotation");
    Path config = Files.createTempFile("weir-rotation", ".conf");
    config.toFile().deleteOnExit();
    Files.writeString(config, "weir.partitions.count = 4\nweir.principals.refresh = 1s\n");
    int seed = NodeProcess.freePort();
    NodeProcess a = start("rotation-a", seed, seed, config, true);
    awaitReady(a, 4);
    NodeProcess b = start("rotation-b", NodeProcess.freePort(), seed, config, false);
    await("b joins")
        .atMost(START_UP)
        .pollInterval(Duration.ofMillis(250))
        .until(
            () ->
                b.ready()
                    && a.memberStatuses().values().stream().filter("up"::equals).count() == 2);

    // The bootstrap administrator: the current and the previous token both work on a; only the
    // current on b.
    assertThat(status(a, "GET", "/admin/cluster", PREVIOUS_ADMIN)).isEqualTo(200);
    assertThat(status(a, "GET", "/admin/cluster", NodeProcess.ADMIN_TOKEN)).isEqualTo(200);
    assertThat(status(b, "GET", "/admin/cluster", PREVIOUS_ADMIN)).isEqualTo(401);

    String old =
        callOnce(a, "POST", "/admin/principals", "{\"id\":\"ops\",\"administrator\":true}")
            .get("token")
            .asText();
    await("b knows ops")
        .atMost(Duration.ofSeconds(60))
        .until(() -> status(b, "GET", "/admin/cluster", old) == 200);

    // Rotate through a with a short grace: both tokens work on both nodes until it ends.
    JsonNode rotated =
        callOnce(
            a, "POST", "/admin/principals/ops/rotate", "{\"graceSeconds\":" + GRACE_SECONDS + "}");
    String fresh = rotated.get("token").asText();
    Instant until = Instant.parse(rotated.get("previousValidUntil").asText());
    assertThat(fresh).isNotEqualTo(old).startsWith("wp_");
    assertThat(status(a, "GET", "/admin/cluster", fresh))
        .as("the new token on the node that rotated")
        .isEqualTo(200);
    assertThat(status(a, "GET", "/admin/cluster", old))
        .as("the previous token within the grace")
        .isEqualTo(200);
    await("b honours the new token")
        .atMost(Duration.ofSeconds(GRACE_SECONDS))
        .pollInterval(Duration.ofMillis(100))
        .until(() -> status(b, "GET", "/admin/cluster", fresh) == 200);
    assertThat(status(b, "GET", "/admin/cluster", old))
        .as("b: the previous token within the grace")
        .isEqualTo(200);
    JsonNode listed = call(() -> a, "GET", "/admin/principals", null);
    assertThat(listed.toString())
        .doesNotContain(old)
        .doesNotContain(fresh)
        .contains("previousTokenValidUntil");

    await("the grace ends")
        .atMost(Duration.ofSeconds(GRACE_SECONDS + 10))
        .pollInterval(Duration.ofMillis(100))
        .until(() -> Instant.now().isAfter(until.plusMillis(200)));
    assertThat(status(a, "GET", "/admin/cluster", old))
        .as("a: the previous token after the grace")
        .isEqualTo(401);
    assertThat(status(b, "GET", "/admin/cluster", old))
        .as("b: the previous token after the grace")
        .isEqualTo(401);
    assertThat(status(a, "GET", "/admin/cluster", fresh)).isEqualTo(200);
    assertThat(status(b, "GET", "/admin/cluster", fresh)).isEqualTo(200);

    // Rotate again with a long grace, then revoke: both tokens die on both nodes.
    String third =
        callOnce(a, "POST", "/admin/principals/ops/rotate", "{\"graceSeconds\":3600}")
            .get("token")
            .asText();
    await("b honours the third token")
        .atMost(Duration.ofSeconds(60))
        .until(() -> status(b, "GET", "/admin/cluster", third) == 200);
    assertThat(status(b, "GET", "/admin/cluster", fresh)).isEqualTo(200);
    call(() -> a, "POST", "/admin/principals/ops/revoke", null);
    assertThat(status(a, "GET", "/admin/cluster", third)).isEqualTo(401);
    assertThat(status(a, "GET", "/admin/cluster", fresh)).isEqualTo(401);
    await("b refuses both after revoking")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(100))
        .until(
            () ->
                status(b, "GET", "/admin/cluster", third) == 401
                    && status(b, "GET", "/admin/cluster", fresh) == 401);
    assertThat(
            a.sendOnce(
                    "POST",
                    "/admin/principals/ops/rotate",
                    "{}",
                    Map.of("Content-Type", "application/json"))
                .statusCode())
        .as("a revoked principal is not rotated")
        .isEqualTo(404);

    // No grace: the previous token stops at once; bad bodies are refused.
    String r1 =
        callOnce(a, "POST", "/admin/principals", "{\"id\":\"reader\"}").get("token").asText();
    JsonNode now = callOnce(a, "POST", "/admin/principals/reader/rotate", "{\"graceSeconds\":0}");
    assertThat(now.get("previousValidUntil").isNull()).isTrue();
    assertThat(status(a, "POST", "/v1/changes/read", r1)).isEqualTo(401);
    for (String bad :
        new String[] {
          "{\"graceSeconds\":-1}",
          "{\"graceSeconds\":99999999}",
          "{\"graceSeconds\":\"1\"}",
          "{\"other\":1}",
          "[1]"
        }) {
      // Refused bodies rotate nothing: a repetition is harmless.
      var r =
          a.sendIdempotent(
              "POST",
              "/admin/principals/reader/rotate",
              bad,
              Map.of("Content-Type", "application/json"));
      assertThat(r.statusCode()).as(bad).isEqualTo(400);
    }
    assertThat(
            a.sendIdempotent("POST", "/admin/principals/nobody/rotate", null, Map.of())
                .statusCode())
        .isEqualTo(404);

    for (NodeProcess n : new NodeProcess[] {a, b}) {
      assertThat(n.log())
          .doesNotContain(old)
          .doesNotContain(fresh)
          .doesNotContain(third)
          .doesNotContain(PREVIOUS_ADMIN);
    }
    System.out.printf(
        "credential-rotation: nodes=2 grace-s=%d overlap-on-both=ok old-refused-after-grace-on-both=ok"
            + " revoke-kills-both=ok admin-token-previous=ok%n",
        GRACE_SECONDS);
  }

  private NodeProcess start(
      String name, int clusterPort, int seed, Path config, boolean previousAdmin) {
    NodeProcess.Spec spec =
        new NodeProcess.Spec(name)
            .database(db)
            .clusterPort(clusterPort)
            .env("WEIR_SEED_NODES", "127.0.0.1:" + seed)
            .args("--config", config.toString());
    if (previousAdmin) {
      spec.env("WEIR_ADMIN_TOKEN_PREVIOUS", PREVIOUS_ADMIN);
    }
    NodeProcess n = NodeProcess.start(spec);
    nodes.add(n);
    return n;
  }

  /**
   * The status of a read ({@code GET /admin/cluster}, {@code POST /v1/changes/read}) as the holder
   * of {@code token}, asked again while the node does not answer or answers 503.
   */
  private static int status(NodeProcess node, String method, String path, String token) {
    return node.sendIdempotent(
            method,
            path,
            method.equals("POST") ? "{}" : null,
            Map.of("Authorization", "Bearer " + token, "Content-Type", "application/json"))
        .statusCode();
  }
}
