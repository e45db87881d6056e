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
          await("the table applied every event")
              .atMost(Duration.ofSeconds(30))
              .until(() -> position(db) == maxSequence(db));
          // PostgreSQL lost the table's applies after event 500 (a crash after their commits, ADR
          // 0035; set back by hand here): the partition still counts them applied.
          long durable = SnapshotPolicy.DEFAULT.events() / 2;
          execute(
              db,
              "UPDATE weir.document_positions SET applied_through = "
                  + durable
                  + " WHERE partition_id = 5");
          TestProbe<PurgeReply> purged = first.createTestProbe();
          p.tell(new PurgeOutbox(1500, 1_000_000, purged.ref()));
          assertThat(purged.receiveMessage(Duration.ofSeconds(10)))
              .isEqualTo(new OutboxPurged(1501, frames + 1, 1500, false));
          // The snapshot at 1000 covers rows 1..1000, but the table durably holds only 1..500:
          // rows 1..500 go, and 501.. stay for the writer to apply again.
          await("journal rows pruned")
              .atMost(Duration.ofSeconds(30))
              .until(() -> count(db, "weir.event_journal") < frames + 1);
          assertThat(count(db, "weir.event_journal"))
              .as("pruned through the table's durable position, not the snapshot's")
              .isEqualTo(frames + 1 - durable);
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

  /**
   * A partition's journal is pruned only through what its documents table durably holds: after a
   * crash of PostgreSQL lost applies the partition had counted (here: the table's position set back
   * by hand, as such a crash leaves it), a prune asked through a later event stops at the table's
   * position, so the events the writer must replay stay. A journal without a position row loses
   * nothing.
   */
  @Test
  void pruningNeverPassesTheDocumentsTablesDurablePosition() throws Exception {
    ExecutorService io = Executors.newFixedThreadPool(1);
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("purge_bound_it")) {
      Config config =
          ConfigFactory.load(
              db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
      try (JdbcPartitions jdbc = new JdbcPartitions(config, "purge-bound-it")) {
        SqlJournalPruner pruner = new SqlJournalPruner(jdbc.database.dataSource(), "weir", io);
        ActorTestKit kit = ActorTestKit.create("purge-bound", config);
        try {
          ActorRef<Command> p = kit.spawn(Partition.create(5, jdbc.wiring()));
          TestProbe<FrameReply> replies = kit.createTestProbe();
          for (int i = 0; i < 10; i++) {
            p.tell(
                new ApplyFrame(
                    "b" + i,
                    List.of(new Upsert("orders", "d" + i, "{\"n\":" + i + "}", Optional.empty())),
                    Optional.empty(),
                    replies.ref()));
            assertThat(replies.receiveMessage(Duration.ofSeconds(30))).isInstanceOf(Applied.class);
          }
          await("the table applied every event")
              .atMost(Duration.ofSeconds(30))
              .until(() -> position(db) == maxSequence(db));
        } finally {
          kit.shutdownTestKit();
        }
        long events = maxSequence(db);
        assertThat(events).isGreaterThanOrEqualTo(10);
        execute(
            db, "UPDATE weir.document_positions SET applied_through = 4 WHERE partition_id = 5");

        assertThat(pruner.deleteThroughApplied(PID, 5, events - 2).toCompletableFuture().get())
            .as("pruned through the lower of the asked bound and the table's position")
            .isEqualTo(Math.min(events - 2, position(db)));
        assertThat(minSequence(db))
            .as("rows through the table's position 4 go, no later")
            .isEqualTo(5);

        pruner.deleteThroughApplied("weir-partition|6", 6, events).toCompletableFuture().get();
        pruner.deleteThroughApplied(PID, 99, events).toCompletableFuture().get();
        assertThat(minSequence(db))
            .as("a partition without a position row prunes nothing")
            .isEqualTo(5);

        execute(
            db,
            "UPDATE weir.document_positions SET applied_through = "
                + events
                + " WHERE partition_id = 5");
        assertThat(pruner.deleteThroughApplied(PID, 5, events - 2).toCompletableFuture().get())
            .as("pruned through the lower of the asked bound and the table's position")
            .isEqualTo(Math.min(events - 2, position(db)));
        assertThat(minSequence(db)).as("caught up, the asked bound holds").isEqualTo(events - 1);
      }
    } finally {
      io.shutdownNow();
    }
  }

  private static long position(TestPostgres.TestDatabase db) throws Exception {
    return single(db, "SELECT applied_through FROM weir.document_positions WHERE partition_id = 5");
  }

  private static long maxSequence(TestPostgres.TestDatabase db) throws Exception {
    return single(
        db,
        "SELECT coalesce(max(sequence_number), 0) FROM weir.event_journal WHERE persistence_id = '"
            + PID
            + "'");
  }

  private static long minSequence(TestPostgres.TestDatabase db) throws Exception {
    return single(
        db,
        "SELECT coalesce(min(sequence_number), 0) FROM weir.event_journal WHERE persistence_id = '"
            + PID
            + "'");
  }

  private static long single(TestPostgres.TestDatabase db, String sql) throws Exception {
    try (Connection c = db.connect();
        ResultSet rs = c.createStatement().executeQuery(sql)) {
      return rs.next() ? rs.getLong(1) : -1;
    }
  }

  private static void execute(TestPostgres.TestDatabase db, String sql) throws Exception {
    try (Connection c = db.connect()) {
      c.createStatement().execute(sql);
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
