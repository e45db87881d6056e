package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.weir.persistence.testing.TestPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Initial snapshot under crashes: a real node seeds the mirror from a populated table with start
 * mode {@code snapshot} while a writer keeps committing; the node is SIGKILLed during the snapshot
 * (each restart recreates the slot and copies everything again) and then around the hand-off (when
 * the snapshot is nearly done), and restarted. At the end the mirror equals the source, every
 * transaction committed after the final snapshot's consistent point is applied exactly once, and
 * nothing is applied twice (prints {@code loss=0 effect-dup=0}).
 *
 * <p>Size: {@code -Dweir.snapshot-crash.kills} (default 3: all but the last during the copy, the
 * last near the hand-off) and {@code -Dweir.snapshot-crash.rows} (default 100000).
 */
class SnapshotCrashIT extends EndToEndTest {

  @Test
  void snapshotThenStreamUnderSigkillLosesAndDuplicatesNothing() throws Exception {
    int kills = Integer.getInteger("weir.snapshot-crash.kills", 3);
    int rows = Integer.getInteger("weir.snapshot-crash.rows", 100_000);
    long seed = Long.getLong("weir.crash.seed", System.nanoTime());
    Random random = new Random(seed);
    db = TestPostgres.server().freshDatabase("snapcrash");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.src (id bigint PRIMARY KEY, v bigint NOT NULL, note text)");
      s.execute(
          "INSERT INTO public.src SELECT g, g, 'seed row ' || g FROM generate_series(1, "
              + rows
              + ") g");
      s.execute("ANALYZE public.src");
      s.execute("CREATE PUBLICATION snap_pub FOR TABLE public.src");
      s.execute("CREATE SCHEMA snap_mirror");
      s.execute(
          "CREATE TABLE snap_mirror.src (id bigint PRIMARY KEY, v bigint NOT NULL, note text)");
    }
    Path config = Files.createTempFile("weir-snapcrash", ".conf");
    Files.writeString(
        config,
        String.join(
            "\n",
            "weir.pipelines.snap {",
            "  slot = snap_slot_" + db.name().substring(db.name().length() - 10),
            "  publications = [snap_pub]",
            "  start-mode = snapshot",
            "  snapshot.batch-rows = 2000",
            "  min-backoff = 200ms",
            "  max-backoff = 2s",
            "  sink { target-schema = snap_mirror, applied-log = true }",
            "}"));

    AtomicBoolean stopWriting = new AtomicBoolean(false);
    ConcurrentLinkedQueue<Long> committed = new ConcurrentLinkedQueue<>();
    AtomicReference<Throwable> writerError = new AtomicReference<>();
    SourceWriter shape = new SourceWriter(1, 5, "updated", id -> "row " + id, 10);
    Thread writer =
        new Thread(
            () ->
                shape.run(
                    db,
                    rows + 1,
                    new Random(seed + 1),
                    committed,
                    () -> !stopWriting.get(),
                    writerError),
            "snap-writer");
    writer.start();

