package io.weir.persistence.cdc.sink;

import io.weir.persistence.Identifiers;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.SlotIncarnation;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Optional;
import javax.sql.DataSource;

/** Pipeline checkpoints in {@code <schema>.cdc_checkpoint} (Weir's own database). Blocking. */
public final class CheckpointStore {
  private final DataSource dataSource;
  private final String table;

  public CheckpointStore(DataSource dataSource, String schema) {
    this.dataSource = dataSource;
    this.table = Identifiers.require("schema name", schema) + ".cdc_checkpoint";
  }

  /** A stored checkpoint: the sink checkpoint plus the end LSN the slot may confirm. */
  public record Stored(SinkCheckpoint checkpoint, Lsn endLsn) {}

  public Optional<Stored> read(String pipeline) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT incarnation, commit_lsn::text, end_lsn::text FROM "
                    + table
                    + " WHERE pipeline = ?")) {
      ps.setString(1, pipeline);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          return Optional.empty();
        }
        return Optional.of(
            new Stored(
                new SinkCheckpoint(
                    SlotIncarnation.parse(rs.getString(1)), Lsn.parse(rs.getString(2))),
                Lsn.parse(rs.getString(3))));
      }
    }
  }

  public void write(String pipeline, Stored stored) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "INSERT INTO "
                    + table
                    + " (pipeline, incarnation, commit_lsn, end_lsn) VALUES (?, ?, ?::pg_lsn, ?::pg_lsn) "
                    + "ON CONFLICT (pipeline) DO UPDATE SET incarnation = excluded.incarnation, "
                    + "commit_lsn = excluded.commit_lsn, end_lsn = excluded.end_lsn, updated_at = now()")) {
      ps.setString(1, pipeline);
      ps.setString(2, stored.checkpoint().incarnation().key());
      ps.setString(3, stored.checkpoint().commitLsn().toString());
      ps.setString(4, stored.endLsn().toString());
      ps.executeUpdate();
    }
  }

  /** The incremental snapshot progress stored for {@code pipeline}, if any. */
  public Optional<String> readProgress(String pipeline) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps =
            c.prepareStatement("SELECT snapshot_progress FROM " + table + " WHERE pipeline = ?")) {
      ps.setString(1, pipeline);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? Optional.ofNullable(rs.getString(1)) : Optional.empty();
      }
    }
  }

  /**
   * Stores incremental snapshot progress (empty clears it). Without a checkpoint row yet, one is
   * created at LSN 0/0, which confirms nothing and skips nothing.
   */
  public void writeProgress(String pipeline, SlotIncarnation incarnation, Optional<String> progress)
      throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "INSERT INTO "
                    + table
                    + " (pipeline, incarnation, commit_lsn, end_lsn, snapshot_progress) "
                    + "VALUES (?, ?, '0/0', '0/0', ?) ON CONFLICT (pipeline) DO UPDATE SET "
                    + "snapshot_progress = excluded.snapshot_progress, updated_at = now()")) {
      ps.setString(1, pipeline);
      ps.setString(2, incarnation.key());
      ps.setString(3, progress.orElse(null));
      ps.executeUpdate();
    }
  }
}
