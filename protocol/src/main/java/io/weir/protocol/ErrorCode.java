package io.weir.protocol;

import java.util.Locale;

/**
 * Typed error codes shared by HTTP replies and the actor protocol. The wire form is {@link
 * #wire()}: lower-case, hyphenated, stable across releases.
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
  /**
   * The request is malformed; the message says which field and what shape was expected. HTTP 400.
   */
  BAD_REQUEST(400),
  /**
   * The request body is not JSON of the expected shape (the message never quotes the body). HTTP
   * 400.
   */
  MALFORMED_JSON(400),
  /**
   * A collection name, document id or header value has the wrong shape (never quoted). HTTP 400.
   */
  INVALID_NAME(400),
  /**
   * The state does not allow the request, e.g. a document revision that does not match. HTTP 409.
   */
  CONFLICT(409),
  /**
   * The principal sent this {@code Idempotency-Key} before with another request (another document,
   * body or {@code If-Match}); nothing was written. HTTP 409.
   */
  IDEMPOTENCY_KEY_REUSED(409),
  /** The collection is written by a CDC pipeline; the document API may only read it. HTTP 409. */
  COLLECTION_FED_BY_CDC(409),
  /** The request body is larger than the configured limit. HTTP 413. */
  DOCUMENT_TOO_LARGE(413),
  /**
   * A token (batch token, cursor) that is not Weir's or was altered: malformed, truncated, forged,
   * signed with a key this cluster does not accept, or of another kind. HTTP 400.
   */
  INVALID_TOKEN(400),
  /** A token past its expiry time. HTTP 400. */
  TOKEN_EXPIRED(400),
  /**
   * A valid token that was fenced: its consumer generation was released, or the partition has
   * another incarnation. Start again from a new read (or a new consumer). HTTP 409.
   */
  TOKEN_INVALIDATED(409),
  /** The token names another partition or consumer than the request. HTTP 400. */
  TOKEN_MISMATCH(400),
  /** The requested history was purged. HTTP 410. */
  HISTORY_UNAVAILABLE(410),
  /** The first entry to return is larger than the request's byte budget. HTTP 413. */
  BUDGET_EXCEEDED(413),
  /** The consumer's checkpoint moved since the batch was read: read again. HTTP 409. */
  STALE_BATCH(409),
  /** The partition has its maximum of active projection consumers. HTTP 409. */
  TOO_MANY_CONSUMERS(409),
  /** The consumer generation was released; a new generation or name is needed. HTTP 409. */
  CONSUMER_RELEASED(409),
  /** A projection effect targets a document of another partition. HTTP 400. */
  CROSS_PARTITION_EFFECT(400),
  /** A commit's effects are more or larger than allowed. HTTP 413. */
  EFFECTS_TOO_LARGE(413),
  /**
   * A query or live-query baseline larger than its row limit or byte budget; nothing partial is
   * returned. HTTP 413.
   */
  RESULT_TOO_LARGE(413),
  /**
   * A query that is not a valid Q1 query (the message names the construct, never a value). HTTP
   * 400.
   */
  INVALID_QUERY(400),
  /**
   * A query construct Q1 does not offer (ORDER BY, aggregates, joins, continuations, ...). HTTP
   * 400.
   */
  UNSUPPORTED_QUERY(400),
  /**
   * A continuous query's SQL is outside the allow-list: not one SELECT/WITH statement, or it uses
   * LIMIT, OFFSET, FETCH, a window, SET, set_config or an administrative function. HTTP 400.
   */
  QUERY_NOT_ALLOWED(400),
  /** A key or ORDER BY column that the continuous query's result does not have. HTTP 400. */
  UNKNOWN_COLUMN(400),
  /**
   * A continuous query parameter that is missing, unused, of an unsupported JSON type or of the
   * wrong SQL type. HTTP 400.
   */
  INVALID_PARAMETER(400),
  /** A security scope no administrator configured on this cluster. HTTP 400. */
  UNKNOWN_SCOPE(400),
  /**
   * A table a continuous query reads is not in the continuous pipeline's publications. HTTP 400.
   */
  TABLE_NOT_PUBLISHED(400),
  /** Too many queries are running on this node; retry shortly. HTTP 429. */
  BUSY(429, true),
  /**
   * Too many pushed live-query streams are open on this node, or for this principal; retry once one
   * has ended. HTTP 429.
   */
  TOO_MANY_STREAMS(429, true),
  /** The partition's outbox is full until entries are purged; retry later. HTTP 429. */
  QUOTA_EXCEEDED(429, true),
  /** The node cannot serve right now (not a cluster member yet, storage unavailable). HTTP 503. */
  UNAVAILABLE(503, true),
  /**
   * The storage keeps fewer durable copies of a commit than {@code weir.storage.required-copies} (a
   * standby is down or lagging): nothing was written; retry once the copies are back. HTTP 503.
   */
  STORAGE_COPIES_INSUFFICIENT(503, true),
  /**
   * The partition's journal lacks writes it acknowledged (a storage failover to a copy that was
   * behind): it writes nothing until an operator accepts the loss ({@code weir ctl partitions
   * accept-storage-loss}). Nothing was written. HTTP 503, not retryable by itself.
   */
  STORAGE_BEHIND(503),
  /**
   * The partition's documents table is as far behind its journal as it may be and applying to it
   * keeps failing (the table or its database refuses the writes): nothing was written. The
   * partition writes again once an apply succeeds; retry later. HTTP 503.
   */
  TABLE_APPLY_FAILED(503, true),
  /**
   * An operator asked to accept a storage loss for a partition whose journal holds everything it
   * acknowledged: nothing changed. HTTP 409.
   */
  NOT_STORAGE_BEHIND(409),
  /** An unexpected failure; details are in the node's log (value-free). HTTP 500. */
  INTERNAL(500),
  /**
   * The request URI is longer than the node accepts ({@code pekko.http.parsing.max-uri-length});
   * answered by the HTTP layer, before any route. HTTP 414.
   */
  URI_TOO_LONG(414),
  /** A header name or value is longer than the node's parser accepts. HTTP 431. */
  HEADERS_TOO_LARGE(431),
  /** A request method HTTP does not define. HTTP 501. */
  NOT_IMPLEMENTED(501),
  /** A protocol version other than HTTP/1.0 and 1.1. HTTP 505. */
  HTTP_VERSION_NOT_SUPPORTED(505);

  private final int httpStatus;
  private final boolean retryable;

  ErrorCode(int httpStatus) {
    this(httpStatus, false);
  }

  ErrorCode(int httpStatus, boolean retryable) {
    this.httpStatus = httpStatus;
    this.retryable = retryable;
  }

  public int httpStatus() {
    return httpStatus;
  }

  /** Whether the same request may succeed later unchanged. */
  public boolean retryable() {
    return retryable;
  }

  public String wire() {
    return name().toLowerCase(Locale.ROOT).replace('_', '-');
  }
}
