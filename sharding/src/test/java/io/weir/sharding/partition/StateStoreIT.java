package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.awaitility.Awaitility.await;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.ConsumerProtocol.ConfigureConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.RowRuleReply;
import io.weir.sharding.partition.PartitionProtocol.SetRowRule;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.pattern.Patterns;
import org.apache.pekko.persistence.Persistence;
import org.apache.pekko.persistence.SnapshotProtocol.LoadSnapshot;
import org.apache.pekko.persistence.SnapshotProtocol.LoadSnapshotResult;
import org.apache.pekko.persistence.SnapshotSelectionCriteria;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.EventEnvelope;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.persistence.query.javadsl.CurrentEventsByPersistenceIdQuery;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.stream.javadsl.Sink;
import org.junit.jupiter.api.Test;

/**
 * A partition's state read with SQL ({@link SqlStateStore}, ADR 0054) against the state Pekko's own
 * recovery builds from the same journal: the snapshot loaded by the JDBC snapshot store and the
 * events after it read by the JDBC plugin, applied with the same transition. Then what the
 * partition does when the journal refutes the state it was given, and a journal the read refuses.
 */
class StateStoreIT {
  private static final int P = 5;
  private static final Duration WAIT = Duration.ofSeconds(30);

  /** Snapshots every 40 events: the journal holds several, and events after the latest. */
  private static final PartitionSettings SETTINGS =
      PartitionSettings.DEFAULTS.withSnapshots(new SnapshotPolicy(40, 16L << 20));

