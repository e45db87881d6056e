package io.weir.persistence.cdc.assembly;

import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.CdcEvent;
import io.weir.protocol.cdc.CdcMessage;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.Changes;
import io.weir.protocol.cdc.SnapshotWatermark;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.MessageType;
import io.weir.protocol.pgoutput.PgOutputMessage;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.LongFunction;

/**
 * Turns decoded pgoutput messages into committed {@link Transaction}s, in commit order. Only
 * committed work is ever emitted. Relation messages pass through the {@link SchemaGuard}. Messages
 * out of protocol order halt with {@link HaltReason#PROTOCOL_VIOLATION}.
 *
 * <h2>Ordinary transactions</h2>
 *
 * Begin, changes, Commit: the changes are held in memory from Begin until Commit and emitted whole
 * (PostgreSQL sends only committed transactions this way). More than {@code maxChanges} changes
 * halt with {@link HaltReason#TRANSACTION_TOO_LARGE}.
 *
 * <h2>Streamed transactions (protocol 2, when a {@link SpillStore} is given)</h2>
 *
 * A large transaction arrives in blocks (Stream Start ... Stream Stop) while it runs, interleaved
 * with other streamed transactions' blocks and with ordinary transactions. Each top-level xid gets
 * a {@link SpillStore.Buffer} holding the raw payloads of its Relation and change messages (in
 * memory, or on disk past the memory bound) and a {@link SchemaGuard.View} of its table shapes.
 * Each change is decoded and checked when it arrives (its table known, its width right), and
 * counted under the (sub)transaction xid it carries. Then:
 *
 * <ul>
 *   <li>Stream Abort of the top-level xid drops the buffer: nothing is delivered.
 *   <li>Stream Abort of a subtransaction ({@code subXid != xid}) marks that xid aborted: its
 *       changes are skipped when the transaction is read, and its counts are dropped. Relation
 *       messages it carried stay in effect: the server does not resend them to the same
 *       transaction.
 *   <li>Stream Commit emits the transaction in its place in commit order, with the counts of the
 *       surviving changes and {@link StreamedChanges} that decode the buffer as the sink reads it.
 *       A streamed transaction that never carried a data message is not emitted: PostgreSQL 15
 *       streams large transactions whose changes the publications filter out as empty blocks.
 * </ul>
 *
 * A block for an xid that never had a first block, a first block for an xid already open, a Stream
 * Commit or Abort of an unknown xid, or a stream message inside an ordinary transaction halt with
 * {@link HaltReason#PROTOCOL_VIOLATION}. Without spilling, a streamed transaction over {@code
 * maxChanges} changes halts like an ordinary one; with it, disk bounds it ({@link
 * HaltReason#SPILL_LIMIT_EXCEEDED}).
 *
 * <p>Two-phase messages are not handled: the pipeline does not request them (with the slot's
 * two_phase option off, a prepared transaction is decoded at COMMIT PREPARED as an ordinary
 * commit).
 *
 * <p>Not thread-safe: one instance per stream run.
 */
public final class TransactionAssembler {
  private final SchemaGuard schemas;
  private final int maxChanges;
  private final boolean messages;
  private final SpillStore spill;
  private final boolean spills;

  private boolean open;
  private long xid;
  private Lsn finalLsn;
  private final List<Change> changes = new ArrayList<>();
  private final Counts counts = new Counts();
  private final Map<Long, TableSchema> announced = new LinkedHashMap<>();

  private final Map<Long, OpenStream> streams = new HashMap<>();
  private OpenStream block;

  // Shapes first accepted in a transaction, to record once it is applied. Identity-keyed and
  // thread-safe: the sink stage takes them out on another thread.
  private final Map<Transaction, List<TableSchema>> acceptedShapes =
      Collections.synchronizedMap(new IdentityHashMap<>());

  /**
   * Protocol 1 only: stream messages are a protocol violation.
   *
   * @param messages emit transactional logical messages as changes of their transaction; when false
   *     they are dropped. Non-transactional ones always become {@link CdcMessage}s (the pipeline
   *     confirms past them and delivers them only when messages are on). A transaction holding only
   *     a {@link SnapshotWatermark#PREFIX} message becomes a {@link SnapshotWatermark}.
   */
  public TransactionAssembler(SchemaGuard schemas, int maxChanges, boolean messages) {
    this(schemas, maxChanges, messages, null, false);
  }

