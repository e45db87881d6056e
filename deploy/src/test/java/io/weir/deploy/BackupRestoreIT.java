package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.partition.Partitioning;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * deploy/bin/backup.sh and restore.sh against a real node and PostgreSQL: a changes cursor and a
 * projection batch token issued before the backup, and a cursor signed with a key rotated in after
 * it, are all refused after the restore with 409 {@code token-invalidated}; new ones work;
 * documents are as backed up; a principal revoked after the backup stays revoked; a CDC pipeline
 * whose slot went on halts {@code restored-from-backup} and, dropped and started again, backfills
 * what the restore rewound. The restore is refused while a node is connected. Prints what it
 * checked.
 */
class BackupRestoreIT extends EndToEndTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int PARTITIONS = 8;
  private static final String CANARY = "restore-canary-7f3a";
  private final AtomicReference<NodeProcess> current = new AtomicReference<>();

  @Test
  void restoreRewindsStateAndInvalidatesEveryTokenIssuedBeforeIt() throws Exception {
    db = TestPostgres.server().freshDatabase("restore");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.items (id int PRIMARY KEY, note text)");
      s.execute("CREATE PUBLICATION items_pub FOR TABLE public.items");
      s.execute("INSERT INTO public.items VALUES (1, 'one'), (2, 'two')");
    }
    String slot = "items_" + db.name().substring(db.name().length() - 8);
    Path config = Files.createTempFile("weir-restore", ".conf");
    config.toFile().deleteOnExit();
    Files.writeString(
        config,
        "weir.partitions.count = "
            + PARTITIONS
            + "\n"
            + "weir.pipelines.items { slot = "
            + slot
            + ", publications = [items_pub],"
            + " start-mode = [go-forward, incremental], sink { type = partitions, collections { \"public.items\" = items } } }\n");
    current.set(startNode("restore", config));
    awaitReady(current.get(), PARTITIONS);
    awaitRunning(current.get(), "items");
    awaitDocument("items", "2", true);

    String follower =
        callOnce(current.get(), "POST", "/admin/principals", "{\"id\":\"follower\"}")
            .get("token")
            .asText();
    call(
        current::get,
        "POST",
        "/admin/principals/follower/grants",
        "{\"collection\":\"docs\",\"grant\":\"ChangesRead\"}");
    String leaky =
        callOnce(current.get(), "POST", "/admin/principals", "{\"id\":\"leaky\"}")
            .get("token")
            .asText();
    for (int i = 0; i < 10; i++) {
      put("d" + i, "{\"n\":" + i + ",\"secret\":\"" + CANARY + "\"}");
    }
    String cursor = readToTail(follower, null, new ArrayList<>());
    int partition = Partitioning.partitionOf("docs", "d0", PARTITIONS);
    call(
        current::get,
        "POST",
        "/admin/projections/configure",
        "{\"partition\":"
            + partition
            + ",\"consumer\":\"count\",\"generation\":1,\"collections\":[\"docs\"]}");
    JsonNode batch =
        call(
            current::get,
            "POST",
            "/admin/projections/read",
            "{\"partition\":" + partition + ",\"consumer\":\"count\",\"generation\":1}");
    assertThat(batch.get("entries").size()).isPositive();
    Map<String, String> backedUp = new LinkedHashMap<>();
    for (int i = 0; i < 10; i++) {
      backedUp.put("d" + i, get("docs", "d" + i).body());
    }

    // The backup, taken while the node runs.
    Path archive = Files.createTempDirectory("weir-backup").resolve("weir.dump");
    long t0 = System.nanoTime();
    Script backup = script("backup.sh", "--output", archive.toString());
    long backupMs = (System.nanoTime() - t0) / 1_000_000;
    assertThat(backup.status()).as("backup.sh: %s", backup.output()).isZero();
    assertThat(backup.output())
        .contains(archive.toString())
        .doesNotContain(TestPostgres.server().password());
    assertThat(Files.getPosixFilePermissions(archive))
        .as("the archive is readable by its owner only")
        .containsOnly(
            java.nio.file.attribute.PosixFilePermission.OWNER_READ,
            java.nio.file.attribute.PosixFilePermission.OWNER_WRITE);

    // After the backup: more writes, a rotated key and a cursor signed with it, a revoked
    // principal, a rotated principal token, and CDC rows the partitions apply.
    put("d0", "{\"n\":100}");
    put("d10", "{\"n\":10}");
    assertThat(
            current.get().sendOnce("DELETE", "/v1/documents/docs/d1", null, Map.of()).statusCode())
        .isEqualTo(200);
    callOnce(current.get(), "POST", "/admin/tokens/rotate", null);
    String rotatedCursor = readToTail(follower, cursor, new ArrayList<>());
    call(current::get, "POST", "/admin/principals/leaky/revoke", null);
    String followerNow =
        callOnce(current.get(), "POST", "/admin/principals/follower/rotate", "{\"graceSeconds\":0}")
            .get("token")
            .asText();
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("INSERT INTO public.items VALUES (3, 'three')");
    }
    awaitDocument("items", "3", true);

    Script refused = script("restore.sh", archive.toString(), "--confirm", db.name());
    assertThat(refused.status()).as("a restore while a node runs is refused").isNotZero();
    assertThat(refused.output()).contains("stop every node");
    Script unconfirmed = script("restore.sh", archive.toString());
    assertThat(unconfirmed.status()).isNotZero();
    assertThat(unconfirmed.output()).contains("--confirm " + db.name());

    current.get().terminate();
    current.get().waitForExit(Duration.ofSeconds(120));
    t0 = System.nanoTime();
    Script restore = script("restore.sh", archive.toString(), "--confirm", db.name());
    long restoreMs = (System.nanoTime() - t0) / 1_000_000;
    assertThat(restore.status()).as("restore.sh: %s", restore.output()).isZero();
    assertThat(restore.output())
        .contains("weir_pre_restore_")
        .contains("items")
        .doesNotContain(CANARY);
    assertThat(count("SELECT count(*) FROM weir.restore_pending"))
        .as("the fence waits for the first node")
        .isEqualTo(1);

    t0 = System.nanoTime();
    current.set(startNode("restore", config));
    awaitReady(current.get(), PARTITIONS);
    long startMs = (System.nanoTime() - t0) / 1_000_000;
    assertThat(
            count(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'weir' AND tablename = 'restore_pending'"))
        .as("the fence ran and dropped its marker")
        .isZero();

    // Every token issued before the restore is refused, typed and value-free.
    HttpResponse<String> oldCursor =
        changes(followerNow, "{\"collection\":\"docs\",\"cursor\":\"" + cursor + "\"}");
    assertInvalidatedByRestore(oldCursor);
    assertInvalidatedByRestore(
        changes(followerNow, "{\"collection\":\"docs\",\"cursor\":\"" + rotatedCursor + "\"}"));
    HttpResponse<String> oldBatch =
        current
            .get()
            .sendIdempotent(
                "POST",
                "/admin/projections/commit",
                "{\"token\":\"" + batch.get("token").asText() + "\"}",
                Map.of("Content-Type", "application/json"));
    assertInvalidatedByRestore(oldBatch);

    // Credentials did not roll back: the revoked principal stays revoked, the rotated token stays
    // rotated.
    assertThat(changes(leaky, "{\"collection\":\"docs\",\"start\":\"beginning\"}").statusCode())
        .isEqualTo(401);
    assertThat(changes(follower, "{\"collection\":\"docs\",\"start\":\"beginning\"}").statusCode())
        .isEqualTo(401);

    // The documents are as backed up.
    for (Map.Entry<String, String> e : backedUp.entrySet()) {
      HttpResponse<String> now = get("docs", e.getKey());
      assertThat(now.statusCode()).as(e.getKey()).isEqualTo(200);
      assertThat(now.body()).as(e.getKey()).isEqualTo(e.getValue());
    }
    assertThat(get("docs", "d10").statusCode()).as("written after the backup").isEqualTo(404);

    // New tokens work: a feed from the beginning and a projection batch.
    List<String> ids = new ArrayList<>();
    readToTail(followerNow, null, ids);
    assertThat(ids)
        .containsExactlyInAnyOrder("d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9");
    JsonNode fresh =
        call(
            current::get,
            "POST",
            "/admin/projections/read",
            "{\"partition\":" + partition + ",\"consumer\":\"count\",\"generation\":1}");
    assertThat(fresh.get("start").asLong()).isEqualTo(batch.get("start").asLong());
    JsonNode committed =
        call(
            current::get,
            "POST",
            "/admin/projections/commit",
            "{\"token\":\"" + fresh.get("token").asText() + "\"}");
    assertThat(committed.get("checkpoint").asLong()).isEqualTo(fresh.get("through").asLong());
    JsonNode keys = call(current::get, "GET", "/admin/tokens/keys", null);
    assertThat(keys.get("restoreEpoch").asInt()).isEqualTo(1);
    int invalidated = 0;
    for (JsonNode k : keys.get("keys")) {
      if (!k.get("active").asBoolean()) {
        assertThat(k.get("invalidatedByRestore").asBoolean()).as("key %s", k.get("kid")).isTrue();
        invalidated++;
      }
    }
    assertThat(invalidated)
        .as("the key of the backup and the one rotated in after it")
        .isEqualTo(2);

    // The pipeline's slot went on past what the restored partitions hold: it halts, typed.
    await("the pipeline halts")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(250))
        .until(
            () ->
                current
                    .get()
                    .pipeline("items")
                    .map(p -> p.get("state").asText().equals("halted"))
                    .orElse(false));
    JsonNode halted = current.get().pipelineNow("items");
    assertThat(halted.get("reason").asText()).isEqualTo("restored-from-backup");
    assertThat(get("items", "3").statusCode()).as("the restore rewound the CDC row").isEqualTo(404);
    // The runbook: drop it and start it again; the incremental snapshot backfills.
    // Dropping a dropped pipeline and starting a running one answer 200 and change nothing.
    HttpResponse<String> dropped =
        current
            .get()
            .sendIdempotent("DELETE", "/admin/pipelines/items?confirm=items", null, Map.of());
    assertThat(dropped.statusCode()).as(dropped.body()).isEqualTo(200);
    assertThat(
            current
                .get()
                .sendIdempotent("POST", "/admin/pipelines/items/start", null, Map.of())
                .statusCode())
        .isEqualTo(200);
    awaitRunning(current.get(), "items");
    awaitDocument("items", "3", true);

    assertThat(current.get().log()).as("no document value in the log").doesNotContain(CANARY);
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("DROP SCHEMA " + previousSchema() + " CASCADE");
    }
    Files.deleteIfExists(archive);
    Files.deleteIfExists(archive.getParent());
    System.out.printf(
        "backup-restore: docs=%d backup-ms=%d restore-ms=%d restart-to-ready-ms=%d old-cursor=409"
            + " rotated-key-cursor=409 old-batch-token=409 invalidated-keys=%d revoked-stays-revoked=ok"
            + " pipeline-halt=%s resync=ok%n",
        backedUp.size(), backupMs, restoreMs, startMs, invalidated, halted.get("reason").asText());
  }

  private static void assertInvalidatedByRestore(HttpResponse<String> r) throws Exception {
    assertThat(r.statusCode()).as(r.body()).isEqualTo(409);
    JsonNode body = JSON.readTree(r.body());
    assertThat(body.get("error").asText()).isEqualTo("token-invalidated");
    assertThat(body.get("message").asText())
        .contains("issued before the cluster was restored from a backup");
    assertThat(r.body()).doesNotContain(CANARY);
  }

  private String previousSchema() throws Exception {
    try (Connection c = db.connect();
        Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'weir_pre_restore_%'")) {
      assertThat(rs.next()).isTrue();
      return rs.getString(1);
    }
  }

  private record Script(int status, String output) {}

  /**
   * Runs deploy/bin/{@code name} with the test database as WEIR_PG_*; its output (both streams).
   */
  private Script script(String name, String... args) throws Exception {
    List<String> cmd =
        new ArrayList<>(
            List.of("bash", TestPostgres.repoRoot().resolve("deploy/bin/" + name).toString()));
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.environment().keySet().removeIf(k -> k.startsWith("WEIR_") || k.startsWith("PG"));
    pb.environment().put("WEIR_PG_URL", db.url());
    pb.environment().put("WEIR_PG_USER", db.server().user());
    pb.environment().put("WEIR_PG_PASSWORD", db.server().password());
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(180, TimeUnit.SECONDS)).as(name + " finishes").isTrue();
    return new Script(p.exitValue(), out);
  }

  /**
   * A PUT without an Idempotency-Key: sent once (a repetition after a lost answer would write a
   * second revision and a second change), again only while the node answers 503.
   */
  private void put(String id, String body) throws Exception {
    long deadline = System.nanoTime() + NodeProcess.ANSWER_DEADLINE.toNanos();
    while (true) {
      HttpResponse<String> r =
          current.get().sendOnce("PUT", "/v1/documents/docs/" + id, body, Map.of());
      if (r.statusCode() == 200) {
        return;
      }
      assertThat(r.statusCode()).as("write %s", id).isEqualTo(503);
      assertThat(System.nanoTime()).as("write %s", id).isLessThan(deadline);
      Thread.sleep(100);
    }
  }

  private HttpResponse<String> get(String collection, String id) {
    return current
        .get()
        .sendIdempotent("GET", "/v1/documents/" + collection + "/" + id, null, Map.of());
  }

  private void awaitDocument(String collection, String id, boolean present) {
    await(collection + "/" + id)
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(250))
        .until(
            () ->
                current
                    .get()
                    .send("GET", "/v1/documents/" + collection + "/" + id, null, Map.of())
                    .map(r -> r.statusCode() != 503 && (r.statusCode() == 200) == present)
                    .orElse(false));
  }

  /** A changes read as {@code token}, retried while the node does not answer or answers 503. */
  private HttpResponse<String> changes(String token, String body) throws Exception {
    return current
        .get()
        .sendIdempotent(
            "POST",
            "/v1/changes/read",
            body,
            Map.of("Authorization", "Bearer " + token, "Content-Type", "application/json"));
  }

  /**
   * Reads the docs feed to its tail from {@code cursor} (null: the beginning); adds ids to {@code
   * ids}.
   */
  private String readToTail(String token, String cursor, List<String> ids) throws Exception {
    while (true) {
      String body =
          cursor == null
              ? "{\"collection\":\"docs\",\"start\":\"beginning\"}"
              : "{\"collection\":\"docs\",\"cursor\":\"" + cursor + "\"}";
      HttpResponse<String> r = changes(token, body);
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
      JsonNode page = JSON.readTree(r.body());
      page.get("changes").forEach(c -> ids.add(c.get("id").asText()));
      cursor = page.get("cursor").asText();
      if (!page.get("hasMore").asBoolean()) {
        return cursor;
      }
    }
  }

  private long count(String query) throws Exception {
    try (Connection c = db.connect();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(query)) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
