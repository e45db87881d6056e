package io.weir.persistence.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.CheckpointStore;
import io.weir.persistence.cdc.sink.CheckpointedSink;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.persistence.cdc.sink.SinkException;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.persistence.cdc.source.StartMode;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.OldTupleKind;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The CDC pipeline against a real PostgreSQL: delivery of every DML kind, schema faults, slot
 * rules.
 */
class CdcPipelineIT extends PipelineITBase {
  private static final org.slf4j.Logger LOG =
      org.slf4j.LoggerFactory.getLogger(CdcPipelineIT.class);

  @Override
  protected String harnessName() {
    return "cdc_it";
  }

  @BeforeEach
  void setUp() throws Exception {
    sql(
        "CREATE TABLE items (id int PRIMARY KEY, name text, price numeric, note text)",
        "CREATE TABLE tags (id int PRIMARY KEY, label text)",
        "CREATE TABLE fulls (id int PRIMARY KEY, v text)",
        "ALTER TABLE fulls REPLICA IDENTITY FULL",
        "CREATE TABLE quiet (id int PRIMARY KEY)",
        "CREATE TABLE unpublished (id serial PRIMARY KEY, payload text)",
        "CREATE PUBLICATION pub FOR TABLE items, tags, fulls",
        "CREATE PUBLICATION quiet_pub FOR TABLE quiet");
  }

  private ActorRef<CdcPipeline.Command> start(PipelineSettings settings, ChangeSink sink) {
    return h.start(source, settings, sink);
  }

  private PipelineStatus awaitState(ActorRef<CdcPipeline.Command> p, String state) {
    return h.awaitState(p, state, Duration.ofSeconds(60));
  }

  private PipelineSettings settings() {
    return PipelineSettings.of("p_" + slot, slot, List.of("pub"))
        .withStatusInterval(Duration.ofSeconds(1));
  }

  private static String text(io.weir.protocol.pgoutput.TupleData row, int column) {
    return row.isNull(column) ? null : row.text(column);
  }

  @Test
  void deliversCommittedTransactionsWithEveryKindOfChange() throws Exception {
    RecordingSink sink = new RecordingSink(true);
    ActorRef<CdcPipeline.Command> p = start(settings().withMessages(true), sink);
    awaitState(p, "running");
    String bigNote = "n".repeat(200_000);
    sql(
        "BEGIN; INSERT INTO items VALUES (1, 'one', 1.5, NULL), (2, 'two', 2, 'short'); INSERT INTO tags VALUES (1, 'a'); COMMIT",
        "BEGIN; INSERT INTO items VALUES (99, 'rolled back', 0, NULL); ROLLBACK",
        "UPDATE items SET price = 3.25 WHERE id = 1",
        "UPDATE items SET id = 3 WHERE id = 2",
        "INSERT INTO items VALUES (10, 'toast', 1, '" + bigNote + "')",
        "UPDATE items SET price = 5 WHERE id = 10",
        "DELETE FROM items WHERE id = 1",
        "INSERT INTO fulls VALUES (1, 'full-before')",
        "UPDATE fulls SET v = 'full-after' WHERE id = 1",
        "DELETE FROM fulls WHERE id = 1",
        "TRUNCATE tags",
        "BEGIN; INSERT INTO tags VALUES (7, 'with message'); SELECT pg_logical_emit_message(true, 'weir-test', 'hello'); COMMIT",
        "ALTER TABLE items ADD COLUMN extra int",
        "INSERT INTO items VALUES (20, 'after-add', 1, NULL, 42)");
    await("12 committed transactions delivered")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() >= 12);
    List<Transaction> t = sink.applied();
    assertThat(t)
        .as("the rolled-back transaction and the DDL deliver nothing; every commit once")
        .hasSize(12);
    for (int i = 1; i < t.size(); i++) {
      assertThat(t.get(i).commitLsn())
          .as("transactions arrive in commit order")
          .isGreaterThan(t.get(i - 1).commitLsn());
    }
    // 1: multi-table insert
    assertThat(t.get(0).changes()).hasSize(3);
    Change.Insert first = (Change.Insert) t.get(0).changes().asList().get(0);
    assertThat(first.table().qualifiedName()).isEqualTo("public.items");
    assertThat(first.table().columnNames()).containsExactly("id", "name", "price", "note");
    assertThat(text(first.newRow(), 1)).isEqualTo("one");
    assertThat(first.newRow().isNull(3)).isTrue();
    assertThat(((Change.Insert) t.get(0).changes().asList().get(2)).table().table())
        .isEqualTo("tags");
    // 2: plain update, key unchanged: no old tuple
    Change.Update priceUpdate = (Change.Update) t.get(1).changes().asList().get(0);
    assertThat(priceUpdate.oldKind()).isEqualTo(OldTupleKind.NONE);
    assertThat(text(priceUpdate.newRow(), 2)).isEqualTo("3.25");
    // 3: key change carries the old key
    Change.Update keyChange = (Change.Update) t.get(2).changes().asList().get(0);
    assertThat(keyChange.oldKind()).isEqualTo(OldTupleKind.KEY);
    assertThat(text(keyChange.oldRow(), 0)).isEqualTo("2");
    assertThat(text(keyChange.newRow(), 0)).isEqualTo("3");
    // 5: unchanged TOAST column is named, not sent
    Change.Update toast = (Change.Update) t.get(4).changes().asList().get(0);
    assertThat(toast.unchangedToastColumns()).containsExactly("note");
    assertThat(((Change.Insert) t.get(3).changes().asList().get(0)).newRow().text(3))
        .hasSize(200_000);
    // 6: delete by key
    Change.Delete delete = (Change.Delete) t.get(5).changes().asList().get(0);
    assertThat(delete.oldKind()).isEqualTo(OldTupleKind.KEY);
    assertThat(text(delete.oldRow(), 0)).isEqualTo("1");
    // 8, 9: REPLICA IDENTITY FULL carries the whole old row
    Change.Update fullUpdate = (Change.Update) t.get(7).changes().asList().get(0);
    assertThat(fullUpdate.oldKind()).isEqualTo(OldTupleKind.FULL);
    assertThat(text(fullUpdate.oldRow(), 1)).isEqualTo("full-before");
    Change.Delete fullDelete = (Change.Delete) t.get(8).changes().asList().get(0);
    assertThat(fullDelete.oldKind()).isEqualTo(OldTupleKind.FULL);
    assertThat(text(fullDelete.oldRow(), 1)).isEqualTo("full-after");
    // 10: truncate
    Change.Truncate truncate = (Change.Truncate) t.get(9).changes().asList().get(0);
    assertThat(truncate.tables()).extracting(s -> s.table()).containsExactly("tags");
    // 11: transactional message inside the transaction
    Change.Message message = (Change.Message) t.get(10).changes().asList().get(1);
    assertThat(message.prefix()).isEqualTo("weir-test");
    assertThat(new String(message.content(), StandardCharsets.UTF_8)).isEqualTo("hello");
    assertThat(message.toString())
        .as("a message's toString hides its content")
        .doesNotContain("hello");
    // 12: the added column is announced with the first transaction that uses it
    Transaction afterAdd = t.get(11);
    assertThat(afterAdd.schemaChanges()).hasSize(1);
    assertThat(afterAdd.schemaChanges().get(0).columnNames())
        .containsExactly("id", "name", "price", "note", "extra");
    assertThat(text(((Change.Insert) afterAdd.changes().asList().get(0)).newRow(), 4))
        .isEqualTo("42");

