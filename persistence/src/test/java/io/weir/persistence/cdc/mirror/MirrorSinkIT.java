package io.weir.persistence.cdc.mirror;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import io.weir.persistence.cdc.PipelineContext;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.persistence.cdc.sink.SinkException;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.SlotIncarnation;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.OldTupleKind;
import io.weir.protocol.pgoutput.PgOutputDecoder;
import io.weir.protocol.pgoutput.PgOutputMessage;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import io.weir.protocol.pgoutput.TupleData;
import java.io.ByteArrayOutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/** The mirror sink against a real PostgreSQL; each test in a fresh database. */
class MirrorSinkIT {

  private static final String PIPELINE = "orders_pipe";
  private static final SlotIncarnation INCARNATION =
      new SlotIncarnation(UUID.randomUUID(), 7301L, 1);
  private static final String CANARY = "canary-e5d1c0ffee";

  /** Stands for an unchanged TOAST column in {@link #decodedUpdate}; compared by identity. */
  private static final String TOAST = new String("<unchanged toast>");

  private static final TableSchema ORDERS =
      new TableSchema(
          16401,
          "src",
          "orders",
          ReplicaIdentity.DEFAULT,
          List.of(
              col("id", 23, true),
              col("name", 25, false),
              col("qty", 23, false),
              col("note", 25, false)));

  private TestPostgres.TestDatabase db;
  private PGSimpleDataSource dataSource;
  private ExecutorService blockingIo;

  @BeforeEach
  void freshDatabase() throws SQLException {
    db = TestPostgres.server().freshDatabase("mirror_it");
    dataSource = new PGSimpleDataSource();
    dataSource.setURL(db.url());
    dataSource.setUser(TestPostgres.server().user());
    dataSource.setPassword(TestPostgres.server().password());
    blockingIo = Executors.newFixedThreadPool(2);
    sql(
        "CREATE TABLE public.orders (id int PRIMARY KEY, name text, qty int NOT NULL DEFAULT 0 CHECK (qty >= 0),"
            + " note text, name_unique text UNIQUE)");
  }

  @AfterEach
  void dropDatabase() throws InterruptedException {
    blockingIo.shutdownNow();
    blockingIo.awaitTermination(10, TimeUnit.SECONDS);
    db.close();
  }

  // ---------------------------------------------------------------------------------------------

  @Test
  void insertsUpdatesDeletesAndTruncatesReachTheTarget() throws Exception {
    PostgresMirrorSink sink = openedSink(settings());

    await(
        sink.apply(
            List.of(
                tx(100, 1000, insert(ORDERS, "1", "apple", "3", "first")),
                tx(
                    101,
                    1100,
                    insert(ORDERS, "2", "pear", "5", null),
                    insert(ORDERS, "3", "plum", "7", "third")))));
    assertThat(rows("SELECT id, name, qty, note FROM public.orders ORDER BY id"))
        .as("three inserted rows should be mirrored with their values")
        .containsExactly(
            List.of("1", "apple", "3", "first"),
            Arrays.asList("2", "pear", "5", null),
            List.of("3", "plum", "7", "third"));

    await(
        sink.apply(
            List.of(
                tx(
                    102,
                    1200,
                    new Change.Update(
                        ORDERS,
                        OldTupleKind.NONE,
                        null,
                        TupleData.ofText("2", "pear", "6", "second")),
                    new Change.Delete(
                        ORDERS, OldTupleKind.KEY, TupleData.ofText("3", null, null, null))))));
    assertThat(rows("SELECT id, name, qty, note FROM public.orders ORDER BY id"))
        .as("the update should replace row 2 and the delete should remove row 3")
        .containsExactly(List.of("1", "apple", "3", "first"), List.of("2", "pear", "6", "second"));

    await(sink.apply(List.of(tx(103, 1300, new Change.Truncate(List.of(ORDERS), false, false)))));
    assertThat(count("SELECT count(*) FROM public.orders"))
        .as("the truncate should empty the target")
        .isZero();
    assertThat(checkpointRow())
        .as("the checkpoint should sit at the last applied commit LSN of this incarnation")
        .containsExactly(INCARNATION.key(), Lsn.of(1300).toString());
  }

  @Test
  void redeliveredBatchIsSkippedEntirely() throws Exception {
    PostgresMirrorSink sink = openedSink(settings());
    List<Transaction> batch =
        List.of(
            tx(200, 2000, insert(ORDERS, "1", "apple", "1", "a")),
            tx(201, 2100, insert(ORDERS, "2", "pear", "2", "b")));
    await(sink.apply(batch));
    // Stand-in for later source changes: a re-applied batch would overwrite them.
    sql("UPDATE public.orders SET name = 'changed later'");
    List<List<String>> before = rows("SELECT id, name, qty, note FROM public.orders ORDER BY id");
    List<List<String>> logBefore = appliedLog();

    await(sink.apply(batch));
    PostgresMirrorSink restarted = openedSink(settings());
    await(restarted.apply(batch));

    assertThat(rows("SELECT id, name, qty, note FROM public.orders ORDER BY id"))
        .as("redelivering an applied batch must not change any row")
        .isEqualTo(before);
    assertThat(appliedLog())
        .as("redelivering an applied batch must not apply any of its transactions again")
        .isEqualTo(logBefore)
        .containsExactly(
            List.of(PIPELINE, "200", Lsn.of(2000).toString()),
            List.of(PIPELINE, "201", Lsn.of(2100).toString()));
  }

