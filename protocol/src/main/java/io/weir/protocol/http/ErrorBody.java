package io.weir.protocol.http;

import io.weir.protocol.ErrorCode;

/**
 * JSON body of every error reply: {@code {"error":"forbidden","message":"..."}}. Messages are
 * value-free: they name fields and shapes, never the data that was sent or stored.
 */
public record ErrorBody(String error, String message) {
  public static ErrorBody of(ErrorCode code, String message) {
    return new ErrorBody(code.wire(), message);
  }
}