  /**
   * @param spill where streamed transactions are buffered; null when streaming was not requested
   * @param spills whether {@code spill} may go to disk (then {@code maxChanges} does not bound
   *     streamed transactions)
   */
  public TransactionAssembler(
      SchemaGuard schemas, int maxChanges, boolean messages, SpillStore spill, boolean spills) {
    this.schemas = schemas;
    this.maxChanges = maxChanges;
    this.messages = messages;
    this.spill = spill;
    this.spills = spills;
  }

  /** Table shapes first accepted in {@code t}, removed from this assembler; empty if none. */
  public List<TableSchema> takeAcceptedShapes(Transaction t) {
    List<TableSchema> shapes = acceptedShapes.remove(t);
    return shapes == null ? List.of() : shapes;
  }

  /** Content of a snapshot watermark message in the open transaction, if any. */
  private String watermark;

  /** Whether an ordinary transaction has begun and not yet committed. */
  public boolean inTransaction() {
    return open;
  }

  /** Streamed transactions begun and neither committed nor aborted. */
  public int openStreams() {
    return streams.size();
  }

  /** As {@link #accept(PgOutputMessage, ByteBuffer)}, for messages that are never streamed. */
  public Optional<CdcEvent> accept(PgOutputMessage message) {
    return accept(message, null);
  }