    NodeProcess node = startNode("snapcrash", config);
    List<String> killedAt = new ArrayList<>();
    for (int k = 0; k < kills; k++) {
      boolean nearHandOff = k == kills - 1;
      NodeProcess current = node;
      // During the copy: at a random share of it. The last kill: once 95% of the rows are in, then
      // a random 0-400 ms, which lands before, during or just after the hand-off checkpoint.
      double share = nearHandOff ? 0.95 : 0.05 + random.nextDouble() * 0.8;
      await("the snapshot reaches " + Math.round(share * 100) + "% on " + current.name())
          .atMost(Duration.ofMinutes(5))
          .pollInterval(Duration.ofMillis(50))
          .until(() -> snapshotShare(current) >= share);
      if (nearHandOff) {
        Thread.sleep(random.nextInt(400));
      }
      String state = current.pipeline("snap").map(p -> p.get("state").asText()).orElse("?");
      current.kill();
      killedAt.add(state + "@" + Math.round(share * 100) + "%");
      node = startNode("snapcrash", config);
    }
    NodeProcess last = node;
    await("the pipeline streams after the snapshot")
        .atMost(Duration.ofMinutes(5))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () ->
                last.pipeline("snap")
                    .map(p -> p.get("state").asText().equals("running"))
                    .orElse(false));
    JsonNode finalSnapshot = last.pipelineNow("snap").get("snapshot");
    // The writer goes on for a while after the hand-off (its transactions are streamed).
    int streaming = committed.size();
    await("the writer commits after the hand-off")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(50))
        .until(() -> committed.size() >= streaming + 50);
    stopWriting.set(true);
    writer.join(Duration.ofMinutes(2).toMillis());
    assertThat(writerError.get()).as("the writer should commit without errors").isNull();
    List<Long> all = List.copyOf(committed);
    await("the mirror equals the source")
        .atMost(Duration.ofMinutes(4))
        .pollInterval(Duration.ofSeconds(1))
        .until(() -> mirrorDifferences("snap_mirror") == 0);

    Map<Long, Integer> applied = appliedCounts("snap_mirror");
    // Transactions committed before the final snapshot are in it; from the first one streamed on
    // (the writer is the only one committing, so its order is commit order) each must be applied.
    int firstStreamed = 0;
    while (firstStreamed < all.size() && !applied.containsKey(all.get(firstStreamed))) {
      firstStreamed++;
    }
    long loss = 0;
    for (int i = firstStreamed; i < all.size(); i++) {
      if (!applied.containsKey(all.get(i))) {
        loss++;
      }
    }
    long dup = applied.values().stream().filter(n -> n > 1).count();
    long unknown = applied.keySet().stream().filter(x -> !all.contains(x)).count();
    System.out.printf(
        "snapshot-crash: kills=%d (%s) rows=%d transactions=%d in-snapshot=%d streamed=%d loss=%d effect-dup=%d "
            + "unknown=%d mirror-diff=0 final-snapshot-ms=%d (-1: the last kill came after the hand-off) seed=%d%n",
        kills,
        String.join(",", killedAt),
        rows,
        all.size(),
        firstStreamed,
        applied.size(),
        loss,
        dup,
        unknown,
        finalSnapshot.isNull() ? -1 : finalSnapshot.get("elapsedMillis").asLong(),
        seed);
    // No snapshot in the last node's status: the last kill fell after the hand-off, so it streamed.
    assertThat(finalSnapshot.isNull() || finalSnapshot.get("state").asText().equals("done"))
        .isTrue();
    assertThat(loss).as("every transaction after the snapshot should be applied (loss)").isZero();
    assertThat(dup).as("no transaction should be applied twice (effect-dup)").isZero();
    assertThat(unknown).as("nothing should be applied that the writer did not commit").isZero();
    assertThat(all.size() - firstStreamed)
        .as("some transactions were streamed after the hand-off")
        .isPositive();

    // The admin API starts an incremental snapshot of the same table while the pipeline streams.
    // Refused requests start nothing: repeated while the node does not answer.
    assertThat(snapshotRequest(last, "{\"tables\": \"public.src\"}").statusCode())
        .as("a malformed body")
        .isEqualTo(400);
    assertThat(snapshotRequest(last, "{\"tables\": [\"public.nope\"]}").statusCode())
        .as("a table not in the publication")
        .isEqualTo(400);
    // A writer runs again meanwhile, and the node is SIGKILLed while chunks are being applied: the
    // restarted node resumes after the last chunk stored with its progress.
    AtomicBoolean stopAgain = new AtomicBoolean(false);
    ConcurrentLinkedQueue<Long> more = new ConcurrentLinkedQueue<>();
    Thread writer2 =
        new Thread(
            () ->
                shape.run(
                    db,
                    rows * 2L + 1,
                    new Random(seed + 2),
                    more,
                    () -> !stopAgain.get(),
                    writerError),
            "snap-writer-2");
    writer2.start();
    // This one starts a snapshot (a repetition would be 409): sent once.
    var accepted =
        last.sendOnce(
            "POST",
            "/admin/pipelines/snap/snapshot",
            "{\"tables\": [\"public.src\"]}",
            Map.of("Content-Type", "application/json"));
    assertThat(accepted.statusCode()).isEqualTo(202);
    assertThat(accepted.body()).contains("\"kind\":\"incremental\"");
    await("chunks are applied")
        .atMost(Duration.ofMinutes(4))
        .pollInterval(Duration.ofMillis(50))
        .until(
            () ->
                last.pipeline("snap")
                    .map(p -> p.get("snapshot").get("rowsDone").asLong() >= rows / 4)
                    .orElse(false));
    long rowsBeforeKill = last.pipelineNow("snap").get("snapshot").get("rowsDone").asLong();
    last.kill();
    NodeProcess resumed = startNode("snapcrash", config);
    await("the incremental snapshot completes after the restart")
        .atMost(Duration.ofMinutes(5))
        .pollInterval(Duration.ofMillis(500))
        .until(
            () ->
                resumed
                    .pipeline("snap")
                    .map(
                        p ->
                            !p.get("snapshot").isNull()
                                && p.get("snapshot").get("kind").asText().equals("incremental")
                                && p.get("snapshot").get("state").asText().equals("done"))
                    .orElse(false));
    long rowsAfterRestart = resumed.pipelineNow("snap").get("snapshot").get("rowsDone").asLong();
    stopAgain.set(true);
    writer2.join(Duration.ofMinutes(2).toMillis());
    assertThat(writerError.get()).isNull();
    await("the mirror equals the source again")
        .atMost(Duration.ofMinutes(4))
        .pollInterval(Duration.ofSeconds(1))
        .until(() -> mirrorDifferences("snap_mirror") == 0);
    Map<Long, Integer> appliedAfter = appliedCounts("snap_mirror");
    long dupAfter = appliedAfter.values().stream().filter(n -> n > 1).count();
    long lossAfter = more.stream().filter(x -> !appliedAfter.containsKey(x)).count();
    System.out.printf(
        "snapshot-crash: incremental snapshot killed after %d rows, resumed and applied %d more;"
            + " transactions=%d loss=%d effect-dup=%d mirror-diff=0%n",
        rowsBeforeKill, rowsAfterRestart, more.size(), lossAfter, dupAfter);
    // Starting over would read about all rows again (at least rows minus the deletes, one per 5
    // transactions); resuming reads what was left after the kill.
    assertThat(rowsAfterRestart)
        .as("the restart resumed instead of starting over")
        .isLessThan(rows - rowsBeforeKill / 2 + more.size());
    assertThat(lossAfter)
        .as("every transaction committed during the incremental snapshot is applied")
        .isZero();
    assertThat(dupAfter).as("still no transaction applied twice").isZero();
  }

  private static java.net.http.HttpResponse<String> snapshotRequest(NodeProcess node, String body) {
    return node.sendIdempotent(
        "POST", "/admin/pipelines/snap/snapshot", body, Map.of("Content-Type", "application/json"));
  }

  /** Share of the rows copied so far; 1 once the snapshot is done (a kill then hits streaming). */
  private static double snapshotShare(NodeProcess node) {
    return node.pipeline("snap")
        .map(
            p -> {
              JsonNode s = p.get("snapshot");
              if (s == null || s.isNull()) {
                return 0.0;
              }
              if (s.get("state").asText().equals("done")) {
                return 1.0;
              }
              if (!s.get("state").asText().equals("running")) {
                return 0.0;
              }
              long estimated = Math.max(1, s.get("rowsEstimated").asLong());
              return (double) s.get("rowsDone").asLong() / estimated;
            })
        .orElse(0.0);
  }
}
