package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.weir.persistence.testing.TestPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Memory stays bounded with streaming and spilling: a real node with a 96 MB heap mirrors a source
 * transaction of about 250 MB (larger than its heap), then follows one of the same size that rolls
 * back after the node has spilled more than its heap of it. The mirror must equal the source (row
 * count and an ordered checksum), the node must not die, and its log must hold no OutOfMemoryError.
 * Prints {@code large-transaction: ...} with the sizes, durations, the peak spill and the node's
 * largest heap use after a collection (from its GC log).
 *
 * <p>Size: {@code -Dweir.large.rows} (default 250000 rows of about 1 kB).
 */
class LargeTransactionIT extends EndToEndTest {
  private static final String HEAP = "96m";
  private static final int ROWS = Integer.getInteger("weir.large.rows", 250_000);

  /** 992 characters per row. */
  private static final String PAYLOAD = "repeat(md5(g::text), 31)";

  @Test
  void aTransactionLargerThanTheHeapIsMirroredAndOneRolledBackIsDropped() throws Exception {
    db = TestPostgres.server().freshDatabase("large");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.big (id bigint PRIMARY KEY, payload text NOT NULL)");
      s.execute(
          "ALTER TABLE public.big ALTER COLUMN payload SET STORAGE EXTERNAL"); // no compression:
      // real bytes
      s.execute("CREATE PUBLICATION big_pub FOR TABLE public.big");
      s.execute("CREATE SCHEMA big_mirror");
      s.execute("CREATE TABLE big_mirror.big (id bigint PRIMARY KEY, payload text NOT NULL)");
    }
    Path spill = Files.createTempDirectory("weir-spill");
    Path logs = NodeProcess.logs();
    Path gcLog = logs.resolve("large-gc.log");
    Files.deleteIfExists(gcLog);
    Path config = Files.createTempFile("weir-large", ".conf");
    Files.writeString(
        config,
        String.join(
            "\n",
            "weir.pipelines.big {",
            "  slot = big_slot_" + db.name().substring(db.name().length() - 10),
            "  publications = [big_pub]",
            "  streaming {",
            "    enabled = true",
            "    decoding-work-mem = 4MiB",
            "    spill { directory = \"" + spill + "\", memory-bound = 8MiB, max-bytes = 2GiB }",
            "  }",
            "  sink { target-schema = big_mirror, applied-log = true }",
            "}"));
    NodeProcess node =
        NodeProcess.start(
            new NodeProcess.Spec("large-0")
                .database(db)
                .maxHeap(HEAP)
                .jvm("-XX:+ExitOnOutOfMemoryError")
                .jvm("-Xlog:gc:file=" + gcLog)
                .args("--config", config.toString()));
    nodes.add(node);
    awaitRunning(node, "big");

    // Peak spill and in-memory payload, sampled from the node's metrics while it works.
    AtomicLong spillPeak = new AtomicLong();
    AtomicLong memoryPeak = new AtomicLong();
    AtomicBoolean sampling = new AtomicBoolean(true);
    Thread sampler =
        new Thread(
            () -> {
              while (sampling.get()) {
                spillPeak.accumulateAndGet(metric(node, "weir_cdc_spill_bytes"), Math::max);
                memoryPeak.accumulateAndGet(metric(node, "weir_cdc_spill_memory_bytes"), Math::max);
                sleep(200);
              }
            },
            "spill-sampler");
    sampler.start();

    // 1. A committed transaction larger than the heap.
    long started = System.nanoTime();
    long walBefore = walPosition();
    long xid;
    try (Connection c = db.connect()) {
      c.setAutoCommit(false);
      try (Statement s = c.createStatement()) {
        s.execute(
            "INSERT INTO public.big SELECT g, "
                + PAYLOAD
                + " FROM generate_series(1, "
                + ROWS
                + ") g");
        try (ResultSet rs = s.executeQuery("SELECT pg_current_xact_id()::xid::text::bigint")) {
          rs.next();
          xid = rs.getLong(1);
        }
      }
      c.commit();
    }
    long walBytes = walPosition() - walBefore;
    long payloadBytes = query("SELECT sum(octet_length(payload)) FROM public.big");
    long committedAt = System.nanoTime();
    await("the mirror holds the large transaction")
        .atMost(Duration.ofMinutes(5))
        .pollInterval(Duration.ofSeconds(1))
        .until(() -> !node.isAlive() || query("SELECT count(*) FROM big_mirror.big") == ROWS);
    assertThat(node.isAlive()).as("the node should survive the large transaction").isTrue();
    long mirroredAt = System.nanoTime();
    long commitSpillPeak = spillPeak.get();
    assertThat(checksum("public.big"))
        .as("the mirror should equal the source")
        .isEqualTo(checksum("big_mirror.big"));
    assertThat(query("SELECT count(*) FROM big_mirror.weir_mirror_applied WHERE xid = " + xid))
        .as("applied exactly once")
        .isEqualTo(1);
    await("its spill file is deleted")
        .atMost(Duration.ofSeconds(120))
        .until(() -> spillFiles(spill) == 0);

