package io.weir.sharding.partition;

import io.weir.persistence.Identifiers;
import io.weir.persistence.SafeErrors;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Deletes journal rows with SQL on {@code <schema>.event_journal} (their tags go with them: the tag
 * table cascades). The journal plugin's own delete would mark rows and keep the highest; the
 * partition never asks for its highest row, so a plain delete is enough.
 */
public final class SqlJournalPruner implements JournalPruner {
  private static final Logger log = LoggerFactory.getLogger(SqlJournalPruner.class);

  private final DataSource dataSource;
  private final String table;
  private final String snapshots;
  private final String positions;
  private final Executor blockingIo;

  public SqlJournalPruner(DataSource dataSource, String schema, Executor blockingIo) {
    this.dataSource = dataSource;
    this.table = Identifiers.require("schema name", schema) + ".event_journal";
    this.snapshots = schema + ".snapshot";
    this.positions = schema + ".document_positions";
    this.blockingIo = blockingIo;
  }

  @Override
  public CompletionStage<Integer> deleteSnapshotsBefore(String persistenceId, long sequenceNr) {
    return delete(
        "DELETE FROM " + snapshots + " WHERE persistence_id = ? AND sequence_number < ?",
        persistenceId,
        sequenceNr,
        "old snapshots");
  }

  @Override
  public CompletionStage<Integer> deleteThrough(String persistenceId, long through) {
    return delete(
        "DELETE FROM " + table + " WHERE persistence_id = ? AND sequence_number <= ?",
        persistenceId,
        through,
        "purged journal rows");
  }

  /**
   * The partition's documents table's position is read by the delete itself: a partition without a
   * position row (no table yet) deletes nothing.
   */
  @Override
  public CompletionStage<Long> deleteThroughApplied(
      String persistenceId, int partition, long through) {
    String sql =
        "WITH bound AS (SELECT LEAST(?, COALESCE((SELECT applied_through FROM "
            + positions
            + " WHERE partition_id = ?), 0)) AS b), gone AS (DELETE FROM "
            + table
            + " WHERE persistence_id = ? AND sequence_number <= (SELECT b FROM bound) RETURNING 1)"
            + " SELECT (SELECT b FROM bound), (SELECT count(*) FROM gone)";
    return run(
        sql,
        persistenceId,
        "purged journal rows",
        ps -> {
          ps.setLong(1, through);
          ps.setInt(2, partition);
          ps.setString(3, persistenceId);
          try (ResultSet rs = ps.executeQuery()) {
            rs.next();
            long bound = rs.getLong(1);
            log.debug(
                "{}: deleted {} purged journal rows (through {}, asked {})",
                persistenceId,
                rs.getLong(2),
                bound,
                through);
            return bound;
          }
        });
  }

  /**
   * Runs {@code sql} (persistence id, sequence number) on the blocking pool; a failure is logged
   * and tried again later.
   */
  private CompletionStage<Integer> delete(
      String sql, String persistenceId, long sequenceNr, String what) {
    return run(
        sql,
        persistenceId,
        what,
        ps -> {
          ps.setString(1, persistenceId);
          ps.setLong(2, sequenceNr);
          int rows = ps.executeUpdate();
          log.debug(
              "{}: deleted {} {} (sequence number {})", persistenceId, rows, what, sequenceNr);
          return rows;
        });
  }

  /** A statement's parameters and execution. */
  private interface Statement<T> {
    T execute(PreparedStatement ps) throws SQLException;
  }

  /**
   * Prepares {@code sql} on a connection of the blocking pool and runs {@code statement} with it; a
   * failure to delete {@code what} is logged (value-free) and tried again later by the caller.
   */
  private <T> CompletionStage<T> run(
      String sql, String persistenceId, String what, Statement<T> statement) {
    return CompletableFuture.supplyAsync(
        () -> {
          try (Connection c = dataSource.getConnection();
              PreparedStatement ps = c.prepareStatement(sql)) {
            return statement.execute(ps);
          } catch (SQLException e) {
            log.warn(
                "{}: could not delete {} ({}); tried again later",
                persistenceId,
                what,
                SafeErrors.describe(e));
            throw new CompletionException(e);
          }
        },
        blockingIo);
  }
}
