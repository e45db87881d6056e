package io.weir.persistence;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.CborSerializable;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.javadsl.CommandHandlerWithReply;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehaviorWithEnforcedReplies;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * An event-sourced entity persists through the JDBC journal and snapshot store into Weir's schema
 * on a real PostgreSQL, its actor system terminates, and a new actor system recovers the state.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class JournalRoundTripIT {
  private TestPostgres.TestDatabase db;
  private Config config;

  @BeforeAll
  void migrate() {
    db = TestPostgres.server().freshDatabase("journal_it");
    config =
        ConfigFactory.load(
            db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
    try (Database database = Database.create(PostgresSettings.create(config), "journal-it")) {
      SchemaMigrator.migrate(database.dataSource(), "weir");
    }
  }

  @AfterAll
  void drop() {
    db.close();
  }

  @Test
  void entityRecoversItsStateFromPostgresInANewActorSystem() throws Exception {
    List<String> written = new ArrayList<>();
    ActorTestKit first = ActorTestKit.create("first", config);
    try {
      ActorRef<Ledger.Command> ledger = first.spawn(Ledger.create("a"));
      TestProbe<StatusReply<Integer>> probe = first.createTestProbe();
      for (int i = 0; i < 7; i++) {
        String entry = "entry-" + i;
        ledger.tell(new Ledger.Append(entry, probe.ref()));
        assertThat(probe.receiveMessage(Duration.ofSeconds(15)).getValue())
            .as("each append should be acknowledged with the new entry count after it is persisted")
            .isEqualTo(i + 1);
        written.add(entry);
      }
      // Outbox reads go through the read journal, on a pool of its own: journal writes never wait
      // behind them for a connection or a Slick thread.
      org.apache.pekko.persistence.jdbc.db.SlickExtensionImpl slick =
          (org.apache.pekko.persistence.jdbc.db.SlickExtensionImpl)
              org.apache.pekko.persistence.jdbc.db.SlickExtension.get(
                  first.system().classicSystem());
      Config pekko = first.system().settings().config();
      assertThat(slick.database(pekko.getConfig("jdbc-read-journal")).database())
          .as("the read journal's database")
          .isNotSameAs(slick.database(pekko.getConfig("jdbc-journal")).database());
      assertThat(
              pekko.getInt("pekko-persistence-jdbc.shared-databases.weir-reads.db.maxConnections"))
          .isEqualTo(pekko.getInt("weir.postgres.read-pool-size"));
      long read =
          org.apache.pekko.persistence.query.PersistenceQuery.get(first.system())
              .getReadJournalFor(
                  org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal.class,
                  org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal.Identifier())
              .currentEventsByPersistenceId("ledger|a", 0, Long.MAX_VALUE)
              .runFold(0L, (n, e) -> n + 1, first.system())
              .toCompletableFuture()
              .get(30, java.util.concurrent.TimeUnit.SECONDS);
      assertThat(read).as("events read through the read journal's pool").isEqualTo(7);
    } finally {
      first.shutdownTestKit();
    }

    try (Connection c = db.connect();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT count(*) FROM weir.event_journal WHERE persistence_id = ?")) {
      ps.setString(1, "ledger|a");
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        assertThat(rs.getInt(1))
            .as("every event should be a row of weir.event_journal")
            .isEqualTo(7);
      }
    }
    try (Connection c = db.connect();
        ResultSet rs = c.createStatement().executeQuery("SELECT count(*) FROM weir.snapshot")) {
      rs.next();
      assertThat(rs.getInt(1))
          .as("snapshotEvery(5) should have written a snapshot")
          .isGreaterThanOrEqualTo(1);
    }

    ActorTestKit second = ActorTestKit.create("second", config);
    try {
      ActorRef<Ledger.Command> ledger = second.spawn(Ledger.create("a"));
      TestProbe<Ledger.State> probe = second.createTestProbe();
      ledger.tell(new Ledger.Get(probe.ref()));
      assertThat(probe.receiveMessage(Duration.ofSeconds(15)).entries())
          .as("the recovered state should hold every entry in order")
          .containsExactlyElementsOf(written);
    } finally {
      second.shutdownTestKit();
    }
  }

  /**
   * Large values written from now on are LZ4-compressed (V18, ADR 0038): journal payloads,
   * snapshots and document bodies. Removing the migration makes this fail (pglz).
   */
  @Test
  void largeValuesAreCompressedWithLz4() throws Exception {
    String large = "0123456789abcdef".repeat(1_024);
    try (Connection c = db.connect()) {
      try (PreparedStatement ps =
          c.prepareStatement(
              "INSERT INTO weir.event_journal (persistence_id, sequence_number, writer,"
                  + " event_ser_id, event_ser_manifest, event_payload) VALUES ('lz4|1', 1, 'w', 1,"
                  + " '', convert_to(?, 'UTF8'))")) {
        ps.setString(1, large);
        ps.executeUpdate();
      }
      try (PreparedStatement ps =
          c.prepareStatement(
              "INSERT INTO weir.snapshot (persistence_id, sequence_number, created, snapshot_ser_id,"
                  + " snapshot_ser_manifest, snapshot_payload) VALUES ('lz4|1', 1, 0, 1, '',"
                  + " convert_to(?, 'UTF8'))")) {
        ps.setString(1, large);
        ps.executeUpdate();
      }
      try (PreparedStatement ps =
          c.prepareStatement(
              "INSERT INTO weir.documents (partition_id, collection, id, revision, body, deleted,"
                  + " journal_seq) VALUES (0, 'c', 'lz4', 1, ?, false, 1)")) {
        ps.setString(1, large);
        ps.executeUpdate();
      }
      try (ResultSet rs =
          c.createStatement()
              .executeQuery(
                  "SELECT (SELECT pg_column_compression(event_payload) FROM weir.event_journal"
                      + " WHERE persistence_id = 'lz4|1'), (SELECT"
                      + " pg_column_compression(snapshot_payload) FROM weir.snapshot WHERE"
                      + " persistence_id = 'lz4|1'), (SELECT pg_column_compression(body) FROM"
                      + " weir.documents WHERE id = 'lz4')")) {
        rs.next();
        assertThat(List.of(rs.getString(1), rs.getString(2), rs.getString(3)))
            .as("compression of a journal payload, a snapshot and a document body")
            .containsExactly("lz4", "lz4", "lz4");
      }
    }
  }

  /** A minimal event-sourced entity: an append-only list of entries. */
  static final class Ledger
      extends EventSourcedBehaviorWithEnforcedReplies<Ledger.Command, Ledger.Event, Ledger.State> {
    sealed interface Command {}

    record Append(String entry, ActorRef<StatusReply<Integer>> replyTo) implements Command {}

    record Get(ActorRef<State> replyTo) implements Command {}

    record Event(String entry) implements CborSerializable {}

    record State(List<String> entries) implements CborSerializable {
      State {
        entries = List.copyOf(entries);
      }

      State with(String entry) {
        List<String> next = new ArrayList<>(entries);
        next.add(entry);
        return new State(next);
      }
    }

    static Behavior<Command> create(String id) {
      return new Ledger(PersistenceId.of("ledger", id));
    }

    private Ledger(PersistenceId id) {
      super(id);
    }

    @Override
    public State emptyState() {
      return new State(List.of());
    }

    @Override
    public RetentionCriteria retentionCriteria() {
      return RetentionCriteria.snapshotEvery(5, 2);
    }

    @Override
    public CommandHandlerWithReply<Command, Event, State> commandHandler() {
      return newCommandHandlerWithReplyBuilder()
          .forAnyState()
          .onCommand(
              Append.class,
              (state, cmd) ->
                  Effect()
                      .persist(new Event(cmd.entry()))
                      .thenReply(cmd.replyTo(), s -> StatusReply.success(s.entries().size())))
          .onCommand(Get.class, (state, cmd) -> Effect().reply(cmd.replyTo(), state))
          .build();
    }

    @Override
    public EventHandler<State, Event> eventHandler() {
      return newEventHandlerBuilder()
          .forAnyState()
          .onEvent(Event.class, (s, e) -> s.with(e.entry()))
          .build();
    }
  }
}