  @Test
  void batchStraddlingTheCheckpointAppliesOnlyTheNewerPart() throws Exception {
    PostgresMirrorSink sink = openedSink(settings());
    await(
        sink.apply(
            List.of(
                tx(300, 3000, insert(ORDERS, "1", "a", "1", null)),
                tx(301, 3100, insert(ORDERS, "2", "b", "1", null)))));

    // 3100 is redelivered (its content marked so that applying it again would show) with a newer
    // one.
    await(
        sink.apply(
            List.of(
                tx(301, 3100, insert(ORDERS, "99", "must not appear", "1", null)),
                tx(302, 3200, insert(ORDERS, "3", "c", "1", null)))));

    assertThat(rows("SELECT id FROM public.orders ORDER BY id"))
        .as("only the transaction above the checkpoint should be applied")
        .containsExactly(List.of("1"), List.of("2"), List.of("3"));
    assertThat(appliedLog()).extracting(r -> r.get(1)).containsExactly("300", "301", "302");
    assertThat(checkpointRow()).containsExactly(INCARNATION.key(), Lsn.of(3200).toString());
  }

  @Test
  void keyChangingUpdateMovesTheRow() throws Exception {
    PostgresMirrorSink sink = openedSink(settings());
    await(
        sink.apply(
            List.of(
                tx(
                    400,
                    4000,
                    insert(ORDERS, "1", "apple", "1", "n1"),
                    insert(ORDERS, "2", "pear", "2", "n2")))));

    await(
        sink.apply(
            List.of(
                tx(
                    401,
                    4100,
                    new Change.Update(
                        ORDERS,
                        OldTupleKind.KEY,
                        TupleData.ofText("1", null, null, null),
                        TupleData.ofText("10", "apple", "1", "n1"))))));
    assertThat(rows("SELECT id, name FROM public.orders ORDER BY id"))
        .as("the old key's row should be gone and the row should live under its new key")
        .containsExactly(List.of("2", "pear"), List.of("10", "apple"));

    // REPLICA IDENTITY FULL: every column is a replica identity column; the target key decides.
    TableSchema full =
        new TableSchema(
            16401,
            "src",
            "orders",
            ReplicaIdentity.FULL,
            List.of(
                col("id", 23, true),
                col("name", 25, true),
                col("qty", 23, true),
                col("note", 25, true)));
    await(
        sink.apply(
            List.of(
                tx(
                    402,
                    4200,
                    new Change.Update(
                        full,
                        OldTupleKind.FULL,
                        TupleData.ofText("2", "pear", "2", "n2"),
                        TupleData.ofText("20", "pear", "2", "n2")),
                    new Change.Update(
                        full,
                        OldTupleKind.FULL,
                        TupleData.ofText("10", "apple", "1", "n1"),
                        TupleData.ofText("10", "apple", "9", "n1"))))));
    assertThat(rows("SELECT id, qty FROM public.orders ORDER BY id"))
        .as(
            "under REPLICA IDENTITY FULL a changed primary key moves the row and an unchanged one updates in place")
        .containsExactly(List.of("10", "9"), List.of("20", "2"));
  }

  @Test
  void nullsAreWrittenAsSqlNull() throws Exception {
    PostgresMirrorSink sink = openedSink(settings());
    await(sink.apply(List.of(tx(500, 5000, insert(ORDERS, "1", null, "4", null)))));
    assertThat(
            count(
                "SELECT count(*) FROM public.orders WHERE id = 1 AND name IS NULL AND note IS NULL"))
        .as("null columns of an insert should be SQL NULL in the target")
        .isEqualTo(1);

    await(
        sink.apply(
            List.of(
                tx(501, 5100, insert(ORDERS, "2", "x", "4", "y")),
                tx(502, 5200, update(ORDERS, "2", null, "4", null)))));
    assertThat(
            count(
                "SELECT count(*) FROM public.orders WHERE id = 2 AND name IS NULL AND note IS NULL"))
        .as("an update to NULL should clear the stored values")
        .isEqualTo(1);
  }

