package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.ChangesSpan;
import io.weir.sharding.partition.ReadProtocol.ReadChanges;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.NotUsed;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.EventEnvelope;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.persistence.query.javadsl.CurrentEventsByPersistenceIdQuery;
import org.apache.pekko.stream.javadsl.Source;
import org.junit.jupiter.api.Test;

/**
 * The outbox reader on the real JDBC journal: many concurrent readers of the same events cost one
 * journal query each event (counted by wrapping the journal's query), cached events are served
 * without one, the cache stays within its bound, and a missing position still fails the read.
 */
class OutboxReaderIT {

  @Test
  void concurrentReadersShareJournalQueriesAndTheCacheIsBounded() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("outbox_reader_it")) {
      Config config =
          ConfigFactory.load(
              db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
      try (Database database =
          Database.create(PostgresSettings.create(config), "outbox-reader-it")) {
        SchemaMigrator.migrate(database.dataSource(), "weir");
      }
      ActorTestKit kit = ActorTestKit.create("outbox-reader-it", config);
      try {
        ActorRef<Command> p = kit.spawn(Partition.create(5));
        TestProbe<FrameReply> replies = kit.createTestProbe();
        for (int i = 0; i < 40; i++) {
          p.tell(
              new ApplyFrame(
                  "c" + i,
                  List.of(new Upsert("orders", "d" + i, "{\"n\":" + i + "}", Optional.empty())),
                  Optional.empty(),
                  replies.ref()));
          assertThat(replies.receiveMessage(Duration.ofSeconds(30))).isInstanceOf(Applied.class);
        }
        TestProbe<ChangesSpan> spans = kit.createTestProbe();
        p.tell(new ReadChanges("orders", 0, 40, spans.ref()));
        ChangesSpan span = spans.receiveMessage(Duration.ofSeconds(10));
        CurrentEventsByPersistenceIdQuery real =
            PersistenceQuery.get(kit.system())
                .getReadJournalFor(JdbcReadJournal.class, JdbcReadJournal.Identifier());
        AtomicInteger queries = new AtomicInteger();
        CurrentEventsByPersistenceIdQuery counted =
            new CurrentEventsByPersistenceIdQuery() {
              @Override
              public Source<EventEnvelope, NotUsed> currentEventsByPersistenceId(
                  String id, long from, long to) {
                queries.incrementAndGet();
                return real.currentEventsByPersistenceId(id, from, to);
              }
            };
        OutboxReader reader = new OutboxReader(kit.system(), counted);
        List<CompletableFuture<List<Partition.OutboxEntry>>> reads = new ArrayList<>();
        for (int r = 0; r < 50; r++) {
          reads.add(
              reader
                  .entries(5, span.incarnation(), span.journalSequences(), 0, 40)
                  .toCompletableFuture());
        }
        for (CompletableFuture<List<Partition.OutboxEntry>> read : reads) {
          List<Partition.OutboxEntry> entries = read.get(30, TimeUnit.SECONDS);
          assertThat(entries)
              .extracting(Partition.OutboxEntry::sequence)
              .containsExactlyElementsOf(
                  java.util.stream.LongStream.rangeClosed(1, 40).boxed().toList());
        }
        assertThat(queries.get()).as("50 concurrent readers of the same events").isEqualTo(1);
        assertThat(
                reader
                    .entries(5, span.incarnation(), span.journalSequences(), 10, 20)
                    .toCompletableFuture()
                    .get(10, TimeUnit.SECONDS))
            .hasSize(10);
        assertThat(queries.get()).as("served from the cache").isEqualTo(1);
        reader
            .entries(5, "another-incarnation", span.journalSequences(), 0, 40)
            .toCompletableFuture()
            .get(10, TimeUnit.SECONDS);
        assertThat(queries.get()).as("another incarnation never hits these events").isEqualTo(2);
        assertThat(
                reader
                    .entries(5, span.journalSequences(), 0, 40)
                    .toCompletableFuture()
                    .get(10, TimeUnit.SECONDS))
            .as("uncached reads give the same entries")
            .hasSize(40);

        OutboxReader tiny = new OutboxReader(kit.system(), counted, 500);
        tiny.entries(5, span.incarnation(), span.journalSequences(), 0, 40)
            .toCompletableFuture()
            .get(10, TimeUnit.SECONDS);
        int before = queries.get();
        tiny.entries(5, span.incarnation(), span.journalSequences(), 0, 1)
            .toCompletableFuture()
            .get(10, TimeUnit.SECONDS);
        assertThat(queries.get())
            .as("the oldest events were evicted from a cache of 500 bytes")
            .isEqualTo(before + 1);

        List<Long> holes = new ArrayList<>(span.journalSequences());
        holes.remove(5);
        assertThatThrownBy(
                () ->
                    reader
                        .entries(5, "third", holes, 0, 40)
                        .toCompletableFuture()
                        .get(10, TimeUnit.SECONDS))
            .hasCauseInstanceOf(OutboxReader.MissingEntries.class);
      } finally {
        kit.shutdownTestKit();
      }
    }
  }

  @Test
  void sqlReadsWhatPekkosReadJournalReads() throws Exception {
    try (TestPostgres.TestDatabase db =
        TestPostgres.server().freshDatabase("outbox_reader_sql_it")) {
      Config config =
          ConfigFactory.load(
              db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
      ActorTestKit kit = ActorTestKit.create("outbox-reader-sql-it", config);
      ExecutorService io = Executors.newFixedThreadPool(2);
      try (Database database =
          Database.create(PostgresSettings.create(config), "outbox-reader-sql-it")) {
        SchemaMigrator.migrate(database.dataSource(), "weir");
        ActorRef<Command> p = kit.spawn(Partition.create(7));
        // Journal events of one frame and of several (ApplyFrames: a CDC sink's slices).
        TestProbe<PartitionProtocol.FramesReply> replies = kit.createTestProbe();
        for (int i = 0; i < 20; i++) {
          List<ApplyFrame> frames = new ArrayList<>();
          for (int f = 0; f <= i % 3; f++) {
            int n = i * 3 + f;
            frames.add(
                new ApplyFrame(
                    "c" + n,
                    List.of(
                        new Upsert("orders", "d" + n % 25, "{\"n\":" + n + "}", Optional.empty()),
                        new Upsert("lines", "l" + n, "{\"é\":\"☃\"}", Optional.empty())),
                    Optional.empty(),
                    null));
          }
          p.tell(new PartitionProtocol.ApplyFrames(frames, replies.ref()));
          assertThat(replies.receiveMessage(Duration.ofSeconds(30)).replies())
              .allMatch(r -> r instanceof Applied);
        }
        String pid = Partition.persistenceId(7).id();
        long events;
        try (var c = database.dataSource().getConnection();
            var st = c.createStatement();
            var rs =
                st.executeQuery(
                    "SELECT max(sequence_number) FROM weir.event_journal WHERE persistence_id = '"
                        + pid
                        + "'")) {
          rs.next();
          events = rs.getLong(1);
        }
        assertThat(events).isEqualTo(20);
        JournalEntries sql = JournalEntries.sql(kit.system(), database.dataSource(), "weir", io);
        JournalEntries pekko = JournalEntries.pekko(kit.system());
        for (long[] range : new long[][] {{1, events}, {2, 3}, {events, events + 5}, {0, 0}}) {
          assertThat(
                  sql.between(7, range[0], range[1])
                      .toCompletableFuture()
                      .get(30, TimeUnit.SECONDS))
              .as("events %d to %d", range[0], range[1])
              .isEqualTo(
                  pekko
                      .between(7, range[0], range[1])
                      .toCompletableFuture()
                      .get(30, TimeUnit.SECONDS))
              .isNotNull();
        }
        assertThat(sql.between(7, 1, events).toCompletableFuture().get(30, TimeUnit.SECONDS))
            .hasSize((int) events)
            .satisfies(
                all ->
                    assertThat(all.values().stream().mapToInt(List::size).sum())
                        .as("two entries a frame, 39 frames (1, 2, 3, 1, ...)")
                        .isEqualTo(78));
        try (var c = database.dataSource().getConnection();
            var st = c.createStatement()) {
          // A deleted row is not read (as Pekko's query does not); a corrupt one fails the read.
          st.executeUpdate(
              "UPDATE weir.event_journal SET deleted = true WHERE persistence_id = '"
                  + pid
                  + "' AND sequence_number = 2");
          st.executeUpdate(
              "UPDATE weir.event_journal SET event_payload = '\\x07ff'::bytea"
                  + " WHERE persistence_id = '"
                  + pid
                  + "' AND sequence_number = 4");
        }
        assertThat(sql.between(7, 1, 3).toCompletableFuture().get(30, TimeUnit.SECONDS))
            .containsOnlyKeys(1L, 3L)
            .isEqualTo(pekko.between(7, 1, 3).toCompletableFuture().get(30, TimeUnit.SECONDS));
        assertThatThrownBy(
                () -> sql.between(7, 1, 5).toCompletableFuture().get(30, TimeUnit.SECONDS))
            .hasRootCauseInstanceOf(IllegalStateException.class)
            .hasStackTraceContaining("journal event 4 of partition 7 could not be decoded");
      } finally {
        io.shutdownNow();
        kit.shutdownTestKit();
      }
    }
  }
}
