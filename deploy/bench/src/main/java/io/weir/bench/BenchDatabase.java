package io.weir.bench;

import io.weir.protocol.Lsn;
import java.net.URI;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A benchmark's own database on the private PostgreSQL ({@value #NAME} unless named otherwise):
 * created afresh and dropped with any replication slots in it; for the CDC benchmarks also its
 * table and publication, the slots of each round and the workload. Everything here runs outside the
 * timed sections.
 */
final class BenchDatabase {
  static final String NAME = "weir_bench";
  static final String TABLE = "bench";
  static final String PUBLICATION = "bench_pub";

  // ~100-byte rows: a bigint key, an int, 64 characters of text and a timestamp.
  private static final String INSERT =
      "INSERT INTO public.bench (id, a, b, c) "
          + "SELECT g, (g * 7919) % 1000000, repeat(md5(g::text), 2), now() FROM generate_series(?, ?) g";
  private static final String UPDATE =
      "UPDATE public.bench SET a = a + 1, c = now() WHERE id BETWEEN ? AND ?";

  private final String adminUrl;
  private final String name;
  private final String benchUrl;
  private final String host;
  private final int port;
  private final String user;
  private final String password;
  // Read by the shutdown hook too.
  private final Set<String> slots = ConcurrentHashMap.newKeySet();

  BenchDatabase(String adminUrl, String user, String password) {
    this(adminUrl, user, password, NAME);
  }

  /** Database {@code name} on the server of {@code adminUrl} (a JDBC URL of any database there). */
  BenchDatabase(String adminUrl, String user, String password, String name) {
    this.adminUrl = adminUrl;
    this.name = name;
    this.user = user;
    this.password = password;
    // jdbc:postgresql://host:port/db?params -> same server, database name.
    URI uri = URI.create(adminUrl.substring("jdbc:".length()));
    this.host = uri.getHost() == null ? "127.0.0.1" : uri.getHost();
    this.port = uri.getPort() < 0 ? 5432 : uri.getPort();
    String query = uri.getRawQuery() == null ? "" : "?" + uri.getRawQuery();
    this.benchUrl = "jdbc:postgresql://" + host + ":" + port + "/" + name + query;
  }

  String name() {
    return name;
  }

  String url() {
    return benchUrl;
  }

  String host() {
    return host;
  }

  int port() {
    return port;
  }

  String user() {
    return user;
  }

  String password() {
    return password;
  }

  Connection connect() throws SQLException {
    Connection c = DriverManager.getConnection(benchUrl, user, password);
    try (Statement s = c.createStatement()) {
      // The login is called weir: with the default search_path "$user" would resolve to Weir's
      // schema.
      s.execute("SET search_path = public");
    }
    return c;
  }

  /**
   * Drops (with any slots left by an earlier run) and recreates the database, table and
   * publication.
   */
  void recreate() throws SQLException {
    recreateEmpty();
    try (Connection c = connect();
        Statement s = c.createStatement()) {
      s.execute(
          "CREATE TABLE public.bench (id bigint PRIMARY KEY, a int NOT NULL, b text NOT NULL, c timestamptz NOT NULL)");
      // No autovacuum on the table between rounds: less background noise while draining.
      s.execute("ALTER TABLE public.bench SET (autovacuum_enabled = false)");
      s.execute("CREATE PUBLICATION " + PUBLICATION + " FOR TABLE public.bench");
    }
  }

  /**
   * Drops the database (with any slots left in it by an earlier run) and creates it again, empty.
   */
  void recreateEmpty() throws SQLException {
    try (Connection c = DriverManager.getConnection(adminUrl, user, password);
        Statement s = c.createStatement()) {
      dropDatabase(c);
      s.execute("CREATE DATABASE " + name);
    }
  }

  /**
   * Drops the database, after the slots this object created and any other slot in it (a node's).
   */
  void drop() throws SQLException {
    dropSlots();
    try (Connection c = DriverManager.getConnection(adminUrl, user, password)) {
      dropDatabase(c);
    }
  }

