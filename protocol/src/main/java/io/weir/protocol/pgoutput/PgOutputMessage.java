package io.weir.protocol.pgoutput;

import io.weir.protocol.Lsn;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * One decoded pgoutput message (PostgreSQL 15, protocol versions 1 to 3).
 *
 * <p>Dispatch on {@link #type()}. XIDs and OIDs are unsigned 32-bit on the wire and are held as
 * non-negative {@code long}s; timestamps are converted from microseconds since 2000-01-01 to {@link
 * Instant}.
 *
 * <p>No {@code toString()} prints row data or message content: {@link TupleData} prints column
 * kinds only, and {@link LogicalMessage} and the two-phase messages print the lengths of their
 * application-chosen prefix and GID, not the strings. Catalog names (namespace, relation, column,
 * type, origin) are printed.
 */
public sealed interface PgOutputMessage {

  MessageType type();

  /**
   * The messages that may travel inside a stream block (between {@link StreamStart} and {@link
   * StreamStop}), where they carry an xid.
   */
  sealed interface Streamable extends PgOutputMessage {
    /**
     * Inside a stream block, the xid of the transaction that made the change: the block's top-level
     * xid from {@link StreamStart}, or the xid of one of its subtransactions. A {@link StreamAbort}
     * for that subtransaction discards the changes carrying its xid. Empty outside stream blocks.
     */
    OptionalLong streamXid();
  }

  /** Start of a transaction; its changes follow, then {@link Commit}. */
  record Begin(Lsn finalLsn, Instant commitTime, long xid) implements PgOutputMessage {
    @Override
    public MessageType type() {
      return MessageType.BEGIN;
    }
  }

  /**
   * End of a transaction begun by {@link Begin}.
   *
   * @param commitLsn the LSN of the commit record
   * @param endLsn the LSN just past the commit record: the position to confirm once the transaction
   *     is durably applied
   */
  record Commit(Lsn commitLsn, Lsn endLsn, Instant commitTime) implements PgOutputMessage {
    @Override
    public MessageType type() {
      return MessageType.COMMIT;
    }
  }

  /** The replication origin the transaction came from (sent after Begin or Stream Start). */
  record Origin(Lsn originCommitLsn, String originName) implements PgOutputMessage {
    @Override
    public MessageType type() {
      return MessageType.ORIGIN;
    }
  }

  /**
   * A table's shape, sent before its first change and again after it changes. Consumers keep the
   * latest per {@link #relationId} to interpret tuples.
   *
   * @param namespace the schema name; empty for {@code pg_catalog}
   */
  record Relation(
      OptionalLong streamXid,
      long relationId,
      String namespace,
      String name,
      ReplicaIdentity replicaIdentity,
      List<Column> columns)
      implements Streamable {

    public Relation {
      columns = List.copyOf(columns);
    }

    /**
     * @param partOfKey whether the column belongs to the replica identity
     * @param typeModifier the type modifier ({@code atttypmod}), -1 if none
     */
    public record Column(boolean partOfKey, String name, long typeOid, int typeModifier) {}

    @Override
    public MessageType type() {
      return MessageType.RELATION;
    }
  }

  /** Names a non-built-in type used by a following Relation. */
  record Type(OptionalLong streamXid, long typeOid, String namespace, String name)
      implements Streamable {
    @Override
    public MessageType type() {
      return MessageType.TYPE;
    }
  }

  /** A new row in the relation {@code relationId}. */
  record Insert(OptionalLong streamXid, long relationId, TupleData newTuple) implements Streamable {
    public Insert {
      Objects.requireNonNull(newTuple, "newTuple");
    }

    @Override
    public MessageType type() {
      return MessageType.INSERT;
    }
  }

  /**
   * A changed row, with the old key or row where the replica identity calls for it. Columns of
   * {@code newTuple} may be {@link ColumnKind#UNCHANGED_TOAST}.
   *
   * @param oldTupleKind {@link OldTupleKind#KEY} if a replica identity column changed, {@link
   *     OldTupleKind#FULL} under {@code REPLICA IDENTITY FULL}, otherwise {@link OldTupleKind#NONE}
   * @param oldTuple the old key or row; {@code null} exactly when {@code oldTupleKind} is {@link
   *     OldTupleKind#NONE}
   */
  record Update(
      OptionalLong streamXid,
      long relationId,
      OldTupleKind oldTupleKind,
      TupleData oldTuple,
      TupleData newTuple)
      implements Streamable {

    public Update {
      Objects.requireNonNull(newTuple, "newTuple");
      if ((oldTupleKind == OldTupleKind.NONE) != (oldTuple == null)) {
        throw new IllegalArgumentException(
            "oldTuple must be null exactly when oldTupleKind is NONE");
      }
    }

    /** The old key or row, if the message carries one. */
    public Optional<TupleData> old() {
      return Optional.ofNullable(oldTuple);
    }

    @Override
    public MessageType type() {
      return MessageType.UPDATE;
    }
  }

  /**
   * A removed row, identified by its old key or, under {@code REPLICA IDENTITY FULL}, its whole old
   * row.
   *
   * @param oldTupleKind {@link OldTupleKind#KEY} or {@link OldTupleKind#FULL}
   */
  record Delete(
      OptionalLong streamXid, long relationId, OldTupleKind oldTupleKind, TupleData oldTuple)
      implements Streamable {

    public Delete {
      Objects.requireNonNull(oldTuple, "oldTuple");
      if (oldTupleKind == OldTupleKind.NONE) {
        throw new IllegalArgumentException("a Delete always carries an old key or row");
      }
    }

    @Override
    public MessageType type() {
      return MessageType.DELETE;
    }
  }

  /** TRUNCATE of one or more relations, with its CASCADE and RESTART IDENTITY options. */
  record Truncate(
      OptionalLong streamXid, boolean cascade, boolean restartIdentity, List<Long> relationIds)
      implements Streamable {

    public Truncate {
      relationIds = List.copyOf(relationIds);
    }

    @Override
    public MessageType type() {
      return MessageType.TRUNCATE;
    }
  }

  /**
   * A message written by {@code pg_logical_emit_message}.
   *
   * @param transactional whether it belongs to a transaction (and arrives inside it) rather than
   *     being decoded as soon as it was written
   * @param lsn the LSN of the message
   * @param prefix the application-chosen prefix
   * @param content the payload, read-only; each call returns an independent view
   */
  record LogicalMessage(
      OptionalLong streamXid, boolean transactional, Lsn lsn, String prefix, ByteBuffer content)
      implements Streamable {

    public LogicalMessage {
      content = content.asReadOnlyBuffer();
    }

    @Override
    public ByteBuffer content() {
      return content.duplicate();
    }

    /** A copy of the payload. */
    public byte[] contentBytes() {
      byte[] bytes = new byte[content.remaining()];
      content.duplicate().get(bytes);
      return bytes;
    }

    @Override
    public MessageType type() {
      return MessageType.MESSAGE;
    }

    /** Everything but the prefix and content, of which only the lengths. */
    @Override
    public String toString() {
      return String.format(
          "LogicalMessage[streamXid=%s, transactional=%s, lsn=%s, prefixLength=%s,"
              + " contentLength=%s]",
          streamXid, transactional, lsn, prefix.length(), content.remaining());
    }
  }

  /**
   * Opens a stream block: a chunk of a large transaction sent before it ends.
   *
   * @param firstSegment whether this is the transaction's first block
   */
  record StreamStart(long xid, boolean firstSegment) implements PgOutputMessage {
    @Override
    public MessageType type() {
      return MessageType.STREAM_START;
    }
  }

  /** Closes the current stream block. */
  record StreamStop() implements PgOutputMessage {
    @Override
    public MessageType type() {
      return MessageType.STREAM_STOP;
    }
  }

  /** A streamed transaction committed: apply its blocks. */
  record StreamCommit(long xid, Lsn commitLsn, Lsn endLsn, Instant commitTime)
      implements PgOutputMessage {
    @Override
    public MessageType type() {
      return MessageType.STREAM_COMMIT;
    }
  }

  /**
   * A streamed transaction, or one of its subtransactions, aborted: discard the changes streamed
   * for {@code subXid}, which equals {@code xid} for the whole transaction.
   */
  record StreamAbort(long xid, long subXid) implements PgOutputMessage {
    /** Whether the whole transaction aborted rather than a subtransaction. */
    public boolean isTopLevel() {
      return xid == subXid;
    }

    @Override
    public MessageType type() {
      return MessageType.STREAM_ABORT;
    }
  }

  /** Start of a prepared transaction's changes (two-phase, protocol 3). */
  record BeginPrepare(Lsn prepareLsn, Lsn endLsn, Instant prepareTime, long xid, String gid)
      implements PgOutputMessage {
    @Override
    public MessageType type() {
      return MessageType.BEGIN_PREPARE;
    }

    @Override
    public String toString() {
      return String.format(
          "BeginPrepare[prepareLsn=%s, endLsn=%s, prepareTime=%s, xid=%s, gidLength=%s]",
          prepareLsn, endLsn, prepareTime, xid, gid.length());
    }
  }

  /** End of a prepared transaction's changes: PREPARE TRANSACTION ran. */
  record Prepare(Lsn prepareLsn, Lsn endLsn, Instant prepareTime, long xid, String gid)
      implements PgOutputMessage {
    @Override
    public MessageType type() {
      return MessageType.PREPARE;
    }

    @Override
    public String toString() {
      return String.format(
          "Prepare[prepareLsn=%s, endLsn=%s, prepareTime=%s, xid=%s, gidLength=%s]",
          prepareLsn, endLsn, prepareTime, xid, gid.length());
    }
  }

  /** COMMIT PREPARED ran for a transaction sent earlier. */
  record CommitPrepared(Lsn commitLsn, Lsn endLsn, Instant commitTime, long xid, String gid)
      implements PgOutputMessage {
    @Override
    public MessageType type() {
      return MessageType.COMMIT_PREPARED;
    }

    @Override
    public String toString() {
      return String.format(
          "CommitPrepared[commitLsn=%s, endLsn=%s, commitTime=%s, xid=%s, gidLength=%s]",
          commitLsn, endLsn, commitTime, xid, gid.length());
    }
  }

  /** ROLLBACK PREPARED ran for a transaction sent earlier. */
  record RollbackPrepared(
      Lsn prepareEndLsn,
      Lsn rollbackEndLsn,
      Instant prepareTime,
      Instant rollbackTime,
      long xid,
      String gid)
      implements PgOutputMessage {
    @Override
    public MessageType type() {
      return MessageType.ROLLBACK_PREPARED;
    }

    @Override
    public String toString() {
      return String.format(
          "RollbackPrepared[prepareEndLsn=%s, rollbackEndLsn=%s, prepareTime=%s, rollbackTime=%s,"
              + " xid=%s, gidLength=%s]",
          prepareEndLsn, rollbackEndLsn, prepareTime, rollbackTime, xid, gid.length());
    }
  }

  /** A streamed transaction was prepared (two-phase with streaming). */
  record StreamPrepare(Lsn prepareLsn, Lsn endLsn, Instant prepareTime, long xid, String gid)
      implements PgOutputMessage {
    @Override
    public MessageType type() {
      return MessageType.STREAM_PREPARE;
    }

    @Override
    public String toString() {
      return String.format(
          "StreamPrepare[prepareLsn=%s, endLsn=%s, prepareTime=%s, xid=%s, gidLength=%s]",
          prepareLsn, endLsn, prepareTime, xid, gid.length());
    }
  }
}
