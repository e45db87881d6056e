package io.weir.persistence;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import javax.sql.DataSource;

/**
 * Which storage the journal is written to (ADR 0036): the primary's system identifier (the same on
 * its standbys; a different one means another database cluster) and the timeline it writes on (a
 * promotion starts the next one). Read with plain SQL, so Weir's role needs no replication
 * privilege: {@code pg_control_system()} for the identifier, and the timeline from the WAL file
 * name of the current insert position ({@code pg_walfile_name}), which changes at the promotion
 * itself, unlike {@code pg_control_checkpoint()} which lags until the next checkpoint. Both agree
 * with {@code IDENTIFY_SYSTEM} on a primary ({@code StorageSystemIT}).
 *
 * @param systemIdentifier the primary's {@code system_identifier}
 * @param timeline the timeline its WAL is written on
 */
public record StorageSystem(long systemIdentifier, int timeline) {

  static final String SQL =
      "SELECT system_identifier, substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)"
          + " FROM pg_catalog.pg_control_system()";

  /** Reads the storage identity on a connection to the journal's primary. */
  public static StorageSystem read(Connection c) throws SQLException {
    try (Statement s = c.createStatement()) {
      s.setQueryTimeout(5);
      ResultSet rs = s.executeQuery(SQL);
      rs.next();
      return new StorageSystem(rs.getLong(1), Integer.parseUnsignedInt(rs.getString(2), 16));
    }
  }

  /** Value-free description for logs and status. */
  public String describe() {
    return "system " + Long.toUnsignedString(systemIdentifier) + ", timeline " + timeline;
  }

  private static final String STANDBYS_PAST =
      "SELECT count(*) FROM pg_catalog.pg_stat_replication r"
          + " WHERE r.state = 'streaming' AND r.sync_state IN ('sync', 'quorum')"
          + " AND r.flush_lsn >= ?::pg_lsn"
          + " AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots s"
          + "   WHERE s.active_pid = r.pid AND s.slot_type = 'logical')";

  /**
   * Completes once {@code standbys} physical standbys streaming as sync or quorum have flushed the
   * primary's WAL up to its current position, read first (ADR 0036): every commit visible on the
   * primary then is on {@code 1 + standbys} copies, including one whose synchronous wait was
   * cancelled. With {@code standbys} 0 it completes at once. Fails after {@code deadline} (the
   * caller does not serve, and tries again later).
   */
  public static CompletionStage<Void> settled(
      DataSource data, int standbys, Duration deadline, Executor io) {
    if (standbys <= 0) {
      return CompletableFuture.completedFuture(null);
    }
    return CompletableFuture.runAsync(
        () -> {
          long until = System.nanoTime() + deadline.toNanos();
          try (Connection c = data.getConnection();
              Statement s = c.createStatement()) {
            s.setQueryTimeout(5);
            String position;
            try (ResultSet rs = s.executeQuery("SELECT pg_current_wal_lsn()::text")) {
              rs.next();
              position = rs.getString(1);
            }
            try (PreparedStatement past = c.prepareStatement(STANDBYS_PAST)) {
              past.setQueryTimeout(5);
              past.setString(1, position);
              while (true) {
                try (ResultSet rs = past.executeQuery()) {
                  rs.next();
                  if (rs.getInt(1) >= standbys) {
                    return;
                  }
                }
                if (System.nanoTime() > until) {
                  throw new IllegalStateException(
                      "the standbys did not flush the primary's WAL within "
                          + deadline.toSeconds()
                          + " s");
                }
                Thread.sleep(50);
              }
            }
          } catch (SQLException e) {
            throw new IllegalStateException(
                "reading the standbys' positions failed (" + SafeErrors.describe(e) + ")");
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the standbys");
          }
        },
        io);
  }
}