  @Test
  void textValuesAreCastToTheTargetColumnTypes() throws Exception {
    sql(
        "CREATE TABLE public.typed (id bigint PRIMARY KEY, amount numeric(10,2), at timestamptz, doc jsonb,"
            + " flag boolean, raw bytea, tags int[], day date, u uuid)");
    TableSchema typed =
        new TableSchema(
            16500,
            "src",
            "typed",
            ReplicaIdentity.DEFAULT,
            List.of(
                col("id", 20, true),
                col("amount", 1700, false),
                col("at", 1184, false),
                col("doc", 3802, false),
                col("flag", 16, false),
                col("raw", 17, false),
                col("tags", 1007, false),
                col("day", 1082, false),
                col("u", 2950, false)));
    PostgresMirrorSink sink = openedSink(settings());
    await(
        sink.apply(
            List.of(
                tx(
                    600,
                    6000,
                    insert(
                        typed,
                        "9007199254740993",
                        "12.50",
                        "2024-02-29 23:59:59.123456+00",
                        "{\"k\": [1, 2]}",
                        "t",
                        "\\x00ff",
                        "{1,2,3}",
                        "2024-02-29",
                        "6f1c9e52-0d8e-4c9c-9d3e-5b1a2c3d4e5f")))));
    assertThat(
            rows(
                "SELECT id::text, amount::text, (at = '2024-02-29 23:59:59.123456+00')::text, doc->'k'->>1, flag::text,"
                    + " encode(raw, 'hex'), array_length(tags, 1)::text, day::text, u::text FROM public.typed"))
        .as("each text value should arrive cast to its column type")
        .containsExactly(
            List.of(
                "9007199254740993",
                "12.50",
                "true",
                "2",
                "true",
                "00ff",
                "3",
                "2024-02-29",
                "6f1c9e52-0d8e-4c9c-9d3e-5b1a2c3d4e5f"));
  }

  @Test
  void constraintViolationIsPermanentValueFreeAndRollsBackTheBatch() throws Exception {
    PostgresMirrorSink sink = openedSink(settings());
    await(sink.apply(List.of(tx(700, 7000, insert(ORDERS, "1", "a", "1", null)))));

    // CHECK (qty >= 0): PostgreSQL's DETAIL repeats the failing row, canary included.
    SinkException check =
        failure(
            sink.apply(
                List.of(
                    tx(701, 7100, insert(ORDERS, "2", "fine", "1", null)),
                    tx(702, 7200, insert(ORDERS, "3", CANARY, "-1", CANARY)))));
    assertRefusedWithoutCanary(check, "23514");

    // UNIQUE (name_unique): the DETAIL is "Key (name_unique)=(<canary>) already exists".
    TableSchema withUnique =
        new TableSchema(
            16401,
            "src",
            "orders",
            ReplicaIdentity.DEFAULT,
            List.of(col("id", 23, true), col("name_unique", 25, false)));
    SinkException unique =
        failure(
            sink.apply(
                List.of(
                    tx(
                        703,
                        7300,
                        insert(withUnique, "4", CANARY),
                        insert(withUnique, "5", CANARY)))));
    assertRefusedWithoutCanary(unique, "23505");

    // NOT NULL on qty.
    SinkException notNull =
        failure(sink.apply(List.of(tx(704, 7400, insert(ORDERS, "6", CANARY, null, CANARY)))));
    assertRefusedWithoutCanary(notNull, "23502");

    assertThat(rows("SELECT id FROM public.orders ORDER BY id"))
        .as("a refused batch must be rolled back whole, including its valid transactions")
        .containsExactly(List.of("1"));
    assertThat(checkpointRow())
        .as("a refused batch must not move the checkpoint")
        .containsExactly(INCARNATION.key(), Lsn.of(7000).toString());
    assertThat(appliedLog()).extracting(r -> r.get(1)).containsExactly("700");
  }

  @Test
  void checkpointSurvivesANewSinkInstance() throws Exception {
    assertThat(await(newSink(settings()).open(new PipelineContext(PIPELINE, Optional.empty()))))
        .as("a pipeline that never applied anything has no checkpoint")
        .isEmpty();
    PostgresMirrorSink first = openedSink(settings());
    await(
        first.apply(
            List.of(
                tx(800, 8000, insert(ORDERS, "1", "a", "1", null)),
                tx(801, 0x1_0000_0010L, insert(ORDERS, "2", "b", "1", null)))));
    first.close();

    Optional<SinkCheckpoint> reopened =
        await(newSink(settings()).open(new PipelineContext(PIPELINE, Optional.empty())));
    assertThat(reopened)
        .as(
            "a new instance should report the incarnation and commit LSN of the last applied transaction")
        .contains(new SinkCheckpoint(INCARNATION, Lsn.of(0x1_0000_0010L)));
    assertThat(
            await(
                newSink(settings())
                    .open(new PipelineContext("other_pipe", Optional.of(INCARNATION)))))
        .as("checkpoints are per pipeline")
        .isEmpty();
  }

  @Test
  void checkpointOfAnotherIncarnationIsRefused() throws Exception {
    await(
        openedSink(settings()).apply(List.of(tx(900, 9000, insert(ORDERS, "1", "a", "1", null)))));

    SlotIncarnation recreated =
        new SlotIncarnation(UUID.randomUUID(), INCARNATION.systemIdentifier(), 1);
    PostgresMirrorSink other = newSink(settings());
    await(other.open(new PipelineContext(PIPELINE, Optional.of(recreated))));
    SinkException refused =
        failure(other.apply(List.of(tx(5, 100, insert(ORDERS, "2", "b", "1", null)))));
    assertThat(refused.isPermanent())
        .as("a checkpoint of another slot incarnation must halt the pipeline")
        .isTrue();
    assertThat(refused.getMessage()).contains("another slot incarnation");
    assertThat(rows("SELECT id FROM public.orders")).containsExactly(List.of("1"));
  }

