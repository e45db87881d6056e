package io.weir.persistence.cdc.source;

import io.weir.persistence.PostgresTls;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.Properties;
import org.postgresql.PGProperty;

/**
 * How to reach the PostgreSQL whose changes a pipeline streams.
 *
 * @param password secret; never part of {@link #toString()}
 * @param tls TLS towards the source (a pipeline's {@code source.tls}, else {@code
 *     weir.postgres.tls}), applied to every connection to it, replication connections included
 */
public record SourceSettings(String url, String user, String password, PostgresTls tls) {

  public SourceSettings {
    tls = tls == null ? PostgresTls.NONE : tls;
  }

  /** Without TLS settings of its own: the URL's parameters and pgjdbc's defaults decide. */
  public SourceSettings(String url, String user, String password) {
    this(url, user, password, PostgresTls.NONE);
  }

  /**
   * The connection properties every connection to the source starts from: login, application name,
   * connect timeout, TLS, and no server error details (they can quote row values) in exception
   * messages.
   */
  public Properties properties(String applicationName) {
    Properties props = new Properties();
    PGProperty.USER.set(props, user);
    if (password != null) {
      PGProperty.PASSWORD.set(props, password);
    }
    PGProperty.APPLICATION_NAME.set(props, applicationName);
    PGProperty.CONNECT_TIMEOUT.set(props, "10");
    PGProperty.LOG_SERVER_ERROR_DETAIL.set(props, "false");
    tls.applyTo(props);
    return props;
  }

  /** A plain (not replication) connection to the source with {@link #properties(String)}. */
  public Connection connect(String applicationName) throws SQLException {
    return DriverManager.getConnection(url, properties(applicationName));
  }

  @Override
  public String toString() {
    return "SourceSettings[url=" + url + ", user=" + user + ", password=<hidden>, tls=" + tls + "]";
  }
}
