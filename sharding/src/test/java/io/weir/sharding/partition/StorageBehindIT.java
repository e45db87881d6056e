package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.ConsumerProtocol.ConfigureConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefusal;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefused;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.StorageBehind;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import io.weir.sharding.partition.StatusProtocol.StorageLossAccepted;
import io.weir.sharding.partition.StatusProtocol.StorageLossRefused;
import io.weir.sharding.partition.StatusProtocol.StorageLossReply;
import io.weir.sharding.storage.AckMark;
import io.weir.sharding.storage.AcknowledgedMarks;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.Test;

/**
 * A partition on a storage that lost frames it acknowledged (ADR 0036), on the real journal: the
 * "lagging standby" is a copy of the journal's database taken after the first write ({@code CREATE
 * DATABASE ... TEMPLATE}); two more writes are acknowledged on the original, then the partition
 * recovers from the copy with the marks it kept. It must halt storage-behind: refuse every write
 * without touching the journal, keep serving reads of what the storage holds, and go on only when
 * an operator accepts the loss, with a new incarnation. Without the marks it would write past the
 * hole unnoticed: the last step shows that, so the check is what makes the difference.
 */
class StorageBehindIT {
  private static final Duration WAIT = Duration.ofSeconds(60);
  private static final int P = 7;

  @Test
  void aPartitionOnACopyThatLostAcknowledgedFramesHaltsUntilTheLossIsAccepted() throws Exception {
    AcknowledgedMarks marks = AcknowledgedMarks.inMemory();
    try (TestPostgres.TestDatabase primary =
        TestPostgres.server().freshDatabase("storage_behind")) {
      TestPostgres.TestDatabase lagging =
          new TestPostgres.TestDatabase(
              primary.server(),
              "storage_behind_copy_"
                  + UUID.randomUUID().toString().replace("-", "").substring(0, 8));
      try (lagging) {
        run(
            primary,
            marks,
            (kit, p) -> {
              assertThat(write(kit, p, "c1", "o1")).isInstanceOf(Applied.class);
              assertThat(storage(kit, p).state()).isEqualTo("serving");
            });
        copy(primary, lagging); // the standby that stops receiving WAL here
        run(
            primary,
            marks,
            (kit, p) -> {
              assertThat(write(kit, p, "c2", "o2")).isInstanceOf(Applied.class);
              assertThat(write(kit, p, "c3", "o3")).isInstanceOf(Applied.class);
              assertThat(storage(kit, p).acknowledged()).isEqualTo(3);
            });
        assertThat(marks.read(P).toCompletableFuture().get().sequence()).isEqualTo(3);
        assertThat(journalRows(lagging)).isEqualTo(1);

        // The failover: the partition recovers from the copy, which lacks two acknowledged frames.
        run(
            lagging,
            marks,
            (kit, p) -> {
              StatusProtocol.StorageView view = storage(kit, p);
              assertThat(view.state()).isEqualTo("storage-behind");
              assertThat(view.acknowledged()).isEqualTo(3);
              assertThat(write(kit, p, "c4", "o4")).isEqualTo(new StorageBehind(1, 3));
              TestProbe<ConsumerReply> consumers = kit.createTestProbe();
              p.tell(
                  new ConfigureConsumer(
                      "agg", 1, List.of("orders"), List.of(), Optional.empty(), consumers.ref()));
              assertThat(((ConsumerRefused) consumers.receiveMessage(WAIT)).refusal())
                  .isEqualTo(ConsumerRefusal.STORAGE_BEHIND);
              assertThat(document(kit, p, "o1")).as("what the storage holds is served").isPresent();
              assertThat(document(kit, p, "o2")).isEmpty();
              assertThat(journalRows(lagging)).as("nothing written past the hole").isEqualTo(1);
              String before = incarnation(kit, p);

              TestProbe<StorageLossReply> accept = kit.createTestProbe();
              p.tell(new StatusProtocol.AcceptStorageLoss(accept.ref()));
              assertThat(accept.receiveMessage(WAIT)).isEqualTo(new StorageLossAccepted(1, 2, 2));
              assertThat(storage(kit, p).state()).isEqualTo("serving");
              assertThat(incarnation(kit, p)).as("a new incarnation").isNotEqualTo(before);
              assertThat(write(kit, p, "c4", "o4")).isInstanceOf(Applied.class);
              p.tell(new StatusProtocol.AcceptStorageLoss(accept.ref()));
              assertThat(accept.receiveMessage(WAIT)).isInstanceOf(StorageLossRefused.class);
            });
        assertThat(marks.read(P).toCompletableFuture().get())
            .isEqualTo(new AckMark(1, marks.read(P).toCompletableFuture().get().incarnation(), 3));
        run(
            lagging,
            marks,
            (kit, p) -> {
              assertThat(storage(kit, p).state())
                  .as("recovered after the acceptance")
                  .isEqualTo("serving");
              assertThat(document(kit, p, "o4")).isPresent();
            });

        // Without marks the same copy is written past the hole, and nothing notices.
        run(
            lagging,
            AcknowledgedMarks.NONE,
            (kit, p) -> {
              assertThat(storage(kit, p).state()).isEqualTo("unchecked");
              assertThat(write(kit, p, "c5", "o5")).isInstanceOf(Applied.class);
            });
      }
    }
  }

