package io.weir.protocol.pgoutput;

import io.weir.protocol.Lsn;
import io.weir.protocol.pgoutput.PgOutputDecodeException.Reason;
import java.time.Instant;
import java.util.Arrays;

/**
 * A bounds-checked, big-endian cursor over one pgoutput message.
 *
 * <p>Every read checks the bytes remaining first, so a short or lying message ends in a {@link
 * PgOutputDecodeException} at the offending offset and never in an index exception or an allocation
 * sized by untrusted input. Offsets are counted from the type byte.
 */
final class WireReader {

  /** Seconds from the Unix epoch to PostgreSQL's, 2000-01-01T00:00:00Z. */
  static final long PG_EPOCH_SECONDS = 946_684_800L;

  private static final int MICROS_PER_SECOND = 1_000_000;
  private static final int NANOS_PER_MICRO = 1_000;

  private final byte[] bytes;
  private final int base;
  private final int length;
  private int position;
  private MessageType messageType;

  WireReader(byte[] bytes, int offset, int length) {
    this.bytes = bytes;
    this.base = offset;
    this.length = length;
  }

  /** Names the message kind in errors raised from now on. */
  void messageType(MessageType type) {
    this.messageType = type;
  }

  MessageType messageType() {
    return messageType;
  }

  int position() {
    return position;
  }

  int remaining() {
    return length - position;
  }

  PgOutputDecodeException fail(Reason reason) {
    return fail(reason, position);
  }

  PgOutputDecodeException fail(Reason reason, int offset) {
    return new PgOutputDecodeException(messageType, offset, reason);
  }

  private int require(int count) {
    if (remaining() < count) {
      throw fail(Reason.TRUNCATED);
    }
    int at = base + position;
    position += count;
    return at;
  }

  byte readByte() {
    return bytes[require(1)];
  }

  /** A signed 16-bit integer. */
  int readInt16() {
    int at = require(2);
    return (short) ((bytes[at] & 0xFF) << 8 | bytes[at + 1] & 0xFF);
  }

  int readInt32() {
    int at = require(4);
    return (bytes[at] & 0xFF) << 24
        | (bytes[at + 1] & 0xFF) << 16
        | (bytes[at + 2] & 0xFF) << 8
        | bytes[at + 3] & 0xFF;
  }

  /** An unsigned 32-bit integer such as an xid or an OID. */
  long readUInt32() {
    return Integer.toUnsignedLong(readInt32());
  }

  long readInt64() {
    int at = require(8);
    long value = 0;
    for (int i = 0; i < 8; i++) {
      value = value << 8 | bytes[at + i] & 0xFF;
    }
    return value;
  }

  Lsn readLsn() {
    return Lsn.of(readInt64());
  }

  /** A timestamp in microseconds since 2000-01-01T00:00:00Z. */
  Instant readTimestamp() {
    return toInstant(readInt64());
  }

  static Instant toInstant(long pgMicros) {
    return Instant.ofEpochSecond(
        PG_EPOCH_SECONDS + Math.floorDiv(pgMicros, MICROS_PER_SECOND),
        (long) Math.floorMod(pgMicros, MICROS_PER_SECOND) * NANOS_PER_MICRO);
  }

  /** A zero-terminated UTF-8 string. */
  String readString() {
    int start = position;
    int terminator = start;
    while (terminator < length && bytes[base + terminator] != 0) {
      terminator++;
    }
    if (terminator == length) {
      throw fail(Reason.UNTERMINATED_STRING, start);
    }
    String text = Utf8.decodeOrNull(bytes, base + start, terminator - start);
    if (text == null) {
      throw fail(Reason.INVALID_UTF8, start);
    }
    position = terminator + 1;
    return text;
  }

  /** A 32-bit length that must fit in the rest of the message; the bytes are not consumed. */
  int readLength() {
    int at = position;
    int value = readInt32();
    if (value < 0) {
      throw fail(Reason.NEGATIVE_LENGTH, at);
    }
    if (value > remaining()) {
      throw fail(Reason.LENGTH_EXCEEDS_MESSAGE, at);
    }
    return value;
  }

  void skip(int count) {
    require(count);
  }

  /** A copy of the message bytes from {@code from} (inclusive) to {@code to} (exclusive). */
  byte[] copy(int from, int to) {
    return Arrays.copyOfRange(bytes, base + from, base + to);
  }

  void expectEnd() {
    if (position != length) {
      throw fail(Reason.TRAILING_BYTES);
    }
  }
}