  @Test
  void theStateReadWithSqlIsTheOnePekkosReplayBuilds() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("recovery_it");
        JdbcPartitions jdbc = new JdbcPartitions(config(db), "recovery-it")) {
      int frames = write(db, jdbc, 173);
      assertThat(frames).isEqualTo(173);
      ActorTestKit kit = ActorTestKit.create("recovery-read", config(db));
      try {
        StateStore.Recovered read = readWithSql(kit, jdbc.wiring(SETTINGS).stateStore());
        assertThat(read).as("the journal's highest sequence is the state's").isNotNull();
        assertThat(read.snapshotSequence()).as("a snapshot was read").isPositive();
        assertThat(read.events()).as("and events after it").isPositive();
        assertThat(read.state().events).isEqualTo(read.snapshotSequence() + read.events());

        PartitionState pekko = readWithPekko(kit);
        assertThat(PartitionSnapshotSerializer.write(read.state()))
            .as("the same state, byte for byte in a snapshot")
            .isEqualTo(PartitionSnapshotSerializer.write(pekko));
        assertThat(read.state().events).isGreaterThan(frames);
      } finally {
        kit.shutdownTestKit();
      }
    }
  }

  @Test
  void aStateTheJournalRefutesIsNeverServedAndThePartitionReplaysWithPekko() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("recovery_refuted");
        JdbcPartitions jdbc = new JdbcPartitions(config(db), "recovery-refuted")) {
      write(db, jdbc, 60);
      StateStore real = jdbc.wiring(SETTINGS).stateStore();
      StateStore.Recovered stale;
      ActorTestKit kit = ActorTestKit.create("recovery-stale", config(db));
      try {
        stale = readWithSql(kit, real);
        ActorRef<Command> p = kit.spawn(Partition.create(P, jdbc.wiring(SETTINGS)));
        TestProbe<FrameReply> reply = kit.createTestProbe();
        p.tell(frame("late", List.of(upsert("late", "{\"n\":\"late\"}")), reply.ref()));
        assertThat(reply.receiveMessage(WAIT)).isInstanceOf(Applied.class);
      } finally {
        kit.shutdownTestKit();
      }

      // A recovery that hands the partition the state from before the last write.
      AtomicInteger refutations = new AtomicInteger();
      StateStore staleRecovery =
          new Delegating(real) {
            @Override
            public CompletionStage<Recovered> recover(
                int partition,
                Serialization serialization,
                Supplier<PartitionState> empty,
                UnaryOperator<PartitionState> fromSnapshot) {
              return CompletableFuture.completedFuture(stale);
            }

            @Override
            public void refuted(int partition) {
              refutations.incrementAndGet();
              super.refuted(partition);
            }
          };
      PartitionWiring wiring = jdbc.wiring(SETTINGS).withStateStore(staleRecovery);
      ActorTestKit second = ActorTestKit.create("recovery-refuted", config(db));
      try {
        ActorRef<Command> p = second.spawn(Partition.create(P, wiring), "refuted");
        TestProbe<DocumentReply> doc = second.createTestProbe();
        long highest = longValue(db, "SELECT max(sequence_number) FROM weir.event_journal");
        p.tell(new GetDocument("orders", "late", doc.ref()));
        // Commands that would persist on the stale state: a purge and a write.
        TestProbe<PartitionProtocol.PurgeReply> purge = second.createTestProbe();
        p.tell(new PartitionProtocol.PurgeOutbox(10, 100, purge.ref()));
        TestProbe<FrameReply> write = second.createTestProbe();
        p.tell(frame("stale", List.of(upsert("stale", "{}")), write.ref()));
        doc.expectNoMessage(Duration.ofSeconds(2));
        TestProbe<Object> watcher = second.createTestProbe();
        watcher.expectTerminated(p, WAIT);
        purge.expectNoMessage(Duration.ofMillis(100));
        write.expectNoMessage(Duration.ofMillis(100));
        assertThat(longValue(db, "SELECT max(sequence_number) FROM weir.event_journal"))
            .as("nothing persisted on the refuted state")
            .isEqualTo(highest);
        assertThat(refutations).as("the refutation is recorded").hasValue(1);
        assertThat(staleRecovery.enabled(P)).isFalse();

        ActorRef<Command> again = second.spawn(Partition.create(P, wiring), "replayed");
        again.tell(new GetDocument("orders", "late", doc.ref()));
        assertThat(doc.receiveMessage(WAIT).document())
            .as("replayed by Pekko: the last write is there")
            .hasValueSatisfying(d -> assertThat(d.body()).isEqualTo("{\"n\":\"late\"}"));
      } finally {
        second.shutdownTestKit();
      }
    }
  }

  @Test
  void aHoleAfterTheSnapshotFailsTheReadAndRowsMarkedDeletedLeaveItToPekko() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("recovery_hole");
        JdbcPartitions jdbc = new JdbcPartitions(config(db), "recovery-hole")) {
      write(db, jdbc, 60);
      StateStore recovery = jdbc.wiring(SETTINGS).stateStore();
      ActorTestKit kit = ActorTestKit.create("recovery-hole", config(db));
      try {
        long highest = readWithSql(kit, recovery).state().events;
        sql(db, "UPDATE weir.event_journal SET deleted = true WHERE sequence_number = " + highest);
        assertThat(readWithSql(kit, recovery))
            .as("a row marked deleted at the end: Pekko's replay decides")
            .isNull();

        long snapshot = longValue(db, "SELECT max(sequence_number) FROM weir.snapshot");
        sql(
            db,
            "UPDATE weir.event_journal SET deleted = false",
            "UPDATE weir.event_journal SET event_payload = '\\x00ff'::bytea"
                + " WHERE sequence_number = "
                + (snapshot + 2));
        Throwable undecodable = catchThrowable(() -> readWithSql(kit, recovery));
        assertThat(Partition.readFailure(undecodable))
            .as("an event its serializer refuses, decoded on the applying thread")
            .startsWith(
                "partition " + P + "'s event at sequence " + (snapshot + 2) + " could not be");

        sql(db, "DELETE FROM weir.event_journal WHERE sequence_number = " + (snapshot + 2));
        Throwable hole = catchThrowable(() -> readWithSql(kit, recovery));
        assertThat(hole)
            .as("a missing event after the snapshot")
            .isInstanceOf(ExecutionException.class)
            .hasMessageContaining("journal goes from sequence " + (snapshot + 1) + " to");
        assertThat(Partition.readFailure(hole))
            .as("what the partition logs: the store's value-free reason")
            .startsWith(
                "partition " + P + "'s journal goes from sequence " + (snapshot + 1) + " to");

        // The partition on that journal does not start; it says why without a value.
        ActorRef<Command> p = kit.spawn(Partition.create(P, jdbc.wiring(SETTINGS)));
        TestProbe<PartitionStatus> status = kit.createTestProbe();
        p.tell(new GetStatus(status.ref()));
        kit.createTestProbe().expectTerminated(p, WAIT);
        status.expectNoMessage(Duration.ofMillis(200));
      } finally {
        kit.shutdownTestKit();
      }
    }
  }

  /**
   * While the state is read, messages wait, no more than the event-sourced behavior's own stash
   * takes after it ({@code pekko.persistence.typed.stash-capacity}, here 5): later ones are dropped
   * (their senders retry), the waiting ones are answered once the read ends.
   */
  @Test
  void messagesWaitForTheReadUpToTheStashAndLaterOnesAreDropped() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("recovery_stash");
        JdbcPartitions jdbc = new JdbcPartitions(config(db), "recovery-stash")) {
      write(db, jdbc, 10);
      CompletableFuture<Void> release = new CompletableFuture<>();
      StateStore held =
          new Delegating(jdbc.wiring(SETTINGS).stateStore()) {
            @Override
            public CompletionStage<Recovered> recover(
                int partition,
                Serialization serialization,
                Supplier<PartitionState> empty,
                UnaryOperator<PartitionState> fromSnapshot) {
              return release.thenCompose(
                  v -> super.recover(partition, serialization, empty, fromSnapshot));
            }
          };
      ActorTestKit kit =
          ActorTestKit.create(
              "recovery-stash",
              ConfigFactory.parseString("pekko.persistence.typed.stash-capacity = 5")
                  .withFallback(config(db)));
      try {
        ActorRef<Command> p =
            kit.spawn(Partition.create(P, jdbc.wiring(SETTINGS).withStateStore(held)));
        List<TestProbe<DocumentReply>> readers = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
          TestProbe<DocumentReply> r = kit.createTestProbe();
          p.tell(new GetDocument("orders", "1", r.ref()));
          readers.add(r);
        }
        readers.get(0).expectNoMessage(Duration.ofMillis(300));
        release.complete(null);
        for (int i = 0; i < 5; i++) {
          assertThat(readers.get(i).receiveMessage(WAIT).document()).as("reader %d", i).isPresent();
        }
        for (int i = 5; i < 8; i++) {
          readers.get(i).expectNoMessage(Duration.ofMillis(300));
        }
        TestProbe<DocumentReply> after = kit.createTestProbe();
        p.tell(new GetDocument("orders", "1", after.ref()));
        assertThat(after.receiveMessage(WAIT).document()).as("served after the read").isPresent();
      } finally {
        kit.shutdownTestKit();
      }
    }
  }

  /**
   * The read hands rows to a thread that decodes and applies them, and may run ahead of it: the
   * fault it reports is still the earliest in sequence (an event that cannot be decoded before a
   * hole), as when one thread read and applied.
   */
  @Test
  void theEarliestFaultIsTheOneReported() throws Exception {
    PartitionSettings noSnapshots =
        PartitionSettings.DEFAULTS.withSnapshots(new SnapshotPolicy(100_000, 1L << 30));
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("recovery_order");
        JdbcPartitions jdbc = new JdbcPartitions(config(db), "recovery-order")) {
      ActorTestKit kit = ActorTestKit.create("recovery-order", config(db));
      try {
        ActorRef<Command> p = kit.spawn(Partition.create(P, jdbc.wiring(noSnapshots)));
        TestProbe<FrameReply> replies = kit.createTestProbe();
        for (int i = 0; i < 300; i++) {
          p.tell(frame("order-" + i, List.of(upsert("d" + i, "{}")), replies.ref()));
          assertThat(replies.receiveMessage(WAIT)).isInstanceOf(Applied.class);
        }
        sql(
            db,
            "UPDATE weir.event_journal SET event_payload = '\\x00ff'::bytea"
                + " WHERE sequence_number = 3",
            "DELETE FROM weir.event_journal WHERE sequence_number = 200");
        StateStore recovery = jdbc.wiring(noSnapshots).stateStore();
        for (int attempt = 0; attempt < 5; attempt++) {
          assertThat(Partition.readFailure(catchThrowable(() -> readWithSql(kit, recovery))))
              .as("attempt %d", attempt)
              .startsWith("partition " + P + "'s event at sequence 3 could not be decoded");
        }
      } finally {
        kit.shutdownTestKit();
      }
    }
  }

  @Test
  void snapshotsAreSavedInTheBackgroundOneAtATimeAndNoWriteWaitsForThem() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("recovery_snapshots");
        JdbcPartitions jdbc = new JdbcPartitions(config(db), "recovery-snapshots")) {
      StateStore real = jdbc.wiring(SETTINGS).stateStore();
      CompletableFuture<Void> gate = new CompletableFuture<>();
      List<Long> asked = new CopyOnWriteArrayList<>();
      StateStore held = heldSaves(real, gate, asked);
      ActorTestKit kit = ActorTestKit.create("recovery-snapshots", config(db));
      try {
        ActorRef<Command> p =
            kit.spawn(Partition.create(P, jdbc.wiring(SETTINGS).withStateStore(held)));
        TestProbe<FrameReply> reply = kit.createTestProbe();
        for (int i = 0; i < 100; i++) {
          p.tell(frame("w" + i, List.of(upsert("d" + (i % 7), "{\"n\":" + i + "}")), reply.ref()));
          assertThat(reply.receiveMessage(WAIT))
              .as("write %s answered while a snapshot is unsaved", i)
              .isInstanceOf(Applied.class);
        }
        assertThat(asked).as("one snapshot at a time: the first is still being saved").hasSize(1);
        assertThat(longValue(db, "SELECT count(*) FROM weir.snapshot")).isZero();

        gate.complete(null);
        await().atMost(WAIT).until(() -> asked.size() == 2);
        assertThat(asked.get(1))
            .as("the snapshot due meanwhile, asked once the first was saved, with no write after")
            .isEqualTo(100L);
        await().atMost(WAIT).until(() -> longValue(db, "SELECT count(*) FROM weir.snapshot") == 2);
        assertThat(longValue(db, "SELECT min(sequence_number) FROM weir.snapshot"))
            .isEqualTo(asked.get(0));
        assertThat(savedSnapshot(db).events)
            .as("the snapshot holds the state at its sequence, not a later one")
            .isEqualTo(asked.get(0));
        for (int i = 100; i < 150; i++) {
          p.tell(frame("w" + i, List.of(upsert("d" + (i % 7), "{\"n\":" + i + "}")), reply.ref()));
          assertThat(reply.receiveMessage(WAIT)).isInstanceOf(Applied.class);
        }
        assertThat(asked).as("the next snapshots once the first was saved").hasSizeGreaterThan(2);
        await()
            .atMost(WAIT)
            .until(
                () ->
                    longValue(db, "SELECT max(sequence_number) FROM weir.snapshot")
                        == asked.get(asked.size() - 1));
      } finally {
        kit.shutdownTestKit();
      }
    }
  }

  /**
   * A save held back while the journal's event at its sequence became another start's (what an
   * accepted storage loss, ADR 0036, lets the next incarnation write) writes nothing; the
   * partition's next snapshot, over its own event, is saved.
   */
  @Test
  void aSnapshotHeldBackPastAnotherWritersEventAtItsSequenceIsNotSaved() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("recovery_writer");
        JdbcPartitions jdbc = new JdbcPartitions(config(db), "recovery-writer")) {
      StateStore real = jdbc.wiring(SETTINGS).stateStore();
      CompletableFuture<Void> gate = new CompletableFuture<>();
      List<Long> asked = new CopyOnWriteArrayList<>();
      StateStore held = heldSaves(real, gate, asked);
      ActorTestKit kit = ActorTestKit.create("recovery-writer", config(db));
      try {
        ActorRef<Command> p =
            kit.spawn(Partition.create(P, jdbc.wiring(SETTINGS).withStateStore(held)));
        TestProbe<FrameReply> reply = kit.createTestProbe();
        int written = 0;
        while (asked.isEmpty()) {
          p.tell(frame("w" + written, List.of(upsert("d" + written % 7, "{}")), reply.ref()));
          assertThat(reply.receiveMessage(WAIT)).isInstanceOf(Applied.class);
          assertThat(++written).as("writes before a snapshot is due").isLessThan(10_000);
        }
        long first = asked.get(0);
        sql(
            db,
            "UPDATE weir.event_journal SET writer = 'another-start' WHERE sequence_number = "
                + first);
        gate.complete(null);
        while (asked.size() < 2) {
          p.tell(frame("w" + written, List.of(upsert("d" + written % 7, "{}")), reply.ref()));
          assertThat(reply.receiveMessage(WAIT)).isInstanceOf(Applied.class);
          assertThat(++written).as("writes before the next snapshot").isLessThan(20_000);
        }
        await().atMost(WAIT).until(() -> longValue(db, "SELECT count(*) FROM weir.snapshot") == 1);
        assertThat(longValue(db, "SELECT sequence_number FROM weir.snapshot"))
            .as("only the snapshot over the partition's own event")
            .isEqualTo(asked.get(1));

        // The binding rests on Pekko's writer id being new at every start of the partition.
        kit.stop(p);
        TestProbe<Object> gone = kit.createTestProbe();
        gone.expectTerminated(p, WAIT);
        ActorRef<Command> again = kit.spawn(Partition.create(P, jdbc.wiring(SETTINGS)));
        again.tell(frame("after-restart", List.of(upsert("d0", "{}")), reply.ref()));
        assertThat(reply.receiveMessage(WAIT)).isInstanceOf(Applied.class);
        assertThat(
                longValue(
                    db,
                    "SELECT count(DISTINCT writer) FROM weir.event_journal"
                        + " WHERE writer <> 'another-start'"))
            .as("two starts of the partition, two journal writers")
            .isEqualTo(2);
      } finally {
        kit.shutdownTestKit();
      }
    }
  }

  /** A failed read of the partition's journal writer is made again at the next due snapshot. */
  @Test
  void aFailedReadOfTheWriterIsMadeAgainAtTheNextDueSnapshot() throws Exception {
    firstWriterReadSpoiled(
        "recovery_writer_read",
        (read, generation) ->
            CompletableFuture.failedFuture(new SQLException("the first read fails")));
  }

  /**
   * A read of the journal writer while the storage changed (the gate's generation moved: it may
   * have been lost and reached again) is not used; it is made again at the next due snapshot.
   */
  @Test
  void aReadOfTheWriterWhileTheStorageChangedIsMadeAgain() throws Exception {
    firstWriterReadSpoiled(
        "recovery_writer_generation",
        (read, generation) -> {
          generation.incrementAndGet();
          return read.get();
        });
  }

  /** What becomes of the first read of the journal writer ({@code read} makes the real one). */
  private interface SpoiledRead {
    CompletionStage<String> of(Supplier<CompletionStage<String>> read, AtomicLong generation);
  }

  /**
   * Writes until a snapshot is saved, the first read of the journal writer made by {@code spoiled}:
   * it must not be used, so the snapshot saved is the second due one.
   */
  private static void firstWriterReadSpoiled(String name, SpoiledRead spoiled) throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase(name);
        JdbcPartitions jdbc = new JdbcPartitions(config(db), name.replace('_', '-'))) {
      List<Long> reads = new CopyOnWriteArrayList<>();
      AtomicLong generation = new AtomicLong();
      StorageGate gate =
          new StorageGate() {
            @Override
            public Refusal refusal() {
              return null;
            }

            @Override
            public long generation() {
              return generation.get();
            }
          };
      StateStore real = jdbc.wiring(SETTINGS).stateStore();
      StateStore store =
          new Delegating(real) {
            @Override
            public CompletionStage<String> journalWriter(int partition, long sequence) {
              reads.add(sequence);
              Supplier<CompletionStage<String>> read =
                  () -> real.journalWriter(partition, sequence);
              return reads.size() == 1 ? spoiled.of(read, generation) : read.get();
            }
          };
      ActorTestKit kit = ActorTestKit.create(name.replace('_', '-'), config(db));
      try {
        ActorRef<Command> p =
            kit.spawn(
                Partition.create(P, jdbc.wiring(SETTINGS).withStateStore(store).withGate(gate)));
        TestProbe<FrameReply> reply = kit.createTestProbe();
        int written = 0;
        while (longValue(db, "SELECT count(*) FROM weir.snapshot") == 0) {
          p.tell(frame("w" + written, List.of(upsert("d" + written % 7, "{}")), reply.ref()));
          assertThat(reply.receiveMessage(WAIT)).isInstanceOf(Applied.class);
          assertThat(++written).as("writes until a snapshot is saved").isLessThan(2_000);
        }
        assertThat(reads).as("the writer read twice: the first was spoiled").hasSize(2);
        assertThat(longValue(db, "SELECT sequence_number FROM weir.snapshot"))
            .as("the second due snapshot")
            .isEqualTo(reads.get(1));
      } finally {
        kit.shutdownTestKit();
      }
    }
  }

  @Test
  void theStoreSavesASnapshotOnlyOverAnEventItsWriterWroteInTheJournal() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("recovery_no_event");
        JdbcPartitions jdbc = new JdbcPartitions(config(db), "recovery-no-event")) {
      write(db, jdbc, 10);
      StateStore store = jdbc.wiring(SETTINGS).stateStore();
      ActorTestKit kit = ActorTestKit.create("recovery-no-event", config(db));
      try {
        PartitionState state = readWithSql(kit, store).state();
        String writer =
            store.journalWriter(P, state.events).toCompletableFuture().get(30, TimeUnit.SECONDS);
        assertThat(writer).as("the writer of the journal's last event").isNotNull();
        long beyond = state.events + 3;
        assertThat(store.journalWriter(P, beyond).toCompletableFuture().get(30, TimeUnit.SECONDS))
            .as("no writer for an event the journal does not hold")
            .isNull();
        assertThat(
                store
                    .saveSnapshot(P, beyond, writer, state)
                    .toCompletableFuture()
                    .get(30, TimeUnit.SECONDS))
            .as("the journal ends before sequence %s", beyond)
            .isFalse();
        assertThat(
                longValue(
                    db, "SELECT count(*) FROM weir.snapshot WHERE sequence_number = " + beyond))
            .isZero();
        assertThat(
                store
                    .saveSnapshot(P, state.events, "another-writer", state)
                    .toCompletableFuture()
                    .get(30, TimeUnit.SECONDS))
            .as("the journal holds event %s from another writer", state.events)
            .isFalse();
        assertThat(
                store
                    .saveSnapshot(P, state.events, writer, state)
                    .toCompletableFuture()
                    .get(30, TimeUnit.SECONDS))
            .isTrue();
        assertThat(readWithSql(kit, store).snapshotSequence()).isEqualTo(state.events);
      } finally {
        kit.shutdownTestKit();
      }
    }
  }

  /**
   * {@code real}, but each snapshot save waits for {@code gate}; the sequences asked for go into
   * {@code asked}.
   */
  private static StateStore heldSaves(
      StateStore real, CompletableFuture<Void> gate, List<Long> asked) {
    return new Delegating(real) {
      @Override
      public CompletionStage<Boolean> saveSnapshot(
          int partition, long sequence, String writer, PartitionState copy) {
        asked.add(sequence);
        return gate.thenCompose(v -> real.saveSnapshot(partition, sequence, writer, copy));
      }
    };
  }

  /** A state store that does what {@code real} does, for tests to change one part of. */
  private static class Delegating implements StateStore {
    private final StateStore real;

    Delegating(StateStore real) {
      this.real = real;
    }

    @Override
    public boolean enabled(int partition) {
      return real.enabled(partition);
    }

    @Override
    public CompletionStage<Recovered> recover(
        int partition,
        Serialization serialization,
        Supplier<PartitionState> empty,
        UnaryOperator<PartitionState> fromSnapshot) {
      return real.recover(partition, serialization, empty, fromSnapshot);
    }

    @Override
    public void refuted(int partition) {
      real.refuted(partition);
    }

    @Override
    public boolean writesSnapshots() {
      return real.writesSnapshots();
    }

    @Override
    public CompletionStage<String> journalWriter(int partition, long sequence) {
      return real.journalWriter(partition, sequence);
    }

    @Override
    public CompletionStage<Boolean> saveSnapshot(
        int partition, long sequence, String writer, PartitionState copy) {
      return real.saveSnapshot(partition, sequence, writer, copy);
    }
  }

  private static Config config(TestPostgres.TestDatabase db) {
    return ConfigFactory.load(
        db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
  }

  /**
   * Writes {@code frames} frames to partition {@link #P} (upserts and deletes from a slot, API
   * frames with receipts, a consumer, a row rule), then stops its actor system.
   *
   * @return the frames written
   */
  private static int write(TestPostgres.TestDatabase db, JdbcPartitions jdbc, int frames) {
    ActorTestKit kit = ActorTestKit.create("recovery-writes", config(db));
    try {
      ActorRef<Command> p = kit.spawn(Partition.create(P, jdbc.wiring(SETTINGS)));
      TestProbe<FrameReply> replies = kit.createTestProbe();
      for (int i = 0; i < frames; i++) {
        String id = Integer.toString(i % 23);
        List<Mutation> mutations =
            i % 9 == 8
                ? List.of(new Delete("orders", id, Optional.empty()))
                : List.of(upsert(id, "{\"n\":" + i + ",\"owner\":\"o" + (i % 3) + "\"}"));
        Optional<SourcePosition> source =
            i % 5 == 0 ? Optional.empty() : Optional.of(new SourcePosition("slot", 1_000 + i));
        p.tell(new ApplyFrame(i % 5 == 0 ? "k" + i : null, mutations, source, replies.ref()));
        if (i == frames / 2) {
          TestProbe<ConsumerReply> consumer = kit.createTestProbe();
          p.tell(
              new ConfigureConsumer(
                  "agg", 1, List.of("orders"), List.of(), Optional.empty(), consumer.ref()));
          consumer.receiveMessage(WAIT);
          TestProbe<RowRuleReply> rule = kit.createTestProbe();
          p.tell(new SetRowRule("orders", "owner", 1, rule.ref()));
          rule.receiveMessage(WAIT);
        }
      }
      for (int i = 0; i < frames; i++) {
        FrameReply r = replies.receiveMessage(WAIT);
        assertThat(r).as("frame reply %s", i).isInstanceOf(Applied.class);
      }
      // A purge: a Purged event in the journal, and the outbox index cut.
      TestProbe<PartitionProtocol.PurgeReply> purged = kit.createTestProbe();
      p.tell(new PartitionProtocol.PurgeOutbox(frames / 3, 1_000_000, purged.ref()));
      assertThat(purged.receiveMessage(WAIT)).isInstanceOf(PartitionProtocol.OutboxPurged.class);
      for (int i = 0; i < 5; i++) {
        p.tell(frame("after-purge-" + i, List.of(upsert("p" + i, "{}")), replies.ref()));
        assertThat(replies.receiveMessage(WAIT)).isInstanceOf(Applied.class);
      }
      return frames;
    } finally {
      kit.shutdownTestKit();
    }
  }

  private static Upsert upsert(String id, String body) {
    return new Upsert("orders", id, body, Optional.empty());
  }

  private static ApplyFrame frame(
      String commandId, List<Mutation> mutations, ActorRef<FrameReply> replyTo) {
    return new ApplyFrame(commandId, mutations, Optional.empty(), replyTo);
  }

  private static StateStore.Recovered readWithSql(ActorTestKit kit, StateStore recovery)
      throws Exception {
    return recovery
        .recover(
            P,
            SerializationExtension.get(Adapter.toClassic(kit.system())),
            () -> PartitionBehavior.emptyState(SETTINGS),
            s -> PartitionBehavior.fromSnapshot(s, SETTINGS))
        .toCompletableFuture()
        .get(30, TimeUnit.SECONDS);
  }

  /** What Pekko's recovery starts from: its snapshot store's latest, then its plugin's events. */
  private static PartitionState readWithPekko(ActorTestKit kit) throws Exception {
    var classic = Adapter.toClassic(kit.system());
    String pid = Partition.persistenceId(P).id();
    var store =
        Persistence.get(classic).snapshotStoreFor("jdbc-snapshot-store", ConfigFactory.empty());
    LoadSnapshotResult loaded =
        (LoadSnapshotResult)
            Patterns.ask(
                    store,
                    new LoadSnapshot(pid, SnapshotSelectionCriteria.Latest(), Long.MAX_VALUE),
                    WAIT)
                .toCompletableFuture()
                .get(30, TimeUnit.SECONDS);
    PartitionState state =
        PartitionBehavior.fromSnapshot(
            (PartitionState) loaded.snapshot().get().snapshot(), SETTINGS);
    long from = loaded.snapshot().get().metadata().sequenceNr() + 1;
    List<EventEnvelope> events =
        PersistenceQuery.get(classic)
            .getReadJournalFor(
                CurrentEventsByPersistenceIdQuery.class, JdbcReadJournal.Identifier())
            .currentEventsByPersistenceId(pid, from, Long.MAX_VALUE)
            .runWith(Sink.seq(), kit.system())
            .toCompletableFuture()
            .get(30, TimeUnit.SECONDS);
    assertThat(events).isNotEmpty();
    for (EventEnvelope e : events) {
      state.apply((Partition.Event) e.event());
    }
    return state;
  }

  /** The one snapshot row of {@link #P}, decoded. */
  private static PartitionState savedSnapshot(TestPostgres.TestDatabase db) throws Exception {
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT snapshot_payload FROM weir.snapshot WHERE persistence_id = '"
                        + Partition.persistenceId(P).id()
                        + "' ORDER BY sequence_number LIMIT 1")) {
      assertThat(rs.next()).isTrue();
      return (PartitionState)
          new PartitionSnapshotSerializer()
              .fromBinary(rs.getBytes(1), PartitionSnapshotSerializer.MANIFEST);
    }
  }

  private static void sql(TestPostgres.TestDatabase db, String... statements) throws SQLException {
    try (Connection c = db.connect()) {
      for (String s : statements) {
        c.createStatement().executeUpdate(s);
      }
    }
  }

  private static long longValue(TestPostgres.TestDatabase db, String query) throws SQLException {
    try (Connection c = db.connect();
        ResultSet rs = c.createStatement().executeQuery(query)) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
