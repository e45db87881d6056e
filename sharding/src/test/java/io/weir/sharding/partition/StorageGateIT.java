package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.ConsumerProtocol.ConfigureConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerConfigured;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefusal;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefused;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.StorageRefused;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import java.sql.Connection;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.Test;

/**
 * The storage gate on the real journal: while the storage keeps fewer copies than required, a
 * partition answers every frame and consumer command with a refusal and writes no journal row; once
 * the copies are back the same commands are applied.
 */
class StorageGateIT {
  private static final Duration WAIT = Duration.ofSeconds(30);

  @Test
  void writesAreRefusedWhileTheCopiesAreShortAndAppliedOnceTheyAreBack() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("storage_gate")) {
      Config config = config(db);
      JdbcPartitions jdbc = new JdbcPartitions(config, "gate-it");
      AtomicReference<StorageGate.Refusal> below =
          new AtomicReference<>(new StorageGate.Refusal(1, 2));
      AtomicInteger refusals = new AtomicInteger();
      PartitionObserver counting =
          new PartitionObserver() {
            @Override
            public void storageRefused(int partition, int writes) {
              refusals.addAndGet(writes);
            }
          };
      ActorTestKit kit = ActorTestKit.create("storage-gate", config);
      try {
        ActorRef<Command> p =
            kit.spawn(
                Partition.create(7, jdbc.wiring().withObserver(counting).withGate(below::get)));
        TestProbe<FrameReply> frames = kit.createTestProbe();
        TestProbe<ConsumerReply> consumers = kit.createTestProbe();
        TestProbe<DocumentReply> documents = kit.createTestProbe();

        p.tell(frame(frames.ref()));
        assertThat(frames.receiveMessage(WAIT)).isEqualTo(new StorageRefused(1, 2));
        p.tell(configure(consumers.ref()));
        ConsumerReply refused = consumers.receiveMessage(WAIT);
        assertThat(refused).isInstanceOf(ConsumerRefused.class);
        assertThat(((ConsumerRefused) refused).refusal()).isEqualTo(ConsumerRefusal.STORAGE_COPIES);
        assertThat(((ConsumerRefused) refused).reason())
            .contains("1 durable copies of a commit where 2 are required");
        below.set(new StorageGate.Refusal(-1, 2));
        p.tell(frame(frames.ref()));
        assertThat(frames.receiveMessage(WAIT))
            .as("unknown copies refuse too")
            .isEqualTo(new StorageRefused(-1, 2));
        assertThat(refusals.get()).isEqualTo(3);
        p.tell(new GetDocument("orders", "o1", documents.ref()));
        assertThat(documents.receiveMessage(WAIT).document()).isEmpty();
        assertThat(journalRows(db)).as("nothing reached the journal").isZero();

        below.set(null);
        p.tell(frame(frames.ref()));
        assertThat(frames.receiveMessage(WAIT)).isInstanceOf(Applied.class);
        p.tell(configure(consumers.ref()));
        assertThat(consumers.receiveMessage(WAIT)).isInstanceOf(ConsumerConfigured.class);
        p.tell(new GetDocument("orders", "o1", documents.ref()));
        assertThat(documents.receiveMessage(WAIT).document()).isPresent();
        assertThat(journalRows(db)).isEqualTo(2);
        assertThat(refusals.get()).isEqualTo(3);
      } finally {
        kit.shutdownTestKit();
        jdbc.close();
      }
    }
  }

  @Test
  void noPartitionStartsBeforeTheNodesSettingsWereChecked() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("settings_gate")) {
      Config config = config(db);
      JdbcPartitions jdbc = new JdbcPartitions(config, "settings-gate-it");
      java.util.concurrent.atomic.AtomicBoolean checked =
          new java.util.concurrent.atomic.AtomicBoolean();
      StorageGate gate =
          new StorageGate() {
            @Override
            public Refusal refusal() {
              return null;
            }

            @Override
            public boolean settingsChecked() {
              return checked.get();
            }
          };
      ActorTestKit kit = ActorTestKit.create("settings-gate", config);
      try {
        TestProbe<FrameReply> frames = kit.createTestProbe();
        ActorRef<Command> early =
            kit.spawn(PartitionEntity.create(7, jdbc.wiring().withGate(gate)));
        early.tell(frame(frames.ref()));
        frames.expectTerminated(early, WAIT);
        frames.expectNoMessage(Duration.ofMillis(200));
        assertThat(journalRows(db)).as("the partition never ran").isZero();

        checked.set(true);
        ActorRef<Command> p = kit.spawn(PartitionEntity.create(7, jdbc.wiring().withGate(gate)));
        p.tell(frame(frames.ref()));
        assertThat(frames.receiveMessage(WAIT)).isInstanceOf(Applied.class);
        assertThat(journalRows(db)).isEqualTo(1);
      } finally {
        kit.shutdownTestKit();
        jdbc.close();
      }
    }
  }

  /** The journal plugins on the test database. */
  private static Config config(TestPostgres.TestDatabase db) {
    return ConfigFactory.load(
        db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
  }

  private static ApplyFrame frame(ActorRef<FrameReply> replyTo) {
    return new ApplyFrame(
        "c1",
        List.of(new Upsert("orders", "o1", "{\"n\":1}", Optional.empty())),
        Optional.empty(),
        replyTo);
  }

  private static ConfigureConsumer configure(ActorRef<ConsumerReply> replyTo) {
    return new ConfigureConsumer("agg", 1, List.of("orders"), List.of(), Optional.empty(), replyTo);
  }

  private static long journalRows(TestPostgres.TestDatabase db) throws Exception {
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT count(*) FROM weir.event_journal WHERE persistence_id = 'weir-partition|7'")) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
