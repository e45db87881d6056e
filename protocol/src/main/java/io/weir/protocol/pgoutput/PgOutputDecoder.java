package io.weir.protocol.pgoutput;

import io.weir.protocol.Lsn;
import io.weir.protocol.pgoutput.PgOutputDecodeException.Reason;
import io.weir.protocol.pgoutput.PgOutputMessage.Begin;
import io.weir.protocol.pgoutput.PgOutputMessage.BeginPrepare;
import io.weir.protocol.pgoutput.PgOutputMessage.Commit;
import io.weir.protocol.pgoutput.PgOutputMessage.CommitPrepared;
import io.weir.protocol.pgoutput.PgOutputMessage.Delete;
import io.weir.protocol.pgoutput.PgOutputMessage.Insert;
import io.weir.protocol.pgoutput.PgOutputMessage.LogicalMessage;
import io.weir.protocol.pgoutput.PgOutputMessage.Origin;
import io.weir.protocol.pgoutput.PgOutputMessage.Prepare;
import io.weir.protocol.pgoutput.PgOutputMessage.Relation;
import io.weir.protocol.pgoutput.PgOutputMessage.RollbackPrepared;
import io.weir.protocol.pgoutput.PgOutputMessage.StreamAbort;
import io.weir.protocol.pgoutput.PgOutputMessage.StreamCommit;
import io.weir.protocol.pgoutput.PgOutputMessage.StreamPrepare;
import io.weir.protocol.pgoutput.PgOutputMessage.StreamStart;
import io.weir.protocol.pgoutput.PgOutputMessage.StreamStop;
import io.weir.protocol.pgoutput.PgOutputMessage.Truncate;
import io.weir.protocol.pgoutput.PgOutputMessage.Type;
import io.weir.protocol.pgoutput.PgOutputMessage.Update;
import java.nio.ByteBuffer;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * Decodes the messages of PostgreSQL 15's {@code pgoutput} plugin, protocol versions 1 to 3, one
 * message (the payload of one XLogData frame) at a time. Pure code: no IO, no threads.
 *
 * <h2>Guarantees</h2>
 *
 * <ul>
 *   <li>A call returns a {@link PgOutputMessage} or throws {@link PgOutputDecodeException}; no
 *       other exception escapes for any input. Every length and count is checked against the bytes
 *       remaining before anything is allocated for it, so a lying length is a decode error, never a
 *       large allocation. A message must be consumed exactly: trailing bytes are an error.
 *   <li>Errors carry the message kind, the byte offset and a {@link Reason}; their text is built
 *       from those alone, never from the input's bytes, strings or values.
 *   <li>Tuple bytes are copied once into the {@link TupleData} (the caller may reuse its buffer
 *       afterwards) and converted only when asked for; strings are decoded straight from the input
 *       as strict UTF-8, so the connection must use {@code client_encoding = UTF8}. A direct or
 *       read-only buffer is first copied into an array.
 * </ul>
 *
 * <h2>Stream blocks</h2>
 *
 * With protocol version 2 or later and {@code streaming} on, PostgreSQL sends a large transaction
 * in blocks between Stream Start and Stream Stop before it commits. Inside a block Relation, Type,
 * Insert, Update, Delete, Truncate and Message carry an {@code Int32} xid right after the type byte
 * (that of the top-level transaction or of the subtransaction that made the change, see {@link
 * PgOutputMessage.Streamable#streamXid()}); outside, they do not. The bytes alone cannot tell the
 * two apart, so the decoder must know whether it is inside a block:
 *
 * <ul>
 *   <li>An instance tracks it: Stream Start enters a block, Stream Stop leaves it. Feed an instance
 *       every message of one replication connection, in order, and use a new one after
 *       reconnecting. An instance is not thread-safe.
 *   <li>{@link #decodeMessage(ByteBuffer, boolean)} takes it as a parameter and keeps no state.
 * </ul>
 *
 * Either way, a message that cannot occur where it is (Begin or a commit inside a block, a nested
 * Stream Start, Stream Stop outside a block) is a decode error rather than a guess: the stream is
 * out of step and every later xid would be misread.
 */
public final class PgOutputDecoder {

  /** Lower bound of a Relation column's wire size: flags, empty name, type OID, modifier. */
  private static final int MIN_RELATION_COLUMN_BYTES = 1 + 1 + 4 + 4;

  private static final int MESSAGE_TRANSACTIONAL = 1;
  private static final int TRUNCATE_CASCADE = 1;
  private static final int TRUNCATE_RESTART_IDENTITY = 2;
  private static final int COLUMN_PART_OF_KEY = 1;

  private boolean inStreamBlock;

  /** Whether the last message decoded was inside a stream block that has not ended. */
  public boolean inStreamBlock() {
    return inStreamBlock;
  }

  /**
   * Decodes the message in {@code message}'s remaining bytes, tracking stream blocks. The buffer's
   * position and limit are left as they were.
   *
   * @throws PgOutputDecodeException if the bytes are not one valid message here; the decoder's
   *     state is then unchanged
   */
  public PgOutputMessage decode(ByteBuffer message) {
    return track(decodeMessage(message, inStreamBlock));
  }

  /** As {@link #decode(ByteBuffer)}, for the whole array. */
  public PgOutputMessage decode(byte[] message) {
    return decode(message, 0, message.length);
  }

  /** As {@link #decode(ByteBuffer)}, for {@code length} bytes of the array from {@code offset}. */
  public PgOutputMessage decode(byte[] message, int offset, int length) {
    return track(decodeMessage(message, offset, length, inStreamBlock));
  }

  private PgOutputMessage track(PgOutputMessage message) {
    if (message.type() == MessageType.STREAM_START) {
      inStreamBlock = true;
    } else if (message.type() == MessageType.STREAM_STOP) {
      inStreamBlock = false;
    }
    return message;
  }

  /**
   * Decodes the message in {@code message}'s remaining bytes, without state. The buffer's position
   * and limit are left as they were.
   *
   * @param inStreamBlock whether the message arrived between Stream Start and Stream Stop
   * @throws PgOutputDecodeException if the bytes are not one valid message there
   */
  public static PgOutputMessage decodeMessage(ByteBuffer message, boolean inStreamBlock) {
    if (message.hasArray()) {
      return decodeMessage(
          message.array(),
          message.arrayOffset() + message.position(),
          message.remaining(),
          inStreamBlock);
    }
    byte[] copy = new byte[message.remaining()];
    message.duplicate().get(copy);
    return decodeMessage(copy, 0, copy.length, inStreamBlock);
  }

  /**
   * As {@link #decodeMessage(ByteBuffer, boolean)}, for {@code length} bytes of the array from
   * {@code offset}.
   *
   * @throws IndexOutOfBoundsException if the range is not within the array
   */
  public static PgOutputMessage decodeMessage(
      byte[] message, int offset, int length, boolean inStreamBlock) {
    Objects.checkFromIndexSize(offset, length, message.length);
    WireReader reader = new WireReader(message, offset, length);
    if (length == 0) {
      throw reader.fail(Reason.EMPTY_MESSAGE);
    }
    Optional<MessageType> found = MessageType.forType((char) (reader.readByte() & 0xFF));
    if (found.isEmpty()) {
      throw reader.fail(Reason.UNKNOWN_MESSAGE_TYPE, 0);
    }
    MessageType type = found.get();
    reader.messageType(type);
    if (inStreamBlock && !type.allowedInStreamBlock()) {
      throw reader.fail(Reason.UNEXPECTED_IN_STREAM_BLOCK, 0);
    }
    if (!inStreamBlock && type == MessageType.STREAM_STOP) {
      throw reader.fail(Reason.UNEXPECTED_OUTSIDE_STREAM_BLOCK, 0);
    }
    PgOutputMessage decoded =
        switch (type) {
          case BEGIN -> begin(reader);
          case COMMIT -> commit(reader);
          case ORIGIN -> new Origin(reader.readLsn(), reader.readString());
          case RELATION -> relation(reader, streamXid(reader, inStreamBlock));
          case TYPE ->
              new Type(
                  streamXid(reader, inStreamBlock),
                  reader.readUInt32(),
                  reader.readString(),
                  reader.readString());
          case INSERT -> insert(reader, streamXid(reader, inStreamBlock));
          case UPDATE -> update(reader, streamXid(reader, inStreamBlock));
          case DELETE -> delete(reader, streamXid(reader, inStreamBlock));
          case TRUNCATE -> truncate(reader, streamXid(reader, inStreamBlock));
          case MESSAGE -> logicalMessage(reader, streamXid(reader, inStreamBlock));
          case STREAM_START -> new StreamStart(reader.readUInt32(), reader.readByte() == 1);
          case STREAM_STOP -> new StreamStop();
          case STREAM_COMMIT -> streamCommit(reader);
          case STREAM_ABORT -> new StreamAbort(reader.readUInt32(), reader.readUInt32());
          case BEGIN_PREPARE -> beginPrepare(reader);
          case PREPARE -> prepare(reader);
          case COMMIT_PREPARED -> commitPrepared(reader);
          case ROLLBACK_PREPARED -> rollbackPrepared(reader);
          case STREAM_PREPARE -> streamPrepare(reader);
        };
    reader.expectEnd();
    return decoded;
  }

  /** The xid that follows the type byte of a {@link PgOutputMessage.Streamable} in a block. */
  private static OptionalLong streamXid(WireReader reader, boolean inStreamBlock) {
    return inStreamBlock ? OptionalLong.of(reader.readUInt32()) : OptionalLong.empty();
  }

  private static Begin begin(WireReader reader) {
    Lsn finalLsn = reader.readLsn();
    Instant commitTime = reader.readTimestamp();
    long xid = reader.readUInt32();
    return new Begin(finalLsn, commitTime, xid);
  }

  private static Commit commit(WireReader reader) {
    reader.readByte(); // flags: none defined
    Lsn commitLsn = reader.readLsn();
    Lsn endLsn = reader.readLsn();
    Instant commitTime = reader.readTimestamp();
    return new Commit(commitLsn, endLsn, commitTime);
  }

  private static Relation relation(WireReader reader, OptionalLong streamXid) {
    long relationId = reader.readUInt32();
    String namespace = reader.readString();
    String name = reader.readString();
    int identityAt = reader.position();
    ReplicaIdentity identity =
        ReplicaIdentity.forWireByte((char) (reader.readByte() & 0xFF))
            .orElseThrow(() -> reader.fail(Reason.UNKNOWN_REPLICA_IDENTITY, identityAt));
    int countAt = reader.position();
    int count = reader.readInt16();
    if (count < 0) {
      throw reader.fail(Reason.NEGATIVE_LENGTH, countAt);
    }
    if ((long) count * MIN_RELATION_COLUMN_BYTES > reader.remaining()) {
      throw reader.fail(Reason.LENGTH_EXCEEDS_MESSAGE, countAt);
    }
    List<Relation.Column> columns = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      boolean partOfKey = (reader.readByte() & COLUMN_PART_OF_KEY) != 0;
      String columnName = reader.readString();
      long typeOid = reader.readUInt32();
      int typeModifier = reader.readInt32();
      columns.add(new Relation.Column(partOfKey, columnName, typeOid, typeModifier));
    }
    return new Relation(streamXid, relationId, namespace, name, identity, columns);
  }

  private static Insert insert(WireReader reader, OptionalLong streamXid) {
    long relationId = reader.readUInt32();
    expectMarker(reader, 'N');
    return new Insert(streamXid, relationId, TupleData.read(reader));
  }

  private static Update update(WireReader reader, OptionalLong streamXid) {
    long relationId = reader.readUInt32();
    int markerAt = reader.position();
    OldTupleKind oldKind =
        switch (reader.readByte()) {
          case 'K' -> OldTupleKind.KEY;
          case 'O' -> OldTupleKind.FULL;
          case 'N' -> OldTupleKind.NONE;
          default -> throw reader.fail(Reason.UNKNOWN_TUPLE_MARKER, markerAt);
        };
    TupleData oldTuple = null;
    if (oldKind != OldTupleKind.NONE) {
      oldTuple = TupleData.read(reader);
      expectMarker(reader, 'N');
    }
    return new Update(streamXid, relationId, oldKind, oldTuple, TupleData.read(reader));
  }

  private static Delete delete(WireReader reader, OptionalLong streamXid) {
    long relationId = reader.readUInt32();
    int markerAt = reader.position();
    OldTupleKind oldKind =
        switch (reader.readByte()) {
          case 'K' -> OldTupleKind.KEY;
          case 'O' -> OldTupleKind.FULL;
          default -> throw reader.fail(Reason.UNKNOWN_TUPLE_MARKER, markerAt);
        };
    return new Delete(streamXid, relationId, oldKind, TupleData.read(reader));
  }

  private static void expectMarker(WireReader reader, char marker) {
    int markerAt = reader.position();
    if (reader.readByte() != marker) {
      throw reader.fail(Reason.UNKNOWN_TUPLE_MARKER, markerAt);
    }
  }

  private static Truncate truncate(WireReader reader, OptionalLong streamXid) {
    int countAt = reader.position();
    int count = reader.readInt32();
    int options = reader.readByte();
    if (count < 0) {
      throw reader.fail(Reason.NEGATIVE_LENGTH, countAt);
    }
    if ((long) count * Integer.BYTES > reader.remaining()) {
      throw reader.fail(Reason.LENGTH_EXCEEDS_MESSAGE, countAt);
    }
    List<Long> relationIds = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      relationIds.add(reader.readUInt32());
    }
    return new Truncate(
        streamXid,
        (options & TRUNCATE_CASCADE) != 0,
        (options & TRUNCATE_RESTART_IDENTITY) != 0,
        relationIds);
  }

  private static LogicalMessage logicalMessage(WireReader reader, OptionalLong streamXid) {
    boolean transactional = (reader.readByte() & MESSAGE_TRANSACTIONAL) != 0;
    Lsn lsn = reader.readLsn();
    String prefix = reader.readString();
    int length = reader.readLength();
    int start = reader.position();
    reader.skip(length);
    ByteBuffer content = ByteBuffer.wrap(reader.copy(start, start + length));
    return new LogicalMessage(streamXid, transactional, lsn, prefix, content);
  }

  private static StreamCommit streamCommit(WireReader reader) {
    long xid = reader.readUInt32();
    reader.readByte(); // flags: none defined
    Lsn commitLsn = reader.readLsn();
    Lsn endLsn = reader.readLsn();
    Instant commitTime = reader.readTimestamp();
    return new StreamCommit(xid, commitLsn, endLsn, commitTime);
  }

  private static BeginPrepare beginPrepare(WireReader reader) {
    Lsn prepareLsn = reader.readLsn();
    Lsn endLsn = reader.readLsn();
    Instant prepareTime = reader.readTimestamp();
    long xid = reader.readUInt32();
    String gid = reader.readString();
    return new BeginPrepare(prepareLsn, endLsn, prepareTime, xid, gid);
  }

  private static Prepare prepare(WireReader reader) {
    reader.readByte(); // flags: none defined
    Lsn prepareLsn = reader.readLsn();
    Lsn endLsn = reader.readLsn();
    Instant prepareTime = reader.readTimestamp();
    long xid = reader.readUInt32();
    String gid = reader.readString();
    return new Prepare(prepareLsn, endLsn, prepareTime, xid, gid);
  }

  private static CommitPrepared commitPrepared(WireReader reader) {
    reader.readByte(); // flags: none defined
    Lsn commitLsn = reader.readLsn();
    Lsn endLsn = reader.readLsn();
    Instant commitTime = reader.readTimestamp();
    long xid = reader.readUInt32();
    String gid = reader.readString();
    return new CommitPrepared(commitLsn, endLsn, commitTime, xid, gid);
  }

  private static RollbackPrepared rollbackPrepared(WireReader reader) {
    reader.readByte(); // flags: none defined
    Lsn prepareEndLsn = reader.readLsn();
    Lsn rollbackEndLsn = reader.readLsn();
    Instant prepareTime = reader.readTimestamp();
    Instant rollbackTime = reader.readTimestamp();
    long xid = reader.readUInt32();
    String gid = reader.readString();
    return new RollbackPrepared(prepareEndLsn, rollbackEndLsn, prepareTime, rollbackTime, xid, gid);
  }

  private static StreamPrepare streamPrepare(WireReader reader) {
    reader.readByte(); // flags: none defined
    Lsn prepareLsn = reader.readLsn();
    Lsn endLsn = reader.readLsn();
    Instant prepareTime = reader.readTimestamp();
    long xid = reader.readUInt32();
    String gid = reader.readString();
    return new StreamPrepare(prepareLsn, endLsn, prepareTime, xid, gid);
  }
}
