package io.weir.protocol.pgoutput;

import java.util.Optional;

/**
 * The pgoutput message kinds of PostgreSQL 15 (protocol versions 1 to 3), keyed by the type byte
 * that starts each message.
 */
public enum MessageType {
  BEGIN('B'),
  COMMIT('C'),
  ORIGIN('O'),
  RELATION('R'),
  TYPE('Y'),
  INSERT('I'),
  UPDATE('U'),
  DELETE('D'),
  TRUNCATE('T'),
  /** A logical decoding message written by {@code pg_logical_emit_message}. */
  MESSAGE('M'),
  STREAM_START('S'),
  STREAM_STOP('E'),
  STREAM_COMMIT('c'),
  STREAM_ABORT('A'),
  BEGIN_PREPARE('b'),
  PREPARE('P'),
  COMMIT_PREPARED('K'),
  ROLLBACK_PREPARED('r'),
  STREAM_PREPARE('p');

  /** Every type byte is ASCII: a 128-entry table indexed by the byte. */
  private static final MessageType[] BY_TYPE = new MessageType[128];

  static {
    for (MessageType type : values()) {
      BY_TYPE[type.typeByte] = type;
    }
  }

  private final char typeByte;

  MessageType(char typeByte) {
    this.typeByte = typeByte;
  }

  /** The byte that starts a message of this kind. */
  public char typeByte() {
    return typeByte;
  }

  /**
   * Whether a message of this kind may appear between Stream Start and Stream Stop. Those that may,
   * apart from Origin and Stream Stop itself, carry an xid right after the type byte there; see
   * {@link PgOutputMessage.Streamable#streamXid()}.
   */
  public boolean allowedInStreamBlock() {
    return switch (this) {
      case ORIGIN, RELATION, TYPE, INSERT, UPDATE, DELETE, TRUNCATE, MESSAGE, STREAM_STOP -> true;
      default -> false;
    };
  }

  /** The kind for a type byte, or empty if pgoutput never starts a message with it. */
  public static Optional<MessageType> forType(char typeByte) {
    return typeByte < BY_TYPE.length ? Optional.ofNullable(BY_TYPE[typeByte]) : Optional.empty();
  }
}
