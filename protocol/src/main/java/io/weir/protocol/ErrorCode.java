package io.weir.protocol;

/**
 * Typed error codes shared by HTTP replies and the actor protocol. The wire form is
 * {@link #wire()}: lower-case, hyphenated, stable across releases.
 */
public enum ErrorCode {
  /** No credentials, or credentials that match no principal. HTTP 401. */
  UNAUTHENTICATED(401),
  /** The principal is known but lacks the grant or role. HTTP 403. */
  FORBIDDEN(403),
  /** No such resource or route. HTTP 404. */
  NOT_FOUND(404),
  /** The method is not allowed on this route. HTTP 405. */
  METHOD_NOT_ALLOWED(405),
  /** The request is malformed; the message says which field and what shape was expected. HTTP 400. */
  BAD_REQUEST(400),
  CONFLICT(409),
  /** The node cannot serve right now (not a cluster member yet, storage unavailable). HTTP 503. */
  UNAVAILABLE(503),
  /** An unexpected failure; details are in the node's log (value-free). HTTP 500. */
  INTERNAL(500);

  private final int httpStatus;

  ErrorCode(int httpStatus) {
    this.httpStatus = httpStatus;
  }

  public int httpStatus() {
    return httpStatus;
  }

  public String wire() {
    return name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
  }
}