  @Test
  void applyNeedsAnOpenWithAnIncarnationAndOpenCanBeRepeated() throws Exception {
    PostgresMirrorSink sink = newSink(settings());
    await(sink.open(new PipelineContext(PIPELINE, Optional.empty())));
    SinkException early =
        failure(sink.apply(List.of(tx(1, 100, insert(ORDERS, "1", "a", "1", null)))));
    assertThat(early.isPermanent())
        .as("without an incarnation the checkpoint cannot be written")
        .isTrue();

    await(sink.open(new PipelineContext(PIPELINE, Optional.of(INCARNATION))));
    await(sink.apply(List.of(tx(1, 100, insert(ORDERS, "1", "a", "1", null)))));
    assertThat(count("SELECT count(*) FROM public.orders")).isEqualTo(1);
  }

  @Test
  void unchangedToastColumnsKeepTheirStoredValue() throws Exception {
    PostgresMirrorSink sink = openedSink(settings());
    String big = "x".repeat(10_000);
    await(
        sink.apply(
            List.of(
                tx(
                    1000,
                    10_000,
                    insert(ORDERS, "1", "apple", "1", big),
                    insert(ORDERS, "2", "pear", "1", big + "2")))));

    await(
        sink.apply(
            List.of(
                tx(
                    1001,
                    10_100,
                    new Change.Update(
                        ORDERS,
                        OldTupleKind.NONE,
                        null,
                        decodedUpdate(null, "1", "apple v2", "5", TOAST)),
                    // Key change and unchanged TOAST together: the value lives in the old row.
                    new Change.Update(
                        ORDERS,
                        OldTupleKind.KEY,
                        TupleData.ofText("2", null, null, null),
                        decodedUpdate(null, "20", "pear v2", "6", TOAST))))));

    assertThat(
            rows(
                "SELECT id, name, qty, note = repeat('x', 10000), note = repeat('x', 10000) || '2' FROM public.orders ORDER BY id"))
        .as("the untouched TOAST column should keep its stored value, also when the key moved")
        .containsExactly(
            List.of("1", "apple v2", "5", "t", "f"), List.of("20", "pear v2", "6", "f", "t"));
  }

  @Test
  void binaryColumnsAreRefused() throws Exception {
    PostgresMirrorSink sink = openedSink(settings());
    TupleData binary = decodedUpdate(new byte[] {0, 0, 0, 1}, null, null, null, null);
    SinkException e = failure(sink.apply(List.of(tx(1, 100, new Change.Insert(ORDERS, binary)))));
    assertThat(e.isPermanent()).isTrue();
    assertThat(e.getMessage()).contains("binary");
  }

  @Test
  void staleSecondWriterWaitsForTheCheckpointAndSkips() throws Exception {
    PostgresMirrorSink sink = openedSink(settings());
    await(sink.apply(List.of(tx(1100, 11_000, insert(ORDERS, "1", "a", "1", null)))));

    try (Connection other = db.connect()) {
      other.setAutoCommit(false);
      try (Statement s = other.createStatement()) {
        s.executeQuery(
                "SELECT 1 FROM public.weir_mirror_checkpoint WHERE pipeline = '"
                    + PIPELINE
                    + "' FOR UPDATE")
            .close();
        CompletableFuture<Void> stale =
            sink.apply(List.of(tx(1101, 11_100, insert(ORDERS, "42", "stale", "1", null))))
                .toCompletableFuture();
        Awaitility.await()
            .atMost(Duration.ofSeconds(20))
            .until(
                () ->
                    count(
                            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                                + " WHERE NOT l.granted AND a.datname = current_database()")
                        > 0);
        assertThat(stale)
            .as("the second writer should wait on the checkpoint row lock")
            .isNotDone();
        // The other writer applies 11100 first.
        s.executeUpdate(
            "UPDATE public.weir_mirror_checkpoint SET commit_lsn = '"
                + Lsn.of(11_100)
                + "' WHERE pipeline = '"
                + PIPELINE
                + "'");
        other.commit();
        stale.get(30, TimeUnit.SECONDS);
      }
    }
    assertThat(count("SELECT count(*) FROM public.orders WHERE id = 42"))
        .as("after the lock is released the stale writer should see the newer checkpoint and skip")
        .isZero();
    assertThat(appliedLog()).extracting(r -> r.get(1)).containsExactly("1100");
  }

