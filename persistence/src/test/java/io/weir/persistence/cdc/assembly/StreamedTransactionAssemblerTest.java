package io.weir.persistence.cdc.assembly;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.CdcEvent;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.PgOutputDecoder;
import io.weir.protocol.pgoutput.PgOutputMessage;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The assembler's handling of protocol 2 stream messages, from hand-built pgoutput bytes. */
class StreamedTransactionAssemblerTest {
  private static final int ITEMS = 16384;

  @TempDir Path dir;

  // --- pgoutput bytes --------------------------------------------------------------------------

  private static final class Bytes {
    final ByteArrayOutputStream out = new ByteArrayOutputStream();

    Bytes b(int v) {
      out.write(v);
      return this;
    }

    Bytes i16(int v) {
      out.writeBytes(ByteBuffer.allocate(2).putShort((short) v).array());
      return this;
    }

    Bytes i32(long v) {
      out.writeBytes(ByteBuffer.allocate(4).putInt((int) v).array());
      return this;
    }

    Bytes str(String s) {
      out.writeBytes(s.getBytes(StandardCharsets.UTF_8));
      return b(0);
    }
  }

  /** A streamed message: its payload and its decoded form, as the pipeline hands them over. */
  private record Msg(PgOutputMessage message, ByteBuffer payload) {}

  private static Msg streamedMsg(Bytes b) {
    byte[] bytes = b.out.toByteArray();
    return new Msg(
        PgOutputDecoder.decodeMessage(bytes, 0, bytes.length, true), ByteBuffer.wrap(bytes));
  }

  /**
   * Relation inside a stream block: columns id (key, int4), v (text) and any extra text columns.
   */
  private static Msg relation(long xid, String... extra) {
    Bytes b =
        new Bytes()
            .b('R')
            .i32(xid)
            .i32(ITEMS)
            .str("public")
            .str("items")
            .b('d')
            .i16(2 + extra.length);
    b.b(1).str("id").i32(23).i32(-1);
    b.b(0).str("v").i32(25).i32(-1);
    for (String e : extra) {
      b.b(0).str(e).i32(25).i32(-1);
    }
    return streamedMsg(b);
  }

  private static Msg insert(long xid, String... values) {
    Bytes b = new Bytes().b('I').i32(xid).i32(ITEMS).b('N').i16(values.length);
    for (String v : values) {
      byte[] utf8 = v.getBytes(StandardCharsets.UTF_8);
      b.b('t').i32(utf8.length);
      b.out.writeBytes(utf8);
    }
    return streamedMsg(b);
  }

  private static PgOutputMessage.StreamStart start(long xid, boolean first) {
    return new PgOutputMessage.StreamStart(xid, first);
  }

  private static final PgOutputMessage.StreamStop STOP = new PgOutputMessage.StreamStop();

  private static PgOutputMessage.StreamCommit commit(long xid, long lsn) {
    return new PgOutputMessage.StreamCommit(xid, Lsn.of(lsn), Lsn.of(lsn + 8), Instant.EPOCH);
  }

  // --- helpers -----------------------------------------------------------------------------------

  private final List<CdcEvent> emitted = new ArrayList<>();

  private void feed(TransactionAssembler a, Object... messages) {
    for (Object o : messages) {
      Optional<CdcEvent> e =
          o instanceof Msg m ? a.accept(m.message(), m.payload()) : a.accept((PgOutputMessage) o);
      e.ifPresent(emitted::add);
    }
  }

  private static List<String> ids(Transaction t) {
    List<String> out = new ArrayList<>();
    for (Change c : t.changes()) {
      out.add(((Change.Insert) c).newRow().text(0));
    }
    return out;
  }

  private static TransactionAssembler assembler(SpillStore store, boolean spills, int maxChanges) {
    return new TransactionAssembler(new SchemaGuard(), maxChanges, false, store, spills);
  }

