package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.weir.persistence.testing.TestPorts;
import io.weir.persistence.testing.TestPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * A real node process: configuration errors at start, and PostgreSQL going away and coming back.
 */
class NodeStartupIT {
  private static final String PASSWORD_CANARY = "canary-pw-5d1e9b";

  @Test
  void missingAdminTokenStopsStartUpNamingTheKey() throws Exception {
    try (NodeProcess node =
        NodeProcess.start(
            new NodeProcess.Spec("no-admin-token")
                .without("WEIR_ADMIN_TOKEN")
                .env("WEIR_PG_URL", "jdbc:postgresql://127.0.0.1:1/weir")
                .env("WEIR_PG_PASSWORD", PASSWORD_CANARY))) {
      assertThat(node.waitForExit(Duration.ofSeconds(120)))
          .as("a configuration error should exit with status 2")
          .isEqualTo(2);
      assertThat(node.log())
          .contains("weir.admin-token")
          .contains("WEIR_ADMIN_TOKEN")
          .doesNotContain(PASSWORD_CANARY);
    }
  }

  @Test
  void badPortStopsStartUpWithoutEchoingTheValue() throws Exception {
    try (NodeProcess node =
        NodeProcess.start(
            new NodeProcess.Spec("bad-port")
                .env("WEIR_PG_URL", "jdbc:postgresql://127.0.0.1:1/weir")
                .env("WEIR_HTTP_PORT", "not-a-port-7731"))) {
      assertThat(node.waitForExit(Duration.ofSeconds(120))).isEqualTo(2);
      assertThat(node.log()).contains("weir.http.port").doesNotContain("not-a-port-7731");
    }
  }

  @Test
  void nodeStaysUpWithoutPostgresAndBecomesReadyWhenItReturns() throws Exception {
    // A PostgreSQL of this test's own, so it can be stopped without disturbing other tests.
    Path home = Files.createTempDirectory("weir-outage-pg");
    Map<String, String> pgEnv =
        Map.of(
            "WEIR_PG_HOME",
            home.toString(),
            "WEIR_PG_PORT_BASE",
            Integer.toString(TestPorts.freeBlock(4)));
    Map<String, String> pg = TestPostgres.pgScript(pgEnv, "start");
    TestPostgres.pgScript(pgEnv, "stop");
    try (NodeProcess node =
        NodeProcess.start(
            new NodeProcess.Spec("storage-outage")
                .env("WEIR_PG_URL", pg.get("WEIR_PG_URL"))
                .env("WEIR_PG_USER", pg.get("WEIR_PG_USER"))
                .env("WEIR_PG_PASSWORD", pg.get("WEIR_PG_PASSWORD"))
                // Short backoff bounds keep the test quick; the production default caps at 30 s.
                .prop("weir.postgres.max-backoff", "2s")
                .prop("weir.postgres.probe-interval", "1s"))) {
      await("the node should serve /health/alive without PostgreSQL")
          .atMost(Duration.ofSeconds(180))
          .until(
              () -> node.get("/health/alive", false).map(r -> r.statusCode() == 200).orElse(false));
      await("the node should report storage unavailable")
          .atMost(Duration.ofSeconds(90))
          .until(
              () ->
                  node.get("/health/ready", false)
                      .map(r -> r.statusCode() == 503 && r.body().contains("\"unavailable\""))
                      .orElse(false));

      TestPostgres.pgScript(pgEnv, "start");
      await("the node should become ready once PostgreSQL is up")
          .atMost(Duration.ofSeconds(120))
          .until(node::ready);

      TestPostgres.pgScript(pgEnv, "stop");
      // An answer 503, not a missing one (a busy machine), shows readiness turned false.
      await("readiness should turn false when PostgreSQL goes away")
          .atMost(Duration.ofSeconds(90))
          .until(
              () -> node.get("/health/ready", false).map(r -> r.statusCode() == 503).orElse(false));
      assertThat(node.isAlive()).as("the node must stay up while PostgreSQL is down").isTrue();

      TestPostgres.pgScript(pgEnv, "start");
      await("the node should reconnect").atMost(Duration.ofSeconds(120)).until(node::ready);

      String log = node.log();
      assertThat(count(log, "PostgreSQL is unavailable"))
          .as("one log line per change to unavailable")
          .isEqualTo(2);
      assertThat(count(log, "PostgreSQL is reachable"))
          .as("one log line per change to reachable")
          .isEqualTo(2);
      assertThat(log)
          .as("the password must never be logged")
          .doesNotContain(pg.get("WEIR_PG_PASSWORD"));
    } finally {
      TestPostgres.pgScript(pgEnv, "destroy");
    }
  }

