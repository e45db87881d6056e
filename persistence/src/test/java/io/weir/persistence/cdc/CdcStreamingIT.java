package io.weir.persistence.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.weir.persistence.cdc.assembly.SpillLimitExceeded;
import io.weir.persistence.cdc.mirror.MirrorSettings;
import io.weir.persistence.cdc.mirror.PostgresMirrorSink;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.CheckpointStore;
import io.weir.persistence.cdc.sink.CheckpointedSink;
import io.weir.persistence.cdc.sink.DeliverySink;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.Transaction;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.eventstream.EventStream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Protocol 2 streaming of in-progress transactions against a real PostgreSQL. The walsender runs
 * with logical_decoding_work_mem = 64kB, so a transaction of a few hundred kB is streamed in blocks
 * before it commits.
 */
class CdcStreamingIT extends PipelineITBase {
  @Override
  protected String harnessName() {
    return "cdc_stream_it";
  }

  /** ~120 bytes of text per row: 3000 rows are several times the 64 kB work memory. */
  private static final String ROW_TEXT = "'row ' || g || ' ' || repeat('v', 110)";

  private SimpleMeterRegistry registry;

  @TempDir Path spillRoot;

  @BeforeEach
  void setUp() throws Exception {
    registry = new SimpleMeterRegistry();
    sql(
        "CREATE TABLE items (id int PRIMARY KEY, v text)",
        "CREATE TABLE tags (id int PRIMARY KEY, label text)",
        "CREATE PUBLICATION pub FOR TABLE items, tags",
        "CREATE SCHEMA mirror",
        "CREATE TABLE mirror.items (id int PRIMARY KEY, v text)",
        "CREATE TABLE mirror.tags (id int PRIMARY KEY, label text)");
  }

  // --- helpers -----------------------------------------------------------------------------------

  private Connection connect() throws SQLException {
    Connection c = db.connect();
    try (Statement s = c.createStatement()) {
      // The test login is called weir, so "$user" in the default search_path would be Weir's
      // schema.
      s.execute("SET search_path = public");
    }
    return c;
  }

  /** A session with an open transaction, for interleaving. */
  private static final class Session implements AutoCloseable {
    final Connection c;

    Session(Connection c) throws SQLException {
      this.c = c;
      c.setAutoCommit(false);
    }

    Session run(String... statements) throws SQLException {
      try (Statement s = c.createStatement()) {
        for (String q : statements) {
          s.execute(q);
        }
      }
      return this;
    }

    void commit() throws SQLException {
      c.commit();
    }

    void rollback() throws SQLException {
      c.rollback();
    }

    @Override
    public void close() throws SQLException {
      c.close();
    }
  }

  private Session session() throws SQLException {
    return new Session(connect());
  }

  private static String insertItems(int from, int to) {
    return "INSERT INTO items SELECT g, "
        + ROW_TEXT
        + " FROM generate_series("
        + from
        + ", "
        + to
        + ") g";
  }

  private StreamingSettings streaming() {
    return StreamingSettings.on().withDecodingWorkMemKb(64);
  }

  private PipelineSettings settings(StreamingSettings streaming) {
    return PipelineSettings.of("p_" + slot, slot, List.of("pub")).toBuilder()
        .statusInterval(Duration.ofSeconds(1))
        .excludedSchemas(List.of("weir", "mirror"))
        .streaming(streaming)
        .build();
  }

  private ActorRef<CdcPipeline.Command> start(PipelineSettings settings, ChangeSink sink) {
    return h.start(source, settings, sink, registry);
  }

  private PipelineStatus awaitState(ActorRef<CdcPipeline.Command> p, String state) {
    return h.awaitState(p, state, Duration.ofSeconds(60));
  }

  private void command(ActorRef<CdcPipeline.Command> p, boolean start) {
    var probe = kit.<PipelineStatus>createTestProbe();
    p.tell(start ? new CdcPipeline.Start(probe.ref()) : new CdcPipeline.Stop(probe.ref()));
    probe.receiveMessage();
  }

  private double counter(String name, String tag, String value) {
    var c = registry.find(name).tag(tag, value).counter();
    return c == null ? 0 : c.count();
  }