    PipelineStatus s = status(p);
    assertThat(s.state()).isEqualTo("running");
    assertThat(s.transactions()).isEqualTo(12);
    await("confirmed position reaches the last commit")
        .atMost(Duration.ofSeconds(30))
        .until(() -> Lsn.parse(status(p).confirmedLsn()).compareTo(afterAdd.endLsn()) >= 0);
  }

  @Test
  void nonTransactionalMessagesGoToTheirCallbackInWalOrderAndAreOptIn() throws Exception {
    PipelineStatus refused =
        awaitState(start(settings().withMessages(true), new RecordingSink(false)), "halted");
    assertThat(refused.reason())
        .as("messages on with a sink lacking the callback")
        .isEqualTo("conflicting-options");

    RecordingSink sink = new RecordingSink(true);
    ActorRef<CdcPipeline.Command> p = start(settings().withMessages(true), sink);
    awaitState(p, "running");
    sql(
        "INSERT INTO items VALUES (1, 'before', 1, NULL)",
        "SELECT pg_logical_emit_message(false, 'audit', 'standalone-content')",
        "BEGIN; INSERT INTO items VALUES (2, 'rolled back', 1, NULL); SELECT pg_logical_emit_message(false, 'audit', 'survives-rollback'); ROLLBACK",
        "INSERT INTO items VALUES (3, 'after', 1, NULL)");
    await("two transactions and two messages")
        .atMost(Duration.ofSeconds(30))
        .until(() -> sink.applied().size() == 2 && sink.messages().size() == 2);
    assertThat(sink.messages())
        .extracting(m -> new String(m.content(), StandardCharsets.UTF_8))
        .as("non-transactional messages arrive even from a rolled-back transaction")
        .containsExactly("standalone-content", "survives-rollback");
    assertThat(sink.messages().get(0).lsn()).isGreaterThan(sink.applied().get(0).commitLsn());
    assertThat(sink.messages().get(1).lsn()).isLessThan(sink.applied().get(1).commitLsn());
    await("the confirmed position passes the last transaction")
        .atMost(Duration.ofSeconds(30))
        .until(
            () ->
                Lsn.parse(status(p).confirmedLsn()).compareTo(sink.applied().get(1).endLsn()) >= 0);
  }

  @Test
  void droppedColumnHaltsFailClosed() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(), sink);
    awaitState(p, "running");
    sql("INSERT INTO items VALUES (1, 'one', 1, NULL)");
    await().atMost(Duration.ofSeconds(30)).until(() -> sink.applied().size() == 1);
    sql(
        "ALTER TABLE items DROP COLUMN note",
        "INSERT INTO items VALUES (2, 'secret-canary-value', 1)");
    PipelineStatus s = awaitState(p, "halted");
    assertThat(s.reason()).isEqualTo("schema-incompatible");
    assertThat(s.detail()).contains("public.items").doesNotContain("secret-canary-value");
    assertThat(sink.applied()).as("nothing after the incompatible change is delivered").hasSize(1);
  }

  @Test
  void aColumnDroppedWhileThePipelineWasStoppedStillHalts() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(), sink);
    awaitState(p, "running");
    sql("INSERT INTO items VALUES (1, 'one', 1, NULL)");
    await().atMost(Duration.ofSeconds(30)).until(() -> sink.applied().size() == 1);
    await("the accepted shape is recorded")
        .atMost(Duration.ofSeconds(10))
        .until(
            () -> {
              try (Connection c = db.connect();
                  ResultSet rs =
                      c.createStatement()
                          .executeQuery(
                              "SELECT count(*) FROM weir.cdc_relation WHERE qualified = 'public.items'")) {
                rs.next();
                return rs.getInt(1) == 1;
              }
            });
    var probe = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Stop(probe.ref()));
    probe.receiveMessage();
    sql("ALTER TABLE items DROP COLUMN note", "INSERT INTO items VALUES (2, 'two', 1)");
    p.tell(new CdcPipeline.Start(probe.ref()));
    probe.receiveMessage();
    PipelineStatus s = awaitState(p, "halted");
    assertThat(s.reason())
        .as("judged against the shape recorded by the previous run")
        .isEqualTo("schema-incompatible");
    assertThat(sink.applied()).hasSize(1);
  }

  @Test
  void refusesBadSetupsWithTypedReasons() throws Exception {
    PipelineStatus invalid =
        awaitState(
            start(
                PipelineSettings.of("p_bad", "Bad-Slot;drop", List.of("pub")), new RecordingSink()),
            "halted");
    assertThat(invalid.reason()).isEqualTo("invalid-identifier");
    assertThat(invalid.detail()).contains("slot name").doesNotContain("Bad-Slot");

    PipelineStatus missing =
        awaitState(
            start(
                PipelineSettings.of("p_nopub", slot, List.of("pub", "no_such_pub")),
                new RecordingSink()),
            "halted");
    assertThat(missing.reason()).isEqualTo("publication-missing");

    PipelineStatus resume =
        awaitState(
            start(settings().withStartMode(StartMode.RESUME), new RecordingSink()), "halted");
    assertThat(resume.reason()).isEqualTo("slot-missing");

    PipelineStatus failover =
        awaitState(start(settings().withFailover(true), new RecordingSink()), "halted");
    assertThat(failover.reason()).isEqualTo("failover-unsupported");

    CheckpointedSink checkpointed =
        new CheckpointedSink(
            t -> java.util.concurrent.CompletableFuture.completedFuture(null),
            new CheckpointStore(state.dataSource(), "weir"),
            Runnable::run,
            1,
            Duration.ofMillis(10),
            1,
            CheckpointedSink.DEFAULT_MAX_DELAY);
    PipelineStatus conflicting =
        awaitState(
            start(settings().withBatching(10, Duration.ofMillis(50)), checkpointed), "halted");
    assertThat(conflicting.reason())
        .as("batch delivery with the library checkpoint store is refused")
        .isEqualTo("conflicting-options");

    sql("CREATE PUBLICATION everything FOR ALL TABLES");
    PipelineStatus feedBack =
        awaitState(
            start(PipelineSettings.of("p_all", slot, List.of("everything")), new RecordingSink()),
            "halted");
    assertThat(feedBack.reason()).isEqualTo("publication-feeds-back");

    sql(
        "CREATE SCHEMA mirror",
        "CREATE TABLE mirror.items (id int PRIMARY KEY)",
        "CREATE PUBLICATION mirror_pub FOR TABLE mirror.items");
    PipelineStatus target =
        awaitState(
            start(
                PipelineSettings.of("p_mirror", slot, List.of("mirror_pub"))
                    .withExcludedSchemas(List.of("weir", "mirror")),
                new RecordingSink()),
            "halted");
    assertThat(target.reason()).isEqualTo("publication-feeds-back");
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()")) {
      rs.next();
      assertThat(rs.getInt(1)).as("no refused pipeline may create a slot").isZero();
    }
  }

  @Test
  void slotLostAfterACheckpointHaltsAndIsNotRecreated() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(), sink);
    awaitState(p, "running");
    sql("INSERT INTO items VALUES (1, 'one', 1, NULL)");
    await().atMost(Duration.ofSeconds(30)).until(() -> sink.applied().size() == 1);
    var probe = kit.<PipelineStatus>createTestProbe();
    stopAndAwaitSlotReleased(p);
    sql("SELECT pg_drop_replication_slot('" + slot + "')");
    p.tell(new CdcPipeline.Start(probe.ref()));
    probe.receiveMessage();
    PipelineStatus s = awaitState(p, "halted");
    assertThat(s.reason()).isEqualTo("slot-lost");
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()")) {
      rs.next();
      assertThat(rs.getInt(1)).as("a lost slot is never recreated silently").isZero();
    }
  }

  @Test
  void aRecordedSlotIsNeverReplacedSilently() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(), sink);
    awaitState(p, "running");
    stopAndAwaitSlotReleased(p);
    // The sink never applied anything, yet the slot Weir recorded is gone: still a lost slot.
    sql("SELECT pg_drop_replication_slot('" + slot + "')");
    assertThat(awaitState(start(settings(), new RecordingSink()), "halted").reason())
        .isEqualTo("slot-lost");
    // Pointing the pipeline at another slot is refused: its checkpoints belong to the recorded one.
    PipelineSettings other = PipelineSettings.of("p_" + slot, slot + "_other", List.of("pub"));
    PipelineStatus moved = awaitState(start(other, new RecordingSink()), "halted");
    assertThat(moved.reason()).isEqualTo("incarnation-mismatch");
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()")) {
      rs.next();
      assertThat(rs.getInt(1)).as("no slot was created").isZero();
    }
  }

  @Test
  void idleSlotReleasesWalWhileOnlyUnpublishedTablesChange() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p =
        start(
            PipelineSettings.of("p_" + slot, slot, List.of("quiet_pub"))
                .withStatusInterval(Duration.ofSeconds(1)),
            sink);
    awaitState(p, "running");
    Lsn restartBefore = slotLsn("restart_lsn");
    for (int i = 0; i < 20; i++) {
      sql(
          "INSERT INTO unpublished (payload) SELECT repeat('x', 1000) FROM generate_series(1, 500)");
    }
    sql("CHECKPOINT");
    Lsn written = currentWal();
    await("confirmed_flush_lsn follows the server past the unpublished writes")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(500))
        .until(() -> slotLsn("confirmed_flush_lsn").compareTo(written) >= 0);
    await("restart_lsn moves so WAL can be recycled")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(500))
        .until(
            () -> {
              sql("CHECKPOINT");
              return slotLsn("restart_lsn").compareTo(restartBefore) > 0;
            });
    assertThat(sink.applied()).as("nothing published changed, so nothing is delivered").isEmpty();
    System.out.printf(
        "idle-slot: restart_lsn %s -> %s, confirmed %s, server wrote to %s%n",
        restartBefore, slotLsn("restart_lsn"), slotLsn("confirmed_flush_lsn"), written);
  }

  @Test
  void anAcknowledgedTransactionIsConfirmedToTheServerWithinSecondsNotAtTheStatusInterval()
      throws Exception {
    // Status updates every ten minutes, and the server asks for one only after half of
    // wal_sender_timeout (30 s by default): only the prompt update after the acknowledgement can
    // move confirmed_flush_lsn within the deadline. Without it, a consumer killed every few seconds
    // restarts from the same position each time.
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p =
        start(
            PipelineSettings.of("p_" + slot, slot, List.of("pub"))
                .withStatusInterval(Duration.ofMinutes(10)),
            sink);
    awaitState(p, "running");
    for (int round = 1; round <= 3; round++) {
      sql("INSERT INTO items VALUES (" + round + ", 'prompt', 1, NULL)");
      int expected = round;
      await("transaction " + round + " delivered")
          .atMost(Duration.ofSeconds(60))
          .until(() -> sink.applied().size() == expected);
      Lsn end = sink.applied().get(round - 1).endLsn();
      long deliveredAt = System.nanoTime();
      await("confirmed_flush_lsn reaches transaction " + round + "'s end")
          .atMost(Duration.ofSeconds(15))
          .pollInterval(Duration.ofMillis(100))
          .until(() -> slotLsn("confirmed_flush_lsn").compareTo(end) >= 0);
      LOG.info(
          "prompt-confirmation: round {} confirmed {} ms after delivery was seen",
          round,
          (System.nanoTime() - deliveredAt) / 1_000_000);
    }
    assertThat(status(p).restarts()).isZero();
  }

  @Test
  void batchedLibraryCheckpointsOnAQuietStreamAreStoredAndConfirmedAfterTheMaxDelay()
      throws Exception {
    List<Transaction> delivered = java.util.Collections.synchronizedList(new ArrayList<>());
    CheckpointStore store = new CheckpointStore(state.dataSource(), "weir");
    CheckpointedSink sink =
        new CheckpointedSink(
            t -> {
              delivered.add(t);
              return java.util.concurrent.CompletableFuture.completedFuture(null);
            },
            store,
            blockingIo,
            1,
            Duration.ofMillis(10),
            50,
            Duration.ofMillis(300));
    ActorRef<CdcPipeline.Command> p =
        start(
            PipelineSettings.of("p_" + slot, slot, List.of("pub"))
                .withStatusInterval(Duration.ofMinutes(10)),
            sink);
    awaitState(p, "running");
    sql(
        "INSERT INTO items VALUES (1, 'quiet', 1, NULL)",
        "INSERT INTO items VALUES (2, 'quiet', 1, NULL)",
        "INSERT INTO items VALUES (3, 'quiet', 1, NULL)");
    await("three delivered").atMost(Duration.ofSeconds(60)).until(() -> delivered.size() == 3);
    Lsn end = delivered.get(2).endLsn();
    await("fewer than checkpoint.every transactions are stored and confirmed all the same")
        .atMost(Duration.ofSeconds(20))
        .pollInterval(Duration.ofMillis(100))
        .until(() -> slotLsn("confirmed_flush_lsn").compareTo(end) >= 0);
    assertThat(store.read("p_" + slot))
        .hasValueSatisfying(
            v -> assertThat(v.checkpoint().commitLsn()).isEqualTo(delivered.get(2).commitLsn()));
  }

  /** Seeded by snapshots, but keeps no incremental snapshot progress (the interface's default). */
  private static ChangeSink snapshotsWithoutProgress(RecordingSink inner) {
    return new ChangeSink() {
      @Override
      public java.util.concurrent.CompletionStage<java.util.Optional<SinkCheckpoint>> open(
          PipelineContext context) {
        return inner.open(context);
      }

      @Override
      public java.util.concurrent.CompletionStage<Void> apply(List<Transaction> transactions) {
        return inner.apply(transactions);
      }

      @Override
      public boolean supportsSnapshots() {
        return true;
      }
    };
  }

  @Test
  void aSinkThatKeepsNoSnapshotProgressIsRefusedIncrementalSnapshotsBeforeAnythingIsRead()
      throws Exception {
    PipelineStatus atStart =
        awaitState(
            start(
                settings().toBuilder().incrementalAtStart(true).build(),
                snapshotsWithoutProgress(new RecordingSink())),
            "halted");
    assertThat(atStart.reason()).isEqualTo("conflicting-options");
    assertThat(atStart.detail()).contains("stores incremental snapshot progress");
    assertThat(slotExists()).as("refused before the slot is created").isFalse();

    RecordingSink inner = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(), snapshotsWithoutProgress(inner));
    awaitState(p, "running");
    var probe = kit.<CdcPipeline.SnapshotReply>createTestProbe();
    p.tell(new CdcPipeline.StartIncrementalSnapshot(List.of(), probe.ref()));
    CdcPipeline.SnapshotReply reply = probe.receiveMessage(Duration.ofSeconds(30));
    assertThat(reply.error()).isEqualTo("unsupported");
    sql("INSERT INTO items VALUES (1, 'still streaming', 1, NULL)");
    await("the pipeline streams on")
        .atMost(Duration.ofSeconds(60))
        .until(() -> inner.applied().size() == 1);
  }

  private boolean slotExists() throws SQLException {
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'")) {
      rs.next();
      return rs.getInt(1) > 0;
    }
  }

  @Test
  void twoPublicationsStreamTheUnionOfTheirTables() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p =
        start(
            PipelineSettings.of("p_" + slot, slot, List.of("pub", "quiet_pub"))
                .withStatusInterval(Duration.ofSeconds(1)),
            sink);
    awaitState(p, "running");
    sql(
        "INSERT INTO items VALUES (1, 'from pub', 1, NULL)",
        "INSERT INTO quiet VALUES (1)",
        "BEGIN; INSERT INTO quiet VALUES (2); INSERT INTO tags VALUES (1, 'both'); INSERT INTO unpublished (payload) VALUES ('no'); COMMIT");
    await("three transactions")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 3);
    List<List<String>> tables = new ArrayList<>();
    for (Transaction t : sink.applied()) {
      tables.add(
          t.changes().asList().stream()
              .map(c -> ((Change.Insert) c).table().qualifiedName())
              .toList());
    }
    assertThat(tables)
        .as("each publication's tables, one transaction per commit, the unpublished row left out")
        .containsExactly(
            List.of("public.items"),
            List.of("public.quiet"),
            List.of("public.quiet", "public.tags"));
  }

  @Test
  void anUnreachableServerIsRetriedWithoutCountingTowardsMaxCommandRetries() throws Exception {
    source = new SourceSettings("jdbc:postgresql://127.0.0.1:1/weir", "weir", "unused");
    ActorRef<CdcPipeline.Command> p =
        start(
            settings().withRetries(1, Duration.ofMillis(50), Duration.ofMillis(200)),
            new RecordingSink());
    await("more failed cycles than max-command-retries")
        .atMost(Duration.ofSeconds(60))
        .until(() -> status(p).restarts() >= 5);
    PipelineStatus s = status(p);
    assertThat(s.state()).as("an unreachable server does not halt").isNotEqualTo("halted");
    assertThat(s.detail()).contains("08001");
  }

  @Test
  void failedConnectCyclesAreCountedAgainAfterTheStreamFlowed() throws Exception {
    RecordingSink sink = new RecordingSink();
    sink.failOpens(2);
    ActorRef<CdcPipeline.Command> p =
        start(settings().withRetries(2, Duration.ofMillis(50), Duration.ofMillis(200)), sink);
    awaitState(p, "running");
    assertThat(status(p).restarts())
        .as("two failed cycles, within max-command-retries")
        .isEqualTo(2);
    sql("INSERT INTO items VALUES (1, 'flowing', 1, NULL)");
    await().atMost(Duration.ofSeconds(60)).until(() -> sink.applied().size() == 1);
    // The stream broke after it flowed: the count starts again, so two more failed cycles are
    // within the limit too (four in all would not be).
    sink.failOpens(2);
    sql(
        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '"
            + slot
            + "'");
    await("the pipeline reconnects after two more failed cycles")
        .atMost(Duration.ofSeconds(60))
        .until(() -> status(p).restarts() >= 5 && status(p).state().equals("running"));
    assertThat(status(p).state()).isEqualTo("running");
    sql("INSERT INTO items VALUES (2, 'again', 1, NULL)");
    await().atMost(Duration.ofSeconds(60)).until(() -> sink.applied().size() == 2);
  }

  @Test
  void transientSinkFailureRedeliversAndPermanentFailureHalts() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(), sink);
    awaitState(p, "running");
    sink.failNext(txns -> SinkException.transientFailure("test: connection reset", null));
    sql(
        "INSERT INTO items VALUES (1, 'one', 1, NULL)",
        "INSERT INTO items VALUES (2, 'two', 1, NULL)");
    await("both delivered after the restart")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 2);
    assertThat(sink.applied()).extracting(Transaction::xid).doesNotHaveDuplicates();
    assertThat(status(p).restarts())
        .as("the transient failure restarted the stream")
        .isGreaterThanOrEqualTo(1);
    assertThat(sink.opens())
        .as("a restart re-reads the sink's checkpoint")
        .isGreaterThanOrEqualTo(2);

    sink.failNext(txns -> SinkException.permanent("test: target refused the row", null));
    sql("INSERT INTO items VALUES (3, 'three', 1, NULL)");
    PipelineStatus s = awaitState(p, "halted");
    assertThat(s.reason()).isEqualTo("sink-rejected");
    assertThat(s.detail()).isEqualTo("test: target refused the row");
  }

  @Test
  void aTransactionTheSinkFailsEveryTimeHaltsSinkFailingWhileTransientClassesRetry()
      throws Exception {
    RecordingSink sink = new RecordingSink();
    PipelineSettings settings =
        settings().withRetries(5, Duration.ofMillis(50), Duration.ofMillis(200)).toBuilder()
            .maxSinkRetries(3)
            .build();
    ActorRef<CdcPipeline.Command> p = start(settings, sink);
    awaitState(p, "running");

    // Deadlocks, serialization failures, lost connections and full disks pass by themselves: more
    // failures in a row than max-sink-retries, and no halt.
    String[] passing = {"40P01", "40001", "08006", "53100", "57P01", "40P01", "40001"};
    java.util.concurrent.atomic.AtomicInteger next =
        new java.util.concurrent.atomic.AtomicInteger();
    sink.failWhile(
        txns -> {
          int i = next.getAndIncrement();
          return i < passing.length
              ? SinkException.transientFailure(
                  "test: transient", new SQLException("transient", passing[i]))
              : null;
        });
    sql("INSERT INTO items VALUES (1, 'one', 1, NULL)");
    await("delivered after the transient failures")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 1);
    PipelineStatus afterTransient = status(p);
    assertThat(afterTransient.state()).isEqualTo("running");
    assertThat(afterTransient.restarts()).isGreaterThanOrEqualTo(passing.length);

    // A trigger's RAISE (P0001) fails the same transaction on every redelivery: after
    // max-sink-retries retries the pipeline halts instead of restarting for ever.
    java.util.concurrent.atomic.AtomicInteger raised =
        new java.util.concurrent.atomic.AtomicInteger();
    sink.failWhile(
        txns -> {
          raised.incrementAndGet();
          return SinkException.transientFailure(
              "test: the target's trigger raised", new SQLException("raised", "P0001"));
        });
    sql("INSERT INTO items VALUES (2, 'two', 1, NULL)");
    PipelineStatus halted = awaitState(p, "halted");
    assertThat(halted.reason()).isEqualTo("sink-failing");
    assertThat(halted.detail()).contains("4 failures in a row").contains("SQLState P0001");
    // (Restarts also count "slot active for another consumer" while the last walsender goes, so
    // the sink's calls are what is counted.)
    assertThat(raised.get()).as("the first try and three retries, then the halt").isEqualTo(4);
    assertThat(sink.applied()).hasSize(1);

    // Started again once the target is fixed, the transaction is delivered.
    sink.failWhile(null);
    var probe = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Start(probe.ref()));
    await("delivered after the restart")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 2);
  }

  @Test
  void aMirrorTargetWhoseTriggerRaisesHaltsSinkFailingValueFree() throws Exception {
    sql(
        "CREATE SCHEMA mirror",
        "CREATE TABLE mirror.items (id int PRIMARY KEY, name text, price numeric, note text)",
        "CREATE FUNCTION mirror.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            + " IF NEW.name = 'poison' THEN RAISE EXCEPTION 'refused %', NEW.name; END IF;"
            + " RETURN NEW; END $$",
        "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON mirror.items"
            + " FOR EACH ROW EXECUTE FUNCTION mirror.refuse()");
    io.weir.persistence.cdc.mirror.PostgresMirrorSink sink =
        new io.weir.persistence.cdc.mirror.PostgresMirrorSink(
            state.dataSource(),
            blockingIo,
            io.weir.persistence.cdc.mirror.MirrorSettings.of("mirror"));
    PipelineSettings settings =
        settings().withRetries(5, Duration.ofMillis(50), Duration.ofMillis(200)).toBuilder()
            .excludedSchemas(List.of("weir", "mirror"))
            .maxSinkRetries(2)
            .build();
    ActorRef<CdcPipeline.Command> p = start(settings, sink);
    awaitState(p, "running");
    sql(
        "INSERT INTO items VALUES (1, 'fine', 1, NULL)",
        "INSERT INTO items VALUES (2, 'poison', 1, NULL)",
        "INSERT INTO items VALUES (3, 'after', 1, NULL)");
    PipelineStatus halted = awaitState(p, "halted");
    assertThat(halted.reason()).isEqualTo("sink-failing");
    assertThat(halted.detail())
        .contains("3 failures in a row")
        .contains("P0001")
        .doesNotContain("poison")
        .doesNotContain("refused");
    try (Connection c = db.connect();
        ResultSet rs = c.createStatement().executeQuery("SELECT id FROM mirror.items")) {
      assertThat(rs.next()).isTrue();
      assertThat(rs.getInt(1)).as("the transaction before the poison one is mirrored").isEqualTo(1);
      assertThat(rs.next()).as("nothing after it").isFalse();
    }
  }

  @Test
  void persistentErrorsBeforeTheStreamIsEstablishedAreBoundedByTheWatchdog() throws Exception {
    // A login without the REPLICATION attribute fails every connect cycle the same way.
    sql(
        "CREATE ROLE no_repl_" + slot + " LOGIN PASSWORD 'pw-no-repl'",
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO no_repl_" + slot);
    source = new SourceSettings(db.url(), "no_repl_" + slot, "pw-no-repl");
    PipelineSettings settings =
        settings().withRetries(3, Duration.ofMillis(50), Duration.ofMillis(200));
    PipelineStatus s = awaitState(start(settings, new RecordingSink()), "halted");
    assertThat(s.reason()).isEqualTo("retries-exhausted");
    assertThat(s.restarts()).as("three retries before the halt").isEqualTo(3);
    assertThat(s.detail()).contains("SQLState 42501").doesNotContain("pw-no-repl");
    sql("DROP OWNED BY no_repl_" + slot, "DROP ROLE no_repl_" + slot);
  }

  @Test
  void keepsTheConnectionAliveWhileTheSinkBackpressures() throws Exception {
    // wal_sender_timeout is settable per login: 3 s for this one, so a silent consumer would be
    // cut off well within the 12 s the sink stalls.
    String role = "short_timeout_" + slot;
    sql(
        "CREATE ROLE " + role + " LOGIN REPLICATION PASSWORD 'pw-short'",
        "ALTER ROLE " + role + " SET wal_sender_timeout = '3s'",
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + role);
    source = new SourceSettings(db.url(), role, "pw-short");
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p =
        start(
            PipelineSettings.of("p_" + slot, slot, List.of("pub"))
                .withStatusInterval(Duration.ZERO),
            sink);
    awaitState(p, "running");
    sink.delayNext(Duration.ofSeconds(12));
    // More transactions than the in-flight window (64): reading stops until the sink catches up.
    String[] inserts = new String[201];
    for (int i = 0; i < inserts.length; i++) {
      inserts[i] = "INSERT INTO items VALUES (" + (100 + i) + ", 'more', 1, NULL)";
    }
    sql(inserts);
    await("every transaction delivered after the stall")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 201);
    PipelineStatus s = status(p);
    assertThat(s.restarts())
        .as("status updates during the stall should have kept the connection")
        .isZero();
    assertThat(s.state()).isEqualTo("running");
  }

  @Test
  void aSlotHeldByAnotherConsumerIsRetriedWithoutCountingUntilItIsReleased() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> first = start(settings(), sink);
    awaitState(first, "running");
    PipelineSettings fast =
        settings().withRetries(2, Duration.ofMillis(100), Duration.ofMillis(300));
    ActorRef<CdcPipeline.Command> second = start(fast, sink);
    await("the second consumer waits for the slot")
        .atMost(Duration.ofSeconds(30))
        .until(() -> status(second).restarts() > 4);
    PipelineStatus waiting = status(second);
    assertThat(waiting.state())
        .as("more failed cycles than max-command-retries, yet no halt")
        .isNotEqualTo("halted");
    assertThat(waiting.detail()).contains("active for another consumer");
    var probe = kit.<PipelineStatus>createTestProbe();
    first.tell(new CdcPipeline.Stop(probe.ref()));
    probe.receiveMessage();
    awaitState(second, "running");
    sql("INSERT INTO items VALUES (1, 'after handover', 1, NULL)");
    await("the new owner delivers")
        .atMost(Duration.ofSeconds(30))
        .until(() -> sink.applied().size() == 1);
  }

  @Test
  void preparedTransactionsDeliverOnceAtCommitPreparedAcrossARestart() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(), sink);
    awaitState(p, "running");
    sql(
        "BEGIN; INSERT INTO items VALUES (1, 'rolled back prepared', 1, NULL); PREPARE TRANSACTION 'weir_g1_"
            + slot
            + "'",
        "ROLLBACK PREPARED 'weir_g1_" + slot + "'",
        "BEGIN; INSERT INTO items VALUES (2, 'committed prepared', 1, NULL); PREPARE TRANSACTION 'weir_g2_"
            + slot
            + "'",
        "INSERT INTO items VALUES (3, 'marker', 1, NULL)");
    await("the marker arrives")
        .atMost(Duration.ofSeconds(30))
        .until(() -> sink.applied().size() == 1);
    assertThat(text(((Change.Insert) sink.applied().get(0).changes().asList().get(0)).newRow(), 1))
        .as("prepared and rolled-back prepared transactions deliver nothing")
        .isEqualTo("marker");
    // The consumer goes away between PREPARE and COMMIT PREPARED, and comes back.
    var probe = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Stop(probe.ref()));
    probe.receiveMessage();
    sql("COMMIT PREPARED 'weir_g2_" + slot + "'");
    p.tell(new CdcPipeline.Start(probe.ref()));
    probe.receiveMessage();
    await("COMMIT PREPARED delivers the transaction")
        .atMost(Duration.ofSeconds(30))
        .until(() -> sink.applied().size() == 2);
    Change.Insert committed = (Change.Insert) sink.applied().get(1).changes().asList().get(0);
    assertThat(text(committed.newRow(), 1)).isEqualTo("committed prepared");
    Thread.sleep(1500);
    assertThat(sink.applied()).as("exactly once").hasSize(2);
  }

  private void stopAndAwaitSlotReleased(ActorRef<CdcPipeline.Command> p) {
    var probe = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Stop(probe.ref()));
    probe.receiveMessage();
    await("slot released")
        .atMost(Duration.ofSeconds(30))
        .until(
            () -> {
              try (Connection c = db.connect();
                  ResultSet rs =
                      c.createStatement()
                          .executeQuery(
                              "SELECT active FROM pg_replication_slots WHERE slot_name = '"
                                  + slot
                                  + "'")) {
                return rs.next() && !rs.getBoolean(1);
              }
            });
  }

  private Lsn slotLsn(String column) throws SQLException {
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT "
                        + column
                        + "::text FROM pg_replication_slots WHERE slot_name = '"
                        + slot
                        + "'")) {
      rs.next();
      return Lsn.parse(rs.getString(1));
    }
  }

  private Lsn currentWal() throws SQLException {
    try (Connection c = db.connect();
        ResultSet rs = c.createStatement().executeQuery("SELECT pg_current_wal_lsn()::text")) {
      rs.next();
      return Lsn.parse(rs.getString(1));
    }
  }
}