  /**
   * Accepts the next message.
   *
   * @param payload the message's bytes as received, kept for streamed transactions (required for
   *     messages inside a stream block); its position is left as it was
   * @return the transaction when {@code message} is its Commit or Stream Commit; a {@link
   *     CdcMessage} for a non-transactional logical message; a {@link SnapshotWatermark}
   * @throws PipelineHaltException for schema faults, protocol order faults and oversized
   *     transactions
   */
  public Optional<CdcEvent> accept(PgOutputMessage message, ByteBuffer payload) {
    MessageType type = message.type();
    if (block != null && message instanceof PgOutputMessage.Streamable s) {
      streamed(s, payload);
      return Optional.empty();
    }
    switch (type) {
      case BEGIN -> {
        if (open) {
          throw protocol("Begin inside an open transaction");
        }
        PgOutputMessage.Begin b = (PgOutputMessage.Begin) message;
        open = true;
        xid = b.xid();
        finalLsn = b.finalLsn();
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
            new Transaction(
                xid,
                c.commitLsn(),
                c.endLsn(),
                c.commitTime(),
                Changes.of(changes),
                List.copyOf(announced.values()),
                counts.rows,
                counts.byTable());
        List<TableSchema> accepted = schemas.drainUnrecorded();
        if (!accepted.isEmpty()) {
          acceptedShapes.put(t, accepted);
        }
        open = false;
        changes.clear();
        announced.clear();
        counts.clear();
        return Optional.of(t);
      }
      case RELATION -> {
        schemas
            .accept((PgOutputMessage.Relation) message)
            .ifPresent(s -> announced.put(s.relationId(), s));
        return Optional.empty();
      }
      case INSERT, UPDATE, DELETE, TRUNCATE ->
          add(toChange(message, id -> table(schemas.schema(id), id, type)));
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
          watermark = new String(m.contentBytes(), StandardCharsets.UTF_8);
        } else if (messages) {
          add(toChange(m, null));
        }
      }
      case ORIGIN, TYPE -> {
        // Origin names a replication origin; Type names a non-built-in type. Neither changes data.
      }
      case STREAM_START -> streamStart((PgOutputMessage.StreamStart) message);
      case STREAM_STOP -> block = null;
      case STREAM_COMMIT -> {
        return streamCommit((PgOutputMessage.StreamCommit) message);
      }
      case STREAM_ABORT -> streamAbort((PgOutputMessage.StreamAbort) message);
      default -> throw protocol(type + " is not expected without two-phase decoding");
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
          "transaction "
              + xid
              + " ending at "
              + finalLsn
              + " has more than "
              + maxChanges
              + " changes");
    }
    changes.add(change);
    counts.add(change);
  }

  // ---------------------------------------------------------------------------------------------
  // streamed transactions

  /** One streamed top-level transaction between its first Stream Start and its end. */
  private static final class OpenStream {
    final long xid;
    final SpillStore.Buffer buffer;
    final SchemaGuard.View view;

    /** Counts per (sub)transaction xid, so that a subtransaction's abort can take its share out. */
    final Map<Long, Counts> bySubXid = new HashMap<>();

    final Set<Long> abortedSubXids = new HashSet<>();
    long changes;

    /**
     * Whether any data message arrived in its blocks, kept or not (as ReplicationConnection
     * counts).
     */
    boolean sawData;

    OpenStream(long xid, SpillStore.Buffer buffer, SchemaGuard.View view) {
      this.xid = xid;
      this.buffer = buffer;
      this.view = view;
    }
  }

  private void streamStart(PgOutputMessage.StreamStart s) {
    if (spill == null) {
      throw protocol("Stream Start, but streaming was not requested");
    }
    if (open) {
      throw protocol("Stream Start inside an ordinary transaction");
    }
    OpenStream st = streams.get(s.xid());
    if (s.firstSegment()) {
      if (st != null) {
        throw protocol("first Stream Start of transaction " + s.xid() + ", which is already open");
      }
      st = new OpenStream(s.xid(), spill.open(s.xid()), schemas.view());
      streams.put(s.xid(), st);
    } else if (st == null) {
      throw protocol(
          "Stream Start for transaction "
              + s.xid()
              + ", which was never started (or already ended)");
    }
    block = st;
  }

  private void streamed(PgOutputMessage.Streamable m, ByteBuffer payload) {
    OpenStream st = block;
    if (payload == null) {
      throw new IllegalArgumentException("a streamed message needs its payload");
    }
    long subXid =
        m.streamXid()
            .orElseThrow(() -> protocol(m.type() + " without an xid inside a stream block"));
    switch (m.type()) {
      case RELATION -> {
        st.view.accept((PgOutputMessage.Relation) m);
        st.buffer.append(payload);
      }
      case INSERT, UPDATE, DELETE, TRUNCATE, MESSAGE -> {
        st.sawData = true;
        if (m instanceof PgOutputMessage.LogicalMessage lm && (!messages || !lm.transactional())) {
          return; // not delivered (a non-transactional message cannot be inside a block)
        }
        Change change =
            toChange(
                m,
                id -> {
                  if (!st.view.sent(id)) {
                    st.view.inherit(
                        id); // the server sends the shape in each streamed transaction; be lenient
                  }
                  return table(st.view.schema(id), id, m.type());
                });
        if (!spills && st.changes >= maxChanges) {
          throw new PipelineHaltException(
              HaltReason.TRANSACTION_TOO_LARGE,
              "streamed transaction "
                  + st.xid
                  + " has more than "
                  + maxChanges
                  + " changes and spilling is off");
        }
        st.buffer.append(payload);
        st.changes++;
        st.bySubXid.computeIfAbsent(subXid, k -> new Counts()).add(change);
      }
      default -> {
        // Type: names a type for a later Relation; no data.
      }
    }
  }

  private Optional<CdcEvent> streamCommit(PgOutputMessage.StreamCommit c) {
    if (open) {
      throw protocol("Stream Commit inside an ordinary transaction");
    }
    OpenStream st = streams.remove(c.xid());
    if (st == null) {
      throw protocol("Stream Commit for transaction " + c.xid() + ", which was never streamed");
    }
    try {
      schemas.commit(st.view);
      st.buffer.seal();
    } catch (RuntimeException e) {
      st.buffer.release();
      throw e;
    }
    if (!st.sawData) {
      // PostgreSQL 15 streams a large transaction even when the publications filter out all its
      // changes (e.g. a mirror sink's own writes into the source database), as empty blocks.
      // Nothing to deliver; ReplicationConnection does not wait for its acknowledgement either.
      st.buffer.release();
      return Optional.empty();
    }
    Counts total = new Counts();
    st.bySubXid.forEach(
        (sub, n) -> {
          if (!st.abortedSubXids.contains(sub)) {
            total.merge(n);
          }
        });
    Transaction t =
        new Transaction(
            c.xid(),
            c.commitLsn(),
            c.endLsn(),
            c.commitTime(),
            new StreamedChanges(
                st.xid, st.buffer, total.changes, st.view.inherited(), st.abortedSubXids, messages),
            st.view.announced(),
            total.rows,
            total.byTable());
    List<TableSchema> accepted = schemas.drainUnrecorded();
    if (!accepted.isEmpty()) {
      acceptedShapes.put(t, accepted);
    }
    return Optional.of(t);
  }

  private void streamAbort(PgOutputMessage.StreamAbort a) {
    if (open) {
      throw protocol("Stream Abort inside an ordinary transaction");
    }
    OpenStream st = streams.get(a.xid());
    if (st == null) {
      throw protocol("Stream Abort for transaction " + a.xid() + ", which was never streamed");
    }
    if (a.isTopLevel()) {
      streams.remove(a.xid());
      st.buffer.release();
    } else {
      st.abortedSubXids.add(a.subXid());
      st.bySubXid.remove(a.subXid());
    }
  }

  /** Releases the buffers of streamed transactions still open (the run is ending). */
  public void releaseOpenStreams() {
    streams.values().forEach(st -> st.buffer.release());
    streams.clear();
    block = null;
  }

  // ---------------------------------------------------------------------------------------------
  // shared with StreamedChanges

  /**
   * The change a data message describes, its tables resolved by {@code tables} and row widths
   * checked against them.
   */
  static Change toChange(PgOutputMessage message, LongFunction<TableSchema> tables) {
    switch (message.type()) {
      case INSERT -> {
        PgOutputMessage.Insert m = (PgOutputMessage.Insert) message;
        TableSchema table = tables.apply(m.relationId());
        m.newTuple().requireColumnCount(table.columns().size());
        return new Change.Insert(table, m.newTuple());
      }
      case UPDATE -> {
        PgOutputMessage.Update m = (PgOutputMessage.Update) message;
        TableSchema table = tables.apply(m.relationId());
        m.newTuple().requireColumnCount(table.columns().size());
        return new Change.Update(table, m.oldTupleKind(), m.oldTuple(), m.newTuple());
      }
      case DELETE -> {
        PgOutputMessage.Delete m = (PgOutputMessage.Delete) message;
        TableSchema table = tables.apply(m.relationId());
        m.oldTuple().requireColumnCount(table.columns().size());
        return new Change.Delete(table, m.oldTupleKind(), m.oldTuple());
      }
      case TRUNCATE -> {
        PgOutputMessage.Truncate m = (PgOutputMessage.Truncate) message;
        List<TableSchema> truncated = new ArrayList<>();
        for (long id : m.relationIds()) {
          truncated.add(tables.apply(id));
        }
        return new Change.Truncate(truncated, m.cascade(), m.restartIdentity());
      }
      case MESSAGE -> {
        PgOutputMessage.LogicalMessage m = (PgOutputMessage.LogicalMessage) message;
        return new Change.Message(m.prefix(), m.contentBytes());
      }
      default -> throw new IllegalArgumentException(message.type() + " is not a change");
    }
  }

  static TableSchema table(TableSchema known, long relationId, MessageType type) {
    if (known == null) {
      throw protocol(type + " for relation " + relationId + " before its Relation message");
    }
    return known;
  }

  static PipelineHaltException protocol(String what) {
    return new PipelineHaltException(HaltReason.PROTOCOL_VIOLATION, what);
  }

  /** Changes and row changes of a transaction (or one of its subtransactions), per table. */
  private static final class Counts {
    long changes;
    long rows;
    // Identity-keyed: one TableSchema instance per accepted shape, and this runs for every row.
    final Map<TableSchema, long[]> tables = new IdentityHashMap<>();

    void add(Change change) {
      changes++;
      TableSchema table = Transaction.rowTable(change);
      if (table != null) {
        rows++;
        tables.computeIfAbsent(table, k -> new long[1])[0]++;
      }
    }

    void merge(Counts other) {
      changes += other.changes;
      rows += other.rows;
      other.tables.forEach((t, n) -> tables.computeIfAbsent(t, k -> new long[1])[0] += n[0]);
    }

    void clear() {
      changes = 0;
      rows = 0;
      tables.clear();
    }

    Map<TableSchema, Long> byTable() {
      Map<TableSchema, Long> out = new HashMap<>();
      tables.forEach((table, n) -> out.merge(table, n[0], Long::sum));
      return out;
    }
  }
}
