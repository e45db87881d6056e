package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.partition.Partitioning;
import java.sql.Connection;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/**
 * Issue 8's end-to-end test 3, on a cluster of three node processes: every node is stopped, then
 * all start again. A changes cursor and a projection batch token issued before (by one node) still
 * work afterwards (through others); the consumer's checkpoint, a write's receipt and the outbox
 * come back from PostgreSQL, one partition from a snapshot plus the journal written after it.
 * Prints what it checked.
 */
class ClusterRestartIT extends EndToEndTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int PARTITIONS = 8;

  private int seed1;
  private int seed2;

  @Test
  void cursorsBatchTokensReceiptsAndOutboxSurviveStoppingEveryNode() throws Exception {
    db = TestPostgres.server().freshDatabase("restart");
    seed1 = NodeProcess.freePort();
    seed2 = NodeProcess.freePort();
    List<NodeProcess> cluster = startCluster("restart-a");

    String token =
        callOnce(cluster.get(0), "POST", "/admin/principals", "{\"id\":\"follower\"}")
            .get("token")
            .asText();
    call(
        () -> cluster.get(0),
        "POST",
        "/admin/principals/follower/grants",
        "{\"collection\":\"docs\",\"grant\":\"ChangesRead\"}");
    for (int i = 0; i < 20; i++) {
      put(cluster.get(i % 3), "d" + i, "{\"n\":" + i + "}", "d" + i);
    }
    // One partition gets enough writes for a snapshot and a journal tail after it.
    int hot = Partitioning.partitionOf("docs", "d0", PARTITIONS);
    List<String> hotIds = new ArrayList<>();
    for (int i = 0; hotIds.size() < 8; i++) {
      if (Partitioning.partitionOf("docs", "h" + i, PARTITIONS) == hot) {
        hotIds.add("h" + i);
      }
    }
    // Writes until the partition has taken a snapshot, then some more: the journal tail recovery
    // replays after loading the snapshot (group commit may put several writes in one event).
    ExecutorService writers = Executors.newFixedThreadPool(6);
    int hotWrites = 0;
    int tail = -1;
    while (tail != 0) {
      List<Future<?>> done = new ArrayList<>();
      for (int w = hotWrites; w < hotWrites + 200; w++) {
        int n = w;
        done.add(
            writers.submit(
                () -> {
                  put(
                      cluster.get(n % 3),
                      hotIds.get(n % hotIds.size()),
                      "{\"n\":" + n + "}",
                      "hot-" + n);
                  return null;
                }));
      }
      for (Future<?> f : done) {
        f.get();
      }
      hotWrites += 200;
      if (tail > 0) {
        tail--;
      } else if (tail < 0 && latestSnapshot(hot)[0] > 0) {
        tail = 1;
      }
      assertThat(hotWrites).as("writes before the hot partition snapshots").isLessThan(20_000);
    }
    writers.shutdown();
    JsonNode receipt = put(cluster.get(1), "r1", "{\"n\":1}", "receipt-r1");

    // The follower reads everything through node 2: its cursor is at the tail.
    List<String> before = new ArrayList<>();
    String cursor = readAll(cluster.get(1), token, null, before);
    int expected = 20 + hotWrites + 1;
    assertThat(before).as("every write is one change").hasSize(expected);

    // A projection consumer of the hot partition commits one batch through node 3 and reads the
    // next one, which it has not committed when the cluster stops.
    String consumer = "{\"partition\":" + hot + ",\"consumer\":\"count\",\"generation\":1";
    call(
        () -> cluster.get(2),
        "POST",
        "/admin/projections/configure",
        consumer + ",\"collections\":[\"docs\"]}");
    JsonNode first =
        call(
            () -> cluster.get(2),
            "POST",
            "/admin/projections/read",
            consumer + ",\"maxEntries\":100}");
    call(
        () -> cluster.get(2),
        "POST",
        "/admin/projections/commit",
        "{\"token\":\"" + first.get("token").asText() + "\"}");
    JsonNode batch =
        call(
            () -> cluster.get(2),
            "POST",
            "/admin/projections/read",
            consumer + ",\"maxEntries\":100}");
    assertThat(batch.get("start").asLong()).isEqualTo(first.get("through").asLong());
    assertThat(batch.get("entries").size()).isPositive();

    // Every node stops (coordinated shutdown): two at once, then the last one. (When all three
    // leave at once, the last one waits out its cluster-exiting phase, 10 s, for nobody.)
    for (List<NodeProcess> stopping :
        List.of(List.of(cluster.get(1), cluster.get(2)), List.of(cluster.get(0)))) {
      for (NodeProcess n : stopping) {
        n.terminate();
      }
      for (NodeProcess n : stopping) {
        assertThat(n.waitForExit(Duration.ofSeconds(120)))
            .as("%s exits after SIGTERM", n.name())
            .isNotNegative();
      }
    }
    long stopped = System.nanoTime();
    long[] snapshot = latestSnapshot(hot);
    assertThat(snapshot[0]).as("the hot partition has a snapshot").isPositive();
    assertThat(snapshot[1])
        .as("and journal events after it, replayed on recovery")
        .isGreaterThan(snapshot[0]);

    List<NodeProcess> again = startCluster("restart-b");
    long restartMs = (System.nanoTime() - stopped) / 1_000_000;

    // The cursor issued through node 2 goes on through node 3 where it was.
    for (int i = 20; i < 25; i++) {
      put(again.get(i % 3), "d" + i, "{\"n\":" + i + "}", "d" + i);
    }
    List<String> after = new ArrayList<>();
    readAll(again.get(2), token, cursor, after);
    assertThat(after)
        .as("the old cursor yields exactly the writes after the restart")
        .hasSize(5)
        .allMatch(c -> c.contains(":d2"));
    // The outbox read from the beginning through node 1: the same entries at the same positions.
    List<String> all = new ArrayList<>();
    readAll(again.get(0), token, null, all);
    List<String> expectedAll = new ArrayList<>(before);
    expectedAll.addAll(after);
    assertThat(all)
        .as("the outbox recovered unchanged: every entry once, at its position")
        .hasSize(expectedAll.size())
        .containsExactlyInAnyOrderElementsOf(expectedAll);

    // The batch token issued through node 3 commits through node 1; the checkpoint holds.
    JsonNode committed =
        call(
            () -> again.get(0),
            "POST",
            "/admin/projections/commit",
            "{\"token\":\"" + batch.get("token").asText() + "\"}");
    assertThat(committed.get("checkpoint").asLong()).isEqualTo(batch.get("through").asLong());
    JsonNode next =
        call(
            () -> again.get(1),
            "POST",
            "/admin/projections/read",
            consumer + ",\"maxEntries\":100}");
    assertThat(next.get("start").asLong())
        .as("the checkpoint survived")
        .isEqualTo(batch.get("through").asLong());

    // The write's receipt: the same Idempotency-Key gets the first reply and writes nothing.
    JsonNode replay = put(again.get(0), "r1", "{\"n\":1}", "receipt-r1");
    assertThat(replay.get("replayed").asBoolean())
        .as("a retry after the restart is answered from the receipt")
        .isTrue();
    assertThat(replay.get("revision").asLong()).isEqualTo(receipt.get("revision").asLong());
    List<String> last = new ArrayList<>();
    readAll(again.get(1), token, null, last);
    assertThat(last).as("the replayed write added no change").hasSize(all.size());

    System.out.printf(
        "cluster-restart: nodes=3 changes-before=%d cursor-changes-after=%d outbox-equal=true"
            + " batch-token-commit=ok checkpoint=%d receipt-replayed=true hot-partition writes=%d snapshot-seq=%d journal-seq=%d"
            + " stop-to-ready-ms=%d%n",
        before.size(),
        after.size(),
        committed.get("checkpoint").asLong(),
        hotWrites,
        snapshot[0],
        snapshot[1],
        restartMs);
  }

  /**
   * Three nodes (two of them seeds, on the same ports each time), Up, ready, partitions running.
   */
  private List<NodeProcess> startCluster(String prefix) {
    String seeds = "127.0.0.1:" + seed1 + ",127.0.0.1:" + seed2;
    List<NodeProcess> cluster = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      NodeProcess.Spec spec =
          new NodeProcess.Spec(prefix + "-" + (i + 1))
              .database(db)
              .env("WEIR_SEED_NODES", seeds)
              .env("WEIR_PARTITIONS", Integer.toString(PARTITIONS))
              .prop("pekko.cluster.split-brain-resolver.stable-after", "3s")
              // Members Up only once all three joined: partitions are placed across them from the
              // start
              // rather than all on the first and then moved one by one (docs/deploy.md).
              .prop("pekko.cluster.min-nr-of-members", "3")
              // A snapshot after 100 events instead of 1,000: the hot partition gets one sooner.
              .prop("weir.partitions.snapshots.after-events", "100");
      if (i < 2) {
        spec.clusterPort(i == 0 ? seed1 : seed2);
      }
      NodeProcess n = NodeProcess.start(spec);
      nodes.add(n);
      cluster.add(n);
    }
    await("3 members Up and ready, partitions running")
        .atMost(Duration.ofSeconds(240))
        .pollInterval(Duration.ofMillis(500))
        .until(
            () ->
                cluster.stream()
                        .allMatch(
                            n ->
                                n.ready()
                                    && n.memberStatuses().size() == 3
                                    && n.memberStatuses().values().stream().allMatch("up"::equals))
                    && cluster
                        .get(0)
                        .partitions()
                        .map(p -> p.get("running").asInt() == PARTITIONS)
                        .orElse(false));
    return cluster;
  }

  /**
   * A PUT with an Idempotency-Key, retried while the node does not answer or answers 503 (its
   * receipt answers a repetition of one that went through).
   */
  private static JsonNode put(NodeProcess node, String id, String body, String key)
      throws Exception {
    var r =
        node.sendIdempotent(
            "PUT", "/v1/documents/docs/" + id, body, Map.of("Idempotency-Key", key));
    if (r.statusCode() != 200) {
      throw new AssertionError("PUT answered " + r.statusCode());
    }
    return JSON.readTree(r.body());
  }

  /**
   * Reads changes from {@code cursor} (null: the beginning) to the tail into {@code out}; the last
   * cursor.
   */
  private static String readAll(NodeProcess node, String token, String cursor, List<String> out)
      throws Exception {
    while (true) {
      String body = changesRequest("docs", cursor, 1000);
      var r =
          node.sendIdempotent(
              "POST",
              "/v1/changes/read",
              body,
              Map.of("Authorization", "Bearer " + token, "Content-Type", "application/json"));
      if (r.statusCode() != 200) {
        throw new AssertionError("changes read: " + r.statusCode() + " " + r.body());
      }
      JsonNode page = JSON.readTree(r.body());
      page.get("changes")
          .forEach(
              c ->
                  out.add(
                      c.get("partition").asInt()
                          + "/"
                          + c.get("sequence").asLong()
                          + ":"
                          + c.get("id").asText()
                          + "@"
                          + c.get("revision").asLong()));
      cursor = page.get("cursor").asText();
      if (!page.get("hasMore").asBoolean()) {
        return cursor;
      }
    }
  }

  /**
   * The hot partition's latest snapshot sequence number and its highest journal sequence number.
   */
  private long[] latestSnapshot(int partition) throws Exception {
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT (SELECT coalesce(max(sequence_number), 0) FROM weir.snapshot WHERE persistence_id LIKE '%|"
                        + partition
                        + "'),"
                        + " (SELECT coalesce(max(sequence_number), 0) FROM weir.event_journal WHERE persistence_id LIKE '%|"
                        + partition
                        + "')")) {
      rs.next();
      return new long[] {rs.getLong(1), rs.getLong(2)};
    }
  }
}
