package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
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
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.Test;

/**
 * A partition on the real JDBC journal and snapshot store in PostgreSQL: frames persist as one
 * journal row each, a snapshot is taken past {@code SnapshotPolicy.DEFAULT.events()} events without
 * deleting events (they are the outbox), and a new actor system recovers the same state.
 */
class PartitionJournalIT {

  @Test
  void framesSurviveANewActorSystemAndSnapshotsKeepTheEvents() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("partition_it")) {
      Config config =
          ConfigFactory.load(
              db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
      JdbcPartitions jdbc = new JdbcPartitions(config, "partition-it");
      int frames = SnapshotPolicy.DEFAULT.events() + 20;
      PartitionStatus before;
      ActorTestKit first = ActorTestKit.create("partition-first", config);
      try {
        ActorRef<Command> p = first.spawn(Partition.create(3, jdbc.wiring()));
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
                  // Frame 1 is an API frame (it keeps a receipt); the others come from a slot.
                  i == 1 ? Optional.empty() : Optional.of(new SourcePosition("slot", 10_000 + i)),
                  replies.ref()));
        }
        for (int i = 0; i < frames; i++) {
          assertThat(replies.receiveMessage(Duration.ofSeconds(30))).isInstanceOf(Applied.class);
        }
        TestProbe<PartitionStatus> status = first.createTestProbe();
        p.tell(new GetStatus(status.ref()));
        before = status.receiveMessage(Duration.ofSeconds(10));
      } finally {
        first.shutdownTestKit();
      }
      try (Connection c = db.connect();
          ResultSet rs =
              c.createStatement()
                  .executeQuery(
                      "SELECT (SELECT count(*) FROM weir.event_journal WHERE persistence_id = 'weir-partition|3'),"
                          + " (SELECT count(*) FROM weir.snapshot WHERE persistence_id = 'weir-partition|3')")) {
        rs.next();
        assertThat(rs.getLong(1))
            .as("one journal row per frame, none deleted by the snapshot")
            .isEqualTo(frames);
        assertThat(rs.getLong(2))
            .as("a snapshot after " + SnapshotPolicy.DEFAULT.events() + " events")
            .isGreaterThanOrEqualTo(1);
      }
      ActorTestKit second = ActorTestKit.create("partition-second", config);
      try {
        ActorRef<Command> p = second.spawn(Partition.create(3, jdbc.wiring()));
        TestProbe<PartitionStatus> status = second.createTestProbe();
        p.tell(new GetStatus(status.ref()));
        PartitionStatus after = status.receiveMessage(Duration.ofSeconds(30));
        assertThat(after)
            .usingRecursiveComparison()
            .ignoringFields("table", "storage")
            .isEqualTo(before);
        assertThat(after.outboxNext()).isEqualTo(frames + 1);
        assertThat(after.watermarks()).containsEntry("slot", 10_000L + frames - 1);
        TestProbe<DocumentReply> doc = second.createTestProbe();
        p.tell(new GetDocument("orders", "19", doc.ref()));
        assertThat(doc.receiveMessage(Duration.ofSeconds(10)).document().orElseThrow().revision())
            .isEqualTo((frames + 80) / 100);
        TestProbe<FrameReply> replies = second.createTestProbe();
        p.tell(
            new ApplyFrame(
                "c1",
                List.of(new Upsert("orders", "1", "{}", Optional.empty())),
                Optional.empty(),
                replies.ref()));
        assertThat(((Applied) replies.receiveMessage(Duration.ofSeconds(10))).replayed())
            .as("receipts recovered")
            .isTrue();
      } finally {
        second.shutdownTestKit();
        jdbc.close();
      }
    }
  }
}
