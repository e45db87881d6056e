package io.weir.protocol.query;

import java.util.Objects;

/**
 * A refused Q1 query. The message and {@link #construct()} name structure only: operator names,
 * positions in the query's JSON ({@code where.args[1].value}) and limits, never a literal or a
 * value.
 */
public final class QueryException extends Exception {
  /** Why a query was refused. */
  public enum Reason {
    /**
     * Not a well-formed Q1 query (wrong type, missing or unknown key, unknown operator, bad name).
     */
    INVALID,
    /**
     * A construct Q1 deliberately lacks (ORDER BY, top-k, aggregates, joins, continuations,
     * EXPLAIN).
     */
    UNSUPPORTED,
    /** Over one of the {@link QueryLimits}. */
    LIMIT
  }

  private final Reason reason;
  private final String construct;

  /**
   * @param construct for {@link Reason#INVALID} the position in the query ({@code
   *     where.args[2].field}), for {@link Reason#UNSUPPORTED} the construct ({@code ORDER BY}), for
   *     {@link Reason#LIMIT} the limit ({@code depth})
   */
  public QueryException(Reason reason, String construct, String message) {
    super(message, null, false, false);
    this.reason = Objects.requireNonNull(reason, "reason");
    this.construct = Objects.requireNonNull(construct, "construct");
  }

  public Reason reason() {
    return reason;
  }

  public String construct() {
    return construct;
  }
}
