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
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Crash injection: a real node process streams a source table into the mirror sink while a writer
 * commits thousands of transactions (delivered to the mirror in batches of up to {@code
 * -Dweir.crash.mirror-batch}, default 16, transactions per sink call); the node is SIGKILLed at
 * random points (after its pipeline is running, at a random delay) and restarted, again and again.
 * At the end the mirror equals the source and the mirror's applied-transactions log holds every
 * committed source transaction exactly once (prints {@code loss=0 effect-dup=0}); with the file
 * sink under the library checkpoint store, every transaction is in the file and a crash repeats at
 * most one.
 *
 * <p>Size: {@code -Dweir.crash.kills} (default 3 per sink, so the suite fits its 20 minutes; 20 and
 * more for a long run) and {@code -Dweir.crash.min-transactions} (default 2000); pass them through
 * {@code deploy/bin/test.sh -Dweir.test.argLine="..."} for a longer run.
 */
class CdcCrashIT extends EndToEndTest {
  private static final String CANARY = "CANARY-9b2e-row-value";

  @Test
  void mirrorSinkUnderSigkillLosesAndDuplicatesNothing() throws Exception {
    // Batch delivery: up to this many transactions per sink call, one target transaction with the
    // checkpoint (SnapshotCrashIT kills the mirror with one transaction per call).
    int batch = Integer.getInteger("weir.crash.mirror-batch", 16);
    Run run =
        crash(
            "sink { target-schema = crash_mirror, applied-log = true }\n"
                + "  batch { max-transactions = "
                + batch
                + ", max-delay = 20ms }",
            () -> appliedDistinct());
    Map<Long, Integer> applied = appliedCounts("crash_mirror");
    long loss = run.committed.stream().filter(x -> !applied.containsKey(x)).count();
    long dup = applied.values().stream().filter(n -> n > 1).count();
    long unknown = applied.keySet().stream().filter(x -> !run.committed.contains(x)).count();
    long differences = mirrorDifferences("crash_mirror");
    System.out.printf(
        "cdc-crash: sink=mirror batch=%d kills=%d transactions=%d applied=%d loss=%d effect-dup=%d unknown=%d mirror-diff=%d seed=%d delays-ms=%s%n",
        batch,
        run.kills,
        run.committed.size(),
        applied.size(),
        loss,
        dup,
        unknown,
        differences,
        run.seed,
        run.delays);
    assertThat(loss).as("every committed source transaction should be applied (loss)").isZero();
    assertThat(dup).as("no source transaction should be applied twice (effect-dup)").isZero();
    assertThat(unknown).as("nothing should be applied that the writer did not commit").isZero();
    assertThat(differences).as("the mirror should equal the source").isZero();
    JsonAssert.noCanary(run.last, CANARY, nodes);
  }

  @Test
  void fileSinkWithLibraryCheckpointsRepeatsAtMostOneTransactionPerCrash() throws Exception {
    Path file = Files.createTempFile("weir-crash-file", ".jsonl");
    Files.delete(file);
    Run run = crash("sink { type = file, path = \"" + file + "\" }", () -> fileCounts(file).size());
    Map<Long, Integer> delivered = fileCounts(file);
    long loss = run.committed.stream().filter(x -> !delivered.containsKey(x)).count();
    long repeatedTransactions = delivered.values().stream().filter(n -> n > 1).count();
    long extraDeliveries = delivered.values().stream().mapToLong(n -> n - 1).sum();
    long unknown = delivered.keySet().stream().filter(x -> !run.committed.contains(x)).count();
    System.out.printf(
        "cdc-crash: sink=file(library checkpoints) kills=%d transactions=%d delivered=%d loss=%d duplicates=%d (max 1 per crash) seed=%d%n",
        run.kills, run.committed.size(), delivered.size(), loss, extraDeliveries, run.seed);
    assertThat(loss).as("every committed source transaction should be delivered (loss)").isZero();
    assertThat(unknown).as("nothing should be delivered that the writer did not commit").isZero();
    assertThat(extraDeliveries)
        .as("a crash repeats at most the one transaction in flight")
        .isLessThanOrEqualTo(run.kills);
    assertThat(repeatedTransactions).isLessThanOrEqualTo(run.kills);
    // What a kill repeats is the transaction in flight: written, not yet checkpointed, so the copy
    // follows the first directly (a repeat from further back would be a checkpoint gone astray).
    List<Long> order = fileXids(file);
    Set<Long> earlier = new HashSet<>();
    for (int i = 0; i < order.size(); i++) {
      if (!earlier.add(order.get(i))) {
        assertThat(order.get(i))
            .as("line %d repeats the transaction of the line just before it", i + 1)
            .isEqualTo(order.get(i - 1));
      }
    }
    assertThat(Files.readString(file))
        .as("the file should hold the delivered transactions")
        .contains("\"op\":\"insert\"");
    JsonAssert.noCanary(run.last, CANARY, nodes);
  }