  /** Drops every replication slot of the database, then the database (ending its sessions). */
  private void dropDatabase(Connection admin) throws SQLException {
    List<String> slotsThere = new ArrayList<>();
    try (PreparedStatement ps =
        admin.prepareStatement("SELECT slot_name FROM pg_replication_slots WHERE database = ?")) {
      ps.setString(1, name);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          slotsThere.add(rs.getString(1));
        }
      }
    }
    for (String slot : slotsThere) {
      dropSlot(admin, slot);
    }
    try (Statement s = admin.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    }
  }

  /**
   * CPU seconds (user + system) used so far by the PostgreSQL backends connected to the database
   * (this query's excepted), from {@code /proc}; only comparable between two calls while the same
   * sessions stay connected (a pool's).
   */
  double backendCpuSeconds() throws SQLException {
    double sum = 0;
    try (Connection c = connect();
        Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    + " AND pid <> pg_backend_pid()")) {
      while (rs.next()) {
        sum += CpuTimes.process(rs.getLong(1));
      }
    }
    return sum;
  }

  /**
   * Empties the table and writes a checkpoint; done before a round's slots exist, so nothing of it
   * is decoded.
   */
  void reset() throws SQLException {
    try (Connection c = connect();
        Statement s = c.createStatement()) {
      s.execute("TRUNCATE public.bench");
      s.execute("CHECKPOINT");
    }
  }

  /** Creates a pgoutput slot and returns the LSN it starts decoding from. */
  long createSlot(String slot) throws SQLException {
    try (Connection c = connect();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT lsn FROM pg_create_logical_replication_slot(?, 'pgoutput')")) {
      ps.setString(1, slot);
      slots.add(slot);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return lsn(rs.getString(1));
      }
    }
  }

  /** Drops every slot this object created; waits for a consumer that is still disconnecting. */
  void dropSlots() throws SQLException {
    if (slots.isEmpty()) {
      return; // also when the database was never created
    }
    SQLException failure = null;
    try (Connection c = connect()) {
      for (String slot : List.copyOf(slots)) {
        try {
          dropSlot(c, slot);
          slots.remove(slot);
        } catch (SQLException e) {
          failure = e;
        }
      }
    }
    if (failure != null) {
      throw failure;
    }
  }

  void dropSlot(String slot) throws SQLException {
    try (Connection c = connect()) {
      dropSlot(c, slot);
      slots.remove(slot);
    }
  }

  private static void dropSlot(Connection c, String slot) throws SQLException {
    long deadline = System.nanoTime() + 20_000_000_000L;
    while (true) {
      Integer activePid = null;
      boolean exists = false;
      try (PreparedStatement ps =
          c.prepareStatement("SELECT active_pid FROM pg_replication_slots WHERE slot_name = ?")) {
        ps.setString(1, slot);
        try (ResultSet rs = ps.executeQuery()) {
          if (rs.next()) {
            exists = true;
            activePid = (Integer) rs.getObject(1);
          }
        }
      }
      if (!exists) {
        return;
      }
      if (activePid == null) {
        try (PreparedStatement ps = c.prepareStatement("SELECT pg_drop_replication_slot(?)")) {
          ps.setString(1, slot);
          ps.execute();
          return;
        } catch (SQLException e) {
          if (!"55006".equals(e.getSQLState()) || System.nanoTime() > deadline) {
            throw e; // 55006: became active again in between; anything else is real
          }
        }
      } else if (System.nanoTime() > deadline - 15_000_000_000L) {
        // A consumer still holds it after 5 s (e.g. after a failure): end its walsender.
        try (PreparedStatement ps = c.prepareStatement("SELECT pg_terminate_backend(?)")) {
          ps.setInt(1, activePid);
          ps.execute();
        }
      }
      if (System.nanoTime() > deadline) {
        throw new SQLException("replication slot " + slot + " stayed active", "55006");
      }
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new SQLException("interrupted while dropping slot " + slot, e);
      }
    }
  }

  /**
   * What a round's workload wrote.
   *
   * @param rowChanges row changes committed (inserts plus updates), counted from the statements'
   *     update counts
   * @param lastXid the 32-bit xid of the last transaction, as pgoutput reports it
   * @param endLsn the WAL insert position read right after the last commit: the end of the workload
   */
  record Workload(int txnSize, long rowChanges, long transactions, long lastXid, long endLsn) {}

  /**
   * Commits {@code rows} row changes in transactions of {@code txnSize}: each transaction first
   * updates {@code updatePercent}% of its size among rows inserted earlier in the round (none in
   * the first), then inserts the rest.
   */
  Workload generate(int rows, int txnSize, int updatePercent) throws SQLException {
    try (Connection c = connect()) {
      try (Statement s = c.createStatement()) {
        // Commit speed is not measured; the final position is taken from the insert pointer.
        s.execute("SET synchronous_commit = off");
      }
      c.setAutoCommit(false);
      long done = 0;
      long transactions = 0;
      long nextId = 1;
      long updateCursor = 1;
      long lastXid;
      try (PreparedStatement insert = c.prepareStatement(INSERT);
          PreparedStatement update = c.prepareStatement(UPDATE);
          PreparedStatement xid =
              c.prepareStatement("SELECT pg_current_xact_id()::text::bigint % 4294967296")) {
        while (true) {
          int size = (int) Math.min(txnSize, rows - done);
          int toUpdate = (int) Math.min((long) size * updatePercent / 100, nextId - 1);
          int changed = 0;
          if (toUpdate > 0) {
            if (updateCursor + toUpdate > nextId) {
              updateCursor = 1;
            }
            update.setLong(1, updateCursor);
            update.setLong(2, updateCursor + toUpdate - 1);
            changed += update.executeUpdate();
            updateCursor += toUpdate;
          }
          int toInsert = size - changed;
          if (toInsert > 0) {
            insert.setLong(1, nextId);
            insert.setLong(2, nextId + toInsert - 1);
            changed += insert.executeUpdate();
            nextId += toInsert;
          }
          done += changed;
          transactions++;
          if (done >= rows) {
            try (ResultSet rs = xid.executeQuery()) {
              rs.next();
              lastXid = rs.getLong(1);
            }
            c.commit();
            break;
          }
          c.commit();
        }
      }
      c.setAutoCommit(true);
      long end;
      try (Statement s = c.createStatement();
          ResultSet rs = s.executeQuery("SELECT pg_current_wal_insert_lsn()")) {
        rs.next();
        end = lsn(rs.getString(1));
      }
      try (Statement s = c.createStatement()) {
        // Flushes the WAL and puts a record after the end position, so pg_recvlogical's --endpos
        // is passed even if the last commit ends right at it.
        s.execute("CHECKPOINT");
      }
      return new Workload(txnSize, done, transactions, lastXid, end);
    }
  }

  /** A server fact as text: SHOW {@code setting}. */
  String show(String setting) throws SQLException {
    try (Connection c = connect();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SHOW " + setting)) {
      rs.next();
      return rs.getString(1);
    }
  }

  private static long lsn(String text) {
    return Lsn.parse(text).asLong();
  }
}
