package io.weir.persistence.cdc.mirror;

import io.weir.protocol.cdc.Transaction;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * The statements of one apply: consecutive changes of one statement shape accumulate in a JDBC
 * batch, which goes out when the shape changes, when it reaches {@link #MAX_BATCH_STATEMENTS}
 * statements or {@link #MAX_BATCH_BYTES} bytes of values, or when the apply ends. Statements run in
 * the order the changes came, so batching never reorders them; the bounds keep the memory of a
 * pending batch (the driver holds every bound value, {@link #pendingKeys} every key) small however
 * large the transaction, which matters when its changes are read from a spill file as they are
 * applied. A second upsert of a key already in the pending batch starts a new batch: with pgjdbc's
 * {@code reWriteBatchedInserts} a batch becomes one multi-row INSERT, and PostgreSQL refuses an ON
 * CONFLICT DO UPDATE that touches a row twice (SQLState 21000). {@link #context} names what the
 * statement that may fail next works on, for the error message.
 */
final class MirrorRun implements AutoCloseable {
  /** Binds one statement's values. */
  @FunctionalInterface
  interface Binder {
    void bind(PreparedStatement ps) throws SQLException;
  }

  /** A few round trips per thousand rows cost little; larger batches buy nothing measurable. */
  static final int MAX_BATCH_STATEMENTS = 1000;

  /** Wide rows flush sooner: the driver keeps each bound value (as a String) until it executes. */
  static final long MAX_BATCH_BYTES = 2L << 20;

  Connection connection;
  String context;
  private final Map<String, PreparedStatement> statements = new HashMap<>();
  private final Set<Object> pendingKeys = new HashSet<>();
  private PreparedStatement pending;
  private String pendingSql;
  private String pendingWhat;
  private int pendingStatements;
  private long pendingBytes;
  private PreparedStatement log;
  private int logged;

  /**
   * @param key the row's target key for upserts, null for statements that are never rewritten
   * @param bytes the value bytes the statement binds
   */
  void batch(String sql, String what, Object key, long bytes, Binder binder) throws SQLException {
    if (pending != null && !sql.equals(pendingSql)) {
      flush();
    }
    if (key != null && !pendingKeys.add(key)) {
      flush();
      pendingKeys.add(key);
    }
    if (pending == null) {
      pending = statement(sql);
      pendingSql = sql;
      pendingWhat = what;
    }
    context = what;
    binder.bind(pending);
    pending.addBatch();
    pendingStatements++;
    pendingBytes += bytes;
    if (pendingStatements >= MAX_BATCH_STATEMENTS || pendingBytes >= MAX_BATCH_BYTES) {
      flush();
    }
  }

  /** Runs one statement now (after what is pending) and returns its update count. */
  int executeNow(String sql, String what, Binder binder) throws SQLException {
    flush();
    context = what;
    PreparedStatement ps = statement(sql);
    binder.bind(ps);
    return ps.executeUpdate();
  }

  void flush() throws SQLException {
    if (pending != null) {
      PreparedStatement ps = pending;
      context = pendingWhat;
      pending = null;
      pendingSql = null;
      pendingKeys.clear();
      pendingStatements = 0;
      pendingBytes = 0;
      ps.executeBatch();
    }
  }

  void logApplied(String sql, String pipeline, Transaction t) throws SQLException {
    if (log == null) {
      log = connection.prepareStatement(sql);
    }
    log.setString(1, pipeline);
    log.setLong(2, t.xid());
    log.setObject(3, t.commitLsn().toString(), Types.OTHER);
    log.addBatch();
    logged++;
  }

  void flushLog() throws SQLException {
    if (logged > 0) {
      log.executeBatch();
      logged = 0;
    }
  }

  private PreparedStatement statement(String sql) throws SQLException {
    PreparedStatement ps = statements.get(sql);
    if (ps == null) {
      ps = connection.prepareStatement(sql);
      statements.put(sql, ps);
    }
    return ps;
  }

  @Override
  public void close() {
    for (PreparedStatement ps : statements.values()) {
      closeQuietly(ps);
    }
    statements.clear();
    if (log != null) {
      closeQuietly(log);
    }
  }

  private static void closeQuietly(Statement s) {
    try {
      s.close();
    } catch (SQLException e) {
      // The connection is going back to the pool or away; nothing to act on.
    }
  }
}
