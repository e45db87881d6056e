package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.partition.Partitioning;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * A full cluster restart (every node stopped, then started again): a changes cursor and a
 * projection batch token issued before it still work afterwards, with the principals, the
 * consumer's checkpoint and the outbox recovered from PostgreSQL (snapshot + journal). Prints
 * what it checked.
 */
class ClusterRestartIT extends EndToEndTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int PARTITIONS = 8;
  private final AtomicReference<NodeProcess> current = new AtomicReference<>();

  @Test
  void cursorsAndBatchTokensSurviveStoppingEveryNode() throws Exception {
    db = TestPostgres.server().freshDatabase("restart");
    Path config = Files.createTempFile("weir-restart", ".conf");
    config.toFile().deleteOnExit();
    Files.writeString(config, "weir.partitions.count = " + PARTITIONS + "\n");
    current.set(startNode("restart", config));
    awaitReady(current.get(), PARTITIONS);
    String token = call(current::get, "POST", "/admin/principals", "{\"id\":\"follower\"}").get("token").asText();
    call(current::get, "POST", "/admin/principals/follower/grants", "{\"collection\":\"docs\",\"grant\":\"ChangesRead\"}");
    for (int i = 0; i < 20; i++) {
      put("d" + i, i);
    }
    // The follower reads everything so far; its cursor is at the tail.
    String cursor = null;
    int before = 0;
    while (true) {
      JsonNode page = changes(token, cursor);
      before += page.get("changes").size();
      cursor = page.get("cursor").asText();
      if (!page.get("hasMore").asBoolean()) {
        break;
      }
    }
    assertThat(before).isEqualTo(20);
    // A projection consumer reads a batch of one partition and is stopped before committing it.
    int partition = Partitioning.partitionOf("docs", "d0", PARTITIONS);
    call(current::get, "POST", "/admin/projections/configure",
        "{\"partition\":" + partition + ",\"consumer\":\"count\",\"generation\":1,\"collections\":[\"docs\"]}");
    JsonNode batch = call(current::get, "POST", "/admin/projections/read",
        "{\"partition\":" + partition + ",\"consumer\":\"count\",\"generation\":1}");
    assertThat(batch.get("entries").size()).isPositive();

    // Every node stops (coordinated shutdown), then the cluster starts again.
    current.get().terminate();
    current.get().waitForExit(Duration.ofSeconds(60));
    long stopped = System.nanoTime();
    current.set(startNode("restart", config));
    awaitReady(current.get(), PARTITIONS);
    long restartMs = (System.nanoTime() - stopped) / 1_000_000;

    for (int i = 20; i < 25; i++) {
      put("d" + i, i);
    }
    Set<String> after = new HashSet<>();
    while (true) {
      JsonNode page = changes(token, cursor);
      page.get("changes").forEach(c -> after.add(c.get("id").asText()));
      cursor = page.get("cursor").asText();
      if (!page.get("hasMore").asBoolean()) {
        break;
      }
    }
    assertThat(after).as("the cursor issued before the restart goes on where it was").containsExactlyInAnyOrder(
        "d20", "d21", "d22", "d23", "d24");
    JsonNode committed = call(current::get, "POST", "/admin/projections/commit",
        "{\"token\":\"" + batch.get("token").asText() + "\"}");
    assertThat(committed.get("checkpoint").asLong()).isEqualTo(batch.get("through").asLong());
    JsonNode next = call(current::get, "POST", "/admin/projections/read",
        "{\"partition\":" + partition + ",\"consumer\":\"count\",\"generation\":1}");
    assertThat(next.get("start").asLong()).as("the checkpoint survived").isEqualTo(batch.get("through").asLong());
    System.out.printf("cluster-restart: changes-before=%d cursor-changes-after-restart=%d batch-token-commit=ok"
        + " checkpoint=%d restart-to-ready-ms=%d%n", before, after.size(), committed.get("checkpoint").asLong(), restartMs);
  }

  private void put(String id, int n) throws Exception {
    for (int attempt = 0; ; attempt++) {
      var r = current.get().send("PUT", "/v1/documents/docs/" + id, "{\"n\":" + n + "}", Map.of("Idempotency-Key", id));
      if (r.isPresent() && r.get().statusCode() == 200) {
        return;
      }
      assertThat(attempt).as("write %s", id).isLessThan(300);
      Thread.sleep(100);
    }
  }

  private JsonNode changes(String token, String cursor) throws Exception {
    String body = cursor == null ? "{\"collection\":\"docs\",\"start\":\"beginning\"}"
        : "{\"collection\":\"docs\",\"cursor\":\"" + cursor + "\"}";
    for (int attempt = 0; ; attempt++) {
      var r = current.get().send("POST", "/v1/changes/read", body,
          Map.of("Authorization", "Bearer " + token, "Content-Type", "application/json"));
      if (r.isPresent() && r.get().statusCode() == 200) {
        return JSON.readTree(r.get().body());
      }
      if (r.isPresent() && r.get().statusCode() != 503) {
        throw new AssertionError("changes read: " + r.get().statusCode() + " " + r.get().body());
      }
      assertThat(attempt).as("changes read answers").isLessThan(300);
      Thread.sleep(100);
    }
  }
}
