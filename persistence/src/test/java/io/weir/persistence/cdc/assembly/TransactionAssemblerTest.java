package io.weir.persistence.cdc.assembly;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.PgOutputMessage;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import io.weir.protocol.pgoutput.TupleData;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

class TransactionAssemblerTest {
  private static final PgOutputMessage.Relation ORDERS =
      new PgOutputMessage.Relation(
          OptionalLong.empty(),
          7,
          "public",
          "orders",
          ReplicaIdentity.DEFAULT,
          List.of(
              new PgOutputMessage.Relation.Column(true, "id", 23, -1),
              new PgOutputMessage.Relation.Column(false, "v", 25, -1)));

  private static PgOutputMessage.Begin begin(long xid) {
    return new PgOutputMessage.Begin(Lsn.of(1000 * xid), Instant.EPOCH, xid);
  }

  private static PgOutputMessage.Commit commit(long xid) {
    return new PgOutputMessage.Commit(Lsn.of(1000 * xid), Lsn.of(1000 * xid + 50), Instant.EPOCH);
  }

  private static PgOutputMessage.Insert insert(String id, String v) {
    return new PgOutputMessage.Insert(OptionalLong.empty(), 7, TupleData.ofText(id, v));
  }

  @Test
  void emitsATransactionOnlyAtItsCommitWithChangesInOrder() {
    TransactionAssembler a = new TransactionAssembler(new SchemaGuard(), 100, true);
    assertThat(a.accept(begin(5))).isEmpty();
    assertThat(a.accept(ORDERS)).isEmpty();
    assertThat(a.accept(insert("1", "a"))).isEmpty();
    assertThat(a.accept(insert("2", "b"))).isEmpty();
    assertThat(
            a.accept(
                new PgOutputMessage.LogicalMessage(
                    OptionalLong.empty(),
                    true,
                    Lsn.of(1),
                    "p",
                    java.nio.ByteBuffer.wrap("c".getBytes(StandardCharsets.UTF_8)))))
        .isEmpty();
    assertThat(a.inTransaction()).isTrue();
    Optional<Transaction> t = a.accept(commit(5)).map(Transaction.class::cast);
    assertThat(t).isPresent();
    assertThat(t.get().xid()).isEqualTo(5);
    assertThat(t.get().endLsn()).isEqualTo(Lsn.of(5050));
    assertThat(t.get().changes()).hasSize(3).element(2).isInstanceOf(Change.Message.class);
    assertThat(t.get().rowCount()).isEqualTo(2);
    assertThat(t.get().rowsByTable())
        .as("row counts per table travel with the transaction")
        .hasSize(1)
        .containsValue(2L);
    assertThat(t.get().rowsByTable().keySet().iterator().next().qualifiedName())
        .isEqualTo("public.orders");
    assertThat(a.inTransaction()).isFalse();
    assertThat(a.accept(begin(6))).isEmpty();
    assertThat(((Transaction) a.accept(commit(6)).orElseThrow()).changes())
        .as("state is reset between transactions")
        .isEmpty();
  }

  @Test
  void messagesRideTheirTransactionOrStandAloneAndAreDroppedWhenOff() {
    java.nio.ByteBuffer content =
        java.nio.ByteBuffer.wrap("user-bytes".getBytes(StandardCharsets.UTF_8));
    PgOutputMessage.LogicalMessage standalone =
        new PgOutputMessage.LogicalMessage(
            OptionalLong.empty(), false, Lsn.of(77), "audit", content);
    TransactionAssembler on = new TransactionAssembler(new SchemaGuard(), 10, true);
    io.weir.protocol.cdc.CdcMessage m =
        (io.weir.protocol.cdc.CdcMessage) on.accept(standalone).orElseThrow();
    assertThat(m.lsn()).isEqualTo(Lsn.of(77));
    assertThat(m.prefix()).isEqualTo("audit");
    assertThat(m.toString()).as("message content never in toString").doesNotContain("user-bytes");
    TransactionAssembler off = new TransactionAssembler(new SchemaGuard(), 10, false);
    assertThat(off.accept(standalone))
        .as("handed on so the pipeline can confirm past it")
        .containsInstanceOf(io.weir.protocol.cdc.CdcMessage.class);
    off.accept(begin(1));
    off.accept(
        new PgOutputMessage.LogicalMessage(
            OptionalLong.empty(), true, Lsn.of(78), "audit", content));
    assertThat(((Transaction) off.accept(commit(1)).orElseThrow()).changes())
        .as("transactional messages dropped when off")
        .isEmpty();
  }

  @Test
  void aTransactionHoldingOnlyAWatermarkBecomesAWatermark() {
    java.nio.ByteBuffer mark =
        java.nio.ByteBuffer.wrap("{\"chunk\":1}".getBytes(StandardCharsets.UTF_8));
    TransactionAssembler a = new TransactionAssembler(new SchemaGuard(), 10, false);
    a.accept(begin(3));
    a.accept(
        new PgOutputMessage.LogicalMessage(
            OptionalLong.empty(),
            true,
            Lsn.of(90),
            io.weir.protocol.cdc.SnapshotWatermark.PREFIX,
            mark));
    io.weir.protocol.cdc.SnapshotWatermark w =
        (io.weir.protocol.cdc.SnapshotWatermark) a.accept(commit(3)).orElseThrow();
    assertThat(w.content()).isEqualTo("{\"chunk\":1}");
    assertThat(a.inTransaction()).isFalse();
  }

  @Test
  void protocolOrderFaultsHalt() {
    TransactionAssembler a = new TransactionAssembler(new SchemaGuard(), 100, true);
    a.accept(ORDERS);
    assertThatThrownBy(() -> a.accept(insert("1", "a")))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.PROTOCOL_VIOLATION));
    assertThatThrownBy(() -> a.accept(commit(1))).isInstanceOf(PipelineHaltException.class);
    TransactionAssembler b = new TransactionAssembler(new SchemaGuard(), 100, true);
    b.accept(begin(1));
    assertThatThrownBy(() -> b.accept(insert("1", "a")))
        .as("a change for a relation never described cannot be interpreted")
        .isInstanceOf(PipelineHaltException.class)
        .hasMessageContaining("before its Relation message");
  }

  @Test
  void oversizedTransactionsHaltRatherThanExhaustTheHeap() {
    TransactionAssembler a = new TransactionAssembler(new SchemaGuard(), 2, true);
    a.accept(begin(1));
    a.accept(ORDERS);
    a.accept(insert("1", "a"));
    a.accept(insert("2", "b"));
    assertThatThrownBy(() -> a.accept(insert("3", "secret-value")))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.TRANSACTION_TOO_LARGE))
        .hasMessageNotContaining("secret-value");
  }

  @Test
  void aTupleOfTheWrongWidthIsRefused() {
    TransactionAssembler a = new TransactionAssembler(new SchemaGuard(), 10, true);
    a.accept(begin(1));
    a.accept(ORDERS);
    assertThatThrownBy(
            () ->
                a.accept(
                    new PgOutputMessage.Insert(OptionalLong.empty(), 7, TupleData.ofText("1"))))
        .isInstanceOf(io.weir.protocol.pgoutput.PgOutputDecodeException.class);
  }
}
