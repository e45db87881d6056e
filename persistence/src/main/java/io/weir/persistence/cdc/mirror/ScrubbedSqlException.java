package io.weir.persistence.cdc.mirror;

import io.weir.persistence.SafeErrors;
import java.sql.SQLException;

/**
 * Stands in for a driver's {@link SQLException} as the cause of a sink failure. pgjdbc's messages
 * can quote row values ({@code DETAIL: Key (id)=(...)}) and loggers print whole cause chains, so
 * this keeps only what is safe: the exception classes along the original chain and the SQLState (as
 * its own {@link #getSQLState()}, where {@link SafeErrors} finds it), plus the original stack
 * trace. It has no cause and no next exception.
 */
public final class ScrubbedSqlException extends SQLException {

  private ScrubbedSqlException(String description, String sqlState) {
    super(description, sqlState);
  }

  /** A value-free copy of {@code original}: classes and SQLState only. */
  public static ScrubbedSqlException of(SQLException original) {
    ScrubbedSqlException scrubbed =
        new ScrubbedSqlException(SafeErrors.describe(original), MirrorFailures.sqlState(original));
    scrubbed.setStackTrace(original.getStackTrace());
    return scrubbed;
  }
}