  private static final AtomicInteger KITS = new AtomicInteger();

  /** Runs {@code body} against partition {@value #P} on {@code db} with {@code marks}. */
  private static void run(
      TestPostgres.TestDatabase db,
      AcknowledgedMarks marks,
      java.util.function.BiConsumer<ActorTestKit, ActorRef<Command>> body) {
    Config config =
        ConfigFactory.load(
            db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
    JdbcPartitions jdbc = new JdbcPartitions(config, "behind-it-" + KITS.incrementAndGet());
    ActorTestKit kit = ActorTestKit.create("storage-behind-" + KITS.get(), config);
    try {
      ActorRef<Command> p = kit.spawn(Partition.create(P, jdbc.wiring().withMarks(marks)));
      body.accept(kit, p);
    } finally {
      kit.shutdownTestKit();
      jdbc.close();
    }
  }

  private static FrameReply write(
      ActorTestKit kit, ActorRef<Command> p, String command, String id) {
    TestProbe<FrameReply> probe = kit.createTestProbe();
    p.tell(
        new ApplyFrame(
            command,
            List.of(new Upsert("orders", id, "{\"n\":1}", Optional.empty())),
            Optional.empty(),
            probe.ref()));
    return probe.receiveMessage(WAIT);
  }

  private static Optional<ReadProtocol.Document> document(
      ActorTestKit kit, ActorRef<Command> p, String id) {
    TestProbe<DocumentReply> probe = kit.createTestProbe();
    p.tell(new GetDocument("orders", id, probe.ref()));
    return probe.receiveMessage(WAIT).document();
  }

  /** The partition's storage check once it is over (a status is answered while checking too). */
  private static StatusProtocol.StorageView storage(ActorTestKit kit, ActorRef<Command> p) {
    TestProbe<PartitionStatus> probe = kit.createTestProbe();
    return org.awaitility.Awaitility.await("the storage check is over")
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              p.tell(new GetStatus(probe.ref()));
              return probe.receiveMessage(WAIT).storage();
            },
            view -> !view.state().equals("checking"));
  }

  private static String incarnation(ActorTestKit kit, ActorRef<Command> p) {
    TestProbe<ReadProtocol.ChangesSpan> probe = kit.createTestProbe();
    p.tell(new ReadProtocol.ReadChanges("orders", 0, 1, probe.ref()));
    return probe.receiveMessage(WAIT).incarnation();
  }

  /** Copies {@code from} into a new database {@code to}: a standby frozen at this point. */
  private static void copy(TestPostgres.TestDatabase from, TestPostgres.TestDatabase to)
      throws Exception {
    try (Connection c = from.server().connect("postgres");
        Statement s = c.createStatement()) {
      s.execute(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '"
              + from.name()
              + "' AND pid <> pg_backend_pid()");
      s.execute("CREATE DATABASE " + to.name() + " TEMPLATE " + from.name());
    }
  }

  private static long journalRows(TestPostgres.TestDatabase db) {
    return JdbcPartitions.journalRows(db, P);
  }
}
