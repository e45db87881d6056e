package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.Document;
import io.weir.sharding.partition.PartitionProtocol.DocumentsReply;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.GetDocuments;
import io.weir.sharding.partition.PartitionProtocol.GetStatus;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.PartitionStatus;
import io.weir.sharding.partition.PartitionProtocol.RowRuleReply;
import io.weir.sharding.partition.PartitionProtocol.SetRowRule;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Truncate;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The documents table ({@link SqlDocumentTable}, {@link TableWriter}) against a real PostgreSQL
 * journal: after every kind of write (API upserts and deletes, CDC frames, snapshot loads with a
 * reset, a truncate, row rules and their change) the table holds exactly what the entity holds; a
 * table that fails for a while is caught up from the journal, also across a restart from a snapshot
 * taken after the last applied event; writes wait while the table is too far behind; a journal
 * pruned before the table existed seeds it from the recovered documents; a table ahead of the
 * journal halts the writer ({@code storage-behind}).
 */
class DocumentTableIT {
  private static final int P = 5;
  private static final Duration WAIT = Duration.ofSeconds(60);
  private static final List<String> COLLECTIONS = List.of("orders", "notes", "loaded");

  private TestPostgres.TestDatabase db;
  private Database database;
  private Config config;
  private final List<ActorTestKit> kits = new ArrayList<>();
  private final java.util.concurrent.ExecutorService io = Executors.newFixedThreadPool(2);

