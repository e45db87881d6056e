package io.weir.protocol.http;

import io.weir.protocol.ErrorCode;

/**
 * JSON body of every error reply: {@code {"error":"forbidden","message":"...","retryable":false}}.
 * Messages are value-free: they name fields and shapes, never the data that was sent or stored.
 *
 * @param retryable whether the same request may succeed later unchanged ({@link
 *     ErrorCode#retryable()})
 */
public record ErrorBody(String error, String message, boolean retryable) {
  public static ErrorBody of(ErrorCode code, String message) {
    return new ErrorBody(code.wire(), message, code.retryable());
  }
}