  @Test
  void consecutiveBatchedStatementsKeepChangeOrder() throws Exception {
    sql(
        "CREATE TABLE public.lines (order_id int, line int, sku text, PRIMARY KEY (order_id, line))");
    TableSchema lines =
        new TableSchema(
            16402,
            "src",
            "lines",
            ReplicaIdentity.DEFAULT,
            List.of(col("order_id", 23, true), col("line", 23, true), col("sku", 25, false)));
    PostgresMirrorSink sink = openedSink(settings());
    List<Change> changes = new ArrayList<>();
    for (int i = 1; i <= 300; i++) {
      changes.add(insert(ORDERS, "" + i, "n" + i, "1", null));
      changes.add(insert(lines, "" + i, "1", "sku" + i));
      changes.add(insert(lines, "" + i, "2", "sku" + i));
    }
    for (int i = 1; i <= 300; i += 3) {
      changes.add(
          new Change.Delete(ORDERS, OldTupleKind.KEY, TupleData.ofText("" + i, null, null, null)));
      changes.add(
          insert(ORDERS, "" + i, "again" + i, "2", null)); // re-insert after delete: order matters
      changes.add(new Change.Delete(lines, OldTupleKind.KEY, TupleData.ofText("" + i, "2", null)));
    }
    List<Transaction> txs =
        List.of(
            tx(1200, 12_000, changes.subList(0, 600).toArray(Change[]::new)),
            tx(1201, 12_100, changes.subList(600, changes.size()).toArray(Change[]::new)));
    await(sink.apply(txs));

    assertThat(count("SELECT count(*) FROM public.orders")).isEqualTo(300);
    assertThat(count("SELECT count(*) FROM public.orders WHERE name LIKE 'again%' AND qty = 2"))
        .as("every deleted-then-reinserted row should hold the later insert")
        .isEqualTo(100);
    assertThat(count("SELECT count(*) FROM public.lines")).isEqualTo(500);
    assertThat(count("SELECT count(*) FROM public.lines WHERE line = 2 AND order_id % 3 = 1"))
        .as("deleted lines should be gone")
        .isZero();
  }

  @Test
  void repeatedUpsertsOfOneKeySurviveRewrittenBatches() throws Exception {
    // pgjdbc's reWriteBatchedInserts turns a batch into one multi-row INSERT, and PostgreSQL
    // refuses an ON CONFLICT DO UPDATE that reaches the same row twice.
    dataSource.setReWriteBatchedInserts(true);
    PostgresMirrorSink sink = openedSink(settings());
    List<Change> changes = new ArrayList<>();
    for (int i = 1; i <= 50; i++) {
      changes.add(insert(ORDERS, "" + i, "v0", "0", null));
    }
    for (int round = 1; round <= 3; round++) {
      for (int i = 1; i <= 50; i++) {
        changes.add(update(ORDERS, "" + i, "v" + round, "" + round, null));
        changes.add(update(ORDERS, "" + i, "v" + round + "b", "" + round, null));
      }
    }
    await(sink.apply(List.of(tx(1300, 13_000, changes.toArray(Change[]::new)))));
    assertThat(count("SELECT count(*) FROM public.orders WHERE name = 'v3b' AND qty = 3"))
        .as("every row should hold its last update")
        .isEqualTo(50);
  }

  @Test
  void aSinglePassTransactionIsAppliedAsItIsReadInBoundedBatches() throws Exception {
    // As a spilled transaction reaches the sink: changes generated one at a time, iterable once.
    // 5000 upserts of distinct keys cross the statement bound of a JDBC batch several times, and
    // the 4 KB notes cross its byte bound; every 7th row is deleted again right away.
    dataSource.setReWriteBatchedInserts(true);
    PostgresMirrorSink sink = openedSink(settings());
    int rows = 5000;
    String note = "x".repeat(4096);
    int[] produced = {0};
    io.weir.protocol.cdc.Changes onePass =
        new io.weir.protocol.cdc.Changes() {
          private boolean iterated;

          @Override
          public long count() {
            return rows + rows / 7;
          }

          @Override
          public boolean repeatable() {
            return false;
          }

          @Override
          public List<Change> asList() {
            throw new IllegalStateException("not repeatable");
          }

          @Override
          public java.util.Iterator<Change> iterator() {
            if (iterated) {
              throw new IllegalStateException("iterated twice");
            }
            iterated = true;
            return new java.util.Iterator<>() {
              int next = 1;
              boolean deleteNext;

              @Override
              public boolean hasNext() {
                return next <= rows || deleteNext;
              }

              @Override
              public Change next() {
                produced[0]++;
                if (deleteNext) {
                  deleteNext = false;
                  return new Change.Delete(
                      ORDERS,
                      OldTupleKind.KEY,
                      TupleData.ofText("" + (next - 1), null, null, null));
                }
                int id = next++;
                deleteNext = id % 7 == 0;
                return insert(ORDERS, "" + id, "n" + id, "1", id % 2 == 0 ? note : null);
              }
            };
          }
        };
    Transaction t =
        new Transaction(
            1400,
            Lsn.of(14_000),
            Lsn.of(14_008),
            Instant.now(),
            onePass,
            List.of(),
            rows + rows / 7,
            java.util.Map.of(ORDERS, (long) (rows + rows / 7)));
    await(sink.apply(List.of(t)));
    assertThat(produced[0])
        .as("every change should be read exactly once")
        .isEqualTo(rows + rows / 7);
    assertThat(count("SELECT count(*) FROM public.orders"))
        .as("inserted rows less the deleted ones")
        .isEqualTo(rows - rows / 7);
    assertThat(count("SELECT count(*) FROM public.orders WHERE id % 7 = 0")).isZero();
    assertThat(count("SELECT count(*) FROM public.orders WHERE length(note) = 4096"))
        .isEqualTo(rows / 2 - rows / 14);
  }