  @Test
  void aNodeRequiringTwoCopiesOnASinglePostgresIsNotReadyAndSaysWhy() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("copies");
        NodeProcess node =
            NodeProcess.start(
                new NodeProcess.Spec("two-copies")
                    .database(db)
                    .env("WEIR_PARTITIONS", "4")
                    .env("WEIR_REQUIRED_COPIES", "2"))) {
      await("the node answers readiness: not ready for want of copies")
          .atMost(Duration.ofSeconds(180))
          .until(
              () ->
                  node.get("/health/ready", false)
                      .map(
                          r ->
                              r.statusCode() == 503
                                  && r.body().contains("\"storage\":\"ready\"")
                                  && r.body().contains("\"storage-copies\":\"1 of 2 required\""))
                      .orElse(false));
      assertThat(node.log())
          .contains("commits are durable on 1 copies")
          .contains("no synchronous standbys");
      // Fail closed: the partitions write nothing a client asks for while the copies are short.
      Map<String, String> json = Map.of("Content-Type", "application/json");
      java.util.concurrent.atomic.AtomicReference<java.net.http.HttpResponse<String>> put =
          new java.util.concurrent.atomic.AtomicReference<>();
      await("a document write is answered (the partitions run)")
          .atMost(Duration.ofSeconds(180))
          .until(
              () -> {
                put.set(node.sendOnce("PUT", "/v1/documents/orders/o1", "{\"v\":1}", json));
                return !put.get().body().contains("\"unavailable\"");
              });
      assertThat(put.get().statusCode()).as(put.get().body()).isEqualTo(503);
      assertThat(put.get().body())
          .contains("\"error\":\"storage-copies-insufficient\"")
          .contains("\"retryable\":true")
          .contains("1 durable copies of a commit where 2 are required");
      assertThat(
              node.getAnswer("/v1/documents/orders/o1", true, Duration.ofSeconds(60)).statusCode())
          .as("nothing was written")
          .isEqualTo(404);
      java.net.http.HttpResponse<String> configure =
          node.sendOnce(
              "POST",
              "/admin/projections/configure",
              "{\"partition\":1,\"consumer\":\"agg\",\"generation\":1,\"collections\":[\"orders\"]}",
              json);
      assertThat(configure.statusCode()).as(configure.body()).isEqualTo(503);
      assertThat(configure.body()).contains("\"error\":\"storage-copies-insufficient\"");
    }
  }

  @Test
  void aNodeWithAnotherPartitionCountOrShardLayoutRefusesToRun() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("partitions")) {
      try (NodeProcess first =
          NodeProcess.start(new NodeProcess.Spec("partitions-64").database(db))) {
        await("the first node creates the cluster with 64 partitions")
            .atMost(Duration.ofSeconds(180))
            .until(first::ready);
        first.terminate();
        first.waitForExit(Duration.ofSeconds(120));
      }
      try (NodeProcess other =
          NodeProcess.start(
              new NodeProcess.Spec("partitions-32").database(db).env("WEIR_PARTITIONS", "32"))) {
        assertThat(other.waitForExit(Duration.ofSeconds(120)))
            .as("a configuration error: exit status 2")
            .isEqualTo(2);
        assertThat(other.log())
            .contains("weir.partitions.count is 32 but this cluster was created with 64 partitions")
            .contains("set weir.partitions.count = 64");
      }
      // Nor with another shard layout (ADR 0052): two layouts would run a partition twice.
      try (NodeProcess other =
          NodeProcess.start(
              new NodeProcess.Spec("shards-legacy")
                  .database(db)
                  .env("WEIR_PARTITION_SHARDS", "legacy"))) {
        assertThat(other.waitForExit(Duration.ofSeconds(120)))
            .as("a configuration error: exit status 2")
            .isEqualTo(2);
        assertThat(other.log())
            .contains("weir.partitions.shards is legacy but this cluster was created with 16")
            .contains("set weir.partitions.shards = 16");
      }
    }
  }

  private static int count(String text, String needle) {
    Matcher m = Pattern.compile(Pattern.quote(needle)).matcher(text);
    int n = 0;
    while (m.find()) {
      n++;
    }
    return n;
  }
}
