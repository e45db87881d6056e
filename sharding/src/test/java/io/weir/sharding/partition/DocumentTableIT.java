package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.RowRuleReply;
import io.weir.sharding.partition.PartitionProtocol.SetRowRule;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Truncate;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.Document;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.DocumentsReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.ReadProtocol.GetDocuments;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;
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
 * taken after the last applied event; writes wait while the table is too far behind; applies lost
 * by a crash of PostgreSQL are never served (single reads, pages, scans) and are replayed; a table
 * ahead of the journal halts the writer ({@code storage-behind}). (Partitions whose snapshots still
 * hold bodies move them into the table on start: {@code LegacySnapshotsIT}.)
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

  /**
   * A table whose applies fail (connection-lost SQLState) while {@code failing} is set; its reads
   * go through (reads by key counted).
   */
  private final class Flaky implements DocumentTable {
    final SqlDocumentTable real;

    Flaky() {
      this(false);
    }

    /** Over a table that checks its applies against the journal when {@code journalChecked}. */
    Flaky(boolean journalChecked) {
      real = new SqlDocumentTable(database.dataSource(), "weir", io, journalChecked);
    }

    final AtomicBoolean failing = new AtomicBoolean();
    final AtomicInteger refused = new AtomicInteger();
    final AtomicInteger receiptLookups = new AtomicInteger();

    /** Documents read by key ({@code rows}). */
    final AtomicInteger keysRead = new AtomicInteger();

    /** Reads of the receipts for the filter that fail (connection lost) before they go through. */
    final AtomicInteger failReceiptReads = new AtomicInteger();

    /** Set: reads of the receipts for the filter are held here and never end. */
    final AtomicBoolean holdReceiptReads = new AtomicBoolean();

    final java.util.concurrent.atomic.AtomicReference<ReceiptKeyVisitor> heldRead =
        new java.util.concurrent.atomic.AtomicReference<>();

    @Override
    public CompletionStage<Position> position(int partition) {
      return real.position(partition);
    }

    @Override
    public CompletionStage<Position> claim(int partition) {
      return real.claim(partition);
    }

    @Override
    public CompletionStage<Long> apply(
        int partition,
        List<Applying> events,
        Map<String, String> ruleFieldsAfter,
        long outboxNextAfter,
        long expectedThrough,
        long receiptsBefore,
        long writerEpoch) {
      if (failing.get()) {
        refused.incrementAndGet();
        return CompletableFuture.failedFuture(new SQLException("injected", "08006"));
      }
      return real.apply(
          partition,
          events,
          ruleFieldsAfter,
          outboxNextAfter,
          expectedThrough,
          receiptsBefore,
          writerEpoch);
    }

    @Override
    public CompletionStage<List<Receipt.Keyed>> receipts(int partition, List<String> keys) {
      if (!keys.isEmpty()) {
        receiptLookups.incrementAndGet();
      }
      return real.receipts(partition, keys);
    }

    @Override
    public CompletionStage<Void> receiptKeys(
        int partition, long sinceMillis, int limit, ReceiptKeyVisitor into) {
      if (failReceiptReads.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
        return CompletableFuture.failedFuture(new SQLException("injected", "08006"));
      }
      if (holdReceiptReads.get()) {
        heldRead.set(into);
        return new CompletableFuture<>();
      }
      return real.receiptKeys(partition, sinceMillis, limit, into);
    }

    @Override
    public CompletionStage<List<Row>> rows(int partition, List<Key> keys) {
      keysRead.addAndGet(keys.size());
      return real.rows(partition, keys);
    }

    @Override
    public CompletionStage<Seen> scan(
        int partition,
        String collection,
        String afterId,
        int limit,
        boolean liveOnly,
        ScanVisitor visit) {
      return real.scan(partition, collection, afterId, limit, liveOnly, visit);
    }
  }

  private ActorTestKit kit(String name) {
    ActorTestKit kit = ActorTestKit.create(name, config);
    kits.add(kit);
    return kit;
  }

  /**
   * A partition on the documents table in PostgreSQL without a body cache: every earlier version is
   * read from the table.
   */
  private ActorRef<Command> uncached(ActorTestKit kit) {
    return partition(
        kit,
        new SqlDocumentTable(database.dataSource(), "weir", io),
        PartitionSettings.DEFAULTS.withBodyCache(0));
  }

  private static ActorRef<Command> partition(ActorTestKit kit, DocumentTable table) {
    return partition(kit, table, PartitionSettings.DEFAULTS);
  }

  private static ActorRef<Command> partition(
      ActorTestKit kit, DocumentTable table, PartitionSettings settings) {
    return partition(kit, table, settings, new PartitionObserver() {});
  }

  private static ActorRef<Command> partition(
      ActorTestKit kit,
      DocumentTable table,
      PartitionSettings settings,
      PartitionObserver observer) {
    return kit.spawn(
        Partition.create(
            P,
            PartitionWiring.inMemory(settings)
                .withTable(table)
                .withObserver(observer)
                .withQueryJournal(
                    org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal.Identifier())));
  }

  /** Counts what a partition reports of its receipt look-ups. */
  private static final class ReceiptLookups implements PartitionObserver {
    final AtomicInteger ruledOut = new AtomicInteger();
    final AtomicInteger read = new AtomicInteger();

    @Override
    public void receiptLookups(int partition, int ruledOut, int read) {
      this.ruledOut.addAndGet(ruledOut);
      this.read.addAndGet(read);
    }
  }

  private static FrameReply frame(
      ActorTestKit kit, ActorRef<Command> p, String id, List<Mutation> m, long lsn) {
    TestProbe<FrameReply> reply = kit.createTestProbe();
    Optional<SourcePosition> source =
        lsn == 0 ? Optional.empty() : Optional.of(new SourcePosition("slot", lsn, 0, 1, true));
    p.tell(new ApplyFrame(lsn == 0 ? "once:" + id : null, m, source, reply.ref()));
    FrameReply r = reply.receiveMessage(WAIT);
    assertThat(r).as("frame " + id).isInstanceOf(PartitionProtocol.Applied.class);
    return r;
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

  /** The partition's documents as it reads them, tombstones included, in (collection, id) order. */
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

  /** The first column of the first row {@code query} returns, as text. */
  private String one(String query) throws SQLException {
    try (Connection c = db.connect();
        ResultSet rs = c.createStatement().executeQuery(query)) {
      assertThat(rs.next()).isTrue();
      return rs.getString(1);
    }
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
            t.apply(
                    P,
                    List.of(put(1, "a", 1, "{\"v\":1}"), put(2, "a", 2, "{\"v\":2}")),
                    Map.of(),
                    0,
                    0,
                    0)
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
                    Map.of(),
                    0,
                    0,
                    0)
                .toCompletableFuture()
                .get())
        .isEqualTo(3);
    assertThat(table())
        .containsExactly(
            row("orders", "a", 2, "{\"v\":2}", false, null),
            row("orders", "b", 1, "{}", false, null));
    // Both writers offering event 4 at once: one applies it, the other finds it applied.
    var first = t.apply(P, List.of(put(4, "c", 1, "{}")), Map.of(), 0, 0, 0).toCompletableFuture();
    var second = t.apply(P, List.of(put(4, "c", 1, "{}")), Map.of(), 0, 0, 0).toCompletableFuture();
    assertThat(first.get()).isEqualTo(4);
    assertThat(second.get()).isEqualTo(4);
    // ... in two transactions, one after the other: never together in one (ADR 0056).
    assertThat(t.retriedAlone()).isZero();
    assertThat(t.position(P).toCompletableFuture().get().appliedThrough()).isEqualTo(4);
    // Event 6 after position 4: 5 is missing, nothing is written.
    assertThat(
            org.assertj.core.api.Assertions.catchThrowable(
                () ->
                    t.apply(P, List.of(put(6, "d", 1, "{}")), Map.of(), 0, 0, 0)
                        .toCompletableFuture()
                        .get()))
        .hasCauseInstanceOf(DocumentTable.TableGap.class);
    assertThat(table()).hasSize(3);
  }

  /**
   * A claim fences the writers before it (ADR 0060): an apply naming an older epoch writes nothing
   * and fails {@link DocumentTable.Fenced}, also with nothing to apply; the newest writer goes on.
   */
  @Test
  void aClaimRefusesTheAppliesOfTheWritersBeforeIt() throws Exception {
    SqlDocumentTable t = new SqlDocumentTable(database.dataSource(), "weir", io);
    long first = t.claim(P).toCompletableFuture().get().writerEpoch();
    assertThat(t.apply(P, List.of(put(1, "a", 1, "{}")), Map.of(), 0, 0, 0, first))
        .succeedsWithin(WAIT)
        .isEqualTo(1L);
    DocumentTable.Position claimed = t.claim(P).toCompletableFuture().get();
    assertThat(claimed.writerEpoch()).isEqualTo(first + 1);
    assertThat(claimed.appliedThrough()).as("a claim moves nothing else").isEqualTo(1);
    assertThat(
            org.assertj.core.api.Assertions.catchThrowable(
                () ->
                    t.apply(P, List.of(put(2, "b", 1, "{}")), Map.of(), 0, 0, 0, first)
                        .toCompletableFuture()
                        .get()))
        .hasCauseInstanceOf(DocumentTable.Fenced.class);
    assertThat(
            org.assertj.core.api.Assertions.catchThrowable(
                () -> t.apply(P, List.of(), Map.of(), 99, 1, 0, first).toCompletableFuture().get()))
        .as("an outbox-sequence update of the older writer")
        .hasCauseInstanceOf(DocumentTable.Fenced.class);
    assertThat(table()).containsExactly(row("orders", "a", 1, "{}", false, null));
    assertThat(t.position(P).toCompletableFuture().get().outboxNext()).isZero();
    assertThat(t.apply(P, List.of(put(2, "c", 1, "{}")), Map.of(), 0, 0, 0, first + 1))
        .succeedsWithin(WAIT)
        .isEqualTo(2L);
    assertThat(table())
        .containsExactly(
            row("orders", "a", 1, "{}", false, null), row("orders", "c", 1, "{}", false, null));
  }

  /**
   * A table that checks its applies against the journal refuses events the journal does not hold
   * (the storage changed under the writer): nothing of that apply is written, while another
   * partition's apply in the same transaction goes in.
   */
  @Test
  void anApplyOfEventsTheJournalLacksIsRefused() throws Exception {
    ActorTestKit kit = kit("document-table-journal-check");
    ActorRef<Command> p = partition(kit, new SqlDocumentTable(database.dataSource(), "weir", io));
    frame(kit, p, "one", List.of(upsert("orders", "1", "{}")), 0);
    long journal = caughtUp(kit, p).journalEvents();
    kit.stop(p);
    SqlDocumentTable checked = new SqlDocumentTable(database.dataSource(), "weir", io, true);
    assertThat(
            org.assertj.core.api.Assertions.catchThrowable(
                () ->
                    checked
                        .apply(P, List.of(put(journal + 1, "x", 1, "{}")), Map.of(), 0, 0, 0)
                        .toCompletableFuture()
                        .get()))
        .hasCauseInstanceOf(DocumentTable.Fenced.class);
    assertThat(checked.position(P).toCompletableFuture().get().appliedThrough()).isEqualTo(journal);
    // An event the journal holds goes in (the table is rewound to before it first).
    sql(
        "UPDATE weir.document_positions SET applied_through = "
            + (journal - 1)
            + " WHERE partition_id = "
            + P);
    assertThat(checked.apply(P, List.of(put(journal, "1", 1, "{}")), Map.of(), 0, 0, 0))
        .succeedsWithin(WAIT)
        .isEqualTo(journal);
  }

  /** A partition whose last event is persisted but not applied, the journal's tail before it. */
  private record Pending(Flaky table, ActorRef<Command> partition, long kept) {}

  /**
   * A partition on a journal-checked table that applied document "kept", then persisted document
   * {@code id} while the table failed: that apply has failed at least once and is retried.
   */
  private Pending pending(ActorTestKit kit, String id) {
    Flaky flaky = new Flaky(true);
    ActorRef<Command> p = partition(kit, flaky);
    frame(kit, p, "kept", List.of(upsert("orders", "kept", "{}")), 0);
    long kept = caughtUp(kit, p).journalEvents();
    flaky.failing.set(true);
    frame(kit, p, id, List.of(upsert("orders", id, "{}")), 0);
    await()
        .atMost(WAIT)
        .alias("the apply of the later event fails")
        .until(() -> status(kit, p).table().failures() > 0);
    return new Pending(flaky, p, kept);
  }

  /**
   * A failover to a copy of the storage that lacks events the partition persisted but has not
   * applied yet (ADR 0060): the writer's retry of them is refused by the journal check instead of
   * moving the table past the journal, the partition stops, and its next incarnation recovers from
   * what the storage holds and serves it. Before the check, the retry wrote the lost events and
   * every later incarnation found the table ahead of its journal (storage-behind, never ready:
   * reads unanswered).
   */
  @Test
  void aWriterWhoseStorageLostItsPendingEventsIsRefusedAndThePartitionRecovers() throws Exception {
    ActorTestKit kit = kit("document-table-fenced");
    Pending pending = pending(kit, "lost");
    Flaky flaky = pending.table();
    ActorRef<Command> p = pending.partition();
    long kept = pending.kept();
    // The copy the storage fails over to never received the later event.
    sql(
        "DELETE FROM weir.event_journal WHERE persistence_id = 'weir-partition|"
            + P
            + "' AND sequence_number > "
            + kept);
    TestProbe<Object> watcher = kit.createTestProbe();
    flaky.failing.set(false);
    watcher.expectTerminated(p, WAIT);
    assertThat(one("SELECT applied_through FROM weir.document_positions WHERE partition_id = " + P))
        .as("the table stays at the journal's tail")
        .isEqualTo(Long.toString(kept));
    assertThat(table()).containsExactly(row("orders", "kept", 1, "{}", false, null));

    ActorRef<Command> again = partition(kit, new Flaky(true));
    caughtUp(kit, again);
    TestProbe<DocumentReply> read = kit.createTestProbe();
    again.tell(new GetDocument("orders", "lost", read.ref()));
    assertThat(read.receiveMessage(WAIT).document()).isEmpty();
    again.tell(new GetDocument("orders", "kept", read.ref()));
    assertThat(read.receiveMessage(WAIT).document()).isPresent();
    frame(kit, again, "after", List.of(upsert("orders", "after", "{}")), 0);
    caughtUp(kit, again);
    assertThat(table()).isEqualTo(heap(kit, again));
  }

  /**
   * A stopped partition's writer retries nothing (ADR 0060): the apply that failed before the stop
   * is not made later by a writer whose incarnation is gone; the next incarnation applies it.
   */
  @Test
  void aStoppedPartitionsWriterRetriesNothing() throws Exception {
    ActorTestKit kit = kit("document-table-stopped-writer");
    Pending pending = pending(kit, "later");
    Flaky flaky = pending.table();
    long kept = pending.kept();
    kit.stop(pending.partition());
    flaky.failing.set(false);
    // Longer than the retries the failed apply had scheduled (100 ms doubling).
    await()
        .during(Duration.ofSeconds(3))
        .atMost(WAIT)
        .alias("the table stays where the stopped partition left it")
        .until(
            () ->
                one("SELECT applied_through FROM weir.document_positions WHERE partition_id = " + P)
                    .equals(Long.toString(kept)));
    ActorRef<Command> again = partition(kit, flaky);
    caughtUp(kit, again);
    assertThat(table()).isEqualTo(heap(kit, again)).hasSize(2);
  }

  /**
   * An apply offered when the table's executor is shut down (the node stopping) fails at once
   * instead of waiting for a combiner that will never run; nothing is written.
   */
  @Test
  void anApplyOnAShutDownExecutorFailsAtOnce() throws Exception {
    java.util.concurrent.ExecutorService stopped = Executors.newSingleThreadExecutor();
    stopped.shutdown();
    SqlDocumentTable t = new SqlDocumentTable(database.dataSource(), "weir", stopped);
    CompletableFuture<Long> apply =
        t.apply(P, List.of(put(1, "a", 1, "{}")), Map.of(), 0, 0, 0).toCompletableFuture();
    assertThat(
            org.assertj.core.api.Assertions.catchThrowable(
                () -> apply.get(30, java.util.concurrent.TimeUnit.SECONDS)))
        .hasCauseInstanceOf(java.util.concurrent.RejectedExecutionException.class);
    assertThat(table()).isEmpty();
  }

  /**
   * When a shared transaction fails and the connection is lost while its applies are tried one by
   * one, the rest fail at once instead of each waiting for a connection of its own.
   */
  @Test
  void aLostConnectionEndsTheOneByOneAttempts() throws Exception {
    AtomicInteger connections = new AtomicInteger();
    javax.sql.DataSource losing =
        failingConnections(
            connections, n -> n > 1 ? new SQLException("the server went away", "08006") : null);
    java.util.concurrent.ExecutorService one = Executors.newSingleThreadExecutor();
    java.util.concurrent.CountDownLatch offered = new java.util.concurrent.CountDownLatch(1);
    try {
      one.execute(
          () -> {
            try {
              offered.await();
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          });
      SqlDocumentTable t = new SqlDocumentTable(losing, "weir", one);
      // All 40 wait before the one combiner starts: they share its first transaction.
      List<CompletableFuture<Long>> applies = applyAtOnce(t, 100, 140, 120);
      offered.countDown();
      for (CompletableFuture<Long> a : applies) {
        assertThat(org.assertj.core.api.Assertions.catchThrowable(a::get))
            .hasRootCauseInstanceOf(SQLException.class);
      }
      assertThat(t.retriedAlone()).isEqualTo(1);
      assertThat(connections.get())
          .as("the shared transaction, then one attempt alone that found the connection lost")
          .isEqualTo(2);
      assertThat(
              count("SELECT count(*) FROM weir.documents WHERE partition_id BETWEEN 100 AND 139"))
          .isZero();
    } finally {
      one.shutdownNow();
    }
  }

  /**
   * An Error thrown while applying (here by the pool) fails the applies it took and ends that
   * combiner, but not the table: combiners start again for what comes after.
   */
  @Test
  void anErrorInACombinerFailsItsAppliesAndLaterOnesStillRun() throws Exception {
    AtomicInteger connections = new AtomicInteger();
    javax.sql.DataSource erring =
        failingConnections(
            connections,
            n -> n <= SqlDocumentTable.COMBINING ? new AssertionError("injected") : null);
    SqlDocumentTable t = new SqlDocumentTable(erring, "weir", io);
    // One at a time, so that each Error ends a combiner: as many as may run at once.
    for (int i = 0; i < SqlDocumentTable.COMBINING; i++) {
      CompletableFuture<Long> failing =
          t.apply(100 + i, List.of(put(1, "a", 1, "{}")), Map.of(), 0, 0, 0).toCompletableFuture();
      assertThat(
              org.assertj.core.api.Assertions.catchThrowable(
                  () -> failing.get(30, java.util.concurrent.TimeUnit.SECONDS)))
          .hasCauseInstanceOf(AssertionError.class);
    }
    CompletableFuture<Long> later =
        t.apply(110, List.of(put(1, "a", 1, "{}")), Map.of(), 0, 0, 0).toCompletableFuture();
    assertThat(later.get(30, java.util.concurrent.TimeUnit.SECONDS)).isEqualTo(1);
  }

  /**
   * The test database's pool, except that its n-th {@code getConnection} (counted in {@code calls},
   * from 1) throws what {@code failure} gives for n, when that is not null.
   */
  private javax.sql.DataSource failingConnections(
      AtomicInteger calls, java.util.function.IntFunction<Throwable> failure) {
    javax.sql.DataSource real = database.dataSource();
    return (javax.sql.DataSource)
        java.lang.reflect.Proxy.newProxyInstance(
            getClass().getClassLoader(),
            new Class<?>[] {javax.sql.DataSource.class},
            (proxy, method, args) -> {
              if (method.getName().equals("getConnection")) {
                Throwable t = failure.apply(calls.incrementAndGet());
                if (t != null) {
                  throw t;
                }
              }
              try {
                return method.invoke(real, args);
              } catch (java.lang.reflect.InvocationTargetException e) {
                throw e.getCause();
              }
            });
  }

  /** Applies to many partitions at once: each partition's own (two documents, position 2). */
  private static List<CompletableFuture<Long>> applyAtOnce(
      SqlDocumentTable t, int from, int to, int poisoned) {
    List<CompletableFuture<Long>> applies = new ArrayList<>();
    for (int p = from; p < to; p++) {
      // PostgreSQL's text refuses a zero character: this partition's rows cannot be written.
      String body = p == poisoned ? "{\"v\":\"\u0000\"}" : "{\"v\":" + p + "}";
      applies.add(
          t.apply(p, List.of(put(1, "a", 1, body), put(2, "b", 1, "{}")), Map.of(), 0, 0, 0)
              .toCompletableFuture());
    }
    return applies;
  }

  /**
   * Applies of many partitions offered at once share transactions (ADR 0056): their rows carry few
   * distinct transaction ids, every partition's rows and position are its own, and a gap in one
   * partition fails only that apply.
   */
  @Test
  void appliesOfManyPartitionsShareTransactions() throws Exception {
    SqlDocumentTable t = new SqlDocumentTable(database.dataSource(), "weir", io);
    List<CompletableFuture<Long>> applies = applyAtOnce(t, 100, 120, -1);
    CompletableFuture<Long> gap =
        t.apply(99, List.of(put(5, "a", 1, "{}")), Map.of(), 0, 0, 0).toCompletableFuture();
    applies.addAll(applyAtOnce(t, 120, 140, -1));
    for (CompletableFuture<Long> a : applies) {
      assertThat(a.get()).isEqualTo(2);
    }
    assertThat(org.assertj.core.api.Assertions.catchThrowable(gap::get))
        .hasCauseInstanceOf(DocumentTable.TableGap.class);
    for (int p = 100; p < 140; p++) {
      assertThat(t.position(p).toCompletableFuture().get().appliedThrough()).isEqualTo(2);
    }
    assertThat(
            count(
                "SELECT count(*) FROM weir.documents WHERE partition_id BETWEEN 100 AND 139"
                    + " AND (id = 'a' AND body = '{\"v\":' || partition_id || '}'"
                    + " OR id = 'b' AND body = '{}')"))
        .isEqualTo(80);
    assertThat(count("SELECT count(*) FROM weir.documents WHERE partition_id = 99")).isZero();
    long transactions =
        count(
            "SELECT count(DISTINCT xmin::text) FROM weir.documents"
                + " WHERE partition_id BETWEEN 100 AND 139");
    assertThat(transactions).as("transactions that wrote 40 partitions' applies").isLessThan(20);
    assertThat(t.retriedAlone()).isZero();
  }

  /**
   * When a shared transaction fails, each apply in it is tried again alone: only the partition
   * whose rows PostgreSQL refuses fails, with nothing of it written; the others land.
   */
  @Test
  void aFailingApplyFailsOnlyItsOwnPartition() throws Exception {
    SqlDocumentTable t = new SqlDocumentTable(database.dataSource(), "weir", io);
    List<CompletableFuture<Long>> applies = applyAtOnce(t, 100, 140, 120);
    for (int i = 0; i < applies.size(); i++) {
      if (100 + i == 120) {
        assertThat(org.assertj.core.api.Assertions.catchThrowable(applies.get(i)::get))
            .hasRootCauseInstanceOf(SQLException.class);
      } else {
        assertThat(applies.get(i).get()).isEqualTo(2);
      }
    }
    assertThat(t.retriedAlone()).isPositive();
    assertThat(count("SELECT count(*) FROM weir.documents WHERE partition_id = 120")).isZero();
    assertThat(t.position(120).toCompletableFuture().get().appliedThrough()).isZero();
    assertThat(
            count(
                "SELECT count(*) FROM weir.documents WHERE partition_id BETWEEN 100 AND 139"
                    + " AND partition_id <> 120"))
        .isEqualTo(78);
  }

  /**
   * What a partition must hold after the writes a test sent, derived on its own from the rules in
   * docs/partitions.md: revisions count every change, a deletion leaves a tombstone with the
   * row-visibility value of the deleted body, a truncate deletes every live document, a snapshot
   * load with a reset starts the collection over, and a rule moving to another field clears the
   * tombstones' values.
   */
  private static final class Model {
    private record Doc(long revision, String body, boolean deleted, String acl) {}

    private final TreeMap<String, TreeMap<String, Doc>> docs = new TreeMap<>();
    private final Map<String, String> rules = new HashMap<>();

    private TreeMap<String, Doc> collection(String c) {
      return docs.computeIfAbsent(c, k -> new TreeMap<>());
    }

    private long next(String c, String id) {
      Doc d = collection(c).get(id);
      return d == null ? 1 : d.revision() + 1;
    }

    void upsert(String c, String id, String body) {
      collection(c).put(id, new Doc(next(c, id), body, false, null));
    }

    void delete(String c, String id) {
      Doc d = collection(c).get(id);
      String before = d == null || d.deleted() ? null : d.body();
      collection(c).put(id, new Doc(next(c, id), null, true, acl(before, rules.get(c))));
    }

    void truncate(String c) {
      for (String id : List.copyOf(collection(c).keySet())) {
        if (!collection(c).get(id).deleted()) {
          delete(c, id);
        }
      }
    }

    void load(List<String> reset, List<Upsert> rows) {
      reset.forEach(docs::remove);
      for (Upsert r : rows) {
        Doc d = collection(r.collection()).get(r.id());
        if (d == null || d.deleted() || !d.body().equals(r.body())) {
          upsert(r.collection(), r.id(), r.body());
        }
      }
    }

    /** Each document's current row-visibility value as a feed page asks for it. */
    Map<String, String> currentAcls(String c) {
      Map<String, String> out = new HashMap<>();
      collection(c)
          .forEach(
              (id, d) -> {
                String acl = d.deleted() ? d.acl() : acl(d.body(), rules.get(c));
                out.put(id, acl == null ? "null" : acl);
              });
      return out;
    }

    void rule(String c, String field) {
      if (!Objects.equals(rules.get(c), field)) {
        collection(c)
            .replaceAll((id, d) -> d.deleted() ? new Doc(d.revision(), null, true, null) : d);
      }
      rules.put(c, field);
    }

    /** The value of a body's field as compact JSON ("null" when absent), null without a rule. */
    private static String acl(String body, String field) {
      if (field == null || body == null) {
        return null;
      }
      try {
        JsonNode value = MAPPER.readTree(body).get(field);
        return value == null ? "null" : MAPPER.writeValueAsString(value);
      } catch (java.io.IOException e) {
        throw new AssertionError(e);
      }
    }

    List<String> rows() {
      List<String> out = new ArrayList<>();
      docs.forEach(
          (c, byId) ->
              byId.forEach(
                  (id, d) -> out.add(row(c, id, d.revision(), d.body(), d.deleted(), d.acl()))));
      return out;
    }
  }

  private static final ObjectMapper MAPPER = new ObjectMapper();

  @Test
  void theTableAndTheReadsHoldWhatAModelOfTheWritesHoldsAfterEveryKindOfWrite() throws Exception {
    ActorTestKit kit = kit("document-table-kinds");
    // No cache: every before image of an earlier document is read from the table.
    ActorRef<Command> p = uncached(kit);
    Model model = new Model();
    TestProbe<RowRuleReply> rule = kit.createTestProbe();
    p.tell(new SetRowRule("orders", "owner", 1, rule.ref()));
    rule.receiveMessage(WAIT);
    model.rule("orders", "owner");
    Random random = new Random(7);
    long lsn = 100;
    for (int i = 0; i < 300; i++) {
      String id = Integer.toString(random.nextInt(40));
      String notes = "{\"i\":" + i + "}";
      if (random.nextInt(4) == 0) {
        frame(
            kit,
            p,
            "a" + i,
            List.of(new Delete("orders", id, Optional.empty()), upsert("notes", id, notes)),
            0);
        model.delete("orders", id);
      } else {
        String body = "{\"owner\":\"u" + random.nextInt(3) + "\",\"n\":" + i + ",\"t\":\"日本\"}";
        frame(kit, p, "a" + i, List.of(upsert("orders", id, body), upsert("notes", id, notes)), 0);
        model.upsert("orders", id, body);
      }
      model.upsert("notes", id, notes);
      if (i % 10 == 0) {
        String body = "{\"lsn\":" + lsn + "}";
        frame(kit, p, "c" + i, List.of(upsert("notes", "cdc" + i, body)), lsn);
        model.upsert("notes", "cdc" + i, body);
        lsn++;
      }
      if (i % 50 == 0) {
        assertThat(heap(kit, p)).as("reads after write " + i).isEqualTo(model.rows());
      }
    }
    TestProbe<FrameReply> loaded = kit.createTestProbe();
    List<Upsert> rows = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      rows.add(upsert("loaded", "r" + i, "{\"r\":" + i + "}"));
    }
    p.tell(new LoadRows(List.of(), rows, true, loaded.ref()));
    loaded.receiveMessage(WAIT);
    model.load(List.of(), rows);
    // A reload starting over replaces the collection's documents.
    p.tell(new LoadRows(List.of("loaded"), rows.subList(0, 10), true, loaded.ref()));
    loaded.receiveMessage(WAIT);
    model.load(List.of("loaded"), rows.subList(0, 10));
    frame(kit, p, "truncate", List.of(new Truncate("notes")), lsn++);
    model.truncate("notes");
    assertThat(heap(kit, p)).as("reads before the table caught up").isEqualTo(model.rows());
    caughtUp(kit, p);
    assertThat(table()).as("the table after every kind of write").isEqualTo(model.rows());
    assertThat(heap(kit, p)).isEqualTo(model.rows());
    assertThat(table())
        .as("tombstones keep the owner they are shown by")
        .anyMatch(r -> r.endsWith("|true|\"u1\""));

    // Another rule field: tombstones of the collection lose their ACL, in both places.
    p.tell(new SetRowRule("orders", "tenant", 2, rule.ref()));
    rule.receiveMessage(WAIT);
    model.rule("orders", "tenant");
    assertThat(heap(kit, p)).isEqualTo(model.rows());
    caughtUp(kit, p);
    assertThat(table()).isEqualTo(model.rows());
    assertThat(table()).noneMatch(r -> r.startsWith("orders|") && r.endsWith("|true|\"u1\""));
  }

  private static Map<String, String> acls(ActorTestKit kit, ActorRef<Command> p, List<String> ids) {
    TestProbe<ReadProtocol.Acls> r = kit.createTestProbe();
    p.tell(new ReadProtocol.GetAcls("orders", ids, r.ref()));
    return r.receiveMessage(WAIT).acls();
  }

  /**
   * The current row-visibility values a restricted feed page asks for (ADR 0059) are the model's,
   * whether the partition reads them from the table, from unapplied changes, or remembers them from
   * an earlier read: across updates, deletions, values too long to remember, and rule changes to
   * another field and back (a remembered value counts only under the rule it was read with). A
   * second read of the same versions reads no row the partition could remember.
   */
  @Test
  void currentAclsAreTheModelsWhetherReadOrRemembered() throws Exception {
    ActorTestKit kit = kit("document-table-acls");
    Flaky table = new Flaky();
    ActorRef<Command> p = partition(kit, table, PartitionSettings.DEFAULTS.withBodyCache(0));
    Model model = new Model();
    TestProbe<RowRuleReply> rule = kit.createTestProbe();
    p.tell(new SetRowRule("orders", "owner", 1, rule.ref()));
    rule.receiveMessage(WAIT);
    model.rule("orders", "owner");
    String tooLong = "\"" + "x".repeat(AclMemo.MAX_CHARS) + "\"";
    String[] values = {"\"u0\"", "[\"u1\",\"u2\"]", "7", tooLong, null};
    Random random = new Random(11);
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < 30; i++) {
      ids.add(Integer.toString(i));
    }
    ids.add("never-written");
    ids.add("t");
    int fromTable = 0;
    for (int i = 0; i < 240; i++) {
      String id = Integer.toString(random.nextInt(30));
      if (random.nextInt(5) == 0) {
        frame(kit, p, "d" + i, List.of(new Delete("orders", id, Optional.empty())), 0);
        model.delete("orders", id);
      } else {
        String owner = values[random.nextInt(values.length)];
        String tenant = values[random.nextInt(values.length)];
        String body =
            "{"
                + (owner == null ? "" : "\"owner\":" + owner + ",")
                + (tenant == null ? "" : "\"tenant\":" + tenant + ",")
                + "\"n\":"
                + i
                + "}";
        frame(kit, p, "u" + i, List.of(upsert("orders", id, body)), 0);
        model.upsert("orders", id, body);
      }
      if (i == 100) {
        p.tell(new SetRowRule("orders", "tenant", 2, rule.ref()));
        rule.receiveMessage(WAIT);
        model.rule("orders", "tenant");
      } else if (i == 180) {
        p.tell(new SetRowRule("orders", "owner", 3, rule.ref()));
        rule.receiveMessage(WAIT);
        model.rule("orders", "owner");
      }
      if (i % 20 == 19 || i == 100 || i == 180) {
        if (i % 40 == 39) {
          caughtUp(kit, p); // every document in the table: its value is read there
        }
        Map<String, String> expected = model.currentAcls("orders");
        int before = table.keysRead.get();
        assertThat(acls(kit, p, ids)).as("first read after write " + i).isEqualTo(expected);
        fromTable += table.keysRead.get() - before;
        int first = table.keysRead.get();
        assertThat(acls(kit, p, ids)).as("second read after write " + i).isEqualTo(expected);
        long unremembered = expected.values().stream().filter(tooLong::equals).count();
        assertThat(table.keysRead.get() - first)
            .as("rows read again after write " + i + ": only values too long to remember")
            .isLessThanOrEqualTo((int) unremembered);
      }
    }
    assertThat(fromTable).as("values read from the table's rows").isGreaterThan(0);

    // A tombstone the table holds with the rule's value, remembered; then, with the table's applies
    // failing, a rule change to another field (which clears tombstones' values) and writes wait in
    // the unapplied changes: the values are read from them and from the rows as the partition
    // holds them, not remembered ones.
    frame(kit, p, "t-put", List.of(upsert("orders", "t", "{\"owner\":\"u9\"}")), 0);
    model.upsert("orders", "t", "{\"owner\":\"u9\"}");
    frame(kit, p, "t-delete", List.of(new Delete("orders", "t", Optional.empty())), 0);
    model.delete("orders", "t");
    caughtUp(kit, p);
    assertThat(acls(kit, p, ids))
        .isEqualTo(model.currentAcls("orders"))
        .containsEntry("t", "\"u9\"");
    table.failing.set(true);
    p.tell(new SetRowRule("orders", "tenant", 4, rule.ref()));
    rule.receiveMessage(WAIT);
    model.rule("orders", "tenant");
    for (int i = 0; i < 10; i++) {
      String body = "{\"tenant\":\"k" + (i % 3) + "\",\"n\":" + i + "}";
      frame(kit, p, "f" + i, List.of(upsert("orders", Integer.toString(i), body)), 0);
      model.upsert("orders", Integer.toString(i), body);
    }
    await().atMost(WAIT).until(() -> table.refused.get() > 0); // the table is behind for good
    Map<String, String> pending = model.currentAcls("orders");
    assertThat(pending).containsEntry("t", "null");
    assertThat(acls(kit, p, ids)).as("applies failing, first read").isEqualTo(pending);
    assertThat(acls(kit, p, ids)).as("applies failing, second read").isEqualTo(pending);
    table.failing.set(false);
    caughtUp(kit, p);
    assertThat(acls(kit, p, ids)).as("caught up").isEqualTo(pending);
  }

  @Test
  void aTableThatFailedIsCaughtUpFromTheJournalAcrossARestartFromASnapshot() throws Exception {
    Flaky flaky = new Flaky();
    ActorTestKit first = kit("document-table-first");
    ActorRef<Command> p = partition(first, flaky);
    int frames = SnapshotPolicy.DEFAULT.events() + 30;
    for (int i = 0; i < frames; i++) {
      if (i == SnapshotPolicy.DEFAULT.events() - 40) {
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
    // Applies wait up to TableWriter.APPLY_DELAY for more events.
    await()
        .atMost(WAIT)
        .alias("the failed applies are counted")
        .until(() -> status(first, p).table().failures() > 0);
    PartitionStatus behind = status(first, p);
    assertThat(behind.table().lastError()).contains("SQLState 08006");
    assertThat(behind.table().appliedThrough()).isLessThan(SnapshotPolicy.DEFAULT.events() - 30);
    List<String> expected = heap(first, p);
    Model model = new Model();
    for (int i = 0; i < frames; i++) {
      model.upsert("orders", Integer.toString(i % 70), "{\"i\":" + i + "}");
    }
    assertThat(expected)
        .as("reads while the table failed: every acknowledged write, from memory")
        .isEqualTo(model.rows());
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

  /**
   * PostgreSQL itself refuses the applies (a constraint no row meets, added while an apply waited
   * for the table's lock): once the table is past its lag bound, the write that waited there and
   * every later one are refused {@code table-apply-failed}, typed, instead of waiting for as long
   * as the failure lasts; once an apply succeeds again, writes are accepted and the table catches
   * up with everything the partition acknowledged.
   */
  @Test
  void writesAreRefusedTypedWhileTheTableFailsAtItsLagBoundAndAcceptedOnceItApplies()
      throws Exception {
    ActorTestKit kit = kit("document-table-lag");
    ActorRef<Command> p = partition(kit, new SqlDocumentTable(database.dataSource(), "weir", io));
    caughtUp(kit, p);
    TestProbe<FrameReply> waiting = kit.createTestProbe();
    try (Connection blocker = db.connect()) {
      blocker.setAutoCommit(false);
      try (Statement st = blocker.createStatement()) {
        st.execute("LOCK TABLE weir.documents IN ACCESS EXCLUSIVE MODE");
      }
      // The applies wait for the lock: the unapplied events pile up past the bound.
      for (int i = 0; i < TableWriter.MAX_LAG_EVENTS + 1; i++) {
        frame(kit, p, "w" + i, List.of(upsert("orders", "d" + (i % 10), "{\"i\":" + i + "}")), 0);
      }
      p.tell(
          new ApplyFrame(
              "once:last",
              List.of(upsert("orders", "last", "{}")),
              Optional.empty(),
              waiting.ref()));
      waiting.expectNoMessage(Duration.ofMillis(500));
      assertThat(status(kit, p).table().state())
          .as("slow, not failing: the write waits")
          .isEqualTo("running");
      try (Statement st = blocker.createStatement()) {
        st.execute(
            "ALTER TABLE weir.documents ADD CONSTRAINT weir_it_refuse_rows CHECK (false) NOT VALID");
      }
      blocker.commit();
    }
    FrameReply refused = waiting.receiveMessage(WAIT);
    assertThat(refused)
        .as("the write that waited at the bound, once the apply failed")
        .isInstanceOf(PartitionProtocol.TableApplyFailed.class);
    assertThat(((PartitionProtocol.TableApplyFailed) refused).lagEvents())
        .isGreaterThan(TableWriter.MAX_LAG_EVENTS);
    TestProbe<FrameReply> later = kit.createTestProbe();
    p.tell(
        new ApplyFrame(
            "once:later", List.of(upsert("orders", "later", "{}")), Optional.empty(), later.ref()));
    assertThat(later.receiveMessage(WAIT)).isInstanceOf(PartitionProtocol.TableApplyFailed.class);
    TestProbe<ConsumerProtocol.ConsumerReply> consumer = kit.createTestProbe();
    p.tell(
        new ConsumerProtocol.ConfigureConsumer(
            "agg", 1, List.of("orders"), List.of(), Optional.empty(), consumer.ref()));
    assertThat(consumer.receiveMessage(WAIT))
        .isInstanceOfSatisfying(
            ConsumerProtocol.ConsumerRefused.class,
            r ->
                assertThat(r.refusal())
                    .isEqualTo(ConsumerProtocol.ConsumerRefusal.TABLE_APPLY_FAILED));
    StatusProtocol.TableStatus failed = status(kit, p).table();
    assertThat(failed.state()).isEqualTo("table-apply-failed");
    assertThat(failed.lagEvents()).isGreaterThan(TableWriter.MAX_LAG_EVENTS);
    assertThat(failed.lagBytes()).as("the unapplied images' bytes").isPositive();
    assertThat(failed.failures()).isPositive();
    assertThat(failed.lastError())
        .as("value-free: exception classes and SQLState")
        .contains("23514")
        .doesNotContain("weir_it_refuse_rows");
    List<String> acknowledged = heap(kit, p);

    try (Connection c = db.connect();
        Statement st = c.createStatement()) {
      st.execute("ALTER TABLE weir.documents DROP CONSTRAINT weir_it_refuse_rows");
    }
    // The next retry (5 s apart at most) applies; writes go again.
    await()
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> {
              TestProbe<FrameReply> again = kit.createTestProbe();
              p.tell(
                  new ApplyFrame(
                      "once:again-" + System.nanoTime(),
                      List.of(upsert("orders", "again", "{}")),
                      Optional.empty(),
                      again.ref()));
              FrameReply r = again.receiveMessage(WAIT);
              if (!(r instanceof PartitionProtocol.TableApplyFailed)) {
                assertThat(r).isInstanceOf(PartitionProtocol.Applied.class);
                return true;
              }
              return false;
            });
    caughtUp(kit, p);
    assertThat(table()).isEqualTo(heap(kit, p));
    assertThat(table())
        .as("everything acknowledged while the table failed, and nothing refused")
        .containsAll(acknowledged)
        .noneMatch(row -> row.startsWith("orders|later|") || row.startsWith("orders|last|"));
  }

  /**
   * A partition whose table cannot be caught up at its start is not ready; rather than leave its
   * writes waiting for as long as that lasts, it refuses them {@code table-apply-failed} after a
   * few failed attempts, and a row-rule change sent beside them waits instead of being dropped;
   * once an attempt succeeds, the partition starts and writes go on.
   */
  @Test
  void writesAreRefusedTypedWhileTheTableCannotBeCaughtUpAtAStart() throws Exception {
    Flaky flaky = new Flaky();
    flaky.failing.set(true);
    ActorTestKit kit = kit("document-table-start-failing");
    ActorRef<Command> p = partition(kit, flaky);
    TestProbe<PartitionProtocol.RowRuleReply> rule = kit.createTestProbe();
    TestProbe<FrameReply> refused = kit.createTestProbe();
    await()
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> {
              p.tell(
                  new ApplyFrame(
                      "once:start-" + System.nanoTime(),
                      List.of(upsert("orders", "s", "{}")),
                      Optional.empty(),
                      refused.ref()));
              return refused.receiveMessage(WAIT) instanceof PartitionProtocol.TableApplyFailed;
            });
    StatusProtocol.TableStatus failed = status(kit, p).table();
    assertThat(failed.state()).isEqualTo("table-apply-failed");
    assertThat(failed.failures()).isGreaterThanOrEqualTo(TableWriter.STARTING_FAILURES_REFUSED);
    p.tell(
        new Partition.WriteBatch(
            List.of(
                new PartitionProtocol.SetRowRule("orders", "owner", 1, rule.ref()),
                new ApplyFrame(
                    "once:beside-rule",
                    List.of(upsert("orders", "r", "{}")),
                    Optional.empty(),
                    refused.ref())),
            null));
    assertThat(refused.receiveMessage(WAIT)).isInstanceOf(PartitionProtocol.TableApplyFailed.class);
    rule.expectNoMessage(Duration.ofMillis(500));
    flaky.failing.set(false);
    assertThat(rule.receiveMessage(WAIT))
        .as("the row-rule change waited for the start and was written")
        .isNotNull();
    frame(kit, p, "after", List.of(upsert("orders", "a", "{}")), 0);
    caughtUp(kit, p);
    assertThat(table()).isEqualTo(heap(kit, p));
  }

  @Test
  void receiptsAreKeptInTheTableAcrossANewActorSystemAndExpiredOnesDeleted() throws Exception {
    PartitionSettings settings = PartitionSettings.DEFAULTS.withReceipts(60_000, 2);
    ActorTestKit first = kit("document-table-receipts");
    ActorRef<Command> p =
        partition(first, new SqlDocumentTable(database.dataSource(), "weir", io), settings);
    for (int i = 0; i < 8; i++) {
      assertThat(keyed(first, p, i))
          .isEqualTo(new PartitionProtocol.Applied(command(i), i + 1, List.of(1L), false));
    }
    caughtUp(first, p);
    first.shutdownTestKit();
    kits.remove(first);
    assertThat(count("SELECT count(*) FROM weir.receipts")).isEqualTo(8);
    ActorTestKit second = kit("document-table-receipts-again");
    ActorRef<Command> again =
        partition(second, new SqlDocumentTable(database.dataSource(), "weir", io), settings);
    assertThat(keyed(second, again, 0))
        .as("a retry of the first, long out of the heap: its receipt from the table")
        .isEqualTo(new PartitionProtocol.Applied(command(0), 1, List.of(1L), true));

    // Receipts past their time leave the table with the next apply.
    ActorTestKit third = kit("document-table-receipts-expiry");
    second.shutdownTestKit();
    kits.remove(second);
    ActorRef<Command> expiring =
        partition(
            third,
            new SqlDocumentTable(database.dataSource(), "weir", io),
            PartitionSettings.DEFAULTS.withReceipts(500, 2));
    await()
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> {
              frame(
                  third,
                  expiring,
                  "tick-" + System.nanoTime(),
                  List.of(upsert("orders", "t", "{}")),
                  0);
              return count("SELECT count(*) FROM weir.receipts") == 0;
            });
  }

  @Test
  void keyedWritesTheReceiptFilterRulesOutReadNothingAndRetriesStillReplay() throws Exception {
    PartitionSettings settings = PartitionSettings.DEFAULTS.withReceipts(60_000, 2);
    ActorTestKit first = kit("document-table-receipt-filter");
    Flaky table = new Flaky();
    ReceiptLookups lookups = new ReceiptLookups();
    ActorRef<Command> p = partition(first, table, settings, lookups);
    for (int i = 0; i < 8; i++) {
      assertThat(keyed(first, p, i))
          .isEqualTo(new PartitionProtocol.Applied(command(i), i + 1, List.of(1L), false));
    }
    assertThat(table.receiptLookups.get())
        .as("a new partition's filter knows every receipt: new keys are not looked up")
        .isZero();
    assertThat(lookups.ruledOut.get())
        .as("reported: the keys written once two receipts had left the heap, ruled out")
        .isEqualTo(5);
    assertThat(lookups.read.get()).isZero();
    caughtUp(first, p);
    assertThat(keyed(first, p, 0))
        .as("a retry of a receipt out of the heap")
        .isEqualTo(new PartitionProtocol.Applied(command(0), 1, List.of(1L), true));
    assertThat(table.receiptLookups.get()).as("looked up in the table").isEqualTo(1);
    assertThat(lookups.read.get()).as("reported: one read of the receipts table").isEqualTo(1);
    caughtUp(first, p);
    first.shutdownTestKit();
    kits.remove(first);

    ActorTestKit second = kit("document-table-receipt-filter-again");
    Flaky again = new Flaky();
    ActorRef<Command> q = partition(second, again, settings);
    untilNewKeysAreNotLookedUp(second, q, again);
    assertThat(keyed(second, q, 1))
        .as("a retry of a receipt only the table holds: the filter learnt it from the table")
        .isEqualTo(new PartitionProtocol.Applied(command(1), 2, List.of(1L), true));
  }

  /**
   * A failed read of the receipts for a partition's filter is tried again (after 2 s): the filter
   * completes and new keys are no longer looked up.
   */
  @Test
  void aFailedReceiptReadIsTriedAgain() throws Exception {
    PartitionSettings settings = receiptsLeftTheHeap("document-table-receipt-retry");
    ActorTestKit second = kit("document-table-receipt-retry-again");
    Flaky failing = new Flaky();
    failing.failReceiptReads.set(1);
    ActorRef<Command> again = partition(second, failing, settings);
    untilNewKeysAreNotLookedUp(second, again, failing);
    assertThat(failing.failReceiptReads.get()).as("the first read failed").isZero();
    assertThat(keyed(second, again, 1))
        .as("a retry of a receipt only the table holds, known to the filter from the second read")
        .isEqualTo(new PartitionProtocol.Applied(command(1), 2, List.of(1L), true));
  }

  /**
   * An answer to another read of the receipts than the one the partition waits for is ignored
   * (issue 22): the filter stays incomplete, so a retry whose receipt only the table holds is still
   * looked up and replayed, not written a second time. Completing the filter with that answer
   * (empty) would rule the key out and write the retry again.
   */
  @Test
  void anAnswerToAnotherReceiptReadIsIgnored() throws Exception {
    HeldRead h = heldReceiptRead("document-table-stale-read");
    ActorTestKit second = h.kit();
    ActorRef<Command> again = h.partition();
    again.tell(new Partition.ReceiptsLoaded(42, 0, null, 1));
    assertThat(keyed(second, again, 1))
        .as("a retry of a receipt only the table holds, while the awaited read still runs")
        .isEqualTo(new PartitionProtocol.Applied(command(1), 2, List.of(1L), true));
  }

  /** A read of the receipts for a partition's filter is not wanted any more once it stopped. */
  @Test
  void aStoppedPartitionsReceiptReadIsNotWanted() throws Exception {
    HeldRead h = heldReceiptRead("document-table-receipt-read");
    Flaky held = h.table();
    assertThat(held.heldRead.get().wanted()).isTrue();
    h.kit().stop(h.partition());
    await().atMost(WAIT).until(() -> !held.heldRead.get().wanted());
  }

  /** A partition whose read of the receipts table for its filter is held, never ending. */
  private record HeldRead(ActorTestKit kit, Flaky table, ActorRef<Command> partition) {}

  /**
   * Receipts left the heap in a first actor system ({@link #receiptsLeftTheHeap}); the partition
   * started again in a second one has written a new key and its filter's read of the receipts table
   * is held.
   */
  private HeldRead heldReceiptRead(String name) throws Exception {
    PartitionSettings settings = receiptsLeftTheHeap(name);
    ActorTestKit second = kit(name + "-again");
    Flaky held = new Flaky();
    held.holdReceiptReads.set(true);
    ActorRef<Command> again = partition(second, held, settings);
    assertThat(keyed(second, again, 9)).isInstanceOf(PartitionProtocol.Applied.class);
    await().atMost(WAIT).until(() -> held.heldRead.get() != null);
    return new HeldRead(second, held, again);
  }

  /**
   * Writes four keyed documents to the partition in an actor system of its own ({@code name}), two
   * receipts kept in the heap: the other two are in the receipts table only. Returns the settings.
   */
  private PartitionSettings receiptsLeftTheHeap(String name) throws Exception {
    PartitionSettings settings = PartitionSettings.DEFAULTS.withReceipts(60_000, 2);
    ActorTestKit kit = kit(name);
    ActorRef<Command> p = partition(kit, new Flaky(), settings);
    for (int i = 0; i < 4; i++) {
      assertThat(keyed(kit, p, i)).isInstanceOf(PartitionProtocol.Applied.class);
    }
    caughtUp(kit, p);
    kit.shutdownTestKit();
    kits.remove(kit);
    return settings;
  }

  /**
   * Writes new keys until one is planned without a look-up in {@code table}: until the receipt
   * filter has read the receipts table, new keys are looked up; then they are not.
   */
  private static void untilNewKeysAreNotLookedUp(
      ActorTestKit kit, ActorRef<Command> p, Flaky table) {
    AtomicInteger next = new AtomicInteger(100);
    await()
        .atMost(WAIT)
        .until(
            () -> {
              int before = table.receiptLookups.get();
              assertThat(keyed(kit, p, next.getAndIncrement()))
                  .isInstanceOf(PartitionProtocol.Applied.class);
              return table.receiptLookups.get() == before;
            });
  }

  private static String command(int i) {
    return "api2:caller-" + i + ":request";
  }

  private static FrameReply keyed(ActorTestKit kit, ActorRef<Command> p, int i) {
    TestProbe<FrameReply> reply = kit.createTestProbe();
    p.tell(
        new ApplyFrame(
            command(i), List.of(upsert("orders", "k" + i, "{}")), Optional.empty(), reply.ref()));
    return reply.receiveMessage(WAIT);
  }

  private long count(String query) throws SQLException {
    try (Connection c = db.connect();
        ResultSet rs = c.createStatement().executeQuery(query)) {
      rs.next();
      return rs.getLong(1);
    }
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

  @Test
  void appliesLostByACrashOfPostgresAreReplayedWhenAReadFindsTheRowBehind() throws Exception {
    ActorTestKit kit = kit("document-table-lost-apply");
    ActorRef<Command> p = withLostSecondApply(kit);
    // The first read is not answered (never the older body); the writer replays the lost event.
    TestProbe<DocumentReply> lost = kit.createTestProbe();
    p.tell(new GetDocument("orders", "1", lost.ref()));
    lost.expectNoMessage(Duration.ofSeconds(1));
    await()
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(200))
        .untilAsserted(
            () -> {
              TestProbe<DocumentReply> r = kit.createTestProbe();
              p.tell(new GetDocument("orders", "1", r.ref()));
              DocumentReply reply = r.receiveMessage(Duration.ofSeconds(2));
              assertThat(reply.document()).isPresent();
              assertThat(reply.document().get().body()).isEqualTo("{\"v\":2}");
            });
    assertThat(table()).containsExactly(row("orders", "1", 2, "{\"v\":2}", false, null));
  }

  /**
   * Reads of many documents after the same loss: a page and a collection scan read the table below
   * the position the partition knew of, and the event between is no longer among its unapplied
   * changes, so merging those would serve the older body (and the scan would name the outbox tail
   * as its baseline, losing the change for a live query for good). Neither is answered until the
   * writer has replayed the lost event; then both serve the acknowledged body.
   */
  @Test
  void appliesLostByACrashOfPostgresAreNeverServedByPagesOrScans() throws Exception {
    ActorTestKit kit = kit("document-table-lost-apply-pages");
    ActorRef<Command> p = withLostSecondApply(kit);
    TestProbe<DocumentsReply> page = kit.createTestProbe();
    p.tell(new GetDocuments("orders", null, 10, page.ref()));
    TestProbe<ReadProtocol.CollectionScan> scan = kit.createTestProbe();
    p.tell(new ReadProtocol.ScanCollection("orders", 1L << 20, scan.ref()));
    page.expectNoMessage(Duration.ofSeconds(1));
    scan.expectNoMessage(Duration.ofMillis(200));
    awaitPageOfOne(kit, p, "{\"v\":2}");
    TestProbe<ReadProtocol.CollectionScan> again = kit.createTestProbe();
    p.tell(new ReadProtocol.ScanCollection("orders", 1L << 20, again.ref()));
    assertThat(again.receiveMessage(WAIT).documents())
        .extracting(Document::body)
        .containsExactly("{\"v\":2}");
  }

  /**
   * The same loss right after a restart, before any apply of the new incarnation: the position the
   * partition knows of comes from its catch-up at start ({@code Unapplied.caughtUp}), so a page
   * that reads the rewound table is not answered until the writer replayed the lost event.
   */
  @Test
  void appliesLostRightAfterARestartAreNeverServedByPages() throws Exception {
    ActorTestKit kit = kit("document-table-lost-after-restart");
    ActorRef<Command> p = uncached(kit);
    frame(kit, p, "r1", List.of(upsert("orders", "1", "{\"v\":1}")), 0);
    long first = caughtUp(kit, p).journalEvents();
    frame(kit, p, "r2", List.of(upsert("orders", "1", "{\"v\":2}")), 0);
    caughtUp(kit, p);
    kit.stop(p);
    ActorRef<Command> again = uncached(kit);
    caughtUp(kit, again);
    rewind("applied_through = " + first, "1", "{\"v\":1}", Long.toString(first));
    TestProbe<DocumentsReply> page = kit.createTestProbe();
    again.tell(new GetDocuments("orders", null, 10, page.ref()));
    page.expectNoMessage(Duration.ofSeconds(1));
    awaitPageOfOne(kit, again, "{\"v\":2}");
  }

  /**
   * The same loss found by the next apply rather than by a read: the table's position is behind the
   * event the apply follows ({@link DocumentTable.TableGap}), so the writer replays the lost event
   * from the journal first, then applies the new one; no read is involved.
   */
  @Test
  void appliesLostByACrashOfPostgresAreReplayedWhenTheNextApplyFindsTheGap() throws Exception {
    ActorTestKit kit = kit("document-table-lost-apply-gap");
    ActorRef<Command> p = withLostSecondApply(kit);
    frame(kit, p, "other", List.of(upsert("orders", "2", "{\"w\":1}")), 0);
    caughtUp(kit, p);
    assertThat(table())
        .containsExactly(
            row("orders", "1", 2, "{\"v\":2}", false, null),
            row("orders", "2", 1, "{\"w\":1}", false, null));
  }

  /**
   * Applies lost by a crash of PostgreSQL across a row-rule change are replayed with the rules of
   * the table's own position: a tombstone written before the change keeps the row-visibility value
   * of the rule then, and the change clears it, as when they were first applied.
   */
  @Test
  void aGapIsReplayedWithTheRulesOfTheTablesPosition() throws Exception {
    ActorTestKit kit = kit("document-table-lost-rule");
    ActorRef<Command> p = uncached(kit);
    TestProbe<RowRuleReply> rule = kit.createTestProbe();
    p.tell(new SetRowRule("orders", "owner", 1, rule.ref()));
    rule.receiveMessage(WAIT);
    frame(kit, p, "v1", List.of(upsert("orders", "1", "{\"owner\":\"a\",\"team\":\"x\"}")), 0);
    caughtUp(kit, p);
    List<String> before = table();
    String position = position();
    String rowSeq = one("SELECT journal_seq FROM weir.documents WHERE partition_id = " + P);
    // Then a delete (its tombstone shown by its owner) and a rule on another field (which clears
    // tombstones' values) are applied, and lost with a crash that rewinds row and position.
    frame(kit, p, "d1", List.of(new Delete("orders", "1", Optional.empty())), 0);
    p.tell(new SetRowRule("orders", "team", 2, rule.ref()));
    rule.receiveMessage(WAIT);
    caughtUp(kit, p);
    List<String> applied = table();
    String appliedPosition = position();
    assertThat(applied).containsExactly(row("orders", "1", 2, null, true, null));
    rewind(position, "1", "{\"owner\":\"a\",\"team\":\"x\"}", rowSeq);
    assertThat(table()).isEqualTo(before);
    // A read finds the row behind the index; the writer replays the lost events from the journal.
    untilReplayed(kit, p, "1", applied);
    assertThat(position()).as("position, rules and outbox sequence").isEqualTo(appliedPosition);

    // A delete alone lost under the rule that still holds: its tombstone keeps that rule's value.
    frame(kit, p, "v2", List.of(upsert("orders", "2", "{\"team\":\"y\"}")), 0);
    caughtUp(kit, p);
    position = position();
    rowSeq = one("SELECT journal_seq FROM weir.documents WHERE id = '2' AND partition_id = " + P);
    frame(kit, p, "d2", List.of(new Delete("orders", "2", Optional.empty())), 0);
    caughtUp(kit, p);
    List<String> deleted = table();
    assertThat(deleted).contains(row("orders", "2", 2, null, true, "\"y\""));
    appliedPosition = position();
    rewind(position, "2", "{\"team\":\"y\"}", rowSeq);
    untilReplayed(kit, p, "2", deleted);
    assertThat(position()).isEqualTo(appliedPosition);
  }

  /** A gap wider than a catch-up chunk (256 events) is replayed in chunks, to the last event. */
  @Test
  void aGapWiderThanAChunkIsReplayedWhole() throws Exception {
    ActorTestKit kit = kit("document-table-lost-many");
    ActorRef<Command> p = uncached(kit);
    frame(kit, p, "w0", List.of(upsert("orders", "1", "{\"n\":0}")), 0);
    caughtUp(kit, p);
    String position = position();
    String rowSeq = one("SELECT journal_seq FROM weir.documents WHERE partition_id = " + P);
    int events = TableWriter.CATCH_UP_CHUNK + 44;
    for (int i = 1; i <= events; i++) {
      frame(kit, p, "w" + i, List.of(upsert("orders", "1", "{\"n\":" + i + "}")), 0);
    }
    caughtUp(kit, p);
    List<String> applied = table();
    assertThat(applied)
        .containsExactly(row("orders", "1", events + 1, "{\"n\":" + events + "}", false, null));
    String appliedPosition = position();
    rewind(position, "1", "{\"n\":0}", rowSeq);
    untilReplayed(kit, p, "1", applied);
    assertThat(position()).isEqualTo(appliedPosition);
  }

  /**
   * Reads document {@code id} of orders until the table holds {@code rows}: a read that finds the
   * row behind the index has the writer replay the lost events (at most once a second).
   */
  private void untilReplayed(ActorTestKit kit, ActorRef<Command> p, String id, List<String> rows) {
    await()
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(200))
        .untilAsserted(
            () -> {
              p.tell(new GetDocument("orders", id, kit.<DocumentReply>createTestProbe().ref()));
              assertThat(table()).isEqualTo(rows);
            });
  }

  /** The partition's position row as SQL assignments (to rewind it to). */
  private String position() throws SQLException {
    return one(
        "SELECT 'applied_through = ' || applied_through || ', rule_fields = '"
            + " || quote_literal(rule_fields) || ', outbox_next = ' || outbox_next"
            + " FROM weir.document_positions WHERE partition_id = "
            + P);
  }

  /**
   * What a crash of PostgreSQL that lost the last applies leaves: the position as it was ({@link
   * #position()}), document {@code id} of orders live with revision 1, {@code body} and {@code
   * journalSeq}.
   */
  /**
   * A partition (no body cache) that wrote orders/1 twice, whose second apply was committed without
   * waiting for its flush and lost by a crash of PostgreSQL: the row and the table's position as
   * they were after the first.
   */
  /** Waits until a page of "orders" holds exactly one document, of {@code body}. */
  private static void awaitPageOfOne(ActorTestKit kit, ActorRef<Command> p, String body) {
    await()
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(200))
        .untilAsserted(
            () -> {
              TestProbe<DocumentsReply> r = kit.createTestProbe();
              p.tell(new GetDocuments("orders", null, 10, r.ref()));
              assertThat(r.receiveMessage(Duration.ofSeconds(2)).documents())
                  .extracting(Document::body)
                  .containsExactly(body);
            });
  }

  private ActorRef<Command> withLostSecondApply(ActorTestKit kit) throws SQLException {
    ActorRef<Command> p = uncached(kit);
    frame(kit, p, "v1", List.of(upsert("orders", "1", "{\"v\":1}")), 0);
    long first = caughtUp(kit, p).journalEvents();
    frame(kit, p, "v2", List.of(upsert("orders", "1", "{\"v\":2}")), 0);
    assertThat(caughtUp(kit, p).journalEvents()).isGreaterThan(first);
    rewind("applied_through = " + first, "1", "{\"v\":1}", Long.toString(first));
    return p;
  }

  private void rewind(String position, String id, String body, String journalSeq)
      throws SQLException {
    sql(
        "UPDATE weir.documents SET body = '"
            + body
            + "', revision = 1, deleted = false, acl = NULL, journal_seq = "
            + journalSeq
            + " WHERE collection = 'orders' AND id = '"
            + id
            + "' AND partition_id = "
            + P);
    sql("UPDATE weir.document_positions SET " + position + " WHERE partition_id = " + P);
  }
}
