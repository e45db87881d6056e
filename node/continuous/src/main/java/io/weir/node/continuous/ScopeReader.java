package io.weir.node.continuous;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.weir.persistence.PostgresSettings;
import java.io.IOException;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * The connections of one security scope: its own pool, logged in as the scope's PostgreSQL role
 * (never Weir's login with a SET ROLE, which the query could undo). Every use is one transaction
 * {@code REPEATABLE READ, READ ONLY} with {@code statement_timeout}, rolled back at the end, so the
 * role's privileges and row-level security decide what a query sees and nothing it runs persists.
 *
 * <p>Parameters are bound as untyped text ({@code stringtype=unspecified}): PostgreSQL infers each
 * one's type from where it is used; a value that does not convert fails the statement.
 */
final class ScopeReader implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** A unit of work on a scope connection inside the read-only transaction. */
  interface Work<T> {
    T run(Connection c) throws SQLException;
  }

  private final ContinuousSettings.Scope scope;
  private final HikariDataSource pool;
  private final Duration statementTimeout;

  ScopeReader(ContinuousSettings.Scope scope, PostgresSettings weir, Duration statementTimeout) {
    this.scope = scope;
    this.statementTimeout = statementTimeout;
    PostgresSettings s = ContinuousSettings.poolSettings(weir, scope);
    HikariConfig hc = new HikariConfig();
    hc.setPoolName("weir-scope-" + scope.name());
    hc.setJdbcUrl(s.url());
    hc.setUsername(s.user());
    hc.setPassword(s.password());
    hc.setMaximumPoolSize(scope.poolSize());
    hc.setMinimumIdle(0);
    hc.setConnectionTimeout(s.connectTimeout().toMillis());
    hc.setValidationTimeout(Math.min(s.connectTimeout().toMillis(), 5000));
    hc.setInitializationFailTimeout(-1);
    hc.setAutoCommit(false);
    hc.addDataSourceProperty("ApplicationName", "weir-continuous");
    hc.addDataSourceProperty("connectTimeout", Math.max(1, s.connectTimeout().toSeconds()));
    hc.addDataSourceProperty("logServerErrorDetail", "false");
    hc.addDataSourceProperty("stringtype", "unspecified");
    s.tls().jdbcProperties().forEach(hc::addDataSourceProperty);
    this.pool = new HikariDataSource(hc);
  }

  ContinuousSettings.Scope scope() {
    return scope;
  }

  /**
   * Runs {@code work} in a read-only repeatable-read transaction with the statement timeout; always
   * rolls back.
   */
  <T> T readOnly(Work<T> work) throws SQLException {
    try (Connection c = pool.getConnection()) {
      c.setAutoCommit(false);
      try {
        try (Statement s = c.createStatement()) {
          s.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
          s.execute("SET LOCAL statement_timeout = " + Math.max(1, statementTimeout.toMillis()));
        }
        return work.run(c);
      } finally {
        c.rollback();
      }
    }
  }

  /**
   * Writes a fence message ({@link ReadPoint#fence}) in a short transaction of its own that
   * commits, so its commit flushes the WAL at once.
   */
  void fence() throws SQLException {
    try (Connection c = pool.getConnection()) {
      c.setAutoCommit(false);
      try {
        try (Statement s = c.createStatement()) {
          s.execute("SET LOCAL statement_timeout = " + Math.max(1, statementTimeout.toMillis()));
        }
        ReadPoint.fence(c);
        c.commit();
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      }
    }
  }

  /**
   * Binds {@code parameters} to the placeholders named by {@code order}, as untyped text (null as
   * NULL).
   */
  static void bind(PreparedStatement ps, List<String> order, ObjectNode parameters)
      throws SQLException {
    for (int i = 0; i < order.size(); i++) {
      JsonNode v = parameters.get(order.get(i));
      if (v == null || v.isNull()) {
        ps.setNull(i + 1, Types.NULL);
      } else {
        ps.setString(i + 1, v.isTextual() ? v.textValue() : v.asText());
      }
    }
  }

  /**
   * SQL widening the 32-bit xid {@code x} to a 64-bit one near the 64-bit {@code xm}: the xid whose
   * low half is {@code x} at the smallest signed distance from {@code xm} (within 2^31, as
   * PostgreSQL compares xids). A transaction delivered by the slot may still be running in the
   * snapshot's eyes, so its xid can be at or above xmax: it must widen to at least xmax
   * (invisible), never to the previous epoch (which would look long committed).
   */
  static String widened(String xm, String x) {
    return "("
        + xm
        + " + (((("
        + x
        + ") - ("
        + xm
        + " & 4294967295) + 2147483648) % 4294967296 + 4294967296)"
        + " % 4294967296 - 2147483648))";
  }

  /**
   * How many of the delivered transactions {@code xids} (32-bit, as pgoutput reports them) the
   * transaction's snapshot does not include. Must be the transaction's first statement, so the
   * snapshot it takes is the one the query that follows reads. Each xid is widened around the
   * snapshot's xmax ({@link #widened}).
   */
  static long invisible(Connection c, Collection<Long> xids) throws SQLException {
    if (xids.isEmpty()) {
      try (Statement s = c.createStatement()) {
        s.execute("SELECT 1"); // takes the snapshot
      }
      return 0;
    }
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT count(*) FILTER (WHERE NOT CASE WHEN w.wide < 0 THEN true"
                + " ELSE pg_visible_in_snapshot(w.wide::text::xid8, w.snap) END)"
                + " FROM (SELECT e.snap, "
                + widened("e.xm", "x")
                + " AS wide"
                + " FROM (SELECT s AS snap, pg_snapshot_xmax(s)::text::bigint AS xm FROM pg_current_snapshot() AS s) e,"
                + " unnest(?::bigint[]) AS x) w")) {
      ps.setArray(1, c.createArrayOf("bigint", xids.toArray()));
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  /** Reads the whole result of {@code ps} as rows keyed by {@code keyColumns}. */
  static List<ResultRow> rows(PreparedStatement ps, List<String> keyColumns) throws SQLException {
    List<ResultRow> out = new ArrayList<>();
    try (ResultSet rs = ps.executeQuery()) {
      ResultSetMetaData md = rs.getMetaData();
      int n = md.getColumnCount();
      String[] names = new String[n];
      for (int i = 0; i < n; i++) {
        names[i] = md.getColumnLabel(i + 1);
      }
      while (rs.next()) {
        ObjectNode row = JsonNodeFactory.instance.objectNode();
        for (int i = 0; i < n; i++) {
          row.set(names[i], value(rs, md, i + 1));
        }
        ArrayNode key = JsonNodeFactory.instance.arrayNode();
        for (String k : keyColumns) {
          key.add(row.get(k));
        }
        out.add(new ResultRow(key.toString(), key, row));
      }
    }
    return out;
  }

  private static JsonNode value(ResultSet rs, ResultSetMetaData md, int i) throws SQLException {
    JsonNodeFactory f = JsonNodeFactory.instance;
    switch (md.getColumnType(i)) {
      case Types.SMALLINT, Types.INTEGER, Types.BIGINT -> {
        long v = rs.getLong(i);
        return rs.wasNull() ? f.nullNode() : f.numberNode(v);
      }
      case Types.NUMERIC, Types.DECIMAL -> {
        // numeric NaN and +/-Infinity have no BigDecimal (getBigDecimal throws 22003): they are
        // text, as float8's are, and ResultOrder ranks them as PostgreSQL does.
        String text = rs.getString(i);
        if (text == null) {
          return f.nullNode();
        }
        return switch (text) {
          case "NaN", "Infinity", "-Infinity" -> f.textNode(text);
          default -> f.numberNode(new BigDecimal(text));
        };
      }
      case Types.REAL, Types.FLOAT, Types.DOUBLE -> {
        double v = rs.getDouble(i);
        if (rs.wasNull()) {
          return f.nullNode();
        }
        return Double.isFinite(v) ? f.numberNode(v) : f.textNode(Double.toString(v));
      }
      case Types.BOOLEAN, Types.BIT -> {
        boolean v = rs.getBoolean(i);
        return rs.wasNull() ? f.nullNode() : f.booleanNode(v);
      }
      default -> {
        String text = rs.getString(i);
        if (text == null) {
          return f.nullNode();
        }
        String type = md.getColumnTypeName(i);
        if (type.equals("json") || type.equals("jsonb")) {
          try {
            return JSON.readTree(text);
          } catch (IOException e) {
            return f.textNode(text);
          }
        }
        return f.textNode(text);
      }
    }
  }

  @Override
  public void close() {
    pool.close();
  }
}
