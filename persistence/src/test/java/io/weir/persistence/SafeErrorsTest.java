package io.weir.persistence;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.ConnectException;
import java.security.cert.CertPathValidatorException;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import javax.net.ssl.SSLHandshakeException;
import org.junit.jupiter.api.Test;

class SafeErrorsTest {

  /** As HikariCP reports a failed connection: its own exception around pgjdbc's. */
  private static Throwable pooled(Throwable driverError) {
    return new SQLTransientConnectionException(
        "weir - Connection is not available", "08001", driverError);
  }

  private static SQLException thrownAt(String className, String method, String sqlState) {
    SQLException e = new SQLException("message not looked at", sqlState);
    e.setStackTrace(
        new StackTraceElement[] {new StackTraceElement(className, method, "X.java", 1)});
    return e;
  }

  @Test
  void classifiesTlsFailuresByTypeAndThrowerNeverByMessage() {
    SSLHandshakeException untrusted = new SSLHandshakeException("PKIX path building failed");
    untrusted.initCause(new CertPathValidatorException("no trust anchor"));
    assertThat(SafeErrors.tlsFailure(pooled(new SQLException("SSL error", "08006", untrusted))))
        .isEqualTo(SafeErrors.TlsFailure.UNTRUSTED_CERTIFICATE);
    assertThat(
            SafeErrors.tlsFailure(
                pooled(new SQLException("SSL error", "08006", new SSLHandshakeException("alert")))))
        .isEqualTo(SafeErrors.TlsFailure.HANDSHAKE);
    assertThat(
            SafeErrors.tlsFailure(
                pooled(thrownAt("org.postgresql.ssl.MakeSSL", "verifyPeerName", "08006"))))
        .isEqualTo(SafeErrors.TlsFailure.NAME_MISMATCH);
    assertThat(
            SafeErrors.tlsFailure(
                pooled(
                    thrownAt(
                        "org.postgresql.core.v3.ConnectionFactoryImpl", "enableSSL", "08004"))))
        .isEqualTo(SafeErrors.TlsFailure.SERVER_WITHOUT_TLS);

    assertThat(
            SafeErrors.tlsFailure(
                pooled(new SQLException("refused", "08001", new ConnectException()))))
        .as("an unreachable server is not a TLS failure")
        .isNull();
    assertThat(
            SafeErrors.tlsFailure(
                pooled(
                    thrownAt(
                        "org.postgresql.core.v3.ConnectionFactoryImpl",
                        "doAuthentication",
                        "28P01"))))
        .isNull();
    for (SafeErrors.TlsFailure f : SafeErrors.TlsFailure.values()) {
      assertThat(f.description()).isNotBlank();
      assertThat(f.isConfiguration())
          .as("%s: only a bare handshake failure may be transient", f)
          .isEqualTo(f != SafeErrors.TlsFailure.HANDSHAKE);
    }
  }
}
