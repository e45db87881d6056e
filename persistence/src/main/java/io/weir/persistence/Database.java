package io.weir.persistence;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import javax.sql.DataSource;

/**
 * Weir's own connection pool to its PostgreSQL (the journal plugin keeps a separate one). The pool
 * starts without a reachable server, so a node can come up while PostgreSQL is down.
 */
public final class Database implements AutoCloseable {
  private final PostgresSettings settings;
  private final HikariDataSource dataSource;

  private Database(PostgresSettings settings, HikariDataSource dataSource) {
    this.settings = settings;
    this.dataSource = dataSource;
  }

  public static Database create(PostgresSettings settings, String poolName) {
    HikariConfig hc = new HikariConfig();
    hc.setPoolName(poolName);
    hc.setJdbcUrl(settings.url());
    hc.setUsername(settings.user());
    hc.setPassword(settings.password());
    hc.setMaximumPoolSize(settings.poolSize());
    hc.setMinimumIdle(0);
    hc.setConnectionTimeout(settings.connectTimeout().toMillis());
    hc.setValidationTimeout(Math.min(settings.connectTimeout().toMillis(), 5000));
    hc.setInitializationFailTimeout(-1);
    connectionProperties(settings, "weir").forEach(hc::addDataSourceProperty);
    return new Database(settings, new HikariDataSource(hc));
  }

  /**
   * One connection of its own, outside any pool, with the pool's settings and {@code
   * applicationName} as its {@code application_name} (a name Weir makes, never a client value).
   * Logging in may take {@code connect-timeout}; a read that waits longer than {@code
   * socketTimeout} fails and closes the connection; TCP keepalive is on.
   */
  public static Connection connect(
      PostgresSettings settings, String applicationName, Duration socketTimeout)
      throws SQLException {
    Properties props = new Properties();
    props.setProperty("user", settings.user());
    props.setProperty("password", settings.password());
    connectionProperties(settings, applicationName)
        .forEach((k, v) -> props.setProperty(k, String.valueOf(v)));
    props.setProperty(
        "loginTimeout", Long.toString(Math.max(1, settings.connectTimeout().toSeconds())));
    props.setProperty("socketTimeout", Long.toString(Math.max(1, socketTimeout.toSeconds())));
    props.setProperty("tcpKeepAlive", "true");
    return DriverManager.getConnection(settings.url(), props);
  }

  private static Map<String, Object> connectionProperties(
      PostgresSettings settings, String applicationName) {
    Map<String, Object> props = new LinkedHashMap<>();
    props.put("ApplicationName", applicationName);
    props.put("connectTimeout", Math.max(1, settings.connectTimeout().toSeconds()));
    // pgjdbc otherwise quotes a failed batch entry's parameters (row values) in its exception
    // messages, e.g. when the connection drops during a PostgreSQL failover.
    props.put("logServerErrorDetail", "false");
    // sslmode, sslrootcert, ... (weir.postgres.tls); the URL carries none of them when these are
    // set.
    props.putAll(settings.tls().jdbcProperties());
    return props;
  }

  public DataSource dataSource() {
    return dataSource;
  }

  public PostgresSettings settings() {
    return settings;
  }

  public Connection connection() throws SQLException {
    return dataSource.getConnection();
  }

  @Override
  public void close() {
    dataSource.close();
  }
}
