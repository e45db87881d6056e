package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.typesafe.config.ConfigFactory;
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
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.Test;

/**
 * Crash injection into the partition sink: a real node streams {@code public.src} into its 64
 * partitions while a writer commits transactions; the node is SIGKILLed at random points and
 * restarted. Afterwards the test reads every partition's journal (the outbox) and checks, per row:
 * the outbox holds one entry per committed change of that row (its insert, one per update — each
 * update adds 1 to {@code v}, so their number is known — and its delete), with revisions 1..n in
 * order, the document the entries end in equals the source row, and so does the row of the
 * partitions' documents table (written behind the journal, caught up after every kill). Prints
 * {@code loss=0 dup=0 table-diff=0}.
 *
 * <p>Size: {@code -Dweir.crash.partition-kills} (default 3; 10 and more for a long run) and {@code
 * -Dweir.crash.min-transactions} (default 2000).
 */
class PartitionCrashIT extends EndToEndTest {
  private static final int PARTITIONS = 64;

  @Test
  void partitionSinkUnderSigkillLosesAndDuplicatesNothing() throws Exception {
    int kills = Integer.getInteger("weir.crash.partition-kills", 3);
    int minTransactions = Integer.getInteger("weir.crash.min-transactions", 2000);
    long seed = Long.getLong("weir.crash.seed", System.nanoTime());
    Random random = new Random(seed);
    db = TestPostgres.server().freshDatabase("pcrash");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.src (id bigint PRIMARY KEY, v bigint NOT NULL, note text)");
      s.execute("CREATE PUBLICATION crash_pub FOR TABLE public.src");
    }
    Path config = Files.createTempFile("weir-pcrash", ".conf");
    Files.writeString(
        config,
        String.join(
            "\n",
            "weir.pipelines.crash {",
            "  slot = pcrash_slot_" + db.name().substring(db.name().length() - 10),
            "  publications = [crash_pub]",
            "  min-backoff = 200ms",
            "  max-backoff = 2s",
            "  sink { type = partitions, collections { \"public.src\" = src } }",
            "}"));

    AtomicBoolean stopWriting = new AtomicBoolean(false);
    ConcurrentLinkedQueue<Long> committed = new ConcurrentLinkedQueue<>();
    AtomicReference<Throwable> writerError = new AtomicReference<>();
    SourceWriter shape = new SourceWriter(3, 10, null, id -> "row " + id, 15);
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
            "pcrash-writer");

    NodeProcess node = startNode("pcrash", config);
    awaitRunning(node, "crash");
    writer.start();
    List<Long> delays = new ArrayList<>();
    node = killAndRestart(node, kills, random, 3000, "pcrash", config, "crash", delays);
    stopWriting.set(true);
    writer.join(Duration.ofMinutes(5).toMillis());
    assertThat(writerError.get()).as("the writer should commit without errors").isNull();
    awaitRunning(node, "crash");

    ActorSystem<Void> reader =
        ActorSystem.create(
            Behaviors.empty(),
            "pcrash-reader",
            ConfigFactory.load(
                db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf"))));
    try {
      Map<Long, JsonNode> source = OutboxAudit.source(db);
      OutboxAudit.Outcome[] last = new OutboxAudit.Outcome[1];
      long[] tableDiff = {-1};
      await("the partitions and their documents table catch up with the source")
          .atMost(Duration.ofMinutes(5))
          .pollInterval(Duration.ofSeconds(2))
          .until(
              () -> {
                last[0] = OutboxAudit.check(reader, PARTITIONS, source);
                tableDiff[0] =
                    last[0].documentDiff() == 0 ? OutboxAudit.tableDiff(db, source, last[0]) : -1;
                return tableDiff[0] == 0;
              });
      OutboxAudit.Outcome o = last[0];
      System.out.printf(
          "partition-crash: kills=%d transactions=%d rows=%d outbox-entries=%d loss=%d dup=%d doc-diff=%d table-diff=%d order-errors=%d seed=%d delays-ms=%s%n",
          kills,
          committed.size(),
          source.size(),
          o.entries(),
          o.loss(),
          o.dup(),
          o.documentDiff(),
          tableDiff[0],
          o.orderErrors(),
          seed,
          delays);
      assertThat(o.loss()).as("every committed change is in the outbox (loss)").isZero();
      assertThat(o.dup()).as("no change is in the outbox twice (dup)").isZero();
      assertThat(o.orderErrors()).as("revisions 1..n in outbox order").isZero();
      assertThat(o.documentDiff()).as("documents equal the source").isZero();
      assertThat(tableDiff[0]).as("the documents table equals the source").isZero();
    } finally {
      reader.terminate();
    }
  }
}
