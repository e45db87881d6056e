package io.weir.persistence;

import java.net.ConnectException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.sql.SQLException;

/**
 * Value-free descriptions of failures for logs, metrics and replies. Exception messages from
 * pgjdbc, Jackson and records can carry row values (e.g. {@code DETAIL: Key (id)=(...)}), so only
 * the exception classes along the cause chain and SQLStates are kept, never a message.
 */
public final class SafeErrors {
  private SafeErrors() {}

  /** e.g. {@code "PSQLException[SQLState 08001] <- ConnectException"}. */
  public static String describe(Throwable error) {
    StringBuilder out = new StringBuilder();
    Throwable t = error;
    int depth = 0;
    while (t != null && depth++ < 6) {
      if (out.length() > 0) {
        out.append(" <- ");
      }
      out.append(t.getClass().getSimpleName());
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        out.append("[SQLState ").append(sql.getSQLState()).append(']');
      }
      if (t.getCause() == t) {
        break;
      }
      t = t.getCause();
    }
    return out.toString();
  }

  /** The SQLState of the first SQLException in the cause chain, or null. */
  public static String sqlState(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        return sql.getSQLState();
      }
    }
    return null;
  }

  /** True when the failure means the server could not be reached (as opposed to a refused query). */
  public static boolean isConnectivity(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof ConnectException || t instanceof SocketTimeoutException || t instanceof UnknownHostException) {
        return true;
      }
      if (t instanceof SQLException sql && sql.getSQLState() != null
          && (sql.getSQLState().startsWith("08") || sql.getSQLState().startsWith("57P"))) {
        return true;
      }
    }
    return false;
  }
}