  /**
   * Counters move once the sink call has completed, a little after the sink saw the transaction.
   */
  private void awaitCounter(String name, String tag, String value, double expected) {
    await(name + "{" + tag + "=" + value + "} = " + expected)
        .atMost(Duration.ofSeconds(10))
        .until(() -> counter(name, tag, value) == expected);
  }

  private static List<Integer> itemIds(Transaction t) {
    List<Integer> ids = new ArrayList<>();
    for (Change c : t.changes()) {
      if (c instanceof Change.Insert i && i.table().table().equals("items")) {
        ids.add(Integer.parseInt(i.newRow().text(0)));
      }
    }
    return ids;
  }

  private static List<Integer> range(int from, int to) {
    List<Integer> out = new ArrayList<>();
    for (int i = from; i <= to; i++) {
      out.add(i);
    }
    return out;
  }

  private long spillFiles() throws Exception {
    Path dir = spillRoot.resolve("p_" + slot);
    if (!Files.isDirectory(dir)) {
      return 0;
    }
    try (Stream<Path> s = Files.list(dir)) {
      return s.count();
    }
  }

  /** Bytes the walsender has streamed from this slot so far (PostgreSQL's slot statistics). */
  private long streamedBytes() throws SQLException {
    return query(
        "SELECT coalesce((SELECT stream_bytes FROM pg_stat_replication_slots WHERE slot_name = '"
            + slot
            + "'), 0)");
  }

  /**
   * Waits until the walsender has streamed at least {@code bytes} more than {@code before}: changes
   * of a subtransaction that is rolled back before the walsender decoded them are never sent (it
   * sees the abort), so a test of Stream Abort for a subtransaction must wait for them first.
   */
  private void awaitStreamed(long before, long bytes) {
    await("the walsender streamed the changes so far")
        .atMost(Duration.ofSeconds(30))
        .pollInterval(Duration.ofMillis(50))
        .until(() -> streamedBytes() - before >= bytes);
  }