  @Test
  void keylessTargetsTakeInsertsAndFullImagesAndRefuseWhatTheyCannotFind() throws Exception {
    sql(
        "CREATE TABLE public.keyless (id int, v text)",
        "CREATE TABLE public.appended (id int, v text)");
    TableSchema full =
        new TableSchema(
            16403,
            "src",
            "keyless",
            ReplicaIdentity.FULL,
            List.of(col("id", 23, true), col("v", 25, true)));
    // A source with a key whose target has none: inserts are fine, updates and deletes cannot say
    // which target row they are about.
    TableSchema keyed =
        new TableSchema(
            16406,
            "src",
            "appended",
            ReplicaIdentity.DEFAULT,
            List.of(col("id", 23, true), col("v", 25, false)));
    TableSchema missing =
        new TableSchema(
            16404, "src", "missing", ReplicaIdentity.DEFAULT, List.of(col("id", 23, true)));
    PostgresMirrorSink sink = openedSink(settings());

    await(
        sink.apply(
            List.of(
                tx(
                    1,
                    100,
                    insert(full, "1", "a"),
                    insert(full, "1", "a"),
                    insert(full, "2", null),
                    insert(keyed, "1", CANARY),
                    insert(keyed, "1", CANARY)))));
    await(
        sink.apply(
            List.of(
                tx(
                    2,
                    200,
                    new Change.Update(
                        full,
                        OldTupleKind.FULL,
                        TupleData.ofText("1", "a"),
                        TupleData.ofText("1", "b")),
                    new Change.Delete(full, OldTupleKind.FULL, TupleData.ofText("2", null)),
                    // Not there: nothing to delete.
                    new Change.Delete(full, OldTupleKind.FULL, TupleData.ofText("3", "x"))))));
    assertThat(rows("SELECT id, v FROM public.keyless ORDER BY id, v"))
        .as("one of two equal rows takes the update; the NULL-holding row is found and deleted")
        .containsExactly(List.of("1", "a"), List.of("1", "b"));
    assertThat(count("SELECT count(*) FROM public.appended"))
        .as("a keyless target takes every insert")
        .isEqualTo(2);

    SinkException noIdentity =
        failure(
            sink.apply(
                List.of(
                    tx(
                        3,
                        300,
                        new Change.Update(
                            keyed,
                            OldTupleKind.NONE,
                            null,
                            TupleData.ofText("1", CANARY + "2"))))));
    assertThat(noIdentity.isPermanent()).isTrue();
    assertThat(noIdentity.getMessage())
        .contains("src.appended", "[no-row-identity]", "REPLICA IDENTITY FULL")
        .doesNotContain(CANARY);

    SinkException noTable = failure(sink.apply(List.of(tx(4, 400, insert(missing, "1")))));
    assertThat(noTable.isPermanent()).isTrue();
    assertThat(noTable.getMessage())
        .contains("public.missing", "[target-missing]", "does not exist");
  }

  @Test
  void identityColumnsCompositeKeysAndToastedKeysAreWritten() throws Exception {
    sql(
        "CREATE TYPE public.pair AS (x int, y text)",
        "CREATE TABLE public.pairs (k public.pair PRIMARY KEY, v text)",
        "CREATE TABLE public.ident (code text PRIMARY KEY,"
            + " seq int GENERATED ALWAYS AS IDENTITY, v text)",
        "CREATE TABLE public.tkey (a text, b int, v text, PRIMARY KEY (a, b))");
    TableSchema pairs =
        new TableSchema(
            16420,
            "src",
            "pairs",
            ReplicaIdentity.DEFAULT,
            List.of(col("k", 16999, true), col("v", 25, false)));
    TableSchema ident =
        new TableSchema(
            16421,
            "src",
            "ident",
            ReplicaIdentity.DEFAULT,
            List.of(col("code", 25, true), col("seq", 23, false), col("v", 25, false)));
    TableSchema tkey =
        new TableSchema(
            16422,
            "src",
            "tkey",
            ReplicaIdentity.DEFAULT,
            List.of(col("a", 25, true), col("b", 23, true), col("v", 25, false)));
    PostgresMirrorSink sink = openedSink(settings());
    await(
        sink.apply(
            List.of(
                tx(
                    1,
                    100,
                    insert(pairs, "(1,a)", "one"),
                    insert(pairs, "(2,)", "two"),
                    insert(ident, "k1", "10", "one"),
                    insert(ident, "k2", "20", "two"),
                    insert(tkey, "big", "1", "v")))));
    await(
        sink.apply(
            List.of(
                tx(
                    2,
                    200,
                    // A composite key: bound untyped it would be an anonymous record (0A000).
                    new Change.Delete(pairs, OldTupleKind.KEY, TupleData.ofText("(1,a)", null)),
                    new Change.Update(
                        pairs,
                        OldTupleKind.KEY,
                        TupleData.ofText("(2,)", null),
                        TupleData.ofText("(3,)", "moved")),
                    // SET seq = DEFAULT on the source: a new identity value outside the key.
                    update(ident, "k1", "11", "one"),
                    update(ident, "k2", "20", "same seq"),
                    // A key column stored out of line: unchanged TOAST, its value in the old key.
                    new Change.Update(
                        tkey,
                        OldTupleKind.KEY,
                        TupleData.ofText("big", "1", null),
                        decodedUpdate(null, TOAST, "2", "w"))))));
    assertThat(rows("SELECT k::text, v FROM public.pairs ORDER BY k"))
        .containsExactly(List.of("(3,)", "moved"));
    assertThat(rows("SELECT code, seq::text, v FROM public.ident ORDER BY code"))
        .as("a GENERATED ALWAYS identity column takes the source's values, also a new one")
        .containsExactly(List.of("k1", "11", "one"), List.of("k2", "20", "same seq"));
    assertThat(rows("SELECT a, b::text, v FROM public.tkey"))
        .as("the key column's value comes from the old key image")
        .containsExactly(List.of("big", "2", "w"));
  }

