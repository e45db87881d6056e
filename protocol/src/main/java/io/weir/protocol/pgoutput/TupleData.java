package io.weir.protocol.pgoutput;

import io.weir.protocol.pgoutput.PgOutputDecodeException.Reason;
import io.weir.protocol.pgoutput.PgOutputMessage.Relation;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The column values of one row image in an Insert, Update or Delete, as they came off the wire.
 *
 * <p>The decoder copies the tuple's bytes once into an array this object owns and records where
 * each column lies; nothing is converted up front. {@link #text} and {@link #value} convert on each
 * call, so a consumer pays only for the columns it reads: call them once per column. Instances are
 * immutable and safe to share.
 *
 * <p>Which type each column has is not on the wire here: it is in the {@link Relation} message sent
 * earlier for the table, which the consumer keeps. {@link #value(int, Relation)} checks that the
 * two agree on the column count.
 *
 * <p>{@link #toString()} prints the column count and kinds, never the data.
 */
public final class TupleData {

  private final MessageType messageType;
  private final int messageOffset;
  private final byte[] data;
  private final byte[] kinds;
  private final int[] starts;
  private final int[] lengths;

  private TupleData(
      MessageType messageType,
      int messageOffset,
      byte[] data,
      byte[] kinds,
      int[] starts,
      int[] lengths) {
    this.messageType = messageType;
    this.messageOffset = messageOffset;
    this.data = data;
    this.kinds = kinds;
    this.starts = starts;
    this.lengths = lengths;
  }

  /**
   * A row image over text-format column bytes already in one array (UTF-8), for snapshot reads:
   * column {@code i} is {@code data[starts[i] .. starts[i] + lengths[i])}, or SQL NULL where {@code
   * nulls[i]}. The arrays become the row's own: the caller must not change them afterwards.
   */
  public static TupleData ofTextColumns(byte[] data, int[] starts, int[] lengths, boolean[] nulls) {
    if (starts.length != lengths.length || starts.length != nulls.length) {
      throw new IllegalArgumentException(
          "starts, lengths and nulls must have one entry per column");
    }
    byte[] kinds = new byte[starts.length];
    for (int i = 0; i < kinds.length; i++) {
      kinds[i] = nulls[i] ? (byte) 'n' : (byte) 't';
      if (!nulls[i] && (starts[i] < 0 || lengths[i] < 0 || starts[i] + lengths[i] > data.length)) {
        throw new IllegalArgumentException("a column lies outside the data");
      }
    }
    return new TupleData(MessageType.INSERT, 0, data, kinds, starts, lengths);
  }

  /**
   * A row image built from text-format values (null for SQL NULL), for rows that do not come off
   * the replication wire: snapshot reads and tests. Equivalent to a decoded tuple of {@code 't'}
   * and {@code 'n'} columns.
   */
  public static TupleData ofText(String... values) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    byte[] kinds = new byte[values.length];
    int[] starts = new int[values.length];
    int[] lengths = new int[values.length];
    for (int i = 0; i < values.length; i++) {
      starts[i] = out.size();
      if (values[i] == null) {
        kinds[i] = 'n';
      } else {
        byte[] utf8 = values[i].getBytes(StandardCharsets.UTF_8);
        kinds[i] = 't';
        lengths[i] = utf8.length;
        out.write(utf8, 0, utf8.length);
      }
    }
    return new TupleData(MessageType.INSERT, 0, out.toByteArray(), kinds, starts, lengths);
  }

  /**
   * Reads {@code Int16 count} then per column a kind byte and, for {@code 't'} and {@code 'b'}, an
   * {@code Int32} length and that many bytes. The count is checked against the bytes left before
   * anything is allocated.
   */
  static TupleData read(WireReader reader) {
    int tupleStart = reader.position();
    int count = reader.readInt16();
    if (count < 0) {
      throw reader.fail(Reason.NEGATIVE_LENGTH, tupleStart);
    }
    if (count > reader.remaining()) { // each column takes at least its kind byte
      throw reader.fail(Reason.LENGTH_EXCEEDS_MESSAGE, tupleStart);
    }
    byte[] kinds = new byte[count];
    int[] starts = new int[count];
    int[] lengths = new int[count];
    for (int i = 0; i < count; i++) {
      int kindAt = reader.position();
      byte kind = reader.readByte();
      switch (kind) {
        case 'n', 'u' -> starts[i] = reader.position() - tupleStart;
        case 't', 'b' -> {
          lengths[i] = reader.readLength();
          starts[i] = reader.position() - tupleStart;
          reader.skip(lengths[i]);
        }
        default -> throw reader.fail(Reason.UNKNOWN_COLUMN_KIND, kindAt);
      }
      kinds[i] = kind;
    }
    byte[] data = reader.copy(tupleStart, reader.position());
    return new TupleData(reader.messageType(), tupleStart, data, kinds, starts, lengths);
  }

  /** The number of columns. */
  public int size() {
    return kinds.length;
  }

  /**
   * How column {@code column} (0-based) is carried.
   *
   * @throws IndexOutOfBoundsException if there is no such column
   */
  public ColumnKind kind(int column) {
    return switch (kinds[column]) {
      case 'n' -> ColumnKind.NULL;
      case 'u' -> ColumnKind.UNCHANGED_TOAST;
      case 't' -> ColumnKind.TEXT;
      default -> ColumnKind.BINARY;
    };
  }

  public boolean isNull(int column) {
    return kinds[column] == 'n';
  }

  /** Whether the column is an unchanged TOAST marker: it has no value, leave it as stored. */
  public boolean isUnchangedToast(int column) {
    return kinds[column] == 'u';
  }

  /** Whether any column is an unchanged TOAST marker. */
  public boolean hasUnchangedToast() {
    for (byte kind : kinds) {
      if (kind == 'u') {
        return true;
      }
    }
    return false;
  }

  /** The number of value bytes of the column; 0 for NULL and unchanged TOAST columns. */
  public int length(int column) {
    return lengths[column];
  }

  /**
   * The text form of a {@link ColumnKind#TEXT} column.
   *
   * @throws IllegalStateException if the column is of another kind
   * @throws PgOutputDecodeException ({@link Reason#INVALID_UTF8}) if the text is not UTF-8
   */
  public String text(int column) {
    requireKind(column, ColumnKind.TEXT);
    String text = Utf8.decodeOrNull(data, starts[column], lengths[column]);
    if (text == null) {
      throw new PgOutputDecodeException(messageType, messageOffsetOf(column), Reason.INVALID_UTF8);
    }
    return text;
  }

  /** Reads bytes of a row image in place. */
  @FunctionalInterface
  public interface BytesReader<R> {
    /** Reads {@code data[offset .. offset + length)}; must not change the array. */
    R read(byte[] data, int offset, int length);
  }

  /**
   * What {@code reader} makes of the bytes of a {@link ColumnKind#TEXT} column, read in place (no
   * copy): for writers that turn a value's text straight into theirs.
   *
   * @throws IllegalStateException if the column is of another kind
   */
  public <R> R readText(int column, BytesReader<R> reader) {
    requireKind(column, ColumnKind.TEXT);
    return reader.read(data, starts[column], lengths[column]);
  }

  /**
   * A copy of the bytes of a {@link ColumnKind#TEXT} or {@link ColumnKind#BINARY} column.
   *
   * @throws IllegalStateException if the column carries no bytes
   */
  public byte[] bytes(int column) {
    if (!kind(column).hasData()) {
      throw new IllegalStateException(
          "column " + column + " is " + kind(column) + " and carries no bytes");
    }
    return Arrays.copyOfRange(data, starts[column], starts[column] + lengths[column]);
  }

  /**
   * The column converted for type {@code typeOid} (see {@link PgType}), or {@code null} if it is
   * SQL NULL.
   *
   * @throws IllegalStateException if the column is an unchanged TOAST marker, which has no value;
   *     check {@link #isUnchangedToast} first
   * @throws PgOutputDecodeException ({@link Reason#INVALID_VALUE}, {@link Reason#INVALID_UTF8}) if
   *     the bytes are not a value of that type
   * @throws IndexOutOfBoundsException if there is no such column
   */
  public PgValue value(int column, long typeOid) {
    try {
      return switch (kinds[column]) {
        case 'n' -> null;
        case 'u' ->
            throw new IllegalStateException(
                "column " + column + " is an unchanged TOAST marker and has no value");
        case 't' -> PgValues.fromText(typeOid, data, starts[column], lengths[column]);
        default -> PgValues.fromBinary(typeOid, data, starts[column], lengths[column]);
      };
    } catch (ValueFormatException e) {
      throw new PgOutputDecodeException(messageType, messageOffsetOf(column), e.reason());
    }
  }

  /**
   * The column converted for the type {@code relation} declares for it, or {@code null} if it is
   * SQL NULL.
   *
   * @throws PgOutputDecodeException ({@link Reason#COLUMN_COUNT_MISMATCH}) if the tuple and the
   *     relation have different column counts; or as {@link #value(int, long)}
   */
  public PgValue value(int column, Relation relation) {
    requireColumnCount(relation);
    return value(column, relation.columns().get(column).typeOid());
  }

  /**
   * Checks that this tuple has as many columns as {@code relation}.
   *
   * @throws PgOutputDecodeException ({@link Reason#COLUMN_COUNT_MISMATCH}) if it does not
   */
  public void requireColumnCount(Relation relation) {
    requireColumnCount(relation.columns().size());
  }

  /**
   * Checks that this tuple has {@code columns} columns.
   *
   * @throws PgOutputDecodeException ({@link Reason#COLUMN_COUNT_MISMATCH}) if it does not
   */
  public void requireColumnCount(int columns) {
    if (columns != kinds.length) {
      throw new PgOutputDecodeException(messageType, messageOffset, Reason.COLUMN_COUNT_MISMATCH);
    }
  }

  private void requireKind(int column, ColumnKind expected) {
    ColumnKind actual = kind(column);
    if (actual != expected) {
      throw new IllegalStateException("column " + column + " is " + actual + ", not " + expected);
    }
  }

  private int messageOffsetOf(int column) {
    return messageOffset + starts[column];
  }

  /** Equal when the column kinds and value bytes are equal, wherever the tuples came from. */
  @Override
  public boolean equals(Object other) {
    if (!(other instanceof TupleData that) || !Arrays.equals(kinds, that.kinds)) {
      return false;
    }
    for (int i = 0; i < kinds.length; i++) {
      if (!Arrays.equals(
          data,
          starts[i],
          starts[i] + lengths[i],
          that.data,
          that.starts[i],
          that.starts[i] + that.lengths[i])) {
        return false;
      }
    }
    return true;
  }

  @Override
  public int hashCode() {
    int hash = Arrays.hashCode(kinds);
    for (int i = 0; i < kinds.length; i++) {
      for (int at = starts[i]; at < starts[i] + lengths[i]; at++) {
        hash = 31 * hash + data[at];
      }
    }
    return hash;
  }

  /** Column count and kinds, e.g. {@code TupleData[columns=3, kinds=tnu]}; never the data. */
  @Override
  public String toString() {
    String kindBytes = new String(kinds, StandardCharsets.US_ASCII);
    return String.format("TupleData[columns=%s, kinds=%s]", kinds.length, kindBytes);
  }
}