  private record Run(
      int kills, List<Long> committed, long seed, List<Long> delays, NodeProcess last) {}

  private Map<Long, Integer> fileCounts(Path file) throws java.io.IOException {
    Map<Long, Integer> out = new HashMap<>();
    for (long xid : fileXids(file)) {
      out.merge(xid, 1, Integer::sum);
    }
    return out;
  }

  /** The transaction ids of the file's lines, in the order written. */
  private static List<Long> fileXids(Path file) throws java.io.IOException {
    List<Long> out = new ArrayList<>();
    if (!Files.exists(file)) {
      return out;
    }
    com.fasterxml.jackson.databind.ObjectMapper json =
        new com.fasterxml.jackson.databind.ObjectMapper();
    for (String line : Files.readAllLines(file)) {
      if (!line.isBlank()) {
        out.add(json.readTree(line).get("xid").asLong());
      }
    }
    return out;
  }

  private Run crash(String sinkConfig, java.util.concurrent.Callable<? extends Number> delivered)
      throws Exception {
    int kills = Integer.getInteger("weir.crash.kills", 3);
    int minTransactions = Integer.getInteger("weir.crash.min-transactions", 2000);
    long seed = Long.getLong("weir.crash.seed", System.nanoTime());
    Random random = new Random(seed);
    db = TestPostgres.server().freshDatabase("crash");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.src (id bigint PRIMARY KEY, v bigint NOT NULL, note text)");
      s.execute("CREATE PUBLICATION crash_pub FOR TABLE public.src");
      s.execute("CREATE SCHEMA crash_mirror");
      s.execute(
          "CREATE TABLE crash_mirror.src (id bigint PRIMARY KEY, v bigint NOT NULL, note text)");
    }
    Path config = Files.createTempFile("weir-crash", ".conf");
    Files.writeString(
        config,
        String.join(
            "\n",
            "weir.pipelines.crash {",
            "  slot = crash_slot_" + db.name().substring(db.name().length() - 10),
            "  publications = [crash_pub]",
            "  min-backoff = 200ms",
            "  max-backoff = 2s",
            "  " + sinkConfig,
            "}"));

    AtomicBoolean stopWriting = new AtomicBoolean(false);
    ConcurrentLinkedQueue<Long> committed = new ConcurrentLinkedQueue<>();
    AtomicReference<Throwable> writerError = new AtomicReference<>();
    SourceWriter shape =
        new SourceWriter(3, 10, null, id -> id % 50 == 0 ? CANARY : "row " + id, 15);
    Thread writer =
        new Thread(
            () ->
                shape.run(
                    db,
                    1,
                    new Random(seed + 1),
                    committed,
                    () -> committed.size() < minTransactions || !stopWriting.get(),
                    writerError),
            "crash-writer");

    NodeProcess node = startNode("crash", config);
    awaitRunning(node, "crash");
    writer.start();
    List<Long> killDelays = new ArrayList<>();
    node = killAndRestart(node, kills, random, 2500, "crash", config, "crash", killDelays);
    stopWriting.set(true);
    writer.join(Duration.ofMinutes(5).toMillis());
    assertThat(writerError.get()).as("the writer should commit without errors").isNull();
    assertThat(committed.size())
        .as("the writer should have committed its minimum")
        .isGreaterThanOrEqualTo(minTransactions);

    NodeProcess last = node;
    awaitRunning(last, "crash");
    await("the sink catches up with every committed transaction")
        .atMost(Duration.ofMinutes(3))
        .pollInterval(Duration.ofSeconds(1))
        .until(() -> delivered.call().longValue() >= committed.size());
    return new Run(kills, List.copyOf(committed), seed, killDelays, last);
  }

  private long appliedDistinct() throws SQLException {
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery("SELECT count(DISTINCT xid) FROM crash_mirror.weir_mirror_applied")) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
