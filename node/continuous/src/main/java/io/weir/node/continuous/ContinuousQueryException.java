package io.weir.node.continuous;

import io.weir.protocol.ErrorCode;

/**
 * A refused continuous-query request: a typed code and a message that quotes no query text or
 * value.
 */
public final class ContinuousQueryException extends RuntimeException {
  private final ErrorCode code;

  public ContinuousQueryException(ErrorCode code, String message) {
    super(message, null, false, false);
    this.code = code;
  }

  public ErrorCode code() {
    return code;
  }
}
