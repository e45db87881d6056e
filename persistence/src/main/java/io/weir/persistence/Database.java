package io.weir.persistence;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.SQLException;
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
    hc.addDataSourceProperty("ApplicationName", "weir");
    hc.addDataSourceProperty("connectTimeout", Math.max(1, settings.connectTimeout().toSeconds()));
    // pgjdbc otherwise quotes a failed batch entry's parameters (row values) in its exception
    // messages, e.g. when the connection drops during a PostgreSQL failover.
    hc.addDataSourceProperty("logServerErrorDetail", "false");
    // sslmode, sslrootcert, ... (weir.postgres.tls); the URL carries none of them when these are
    // set.
    settings.tls().jdbcProperties().forEach(hc::addDataSourceProperty);
    return new Database(settings, new HikariDataSource(hc));
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