  @Test
  void typedRefusalsNameTheFixAndNoValue() throws Exception {
    sql(
        "CREATE TABLE public.shapes (b box, v text)",
        "CREATE TABLE public.gen (id int PRIMARY KEY, g int GENERATED ALWAYS AS (id * 2) STORED)",
        "CREATE TABLE public.narrow (id int PRIMARY KEY)",
        "CREATE TABLE public.other_key (id int, code text PRIMARY KEY)");
    TableSchema shapes =
        new TableSchema(
            16410,
            "src",
            "shapes",
            ReplicaIdentity.FULL,
            List.of(col("b", 603, true), col("v", 25, true)));
    TableSchema gen =
        new TableSchema(
            16411,
            "src",
            "gen",
            ReplicaIdentity.DEFAULT,
            List.of(col("id", 23, true), col("g", 23, false)));
    TableSchema narrow =
        new TableSchema(
            16412,
            "src",
            "narrow",
            ReplicaIdentity.DEFAULT,
            List.of(col("id", 23, true), col("added", 25, false)));
    TableSchema otherKey =
        new TableSchema(
            16413,
            "src",
            "other_key",
            ReplicaIdentity.DEFAULT,
            List.of(col("id", 23, true), col("code", 25, false)));
    PostgresMirrorSink sink = openedSink(settings());
    await(sink.apply(List.of(tx(1, 100, insert(shapes, "(1,1),(0,0)", CANARY)))));
    await(
        sink.apply(
            List.of(
                tx(
                    2,
                    200,
                    new Change.Delete(narrow, OldTupleKind.KEY, TupleData.ofText("1", null))))));

    record Case(Change change, String code, String hint) {}
    List<Case> cases =
        List.of(
            new Case(
                new Change.Delete(
                    shapes, OldTupleKind.FULL, TupleData.ofText("(1,1),(0,0)", CANARY)),
                "[no-equality]",
                "column b"),
            new Case(
                insert(gen, "1", CANARY.length() + ""), "[target-column-generated]", "column g"),
            new Case(insert(narrow, "1", CANARY), "[target-column-missing]", "ADD COLUMN"),
            new Case(
                new Change.Delete(otherKey, OldTupleKind.KEY, TupleData.ofText("1", null)),
                "[key-not-replica-identity]",
                "REPLICA IDENTITY FULL"));
    long xid = 10;
    for (Case c : cases) {
      SinkException e = failure(sink.apply(List.of(tx(xid, xid * 100, c.change()))));
      xid++;
      assertThat(e.isPermanent()).as("%s must halt", c.code()).isTrue();
      assertThat(e.getMessage()).contains(c.code(), c.hint()).doesNotContain(CANARY);
    }
  }

  @Test
  void mappedTablesAndMessagesAndQuotedNames() throws Exception {
    sql("CREATE TABLE public.orders_copy (id int PRIMARY KEY, \"Odd \"\"Name\"\"\" text)");
    TableSchema odd =
        new TableSchema(
            16405,
            "src",
            "Weird Table",
            ReplicaIdentity.DEFAULT,
            List.of(col("id", 23, true), col("Odd \"Name\"", 25, false)));
    PostgresMirrorSink sink = openedSink(settings().withTable("src.Weird Table", "orders_copy"));
    await(
        sink.apply(
            List.of(
                tx(
                    1,
                    100,
                    new Change.Message("audit", CANARY.getBytes(StandardCharsets.UTF_8)),
                    insert(odd, "1", "quoted ok")))));
    assertThat(rows("SELECT id, \"Odd \"\"Name\"\"\" FROM public.orders_copy"))
        .as("a mapped table with names that need quoting should be mirrored; messages are ignored")
        .containsExactly(List.of("1", "quoted ok"));
  }

  // ---------------------------------------------------------------------------------------------

  private static MirrorSettings settings() {
    return MirrorSettings.of("public").withAppliedLog(true);
  }

  private PostgresMirrorSink newSink(MirrorSettings settings) {
    return new PostgresMirrorSink(dataSource, blockingIo, settings);
  }

  private PostgresMirrorSink openedSink(MirrorSettings settings) throws Exception {
    PostgresMirrorSink sink = newSink(settings);
    await(sink.open(new PipelineContext(PIPELINE, Optional.of(INCARNATION))));
    return sink;
  }

