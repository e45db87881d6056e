package io.weir.node.continuous;

import io.weir.persistence.Identifiers;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import javax.sql.DataSource;

/**
 * The replay log's earlier home, {@code weir.continuous_replay} (migration V14), read only: a
 * subscription whose log was kept there before the logs moved to the sessions' journal (ADR 0025)
 * continues after its last sequence there, so no sequence is ever used twice. Nothing writes the
 * table any more.
 */
final class ReplayStore {
  private final DataSource dataSource;
  private final String table;

  ReplayStore(DataSource dataSource, String schema) {
    this.dataSource = dataSource;
    this.table = Identifiers.quote(schema) + ".continuous_replay";
  }

  /** The highest sequence of {@code id} in the earlier table, 0 if none. */
  long lastSequence(String id) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT coalesce(max(sequence), 0) FROM " + table + " WHERE id = ?")) {
      ps.setString(1, id);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }
}
