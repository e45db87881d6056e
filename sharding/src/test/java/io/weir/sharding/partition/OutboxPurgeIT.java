package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.OutboxPurged;
import io.weir.sharding.partition.PartitionProtocol.PurgeOutbox;
import io.weir.sharding.partition.PartitionProtocol.PurgeReply;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.sql.Connection;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.Test;

/**
 * Purge on the real JDBC journal: purged entries' journal rows are deleted once the older of the
 * two latest snapshots covers them, the rows recovery needs stay, and a new actor system recovers
 * the purged state with every document.
 */
class OutboxPurgeIT {
  private static final String PID = "weir-partition|5";

  @Test
  void purgedRowsGoOnceASnapshotCoversThemAndRecoveryStillWorks() throws Exception {
    ExecutorService io = Executors.newFixedThreadPool(1);
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("purge_it")) {
      Config config =
          ConfigFactory.load(
              db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
      try (JdbcPartitions jdbc = new JdbcPartitions(config, "purge-it")) {
        JournalPruner pruner = new SqlJournalPruner(jdbc.database.dataSource(), "weir", io);
        PartitionWiring wiring = jdbc.wiring().withPruner(pruner);
        int frames = 2 * SnapshotPolicy.DEFAULT.events() + 100;
        PartitionStatus before;
        ActorTestKit first = ActorTestKit.create("purge-first", config);
        try {
          ActorRef<Command> p = first.spawn(Partition.create(5, wiring));
          TestProbe<FrameReply> replies = first.createTestProbe();
          for (int i = 0; i < frames; i++) {
            p.tell(
                new ApplyFrame(
                    "c" + i,
                    List.of(
                        new Upsert(
                            "orders",
                            Integer.toString(i % 100),
                            "{\"n\":" + i + "}",
                            Optional.empty())),
                    Optional.empty(),
                    replies.ref()));
          }
          for (int i = 0; i < frames; i++) {
            assertThat(replies.receiveMessage(Duration.ofSeconds(30))).isInstanceOf(Applied.class);
          }
          await("two snapshots")
              .atMost(Duration.ofSeconds(30))
              .until(() -> count(db, "weir.snapshot") >= 2);
          TestProbe<PurgeReply> purged = first.createTestProbe();
          p.tell(new PurgeOutbox(1500, 1_000_000, purged.ref()));
          assertThat(purged.receiveMessage(Duration.ofSeconds(10)))
              .isEqualTo(new OutboxPurged(1501, frames + 1, 1500, false));
          // Rows 1..1000 go (the snapshot at 1000 covers them); 1001..1500 wait for a later
          // snapshot.
          await("journal rows pruned")
              .atMost(Duration.ofSeconds(30))
              .until(
                  () ->
                      count(db, "weir.event_journal")
                          == frames + 1 - SnapshotPolicy.DEFAULT.events());
          TestProbe<PartitionStatus> status = first.createTestProbe();
          p.tell(new GetStatus(status.ref()));
          before = status.receiveMessage(Duration.ofSeconds(10));
        } finally {
          first.shutdownTestKit();
        }
        System.out.println(
            "purge: frames=" + frames + " journal-rows-left=" + count(db, "weir.event_journal"));
        ActorTestKit second = ActorTestKit.create("purge-second", config);
        try {
          ActorRef<Command> p = second.spawn(Partition.create(5, wiring));
          TestProbe<PartitionStatus> status = second.createTestProbe();
          p.tell(new GetStatus(status.ref()));
          PartitionStatus after = status.receiveMessage(Duration.ofSeconds(30));
          assertThat(after)
              .usingRecursiveComparison()
              .ignoringFields("table", "storage")
              .isEqualTo(before);
          assertThat(after.outboxFirst()).isEqualTo(1501);
          TestProbe<DocumentReply> doc = second.createTestProbe();
          p.tell(new GetDocument("orders", "7", doc.ref()));
          assertThat(doc.receiveMessage(Duration.ofSeconds(10)).document().orElseThrow().revision())
              .as("documents written by purged frames stay")
              .isEqualTo(frames / 100);
        } finally {
          second.shutdownTestKit();
        }
      }
    } finally {
      io.shutdownNow();
    }
  }

  private static long count(TestPostgres.TestDatabase db, String table) throws Exception {
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT count(*) FROM " + table + " WHERE persistence_id = '" + PID + "'")) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
