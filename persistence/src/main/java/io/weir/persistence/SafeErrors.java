package io.weir.persistence;

import java.net.ConnectException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.security.cert.CertPathBuilderException;
import java.security.cert.CertPathValidatorException;
import java.security.cert.CertificateException;
import java.sql.SQLException;
import javax.net.ssl.SSLException;

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

  /** Why a connection's TLS set-up failed; see {@link #tlsFailure(Throwable)}. */
  public enum TlsFailure {
    /** The server's certificate does not chain to a trusted CA (or is expired, or malformed). */
    UNTRUSTED_CERTIFICATE(
        "the server's certificate is not signed by a certificate authority in the root certificate file"
            + " (or it expired)"),
    /** verify-full: the server's certificate does not name the host the URL connects to. */
    NAME_MISMATCH(
        "the server's certificate does not name the host of the URL (sslmode verify-full)"),
    /** The TLS mode requires encryption and the server does not offer TLS. */
    SERVER_WITHOUT_TLS("the server does not offer TLS (ssl = off on the server?)"),
    /**
     * Any other handshake failure: no common protocol or cipher, or the peer refused our
     * certificate.
     */
    HANDSHAKE(
        "the TLS handshake failed (no common protocol, or the client certificate was refused)");

    private final String description;

    TlsFailure(String description) {
      this.description = description;
    }

    /** A value-free sentence for logs and errors. */
    public String description() {
      return description;
    }

    /**
     * True when the configuration and the server disagree (untrusted certificate, name mismatch,
     * server without TLS): retrying cannot help. A bare handshake failure may be a connection cut
     * during the handshake, so it is not.
     */
    public boolean isConfiguration() {
      return this != HANDSHAKE;
    }
  }

  /**
   * The TLS failure that ended a connection attempt, or null when {@code error} is not one. Judged
   * by exception classes and, for pgjdbc's own checks that carry no TLS exception (host name,
   * server without TLS), by the pgjdbc method that threw; never by a message.
   */
  public static TlsFailure tlsFailure(Throwable error) {
    boolean handshake = false;
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof CertificateException
          || t instanceof CertPathValidatorException
          || t instanceof CertPathBuilderException) {
        return TlsFailure.UNTRUSTED_CERTIFICATE;
      }
      if (t instanceof SSLException) {
        handshake = true;
      }
      if (t instanceof SQLException
          && thrownBy(t, "org.postgresql.ssl.MakeSSL", "verifyPeerName")) {
        return TlsFailure.NAME_MISMATCH;
      }
      if (t instanceof SQLException sql
          && "08004".equals(sql.getSQLState())
          && thrownBy(t, "org.postgresql.core.v3.ConnectionFactoryImpl", "enableSSL")) {
        return TlsFailure.SERVER_WITHOUT_TLS;
      }
    }
    return handshake ? TlsFailure.HANDSHAKE : null;
  }

  private static boolean thrownBy(Throwable t, String className, String method) {
    StackTraceElement[] trace = t.getStackTrace();
    return trace.length > 0
        && trace[0].getClassName().equals(className)
        && trace[0].getMethodName().equals(method);
  }

  /**
   * True when the failure means the server could not be reached (as opposed to a refused query).
   */
  public static boolean isConnectivity(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof ConnectException
          || t instanceof SocketTimeoutException
          || t instanceof UnknownHostException) {
        return true;
      }
      if (t instanceof SQLException sql
          && sql.getSQLState() != null
          && (sql.getSQLState().startsWith("08") || sql.getSQLState().startsWith("57P"))) {
        return true;
      }
    }
    return false;
  }
}
