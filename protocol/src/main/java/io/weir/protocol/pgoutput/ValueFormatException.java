package io.weir.protocol.pgoutput;

import io.weir.protocol.pgoutput.PgOutputDecodeException.Reason;

/**
 * Internal signal that a column value does not convert; the caller adds the message context and
 * rethrows it as a {@link PgOutputDecodeException} or an {@link IllegalArgumentException}.
 * Stackless and without a message, so the two shared instances are safe to throw anywhere.
 */
final class ValueFormatException extends Exception {

  private static final long serialVersionUID = 1L;

  static final ValueFormatException INVALID_VALUE = new ValueFormatException(Reason.INVALID_VALUE);
  static final ValueFormatException INVALID_UTF8 = new ValueFormatException(Reason.INVALID_UTF8);

  private final transient Reason reason;

  private ValueFormatException(Reason reason) {
    super(null, null, false, false);
    this.reason = reason;
  }

  Reason reason() {
    return reason;
  }
}
