package io.weir.protocol.pgoutput;

/**
 * PostgreSQL values that the natural Java class of their type cannot hold: numeric {@code NaN} and
 * {@code ±Infinity}, and {@code ±infinity} dates and timestamps.
 */
public enum PgSpecial {
  /** Numeric {@code NaN}. */
  NAN,
  /** {@code Infinity} (numeric) or {@code infinity} (date, timestamp, timestamptz). */
  INFINITY,
  /** {@code -Infinity} (numeric) or {@code -infinity} (date, timestamp, timestamptz). */
  NEGATIVE_INFINITY
}