  @BeforeEach
  void start() {
    db = TestPostgres.server().freshDatabase("document_table_it");
    config =
        ConfigFactory.load(
            db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
    database = Database.create(PostgresSettings.create(config), "document-table-it");
    SchemaMigrator.migrate(database.dataSource(), "weir");
  }

  @AfterEach
  void stop() {
    kits.forEach(ActorTestKit::shutdownTestKit);
    io.shutdownNow();
    database.close();
    db.close();
  }

  /** A table whose applies fail (connection-lost SQLState) while {@code failing} is set. */
  private final class Flaky implements DocumentTable {
    final SqlDocumentTable real = new SqlDocumentTable(database.dataSource(), "weir", io);
    final AtomicBoolean failing = new AtomicBoolean();
    final AtomicInteger refused = new AtomicInteger();

    @Override
    public CompletionStage<Position> position(int partition) {
      return real.position(partition);
    }

    @Override
    public CompletionStage<Long> apply(
        int partition, List<Applying> events, Map<String, String> ruleFieldsAfter) {
      return failing.get() ? refuse() : real.apply(partition, events, ruleFieldsAfter);
    }

    @Override
    public CompletionStage<Long> seed(
        int partition,
        long expected,
        long through,
        List<Document> documents,
        Map<String, String> ruleFields) {
      return failing.get()
          ? refuse()
          : real.seed(partition, expected, through, documents, ruleFields);
    }

    private CompletionStage<Long> refuse() {
      refused.incrementAndGet();
      return CompletableFuture.failedFuture(new SQLException("injected", "08006"));
    }
  }

  private ActorTestKit kit(String name) {
    ActorTestKit kit = ActorTestKit.create(name, config);
    kits.add(kit);
    return kit;
  }

  private static ActorRef<Command> partition(ActorTestKit kit, DocumentTable table) {
    return kit.spawn(
        Partition.create(
            P, PartitionSettings.DEFAULTS, JournalPruner.NONE, table, PartitionObserver.NONE));
  }

  private static FrameReply frame(
      ActorTestKit kit, ActorRef<Command> p, String id, List<Mutation> m, long lsn) {
    TestProbe<FrameReply> reply = kit.createTestProbe();
    Optional<SourcePosition> source =
        lsn == 0
            ? Optional.empty()
            : Optional.of(new SourcePosition("slot", lsn, lsn - 1, 1, true));
    p.tell(new ApplyFrame(lsn == 0 ? "once:" + id : null, m, source, reply.ref()));
    return reply.receiveMessage(WAIT);
  }

  private static Upsert upsert(String collection, String id, String body) {
    return new Upsert(collection, id, body, Optional.empty());
  }

  private static PartitionStatus status(ActorTestKit kit, ActorRef<Command> p) {
    TestProbe<PartitionStatus> s = kit.createTestProbe();
    p.tell(new GetStatus(s.ref()));
    return s.receiveMessage(WAIT);
  }

  /** Waits until the table holds every persisted event, then returns the status. */
  private static PartitionStatus caughtUp(ActorTestKit kit, ActorRef<Command> p) {
    PartitionStatus[] last = new PartitionStatus[1];
    await()
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              last[0] = status(kit, p);
              return last[0].table().state().equals("running")
                  && last[0].table().appliedThrough() == last[0].journalEvents()
                  && last[0].table().lagEvents() == 0;
            });
    return last[0];
  }

  /** The entity's documents, tombstones included, in (collection, id) order. */
  private static List<String> heap(ActorTestKit kit, ActorRef<Command> p) {
    List<String> out = new ArrayList<>();
    for (String c : COLLECTIONS.stream().sorted().toList()) {
      String after = null;
      while (true) {
        TestProbe<DocumentsReply> r = kit.createTestProbe();
        p.tell(new GetDocuments(c, after, 500, r.ref()));
        DocumentsReply page = r.receiveMessage(WAIT);
        for (Document d : page.documents()) {
          out.add(row(d.collection(), d.id(), d.revision(), d.body(), d.deleted(), d.acl()));
          after = d.id();
        }
        if (!page.more() || page.documents().isEmpty()) {
          break;
        }
      }
    }
    return out;
  }

  private List<String> table() throws SQLException {
    List<String> out = new ArrayList<>();
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT collection, id, revision, body, deleted, acl FROM weir.documents"
                        + " WHERE partition_id = "
                        + P
                        + " ORDER BY collection, id")) {
      while (rs.next()) {
        out.add(
            row(
                rs.getString(1),
                rs.getString(2),
                rs.getLong(3),
                rs.getString(4),
                rs.getBoolean(5),
                rs.getString(6)));
      }
    }
    return out;
  }

  private static String row(
      String collection, String id, long revision, String body, boolean deleted, String acl) {
    return collection + "|" + id + "|" + revision + "|" + body + "|" + deleted + "|" + acl;
  }

  private void sql(String statement) throws SQLException {
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute(statement);
    }
  }

  private static DocumentTable.Applying put(long sequence, String id, long revision, String body) {
    return new DocumentTable.Applying(
        sequence,
        List.of(new DocumentChange.Put(new Document("orders", id, revision, body, false))));
  }

  @Test
  void twoWritersSerializeOnThePositionRowAndAGapIsRefused() throws Exception {
    SqlDocumentTable t = new SqlDocumentTable(database.dataSource(), "weir", io);
    assertThat(
            t.apply(P, List.of(put(1, "a", 1, "{\"v\":1}"), put(2, "a", 2, "{\"v\":2}")), Map.of())
                .toCompletableFuture()
                .get())
        .isEqualTo(2);
    // The other incarnation of a hand-off offers 1..3: what is applied is skipped, 3 goes in.
    assertThat(
            t.apply(
                    P,
                    List.of(
                        put(1, "a", 1, "{\"v\":\"stale\"}"),
                        put(2, "a", 2, "{\"v\":2}"),
                        put(3, "b", 1, "{}")),
                    Map.of())
                .toCompletableFuture()
                .get())
        .isEqualTo(3);
    assertThat(table())
        .containsExactly(
            row("orders", "a", 2, "{\"v\":2}", false, null),
            row("orders", "b", 1, "{}", false, null));
    // Both writers offering event 4 at once: one applies it, the other finds it applied.
    var first = t.apply(P, List.of(put(4, "c", 1, "{}")), Map.of()).toCompletableFuture();
    var second = t.apply(P, List.of(put(4, "c", 1, "{}")), Map.of()).toCompletableFuture();
    assertThat(first.get()).isEqualTo(4);
    assertThat(second.get()).isEqualTo(4);
    assertThat(t.position(P).toCompletableFuture().get().appliedThrough()).isEqualTo(4);
    // Event 6 after position 4: 5 is missing, nothing is written.
    assertThat(
            org.assertj.core.api.Assertions.catchThrowable(
                () ->
                    t.apply(P, List.of(put(6, "d", 1, "{}")), Map.of())
                        .toCompletableFuture()
                        .get()))
        .hasCauseInstanceOf(DocumentTable.TableGap.class);
    assertThat(table()).hasSize(3);
  }

  @Test
  void theTableHoldsExactlyWhatThePartitionHoldsAfterEveryKindOfWrite() throws Exception {
    ActorTestKit kit = kit("document-table-kinds");
    ActorRef<Command> p = partition(kit, new SqlDocumentTable(database.dataSource(), "weir", io));
    TestProbe<RowRuleReply> rule = kit.createTestProbe();
    p.tell(new SetRowRule("orders", "owner", 1, rule.ref()));
    rule.receiveMessage(WAIT);
    Random random = new Random(7);
    long lsn = 100;
    for (int i = 0; i < 300; i++) {
      String id = Integer.toString(random.nextInt(40));
      Mutation m =
          random.nextInt(4) == 0
              ? new Delete("orders", id, Optional.empty())
              : upsert(
                  "orders",
                  id,
                  "{\"owner\":\"u" + random.nextInt(3) + "\",\"n\":" + i + ",\"t\":\"日本\"}");
      frame(kit, p, "a" + i, List.of(m, upsert("notes", id, "{\"i\":" + i + "}")), 0);
      if (i % 10 == 0) {
        frame(kit, p, "c" + i, List.of(upsert("notes", "cdc" + i, "{\"lsn\":" + lsn + "}")), lsn);
        lsn++;
      }
    }
    TestProbe<FrameReply> loaded = kit.createTestProbe();
    List<Upsert> rows = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      rows.add(upsert("loaded", "r" + i, "{\"r\":" + i + "}"));
    }
    p.tell(new LoadRows(List.of(), rows, true, loaded.ref()));
    loaded.receiveMessage(WAIT);
    // A reload starting over replaces the collection's documents.
    p.tell(new LoadRows(List.of("loaded"), rows.subList(0, 10), true, loaded.ref()));
    loaded.receiveMessage(WAIT);
    frame(kit, p, "truncate", List.of(new Truncate("notes")), lsn++);
    caughtUp(kit, p);
    assertThat(table()).as("the table after every kind of write").isEqualTo(heap(kit, p));
    assertThat(table())
        .as("tombstones keep the owner they are shown by")
        .anyMatch(r -> r.endsWith("|true|\"u1\""));

    // Another rule field: tombstones of the collection lose their ACL, in both places.
    p.tell(new SetRowRule("orders", "tenant", 2, rule.ref()));
    rule.receiveMessage(WAIT);
    caughtUp(kit, p);
    assertThat(table()).isEqualTo(heap(kit, p));
    assertThat(table()).noneMatch(r -> r.startsWith("orders|") && r.endsWith("|true|\"u1\""));
  }

  @Test
  void aTableThatFailedIsCaughtUpFromTheJournalAcrossARestartFromASnapshot() throws Exception {
    Flaky flaky = new Flaky();
    ActorTestKit first = kit("document-table-first");
    ActorRef<Command> p = partition(first, flaky);
    int frames = Partition.SNAPSHOT_EVERY + 30;
    for (int i = 0; i < frames; i++) {
      if (i == Partition.SNAPSHOT_EVERY - 40) {
        caughtUp(first, p);
        flaky.failing.set(true);
      }
      frame(
          first,
          p,
          "f" + i,
          List.of(upsert("orders", Integer.toString(i % 70), "{\"i\":" + i + "}")),
          0);
    }
    PartitionStatus behind = status(first, p);
    assertThat(behind.table().failures()).as("the failed applies are counted").isPositive();
    assertThat(behind.table().lastError()).contains("SQLState 08006");
    assertThat(behind.table().appliedThrough()).isLessThan(Partition.SNAPSHOT_EVERY - 30);
    List<String> expected = heap(first, p);
    first.shutdownTestKit();
    kits.remove(first);
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT max(sequence_number) FROM weir.snapshot WHERE persistence_id = 'weir-partition|"
                        + P
                        + "'")) {
      rs.next();
      assertThat(rs.getLong(1))
          .as("the snapshot recovery starts from lies after what the table applied")
          .isGreaterThan(behind.table().appliedThrough());
    }

    ActorTestKit second = kit("document-table-second");
    ActorRef<Command> again =
        partition(second, new SqlDocumentTable(database.dataSource(), "weir", io));
    caughtUp(second, again);
    assertThat(heap(second, again)).isEqualTo(expected);
    assertThat(table()).as("caught up from the journal").isEqualTo(expected);
  }

  @Test
  void writesWaitWhileTheTableIsTooFarBehind() throws Exception {
    Flaky flaky = new Flaky();
    ActorTestKit kit = kit("document-table-lag");
    ActorRef<Command> p = partition(kit, flaky);
    caughtUp(kit, p);
    flaky.failing.set(true);
    for (int i = 0; i < TableWriter.MAX_LAG_EVENTS + 1; i++) {
      frame(kit, p, "w" + i, List.of(upsert("orders", "d" + (i % 10), "{\"i\":" + i + "}")), 0);
    }
    TestProbe<FrameReply> waiting = kit.createTestProbe();
    p.tell(
        new ApplyFrame(
            "once:last", List.of(upsert("orders", "last", "{}")), Optional.empty(), waiting.ref()));
    waiting.expectNoMessage(Duration.ofSeconds(2));
    PartitionProtocol.TableStatus failed = status(kit, p).table();
    assertThat(failed.state()).isEqualTo("table-apply-failed");
    assertThat(failed.lagEvents()).isGreaterThan(TableWriter.MAX_LAG_EVENTS);
    assertThat(failed.failures()).isPositive();
    assertThat(failed.lastError())
        .as("value-free: exception classes and SQLState")
        .contains("08006")
        .doesNotContain("injected");
    flaky.failing.set(false);
    assertThat(waiting.receiveMessage(WAIT)).isInstanceOf(PartitionProtocol.Applied.class);
    caughtUp(kit, p);
    assertThat(table()).isEqualTo(heap(kit, p));
  }

  @Test
  void aJournalPrunedBeforeTheTableExistedSeedsItFromTheRecoveredDocuments() throws Exception {
    ActorTestKit first = kit("document-table-old");
    // A partition of a release without the table.
    ActorRef<Command> p = first.spawn(Partition.create(P));
    for (int i = 0; i < Partition.SNAPSHOT_EVERY + 5; i++) {
      frame(
          first,
          p,
          "o" + i,
          List.of(upsert("orders", Integer.toString(i % 50), "{\"i\":" + i + "}")),
          0);
    }
    List<String> expected = heap(first, p);
    first.shutdownTestKit();
    kits.remove(first);
    sql(
        "DELETE FROM weir.event_journal WHERE persistence_id = 'weir-partition|"
            + P
            + "' AND sequence_number <= 100");

    ActorTestKit second = kit("document-table-new");
    ActorRef<Command> again =
        partition(second, new SqlDocumentTable(database.dataSource(), "weir", io));
    caughtUp(second, again);
    assertThat(table()).as("seeded from the recovered documents").isEqualTo(expected);
    frame(second, again, "after", List.of(upsert("orders", "new", "{}")), 0);
    caughtUp(second, again);
    assertThat(table()).isEqualTo(heap(second, again));
  }

  @Test
  void aTableAheadOfTheJournalHaltsTheWriterAndWritesWait() throws Exception {
    ActorTestKit kit = kit("document-table-ahead");
    ActorRef<Command> p = partition(kit, new SqlDocumentTable(database.dataSource(), "weir", io));
    frame(kit, p, "one", List.of(upsert("orders", "1", "{}")), 0);
    caughtUp(kit, p);
    kit.stop(p);
    // The journal lost events the table holds (a storage rewound under the table).
    sql("UPDATE weir.document_positions SET applied_through = 50 WHERE partition_id = " + P);
    ActorRef<Command> again =
        partition(kit, new SqlDocumentTable(database.dataSource(), "weir", io));
    await().atMost(WAIT).until(() -> status(kit, again).table().state().equals("storage-behind"));
    TestProbe<FrameReply> waiting = kit.createTestProbe();
    again.tell(
        new ApplyFrame(
            "once:two", List.of(upsert("orders", "2", "{}")), Optional.empty(), waiting.ref()));
    waiting.expectNoMessage(Duration.ofSeconds(2));
  }
}
