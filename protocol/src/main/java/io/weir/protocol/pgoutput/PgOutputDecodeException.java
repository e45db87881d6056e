package io.weir.protocol.pgoutput;

import java.util.Optional;

/**
 * A pgoutput message, or a value inside one, that cannot be decoded.
 *
 * <p>It carries only what is safe to log: the message kind (absent when the type byte itself was
 * the problem), the byte offset within the message where decoding stopped, and a {@link Reason}.
 * The message text is built from those three alone: never from the bytes, strings or values of the
 * input, which may be personal data or secrets. For the same reason it never has a cause: the JDK's
 * parse exceptions quote their input.
 */
public final class PgOutputDecodeException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  /** Why decoding failed. */
  public enum Reason {
    EMPTY_MESSAGE("the message has no type byte"),
    UNKNOWN_MESSAGE_TYPE("the type byte names no pgoutput message"),
    TRUNCATED("the message ends before a field it must contain"),
    NEGATIVE_LENGTH("a length or count field is negative"),
    LENGTH_EXCEEDS_MESSAGE("a length or count field exceeds the bytes remaining in the message"),
    UNTERMINATED_STRING("a string field has no terminating zero byte"),
    INVALID_UTF8("a string or text value is not valid UTF-8"),
    UNKNOWN_TUPLE_MARKER("a tuple marker is not the one this message kind allows"),
    UNKNOWN_COLUMN_KIND("a tuple column kind is not one of n, u, t, b"),
    UNKNOWN_REPLICA_IDENTITY("the replica identity setting is not one of d, n, f, i"),
    TRAILING_BYTES("bytes remain after the last field of the message"),
    UNEXPECTED_IN_STREAM_BLOCK("this message kind cannot appear inside a stream block"),
    UNEXPECTED_OUTSIDE_STREAM_BLOCK("this message kind can only appear inside a stream block"),
    COLUMN_COUNT_MISMATCH("the tuple's column count differs from its relation's"),
    INVALID_VALUE("a column value is not valid for its type");

    private final String description;

    Reason(String description) {
      this.description = description;
    }

    /** A sentence fragment saying what was wrong, without any input data. */
    public String description() {
      return description;
    }
  }

  private final MessageType messageType;
  private final int offset;
  private final Reason reason;

  /**
   * @param messageType the kind of message being decoded, or {@code null} if unknown
   * @param offset the byte offset within the message at which decoding stopped
   * @param reason why decoding failed
   */
  public PgOutputDecodeException(MessageType messageType, int offset, Reason reason) {
    super(describe(messageType, offset, reason));
    this.messageType = messageType;
    this.offset = offset;
    this.reason = reason;
  }

  private static String describe(MessageType messageType, int offset, Reason reason) {
    return String.format(
        "cannot decode pgoutput %s message at byte offset %s: %s (%s)",
        messageType == null ? "unknown" : messageType.name(),
        offset,
        reason.description(),
        reason.name());
  }

  /** The kind of message being decoded, empty if the type byte was missing or unknown. */
  public Optional<MessageType> messageType() {
    return Optional.ofNullable(messageType);
  }

  /** The byte offset within the message, counted from the type byte, where decoding stopped. */
  public int offset() {
    return offset;
  }

  public Reason reason() {
    return reason;
  }
}