  private static TableSchema.Column col(String name, long oid, boolean key) {
    return new TableSchema.Column(name, oid, -1, key);
  }

  private static Change.Insert insert(TableSchema table, String... values) {
    return new Change.Insert(table, TupleData.ofText(values));
  }

  private static Change.Update update(TableSchema table, String... values) {
    return new Change.Update(table, OldTupleKind.NONE, null, TupleData.ofText(values));
  }

  private static Transaction tx(long xid, long commitLsn, Change... changes) {
    return new Transaction(
        xid, Lsn.of(commitLsn), Lsn.of(commitLsn + 8), Instant.now(), List.of(changes), List.of());
  }

  /**
   * A new-row image decoded from a hand-built pgoutput Update message, the only public way to get
   * unchanged TOAST ({@link #TOAST}) and binary ({@code binaryFirst}) columns.
   */
  private static TupleData decodedUpdate(byte[] binaryFirst, String... values) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int count = values.length;
    ByteBuffer head =
        ByteBuffer.allocate(1 + 4 + 1 + 2)
            .put((byte) 'U')
            .putInt(16401)
            .put((byte) 'N')
            .putShort((short) count);
    out.writeBytes(head.array());
    for (int i = 0; i < count; i++) {
      if (i == 0 && binaryFirst != null) {
        out.write('b');
        out.writeBytes(ByteBuffer.allocate(4).putInt(binaryFirst.length).array());
        out.writeBytes(binaryFirst);
      } else if (values[i] == TOAST) {
        out.write('u');
      } else if (values[i] == null) {
        out.write('n');
      } else {
        byte[] utf8 = values[i].getBytes(StandardCharsets.UTF_8);
        out.write('t');
        out.writeBytes(ByteBuffer.allocate(4).putInt(utf8.length).array());
        out.writeBytes(utf8);
      }
    }
    byte[] message = out.toByteArray();
    PgOutputMessage decoded = PgOutputDecoder.decodeMessage(message, 0, message.length, false);
    return ((PgOutputMessage.Update) decoded).newTuple();
  }

  private static <T> T await(CompletionStage<T> stage) throws Exception {
    return stage.toCompletableFuture().get(60, TimeUnit.SECONDS);
  }

  private static SinkException failure(CompletionStage<?> stage) throws Exception {
    try {
      stage.toCompletableFuture().get(60, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      assertThat(e.getCause())
          .as("the stage should fail with a SinkException")
          .isInstanceOf(SinkException.class);
      return (SinkException) e.getCause();
    }
    return fail("the stage should have failed");
  }

  private static void assertRefusedWithoutCanary(SinkException e, String sqlState) {
    assertThat(e.isPermanent())
        .as("SQLState %s refuses the data: the failure must be permanent", sqlState)
        .isTrue();
    assertThat(e.getMessage())
        .contains("src.orders", "SQLState " + sqlState)
        .doesNotContain(CANARY);
    List<String> texts = new ArrayList<>();
    collectTexts(e, texts, 0);
    assertThat(texts)
        .as("no message along the cause chain may carry the row value")
        .noneMatch(t -> t.contains(CANARY));
    StringWriter printed = new StringWriter();
    e.printStackTrace(new PrintWriter(printed));
    assertThat(printed.toString())
        .as("a logged stack trace must not carry the row value")
        .doesNotContain(CANARY);
  }

  private static void collectTexts(Throwable t, List<String> texts, int depth) {
    if (t == null || depth > 10) {
      return;
    }
    texts.add(String.valueOf(t.getMessage()));
    texts.add(t.toString());
    if (t instanceof SQLException sql) {
      collectTexts(sql.getNextException(), texts, depth + 1);
    }
    for (Throwable s : t.getSuppressed()) {
      collectTexts(s, texts, depth + 1);
    }
    if (t.getCause() != t) {
      collectTexts(t.getCause(), texts, depth + 1);
    }
  }

  private void sql(String... statements) throws SQLException {
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      for (String statement : statements) {
        s.execute(statement);
      }
    }
  }

  private List<List<String>> rows(String query) throws SQLException {
    try (Connection c = db.connect();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(query)) {
      List<List<String>> rows = new ArrayList<>();
      int width = rs.getMetaData().getColumnCount();
      while (rs.next()) {
        List<String> row = new ArrayList<>();
        for (int i = 1; i <= width; i++) {
          row.add(rs.getString(i));
        }
        rows.add(row);
      }
      return rows;
    }
  }

  private long count(String query) throws SQLException {
    return Long.parseLong(rows(query).get(0).get(0));
  }

  private List<String> checkpointRow() throws SQLException {
    List<List<String>> rows =
        rows(
            "SELECT incarnation, commit_lsn::text FROM public.weir_mirror_checkpoint WHERE pipeline = '"
                + PIPELINE
                + "'");
    assertThat(rows).as("the pipeline should have exactly one checkpoint row").hasSize(1);
    return rows.get(0);
  }

  private List<List<String>> appliedLog() throws SQLException {
    return rows(
        "SELECT pipeline, xid::text, commit_lsn::text FROM public.weir_mirror_applied ORDER BY commit_lsn, xid");
  }
}