    // 2. One as large that rolls back, after the node spilled more than its heap of it.
    spillPeak.set(0);
    long abortStarted = System.nanoTime();
    long spilledBeforeRollback;
    try (Connection c = db.connect()) {
      c.setAutoCommit(false);
      try (Statement s = c.createStatement()) {
        s.execute(
            "INSERT INTO public.big SELECT g, "
                + PAYLOAD
                + " FROM generate_series("
                + (ROWS + 1)
                + ", "
                + (2 * ROWS)
                + ") g");
      }
      long heapBytes = 96L << 20;
      await("the node spilled more than its heap of the open transaction")
          .atMost(Duration.ofMinutes(4))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> !node.isAlive() || metric(node, "weir_cdc_spill_bytes") > heapBytes);
      spilledBeforeRollback = metricNow(node, "weir_cdc_spill_bytes");
      c.rollback();
    }
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("INSERT INTO public.big VALUES (0, 'after the rollback')");
    }
    await("the transaction after the rollback is mirrored")
        .atMost(Duration.ofMinutes(4))
        .pollInterval(Duration.ofSeconds(1))
        .until(
            () ->
                !node.isAlive() || query("SELECT count(*) FROM big_mirror.big WHERE id = 0") == 1);
    long abortDone = System.nanoTime();
    assertThat(node.isAlive()).as("the node should survive the rolled-back transaction").isTrue();
    // An unanswered scrape is no 0: only an answer ends the wait.
    await("the rolled-back transaction's spill is deleted")
        .atMost(Duration.ofSeconds(120))
        .until(
            () ->
                spillFiles(spill) == 0
                    && scraped(node, "weir_cdc_spill_bytes").map(v -> v == 0).orElse(false));
    sampling.set(false);
    sampler.join();

    assertThat(query("SELECT count(*) FROM big_mirror.big"))
        .as("nothing of the rolled-back rows")
        .isEqualTo(ROWS + 1);
    assertThat(checksum("public.big"))
        .as("the mirror should still equal the source")
        .isEqualTo(checksum("big_mirror.big"));
    assertThat(node.isAlive()).as("the node should still run").isTrue();
    assertThat(node.pipelineNow("big").get("state").asText()).isEqualTo("running");
    assertThat(node.log()).as("no OutOfMemoryError").doesNotContain("OutOfMemoryError");
    long[] gc = gcPeaks(gcLog);
    System.out.printf(
        "large-transaction: heap=%s rows=%d payload=%dMB wal=%dMB (%.1fx the heap); commit: insert=%.1fs mirrored-after-commit=%.1fs"
            + " spill-peak=%dMB memory-peak=%dMB; rollback: spilled-before-rollback=%dMB total=%.1fs;"
            + " gc: max-heap-after-gc=%dMB max-heap-before-gc=%dMB collections=%d%n",
        HEAP,
        ROWS,
        payloadBytes >> 20,
        walBytes >> 20,
        (double) payloadBytes / (96L << 20),
        (committedAt - started) / 1e9,
        (mirroredAt - committedAt) / 1e9,
        commitSpillPeak >> 20,
        memoryPeak.get() >> 20,
        spilledBeforeRollback >> 20,
        (abortDone - abortStarted) / 1e9,
        gc[0],
        gc[1],
        gc[2]);
    assertThat(payloadBytes)
        .as("the committed transaction should be larger than the heap")
        .isGreaterThan(96L << 20);
    assertThat(commitSpillPeak)
        .as("the committed transaction should have gone to disk")
        .isGreaterThan(96L << 20);
    try (Stream<Path> dirs = Files.walk(spill)) {
      dirs.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  private static final Pattern GAUGE =
      Pattern.compile("(?m)^(\\w+)\\{[^}]*pipeline=\"big\"[^}]*\\}\\s+(\\S+)$");

  /** A gauge of pipeline big from /admin/metrics; 0 when absent or the node does not answer. */
  private static long metric(NodeProcess node, String name) {
    return scraped(node, name).orElse(0L);
  }

  /** A gauge of pipeline big (0 when absent); empty when the node does not answer. */
  private static java.util.Optional<Long> scraped(NodeProcess node, String name) {
    return node.get("/admin/metrics", true)
        .filter(r -> r.statusCode() == 200)
        .map(r -> gauge(r.body(), name));
  }

  /** A gauge of pipeline big, scraped again until the node answers. */
  private static long metricNow(NodeProcess node, String name) {
    var r = node.getUntil("/admin/metrics", true);
    assertThat(r.statusCode()).as("GET /admin/metrics").isEqualTo(200);
    return gauge(r.body(), name);
  }

  private static long gauge(String exposition, String name) {
    Matcher m = GAUGE.matcher(exposition);
    while (m.find()) {
      if (m.group(1).equals(name)) {
        return (long) Double.parseDouble(m.group(2));
      }
    }
    return 0L;
  }

  private static long spillFiles(Path spill) throws Exception {
    try (Stream<Path> s = Files.walk(spill)) {
      return s.filter(p -> p.toString().endsWith(".spill")).count();
    }
  }

  /**
   * [largest heap in use after a collection, largest before one, collections] in MB, from -Xlog:gc.
   */
  private static long[] gcPeaks(Path gcLog) throws Exception {
    Pattern pause = Pattern.compile("(\\d+)M->(\\d+)M\\((\\d+)M\\)");
    long after = 0;
    long before = 0;
    long n = 0;
    for (String line : Files.readAllLines(gcLog)) {
      Matcher m = pause.matcher(line);
      if (m.find()) {
        before = Math.max(before, Long.parseLong(m.group(1)));
        after = Math.max(after, Long.parseLong(m.group(2)));
        n++;
      }
    }
    return new long[] {after, before, n};
  }

  private String checksum(String table) throws SQLException {
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT count(*) || ':' || md5(string_agg(md5(id || ':' || payload), ',' ORDER BY id)) FROM "
                        + table)) {
      rs.next();
      return rs.getString(1);
    }
  }

  private long query(String sql) throws SQLException {
    try (Connection c = db.connect();
        ResultSet rs = c.createStatement().executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  private long walPosition() throws SQLException {
    return query("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn");
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
