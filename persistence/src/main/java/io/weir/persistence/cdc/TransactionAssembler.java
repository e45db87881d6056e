package io.weir.persistence.cdc;

import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.CdcEvent;
import io.weir.protocol.cdc.CdcMessage;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.SnapshotWatermark;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.MessageType;
import io.weir.protocol.pgoutput.PgOutputMessage;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Turns decoded pgoutput messages (protocol version 1: no streaming) into committed {@link
 * Transaction}s. Changes are held from Begin until Commit, so only committed work is ever emitted;
 * PostgreSQL does not send rolled-back transactions in this mode. Relation messages pass through
 * the {@link SchemaGuard}. Messages out of protocol order (a change outside a transaction, a Begin
 * inside one) halt with {@link HaltReason#PROTOCOL_VIOLATION}; a transaction with more than {@code
 * maxChanges} changes halts with {@link HaltReason#TRANSACTION_TOO_LARGE} (it would be held in
 * memory whole).
 *
 * <p>Two-phase and streaming messages are not handled here: the pipeline does not request them
 * (with the slot's two_phase option off, a prepared transaction is decoded at COMMIT PREPARED as an
 * ordinary commit).
 *
 * <p>Not thread-safe: one instance per stream run.
 */
public final class TransactionAssembler {
  private final SchemaGuard schemas;
  private final int maxChanges;

  private boolean open;
  private long xid;
  private Lsn finalLsn;
  private Instant commitTime;
  private final List<Change> changes = new ArrayList<>();
  private final Map<Long, TableSchema> announced = new LinkedHashMap<>();
  // Shapes first accepted in a transaction, to record once it is applied. Identity-keyed and
  // thread-safe: the sink stage takes them out on another thread.
  private final Map<Transaction, List<TableSchema>> acceptedShapes =
      java.util.Collections.synchronizedMap(new java.util.IdentityHashMap<>());

  /** Table shapes first accepted in {@code t}, removed from this assembler; empty if none. */
  public List<TableSchema> takeAcceptedShapes(Transaction t) {
    List<TableSchema> shapes = acceptedShapes.remove(t);
    return shapes == null ? List.of() : shapes;
  }

  private final boolean messages;
  /** Content of a snapshot watermark message in the open transaction, if any. */
  private String watermark;

  /**
   * @param messages emit transactional logical messages as changes of their transaction; when
   *     false they are dropped. Non-transactional ones always become {@link CdcMessage}s (the
   *     pipeline confirms past them and delivers them only when messages are on). A transaction
   *     holding only a {@link SnapshotWatermark#PREFIX} message becomes a {@link SnapshotWatermark}.
   */
  public TransactionAssembler(SchemaGuard schemas, int maxChanges, boolean messages) {
    this.schemas = schemas;
    this.maxChanges = maxChanges;
    this.messages = messages;
  }

  /** Whether a transaction has begun and not yet committed. */
  public boolean inTransaction() {
    return open;
  }

  /**
   * Accepts the next message.
   *
   * @return the transaction when {@code message} is its Commit; a {@link CdcMessage} for a
   *     non-transactional logical message (when messages are on)
   * @throws PipelineHaltException for schema faults, protocol order faults and oversized transactions
   */
  public Optional<CdcEvent> accept(PgOutputMessage message) {
    MessageType type = message.type();
    switch (type) {
      case BEGIN -> {
        if (open) {
          throw protocol("Begin inside an open transaction");
        }
        PgOutputMessage.Begin b = (PgOutputMessage.Begin) message;
        open = true;
        xid = b.xid();
        finalLsn = b.finalLsn();
        commitTime = b.commitTime();
        return Optional.empty();
      }
      case COMMIT -> {
        if (!open) {
          throw protocol("Commit outside a transaction");
        }
        PgOutputMessage.Commit c = (PgOutputMessage.Commit) message;
        if (watermark != null && changes.isEmpty() && announced.isEmpty()) {
          SnapshotWatermark w = new SnapshotWatermark(c.commitLsn(), c.endLsn(), watermark);
          open = false;
          watermark = null;
          return Optional.of(w);
        }
        watermark = null;
        Transaction t =
            new Transaction(xid, c.commitLsn(), c.endLsn(), c.commitTime(), changes, List.copyOf(announced.values()));
        List<TableSchema> accepted = schemas.drainUnrecorded();
        if (!accepted.isEmpty()) {
          acceptedShapes.put(t, accepted);
        }
        open = false;
        changes.clear();
        announced.clear();
        return Optional.of(t);
      }
      case RELATION -> {
        schemas.accept((PgOutputMessage.Relation) message).ifPresent(s -> announced.put(s.relationId(), s));
        return Optional.empty();
      }
      case INSERT -> {
        PgOutputMessage.Insert m = (PgOutputMessage.Insert) message;
        TableSchema table = table(m.relationId(), type);
        m.newTuple().requireColumnCount(table.columns().size());
        add(new Change.Insert(table, m.newTuple()));
      }
      case UPDATE -> {
        PgOutputMessage.Update m = (PgOutputMessage.Update) message;
        TableSchema table = table(m.relationId(), type);
        m.newTuple().requireColumnCount(table.columns().size());
        add(new Change.Update(table, m.oldTupleKind(), m.oldTuple(), m.newTuple()));
      }
      case DELETE -> {
        PgOutputMessage.Delete m = (PgOutputMessage.Delete) message;
        TableSchema table = table(m.relationId(), type);
        m.oldTuple().requireColumnCount(table.columns().size());
        add(new Change.Delete(table, m.oldTupleKind(), m.oldTuple()));
      }
      case TRUNCATE -> {
        PgOutputMessage.Truncate m = (PgOutputMessage.Truncate) message;
        List<TableSchema> tables = new ArrayList<>();
        for (long id : m.relationIds()) {
          tables.add(table(id, type));
        }
        add(new Change.Truncate(tables, m.cascade(), m.restartIdentity()));
      }
      case MESSAGE -> {
        PgOutputMessage.LogicalMessage m = (PgOutputMessage.LogicalMessage) message;
        if (!m.transactional()) {
          // Handed on even when messages are off: the pipeline must confirm past it.
          return Optional.of(new CdcMessage(m.lsn(), m.prefix(), m.contentBytes()));
        }
        if (SnapshotWatermark.PREFIX.equals(m.prefix())) {
          if (!open) {
            throw protocol("a change arrived outside a transaction");
          }
          watermark = new String(m.contentBytes(), java.nio.charset.StandardCharsets.UTF_8);
        } else if (messages) {
          add(new Change.Message(m.prefix(), m.contentBytes()));
        }
      }
      case ORIGIN, TYPE -> {
        // Origin names a replication origin; Type names a non-built-in type. Neither changes data.
      }
      default -> throw protocol(type + " is not expected without streaming or two-phase decoding");
    }
    return Optional.empty();
  }

  private void add(Change change) {
    if (!open) {
      throw protocol("a change arrived outside a transaction");
    }
    if (changes.size() >= maxChanges) {
      throw new PipelineHaltException(
          HaltReason.TRANSACTION_TOO_LARGE,
          "transaction " + xid + " ending at " + finalLsn + " has more than " + maxChanges + " changes");
    }
    changes.add(change);
  }

  private TableSchema table(long relationId, MessageType type) {
    TableSchema t = schemas.schema(relationId);
    if (t == null) {
      throw protocol(type + " for relation " + relationId + " before its Relation message");
    }
    return t;
  }

  private static PipelineHaltException protocol(String what) {
    return new PipelineHaltException(HaltReason.PROTOCOL_VIOLATION, what);
  }
}