  private static void assertProtocolViolation(Runnable r, String containing) {
    assertThatThrownBy(r::run)
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.PROTOCOL_VIOLATION))
        .hasMessageContaining(containing);
  }

  // --- tests -------------------------------------------------------------------------------------

  @Test
  void aStreamedTransactionIsDeliveredAtItsCommitInCommitOrderWithAllItsChanges() {
    SpillStore store = new SpillStore(null, 1 << 20, 1 << 20);
    TransactionAssembler a = assembler(store, false, 1000);
    feed(a, start(100, true), relation(100), insert(100, "1", "a"), insert(100, "2", "b"), STOP);
    assertThat(a.openStreams()).isEqualTo(1);
    // An ordinary transaction commits while the streamed one is open: it comes first.
    feed(
        a,
        new PgOutputMessage.Begin(Lsn.of(500), Instant.EPOCH, 7),
        new PgOutputMessage.Relation(
            java.util.OptionalLong.empty(),
            ITEMS,
            "public",
            "items",
            io.weir.protocol.pgoutput.ReplicaIdentity.DEFAULT,
            List.of(
                new PgOutputMessage.Relation.Column(true, "id", 23, -1),
                new PgOutputMessage.Relation.Column(false, "v", 25, -1))),
        new PgOutputMessage.Insert(
            java.util.OptionalLong.empty(),
            ITEMS,
            io.weir.protocol.pgoutput.TupleData.ofText("9", "z")),
        new PgOutputMessage.Commit(Lsn.of(500), Lsn.of(508), Instant.EPOCH));
    feed(a, start(100, false), insert(100, "3", "c"), STOP, commit(100, 900));
    assertThat(emitted).hasSize(2);
    assertThat(((Transaction) emitted.get(0)).xid()).isEqualTo(7);
    Transaction t = (Transaction) emitted.get(1);
    assertThat(t.xid()).isEqualTo(100);
    assertThat(t.commitLsn()).isEqualTo(Lsn.of(900));
    assertThat(t.endLsn()).isEqualTo(Lsn.of(908));
    assertThat(t.rowCount()).isEqualTo(3);
    assertThat(t.changes().count()).isEqualTo(3);
    assertThat(t.rowsByTable().values()).containsExactly(3L);
    assertThat(ids(t)).as("every change once, in order").containsExactly("1", "2", "3");
    assertThat(t.changes().repeatable()).as("held in memory").isTrue();
    assertThat(ids(t)).containsExactly("1", "2", "3");
    assertThat(a.openStreams()).isZero();
    ((StreamedChanges) t.changes()).release();
    assertThat(store.memoryInUse()).isZero();
    assertThatThrownBy(() -> t.changes().iterator())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("valid only during the sink call");
  }

  @Test
  void aStreamAbortOfTheWholeTransactionDeliversNothingAndFreesItsBuffer() {
    SpillStore store = new SpillStore(dir.resolve("p"), 300, 1 << 20);
    TransactionAssembler a = assembler(store, true, 1000);
    feed(a, start(100, true), relation(100));
    for (int i = 0; i < 50; i++) {
      feed(a, insert(100, "" + i, "value " + i));
    }
    feed(a, STOP);
    assertThat(store.bytesOnDisk()).as("past the memory bound it went to disk").isPositive();
    feed(a, new PgOutputMessage.StreamAbort(100, 100));
    assertThat(emitted).isEmpty();
    assertThat(a.openStreams()).isZero();
    assertThat(store.bytesOnDisk()).isZero();
    assertThat(store.memoryInUse()).isZero();
    assertProtocolViolation(() -> feed(a, start(100, false)), "never started");
  }

  @Test
  void aSubtransactionsAbortDropsOnlyTheChangesCarryingItsXid() {
    TransactionAssembler a = assembler(new SpillStore(null, 1 << 20, 1 << 20), false, 1000);
    feed(
        a,
        start(100, true),
        relation(100),
        insert(100, "1", "top"),
        insert(101, "2", "savepoint"),
        insert(102, "3", "other savepoint"),
        STOP);
    feed(a, new PgOutputMessage.StreamAbort(100, 101)); // ROLLBACK TO SAVEPOINT
    assertThat(a.openStreams())
        .as("a subtransaction's abort leaves the transaction open")
        .isEqualTo(1);
    feed(a, start(100, false), insert(100, "4", "after"), insert(103, "5", "aborted later"), STOP);
    feed(a, new PgOutputMessage.StreamAbort(100, 103));
    feed(a, commit(100, 900));
    Transaction t = (Transaction) emitted.get(0);
    assertThat(ids(t)).containsExactly("1", "3", "4");
    assertThat(t.rowCount()).as("counts leave the aborted subtransactions out").isEqualTo(3);
    assertThat(t.changes().count()).isEqualTo(3);
  }

  @Test
  void aSpilledTransactionIsASinglePassThatFailsLoudlyWhenReadAgainOrAfterItsCall()
      throws Exception {
    SpillStore store = new SpillStore(dir.resolve("p"), 1024, 1 << 20);
    TransactionAssembler a = assembler(store, true, 10);
    feed(a, start(100, true), relation(100));
    for (int i = 0; i < 100; i++) {
      feed(
          a,
          insert(100 + (i % 2), "" + i, "v".repeat(50))); // max-transaction-changes does not apply
    }
    feed(a, STOP, commit(100, 900));
    Transaction t = (Transaction) emitted.get(0);
    assertThat(t.changes().repeatable()).isFalse();
    assertThat(t.rowCount()).isEqualTo(100);
    assertThatThrownBy(() -> t.changes().asList()).isInstanceOf(IllegalStateException.class);
    assertThat(ids(t)).hasSize(100).startsWith("0", "1", "2").endsWith("99");
    assertThatThrownBy(() -> ids(t))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("iterated only once");
    try (Stream<Path> files = Files.list(dir.resolve("p"))) {
      assertThat(files.count()).isEqualTo(1);
    }
    ((StreamedChanges) t.changes()).release();
    try (Stream<Path> files = Files.list(dir.resolve("p"))) {
      assertThat(files.count())
          .as("the spill file is deleted when the sink call completes")
          .isZero();
    }
    assertThatThrownBy(() -> t.changes().iterator())
        .hasMessageContaining("valid only during the sink call");
  }

  @Test
  void aColumnAddedInsideAStreamedTransactionIsReadWithTheRightShapeAndAnnounced() {
    SchemaGuard guard = new SchemaGuard();
    TransactionAssembler a =
        new TransactionAssembler(guard, 100, false, new SpillStore(null, 1 << 20, 1 << 20), false);
    feed(a, start(100, true), relation(100), insert(100, "1", "a"), STOP);
    feed(a, start(100, false), relation(100, "extra"), insert(100, "2", "b", "x"), STOP);
    assertThat(guard.schema(ITEMS)).as("no shape reaches the run before the commit").isNull();
    feed(a, commit(100, 900));
    Transaction t = (Transaction) emitted.get(0);
    List<Change> changes = t.changes().asList();
    assertThat(((Change.Insert) changes.get(0)).table().columnNames()).containsExactly("id", "v");
    assertThat(((Change.Insert) changes.get(1)).table().columnNames())
        .containsExactly("id", "v", "extra");
    assertThat(((Change.Insert) changes.get(1)).newRow().text(2)).isEqualTo("x");
    assertThat(t.schemaChanges()).extracting(s -> s.columnNames().size()).containsExactly(3);
    assertThat(guard.schema(ITEMS).columnNames()).containsExactly("id", "v", "extra");
    assertThat(a.takeAcceptedShapes(t))
        .extracting(s -> s.columnNames().size())
        .as("the final shape is recorded")
        .containsExactly(3);
  }

  @Test
  void anOlderStreamedShapeDoesNotOverwriteANewerOneOrMisreadLaterTransactions() {
    SchemaGuard guard = new SchemaGuard();
    TransactionAssembler a =
        new TransactionAssembler(guard, 100, false, new SpillStore(null, 1 << 20, 1 << 20), false);
    feed(a, start(100, true), relation(100), insert(100, "1", "a"), STOP);
    // Meanwhile another streamed transaction adds a column and commits first.
    feed(
        a,
        start(200, true),
        relation(200, "extra"),
        insert(200, "2", "b", "x"),
        STOP,
        commit(200, 800));
    feed(a, start(100, false), insert(100, "3", "c"), STOP, commit(100, 900));
    Transaction first = (Transaction) emitted.get(0);
    Transaction second = (Transaction) emitted.get(1);
    assertThat(first.xid()).isEqualTo(200);
    assertThat(((Change.Insert) second.changes().asList().get(1)).table().columnNames())
        .as("read with its own (older) shape")
        .containsExactly("id", "v");
    assertThat(guard.schema(ITEMS).columnNames())
        .as("the later shape stays the run's")
        .containsExactly("id", "v", "extra");
  }

  @Test
  void aStreamedTransactionWithoutDataMessagesIsNotEmitted() {
    SpillStore store = new SpillStore(null, 1 << 20, 1 << 20);
    TransactionAssembler a = assembler(store, false, 10);
    feed(a, start(100, true), STOP, start(100, false), STOP, commit(100, 900));
    assertThat(emitted).as("filtered out by the publications: nothing to deliver").isEmpty();
    assertThat(a.openStreams()).isZero();
    // One whose only data was rolled back is delivered, empty: the server counted it.
    feed(
        a,
        start(200, true),
        relation(200),
        insert(201, "1", "a"),
        STOP,
        new PgOutputMessage.StreamAbort(200, 201),
        commit(200, 950));
    assertThat(emitted).hasSize(1);
    assertThat(((Transaction) emitted.get(0)).changes().isEmpty()).isTrue();
  }

  @Test
  void streamMessagesOutOfProtocolOrderHalt() {
    assertProtocolViolation(
        () -> feed(new TransactionAssembler(new SchemaGuard(), 10, false), start(1, true)),
        "streaming was not requested");
    assertProtocolViolation(
        () -> feed(assembler(new SpillStore(null, 1 << 20, 1 << 20), false, 10), start(5, false)),
        "never started");
    assertProtocolViolation(
        () -> feed(assembler(new SpillStore(null, 1 << 20, 1 << 20), false, 10), commit(5, 100)),
        "never streamed");
    assertProtocolViolation(
        () ->
            feed(
                assembler(new SpillStore(null, 1 << 20, 1 << 20), false, 10),
                new PgOutputMessage.StreamAbort(5, 6)),
        "never streamed");
    TransactionAssembler twice = assembler(new SpillStore(null, 1 << 20, 1 << 20), false, 10);
    feed(twice, start(5, true), STOP);
    assertProtocolViolation(() -> feed(twice, start(5, true)), "already open");
    TransactionAssembler inside = assembler(new SpillStore(null, 1 << 20, 1 << 20), false, 10);
    feed(inside, new PgOutputMessage.Begin(Lsn.of(1), Instant.EPOCH, 3));
    assertProtocolViolation(() -> feed(inside, start(5, true)), "inside an ordinary transaction");
    TransactionAssembler noRelation = assembler(new SpillStore(null, 1 << 20, 1 << 20), false, 10);
    feed(noRelation, start(5, true));
    assertProtocolViolation(
        () -> feed(noRelation, insert(5, "1", "a")), "before its Relation message");
  }

  @Test
  void withoutSpillingAStreamedTransactionIsBoundedByItsChangeCount() {
    TransactionAssembler a = assembler(new SpillStore(null, 1 << 20, 1 << 20), false, 2);
    feed(a, start(5, true), relation(5), insert(5, "1", "a"), insert(5, "2", "b"));
    assertThatThrownBy(() -> feed(a, insert(5, "3", "secret-value")))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.TRANSACTION_TOO_LARGE))
        .hasMessageNotContaining("secret-value");
  }

  @Test
  void pastMaxSpillBytesTheAssemblerHaltsSpillLimitExceeded() {
    TransactionAssembler a = assembler(new SpillStore(dir.resolve("p"), 100, 2000), true, 10);
    feed(a, start(5, true), relation(5));
    assertThatThrownBy(
            () -> {
              for (int i = 0; i < 100; i++) {
                feed(a, insert(5, "" + i, "secret-value-" + i));
              }
            })
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.SPILL_LIMIT_EXCEEDED))
        .hasMessageNotContaining("secret-value");
  }
}
