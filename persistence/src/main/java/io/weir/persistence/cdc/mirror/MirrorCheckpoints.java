package io.weir.persistence.cdc.mirror;

import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.persistence.cdc.sink.SinkException;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.SlotIncarnation;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.Optional;

/**
 * The mirror's bookkeeping in the target database: the checkpoint table (one row per pipeline: its
 * slot incarnation, the commit LSN applied through and an incremental snapshot's progress) and the
 * optional applied log, created when missing, and the statements that read, lock and move a
 * checkpoint inside the sink's transaction ({@link PostgresMirrorSink}).
 */
final class MirrorCheckpoints {
  private static final String SCHEMA_EXISTS_SQL =
      "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = ?";
  private static final String TABLE_EXISTS_SQL =
      "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
          + " WHERE n.nspname = ? AND c.relname = ?";

  private final MirrorSettings settings;
  private final String checkpointWhat;
  private final String createCheckpoint;
  private final String createAppliedLog;
  private final String selectCheckpoint;
  private final String lockCheckpoint;
  private final String insertPlaceholder;
  private final String updateCheckpoint;
  private final String insertApplied;
  private final String checkpointQualified;

  MirrorCheckpoints(MirrorSettings settings) {
    this.settings = settings;
    String checkpoint = MirrorSql.qualified(settings.targetSchema(), settings.checkpointTable());
    String applied = MirrorSql.qualified(settings.targetSchema(), MirrorSettings.APPLIED_LOG_TABLE);
    this.checkpointWhat =
        "its checkpoint in " + settings.targetSchema() + "." + settings.checkpointTable();
    this.createCheckpoint = MirrorSql.createCheckpointTable(checkpoint);
    this.createAppliedLog = MirrorSql.createAppliedLog(applied);
    this.selectCheckpoint =
        "SELECT incarnation, commit_lsn::text FROM " + checkpoint + " WHERE pipeline = ?";
    this.lockCheckpoint = selectCheckpoint + " FOR UPDATE";
    // 0/0 is below every commit LSN; the row only exists so that FOR UPDATE has a row to lock.
    this.insertPlaceholder =
        "INSERT INTO "
            + checkpoint
            + " (pipeline, incarnation, commit_lsn) VALUES (?, ?, '0/0')"
            + " ON CONFLICT (pipeline) DO NOTHING";
    this.updateCheckpoint =
        "UPDATE "
            + checkpoint
            + " SET incarnation = ?, commit_lsn = ?, updated_at = now() WHERE pipeline = ?";
    this.checkpointQualified = checkpoint;
    this.insertApplied = "INSERT INTO " + applied + " (pipeline, xid, commit_lsn) VALUES (?, ?, ?)";
  }

  /** What refusals name: the checkpoint table. */
  String what() {
    return checkpointWhat;
  }

  String qualified() {
    return checkpointQualified;
  }

  String createCheckpoint() {
    return createCheckpoint;
  }

  String createAppliedLog() {
    return createAppliedLog;
  }

  String insertApplied() {
    return insertApplied;
  }

  boolean schemaExists(Connection c) throws SQLException {
    return exists(c, SCHEMA_EXISTS_SQL, settings.targetSchema(), null);
  }

  boolean tableExists(Connection c, String table) throws SQLException {
    return exists(c, TABLE_EXISTS_SQL, settings.targetSchema(), table);
  }

  void writeProgress(Connection c, String pipeline, Optional<String> progress) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "UPDATE "
                + checkpointQualified
                + " SET snapshot_progress = ?, updated_at = now() WHERE pipeline = ?")) {
      ps.setString(1, progress.orElse(null));
      ps.setString(2, pipeline);
      ps.executeUpdate();
    }
  }

  /** Checkpoint tables created before snapshots existed lack the progress column: add it. */
  void ensureProgressColumn(Connection c) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT 1 FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class t ON t.oid = a.attrelid "
                + "JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace "
                + "WHERE n.nspname = ? AND t.relname = ? AND a.attname = 'snapshot_progress' AND NOT a.attisdropped")) {
      ps.setString(1, settings.targetSchema());
      ps.setString(2, settings.checkpointTable());
      try (ResultSet rs = ps.executeQuery()) {
        if (rs.next()) {
          return;
        }
      }
    }
    try (Statement s = c.createStatement()) {
      s.execute(
          "ALTER TABLE "
              + checkpointQualified
              + " ADD COLUMN IF NOT EXISTS snapshot_progress text");
    }
  }

  /**
   * Creates a bookkeeping table unless it exists. The check comes first because CREATE ... IF NOT
   * EXISTS still needs the CREATE privilege, which a sink that only writes may lack.
   */
  void ensureTable(Connection c, String table, String ddl) throws SQLException {
    if (exists(c, TABLE_EXISTS_SQL, settings.targetSchema(), table)) {
      return;
    }
    try (Statement s = c.createStatement()) {
      s.execute(ddl);
    } catch (SQLException e) {
      // Two sinks creating it at once: the loser sees a duplicate catalog entry.
      String state = MirrorFailures.sqlState(e);
      if (("23505".equals(state) || "42P07".equals(state))
          && exists(c, TABLE_EXISTS_SQL, settings.targetSchema(), table)) {
        return;
      }
      throw e;
    }
  }

  private static boolean exists(Connection c, String sql, String first, String second)
      throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, first);
      if (second != null) {
        ps.setString(2, second);
      }
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next();
      }
    }
  }

  Optional<SinkCheckpoint> read(Connection c, String pipeline, boolean forUpdate)
      throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(forUpdate ? lockCheckpoint : selectCheckpoint)) {
      ps.setString(1, pipeline);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          return Optional.empty();
        }
        try {
          return Optional.of(
              new SinkCheckpoint(
                  SlotIncarnation.parse(rs.getString(1)), Lsn.parse(rs.getString(2))));
        } catch (IllegalArgumentException e) {
          throw MirrorFailures.refused(
              checkpointWhat, MirrorFailures.CHECKPOINT, "the stored checkpoint is malformed");
        }
      }
    }
  }

  /** Locks the pipeline's checkpoint row (creating a placeholder) and returns its commit LSN. */
  Lsn lock(Connection c, String pipeline, SlotIncarnation incarnation) throws SQLException {
    Optional<SinkCheckpoint> checkpoint = read(c, pipeline, true);
    if (checkpoint.isEmpty()) {
      // Nothing to lock yet: insert a row (waiting out a concurrent first writer) and lock that.
      try (PreparedStatement ps = c.prepareStatement(insertPlaceholder)) {
        ps.setString(1, pipeline);
        ps.setString(2, incarnation.key());
        ps.executeUpdate();
      }
      checkpoint = read(c, pipeline, true);
      if (checkpoint.isEmpty()) {
        throw SinkException.transientFailure("mirror could not lock its checkpoint row", null);
      }
    }
    if (!checkpoint.get().incarnation().equals(incarnation)) {
      throw MirrorFailures.refused(
          checkpointWhat,
          MirrorFailures.CHECKPOINT,
          "it belongs to another slot incarnation: drop the pipeline (or delete its checkpoint"
              + " row) and start it again");
    }
    return checkpoint.get().commitLsn();
  }

  void write(Connection c, String pipeline, SlotIncarnation incarnation, Lsn lsn)
      throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(updateCheckpoint)) {
      ps.setString(1, incarnation.key());
      ps.setObject(2, lsn.toString(), Types.OTHER);
      ps.setString(3, pipeline);
      if (ps.executeUpdate() != 1) {
        throw SinkException.transientFailure("mirror lost its locked checkpoint row", null);
      }
    }
  }
}