  private long query(String sql) throws SQLException {
    try (Connection c = connect();
        ResultSet rs = c.createStatement().executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  private List<String> appliedLog() throws SQLException {
    List<String> out = new ArrayList<>();
    try (Connection c = connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT xid, commit_lsn FROM mirror.weir_mirror_applied ORDER BY commit_lsn")) {
      while (rs.next()) {
        out.add(rs.getLong(1) + "@" + rs.getString(2));
      }
    }
    return out;
  }

  // --- tests -------------------------------------------------------------------------------------

  @Test
  void aStreamedTransactionIsDeliveredOnceAtItsCommitWithAllChangesInOrder() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(streaming()), sink);
    awaitState(p, "running");
    try (Session s = session()) {
      s.run(
          insertItems(1, 2000),
          "UPDATE items SET v = 'updated' WHERE id <= 10",
          "DELETE FROM items WHERE id > 1990",
          insertItems(2001, 3000));
      s.commit();
    }
    await("the streamed transaction")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 1);
    Transaction t = sink.applied().get(0);
    awaitCounter(
        "weir.cdc.streamed.transactions",
        "spilled",
        "false",
        1); // streamed, and it stayed in memory
    assertThat(t.rowCount()).isEqualTo(2000 + 10 + 10 + 1000);
    assertThat(sink.changesRead().get(0)).isEqualTo(3020);
    List<Change> changes = t.changes().asList();
    assertThat(changes.subList(0, 2000)).allMatch(c -> c instanceof Change.Insert);
    assertThat(changes.subList(2000, 2010)).allMatch(c -> c instanceof Change.Update);
    assertThat(changes.subList(2010, 2020)).allMatch(c -> c instanceof Change.Delete);
    List<Integer> expected = range(1, 2000);
    expected.addAll(range(2001, 3000));
    assertThat(itemIds(t)).as("every insert once, in the order made").isEqualTo(expected);
    assertThat(t.rowsByTable().values()).containsExactly(3020L);
    Thread.sleep(1500);
    assertThat(sink.applied()).as("exactly once").hasSize(1);
    assertThat(status(p).state()).isEqualTo("running");
    await().atMost(Duration.ofSeconds(10)).until(() -> status(p).rows() == 3020);
  }

  @Test
  void messagesRideAStreamedTransactionOrPassItWhileItIsOpen() throws Exception {
    RecordingSink sink = new RecordingSink(true);
    ActorRef<CdcPipeline.Command> p = start(settings(streaming()).withMessages(true), sink);
    awaitState(p, "running");
    try (Session s = session()) {
      s.run(
          insertItems(1, 1500),
          "SELECT pg_logical_emit_message(true, 'inside', 'in the streamed transaction')",
          insertItems(1501, 3000));
      sql("SELECT pg_logical_emit_message(false, 'outside', 'while it is open')");
      s.commit();
    }
    await("the transaction and the message")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 1 && sink.messages().size() == 1);
    List<Change> changes = sink.applied().get(0).changes().asList();
    assertThat(changes).hasSize(3001);
    assertThat(changes.get(1500))
        .isInstanceOfSatisfying(
            Change.Message.class, m -> assertThat(m.prefix()).isEqualTo("inside"));
    assertThat(sink.applied().get(0).rowCount()).isEqualTo(3000);
    assertThat(sink.messages().get(0).prefix()).isEqualTo("outside");
    // A message's position is the end of its WAL record: here, where the commit record begins.
    assertThat(sink.messages().get(0).lsn())
        .as("the message was written before the commit")
        .isLessThanOrEqualTo(sink.applied().get(0).commitLsn());
  }

  @Test
  void aSpilledTransactionPassesThroughTheLibraryCheckpointStore() throws Exception {
    List<long[]> delivered = new java.util.concurrent.CopyOnWriteArrayList<>();
    DeliverySink counting =
        t -> {
          long n = 0;
          long lastId = 0;
          boolean ordered = true;
          for (Change c : t.changes()) {
            long id = Long.parseLong(((Change.Insert) c).newRow().text(0));
            ordered &= id == lastId + 1;
            lastId = id;
            n++;
          }
          delivered.add(new long[] {t.xid(), n, ordered ? 1 : 0});
          return java.util.concurrent.CompletableFuture.completedFuture(null);
        };
    CheckpointedSink sink =
        new CheckpointedSink(
            counting,
            new CheckpointStore(state.dataSource(), "weir"),
            kit.system()
                .dispatchers()
                .lookup(DispatcherSelector.fromConfig("weir.blocking-io-dispatcher")),
            1,
            Duration.ofMillis(10),
            1,
            CheckpointedSink.DEFAULT_MAX_DELAY);
    ActorRef<CdcPipeline.Command> p =
        start(settings(streaming().withSpill(spillRoot, 64 * 1024, 64L << 20)), sink);
    awaitState(p, "running");
    sql(insertItems(1, 8000));
    await("delivered").atMost(Duration.ofSeconds(60)).until(() -> delivered.size() == 1);
    assertThat(delivered.get(0)[1]).as("every change read once").isEqualTo(8000);
    assertThat(delivered.get(0)[2]).as("in order").isEqualTo(1);
    awaitCounter("weir.cdc.streamed.transactions", "spilled", "true", 1);
    await("checkpoint stored")
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                query("SELECT count(*) FROM weir.cdc_checkpoint WHERE pipeline = 'p_" + slot + "'")
                    == 1);
    await("spill files are deleted").atMost(Duration.ofSeconds(10)).until(() -> spillFiles() == 0);
  }

  @Test
  void anAbortedStreamedTransactionDeliversNothing() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(streaming()), sink);
    awaitState(p, "running");
    try (Session s = session()) {
      s.run(insertItems(1, 3000));
      s.rollback();
    }
    sql("INSERT INTO tags VALUES (1, 'after the rollback')");
    await("the later transaction")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() >= 1);
    Thread.sleep(1000);
    assertThat(sink.applied()).as("only the committed transaction").hasSize(1);
    assertThat(sink.applied().get(0).rowCount()).isEqualTo(1);
    assertThat(status(p).state()).isEqualTo("running");
  }

  @Test
  void rollbackToSavepointInsideAStreamedTransactionDropsJustThatSubtransaction() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(streaming()), sink);
    awaitState(p, "running");
    try (Session s = session()) {
      long before = streamedBytes();
      s.run(insertItems(1, 2000), "SAVEPOINT a", insertItems(2001, 4000));
      awaitStreamed(before, 4000 * 120);
      s.run(
          "ROLLBACK TO SAVEPOINT a",
          "SAVEPOINT b",
          insertItems(4001, 5000),
          "RELEASE SAVEPOINT b",
          insertItems(5001, 5500));
      s.commit();
    }
    await("the streamed transaction")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 1);
    Transaction t = sink.applied().get(0);
    List<Integer> expected = range(1, 2000);
    expected.addAll(range(4001, 5500));
    assertThat(itemIds(t))
        .as("the rolled-back savepoint's rows are gone, the rest in order")
        .isEqualTo(expected);
    assertThat(t.rowCount()).as("counts leave the aborted subtransaction out").isEqualTo(3500);
    awaitCounter("weir.cdc.streamed.transactions", "spilled", "false", 1);
  }

  @Test
  void streamedAndOrdinaryTransactionsArriveInCommitOrder() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(streaming()), sink);
    awaitState(p, "running");
    try (Session a = session();
        Session c = session()) {
      a.run(insertItems(1, 2000)); // streamed, open
      sql("INSERT INTO tags VALUES (1, 'first')"); // ordinary, commits
      c.run(insertItems(10001, 12000)); // a second streamed transaction, open
      a.run(insertItems(2001, 2500));
      sql("INSERT INTO tags VALUES (2, 'second')");
      c.commit(); // the later-started one commits first
      sql("INSERT INTO tags VALUES (3, 'third')");
      a.commit();
    }
    sql("INSERT INTO tags VALUES (4, 'fourth')");
    await("six transactions")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 6);
    List<Transaction> t = sink.applied();
    for (int i = 1; i < t.size(); i++) {
      assertThat(t.get(i).commitLsn()).as("commit order").isGreaterThan(t.get(i - 1).commitLsn());
    }
    assertThat(t).extracting(Transaction::rowCount).containsExactly(1L, 1L, 2000L, 1L, 2500L, 1L);
    assertThat(itemIds(t.get(2))).isEqualTo(range(10001, 12000));
    assertThat(itemIds(t.get(4))).isEqualTo(range(1, 2500));
    awaitCounter("weir.cdc.streamed.transactions", "spilled", "false", 2);
  }

  @Test
  void pastTheMemoryBoundATransactionIsSpilledReadOnceAndItsFilesRemoved() throws Exception {
    RecordingSink sink = new RecordingSink(false, false);
    ActorRef<CdcPipeline.Command> p =
        start(settings(streaming().withSpill(spillRoot, 64 * 1024, 64L << 20)), sink);
    awaitState(p, "running");
    try (Session s = session()) {
      s.run(insertItems(1, 20_000));
      await("a spill file while the transaction is open")
          .atMost(Duration.ofSeconds(30))
          .until(() -> spillFiles() > 0);
      s.run(insertItems(20_001, 25_000));
      s.commit();
    }
    await("the spilled transaction")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 1);
    assertThat(sink.repeatable().get(0)).as("read from disk: a single pass").isFalse();
    assertThat(sink.changesRead().get(0)).as("every change read once").isEqualTo(25_000);
    assertThat(sink.applied().get(0).rowCount()).isEqualTo(25_000);
    awaitCounter("weir.cdc.streamed.transactions", "spilled", "true", 1);
    await("spill files are deleted after the sink call")
        .atMost(Duration.ofSeconds(10))
        .until(() -> spillFiles() == 0);
    assertThat(registry.find("weir.cdc.spill.bytes").gauge().value()).isZero();

    // A stale file from a crashed run is removed when the pipeline starts again.
    command(p, false);
    Path dir = spillRoot.resolve("p_" + slot);
    Files.writeString(dir.resolve("txn-1-r999-1.spill"), "left by a crashed run");
    command(p, true);
    awaitState(p, "running");
    assertThat(spillFiles()).isZero();
  }

  @Test
  void pastMaxSpillBytesThePipelineHaltsWithAnAlert() throws Exception {
    var alerts = kit.<SpillLimitExceeded>createTestProbe();
    kit.system()
        .eventStream()
        .tell(new EventStream.Subscribe<>(SpillLimitExceeded.class, alerts.ref()));
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p =
        start(settings(streaming().withSpill(spillRoot, 16 * 1024, 200 * 1024)), sink);
    awaitState(p, "running");
    try (Session s = session()) {
      s.run(
          "INSERT INTO items SELECT g, 'secret-canary-' || g || repeat('v', 200) FROM generate_series(1, 5000) g");
      s.commit();
    }
    PipelineStatus halted = awaitState(p, "halted");
    assertThat(halted.reason()).isEqualTo("spill-limit-exceeded");
    assertThat(halted.detail()).contains("max-bytes").doesNotContain("secret-canary");
    SpillLimitExceeded alert = alerts.receiveMessage(Duration.ofSeconds(10));
    assertThat(alert.pipeline()).isEqualTo("p_" + slot);
    assertThat(alert.maxSpillBytes()).isEqualTo(200 * 1024);
    assertThat(counter("weir.cdc.alerts", "alert", "spill-limit-exceeded")).isEqualTo(1);
    assertThat(counter("weir.cdc.halts", "reason", "spill-limit-exceeded")).isEqualTo(1);
    assertThat(sink.applied()).as("nothing of it was delivered").isEmpty();
    await("the halted run's spill files are deleted")
        .atMost(Duration.ofSeconds(10))
        .until(() -> spillFiles() == 0);
  }

  @Test
  void restartedWhileAStreamedTransactionIsOpenItIsMirroredExactlyOnce() throws Exception {
    PostgresMirrorSink mirror =
        new PostgresMirrorSink(
            state.dataSource(),
            kit.system()
                .dispatchers()
                .lookup(DispatcherSelector.fromConfig("weir.blocking-io-dispatcher")),
            MirrorSettings.of("mirror").withAppliedLog(true));
    ActorRef<CdcPipeline.Command> p =
        start(settings(streaming().withSpill(spillRoot, 64 * 1024, 64L << 20)), mirror);
    awaitState(p, "running");
    sql("INSERT INTO tags VALUES (1, 'before')");
    await("the first transaction")
        .atMost(Duration.ofSeconds(30))
        .until(() -> query("SELECT count(*) FROM mirror.tags") == 1);
    long xid;
    try (Session s = session()) {
      s.run(insertItems(1, 10_000));
      try (ResultSet rs =
          s.c.createStatement().executeQuery("SELECT pg_current_xact_id()::xid::text::bigint")) {
        rs.next();
        xid = rs.getLong(1);
      }
      await("part of it was streamed and spilled")
          .atMost(Duration.ofSeconds(30))
          .until(() -> spillFiles() > 0);
      command(p, false);
      await("the stopped run's files are gone")
          .atMost(Duration.ofSeconds(30))
          .until(() -> spillFiles() == 0);
      s.run("UPDATE items SET v = 'changed while stopped' WHERE id % 100 = 0");
      command(p, true);
      awaitState(p, "running");
      s.run(insertItems(10_001, 12_000), "DELETE FROM items WHERE id % 1000 = 1");
      sql("INSERT INTO tags VALUES (2, 'committed meanwhile')");
      s.commit();
    }
    sql("INSERT INTO tags VALUES (3, 'after')");
    await("the mirror catches up")
        .atMost(Duration.ofSeconds(60))
        .until(() -> query("SELECT count(*) FROM mirror.tags") == 3);
    await("the streamed transaction is mirrored")
        .atMost(Duration.ofSeconds(30))
        .until(() -> query("SELECT count(*) FROM mirror.items") == 12_000 - 12);
    assertThat(
            query("SELECT count(*) FROM (SELECT * FROM items EXCEPT SELECT * FROM mirror.items) d")
                + query(
                    "SELECT count(*) FROM (SELECT * FROM mirror.items EXCEPT SELECT * FROM items) d"))
        .as("the mirror equals the source")
        .isZero();
    assertThat(query("SELECT count(*) FROM mirror.weir_mirror_applied WHERE xid = " + xid))
        .as("the streamed transaction was applied exactly once")
        .isEqualTo(1);
    assertThat(query("SELECT count(*) FROM mirror.weir_mirror_applied"))
        .as(
            "four transactions, once each (the mirror's own large write into this database comes back as an"
                + " empty streamed transaction, which is not delivered): %s",
            appliedLog())
        .isEqualTo(4);
    await("no spill file is left").atMost(Duration.ofSeconds(10)).until(() -> spillFiles() == 0);
  }

  @Test
  void aColumnAddedInsideOrBetweenStreamedTransactionsIsFollowed() throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p =
        start(settings(streaming().withSpill(spillRoot, 64 * 1024, 64L << 20)), sink);
    awaitState(p, "running");
    // Inside: the shape changes half-way through a streamed (and spilled) transaction.
    try (Session s = session()) {
      s.run(
          insertItems(1, 3000),
          "ALTER TABLE items ADD COLUMN extra int",
          "INSERT INTO items SELECT g, 'after', g FROM generate_series(3001, 6000) g");
      s.commit();
    }
    // Between: an ordinary transaction, then another streamed one with the new shape.
    sql("INSERT INTO items VALUES (6001, 'ordinary', 1)");
    sql("ALTER TABLE tags ADD COLUMN color text");
    try (Session s = session()) {
      s.run(
          "INSERT INTO tags SELECT g, 'tag ' || g || repeat('t', 100), 'red' FROM generate_series(1, 3000) g");
      s.commit();
    }
    sql("INSERT INTO tags VALUES (3001, 'ordinary', 'blue')");
    await("four transactions")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 4);
    assertThat(status(p).state()).as("an added column never halts").isEqualTo("running");
    Transaction inside = sink.applied().get(0);
    List<Change> changes = inside.changes().asList();
    assertThat(((Change.Insert) changes.get(0)).table().columnNames()).containsExactly("id", "v");
    assertThat(((Change.Insert) changes.get(5999)).table().columnNames())
        .containsExactly("id", "v", "extra");
    assertThat(((Change.Insert) changes.get(5999)).newRow().text(2)).isEqualTo("6000");
    assertThat(inside.schemaChanges())
        .extracting(s -> s.columnNames().size())
        .as("the added column is announced")
        .containsExactly(3);
    assertThat(
            ((Change.Insert) sink.applied().get(1).changes().asList().get(0)).table().columnNames())
        .as("the next ordinary transaction is read with the new shape")
        .containsExactly("id", "v", "extra");
    assertThat(((Change.Insert) sink.applied().get(2).changes().asList().get(0)).newRow().text(2))
        .isEqualTo("red");
    assertThat(((Change.Insert) sink.applied().get(3).changes().asList().get(0)).newRow().text(2))
        .isEqualTo("blue");
    await("the new shapes are recorded")
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                query(
                            "SELECT count(*) FROM weir.cdc_relation WHERE definition::text LIKE '%extra%'")
                        == 1
                    && query(
                            "SELECT count(*) FROM weir.cdc_relation WHERE definition::text LIKE '%color%'")
                        == 1);
  }

  @Test
  void
      aShapeAStreamedTransactionSentBeforeAnotherTransactionChangedTheTableDoesNotReplaceTheNewOne()
          throws Exception {
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = start(settings(streaming()), sink);
    awaitState(p, "running");
    try (Session a = session()) {
      // The streamed transaction writes tags in a savepoint (streamed, with the old shape of tags),
      // rolls it back, which releases its lock on tags ...
      long before = streamedBytes();
      a.run(
          insertItems(1, 2000),
          "SAVEPOINT s",
          "INSERT INTO tags SELECT g, 'tag ' || g || repeat('t', 100) FROM generate_series(1, 2000) g");
      awaitStreamed(before, 4000 * 110);
      a.run("ROLLBACK TO SAVEPOINT s");
      // ... so another transaction can add a column to tags and commit.
      sql("ALTER TABLE tags ADD COLUMN color text", "INSERT INTO tags VALUES (1, 'one', 'red')");
      a.run(insertItems(2001, 2100));
      a.commit();
    }
    sql("INSERT INTO tags VALUES (2, 'two', 'blue')");
    await("three transactions")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sink.applied().size() == 3);
    assertThat(status(p).state()).as("no false schema halt").isEqualTo("running");
    assertThat(itemIds(sink.applied().get(1))).isEqualTo(range(1, 2100));
    Change.Insert last = (Change.Insert) sink.applied().get(2).changes().asList().get(0);
    assertThat(last.table().columnNames())
        .as("read with the newer shape")
        .containsExactly("id", "label", "color");
    assertThat(last.newRow().text(2)).isEqualTo("blue");
  }
}
