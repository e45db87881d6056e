package io.weir.deploy;

import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;

/**
 * Base of the end-to-end tests: the node processes a test starts and its database, both cleaned
 * up after each test whatever its outcome (nodes first, so nothing holds the database).
 */
abstract class EndToEndTest {
  protected final List<NodeProcess> nodes = new ArrayList<>();
  protected TestPostgres.TestDatabase db;

  @AfterEach
  void cleanUpNodesAndDatabase() {
    nodes.forEach(NodeProcess::close);
    if (db != null) {
      db.close();
    }
  }

  /** How often the mirror in {@code schema} applied each source xid (its applied-transactions log). */
  protected Map<Long, Integer> appliedCounts(String schema) throws SQLException {
    Map<Long, Integer> out = new HashMap<>();
    try (Connection c = db.connect(); ResultSet rs = c.createStatement().executeQuery(
        "SELECT xid, count(*) FROM " + schema + ".weir_mirror_applied GROUP BY xid")) {
      while (rs.next()) {
        out.put(rs.getLong(1), rs.getInt(2));
      }
    }
    return out;
  }

  /** Rows of {@code public.src} and {@code <schema>.src} that are not in the other. */
  protected long mirrorDifferences(String schema) throws SQLException {
    try (Connection c = db.connect(); ResultSet rs = c.createStatement().executeQuery(
        "SELECT (SELECT count(*) FROM (SELECT * FROM public.src EXCEPT SELECT * FROM " + schema + ".src) a)"
            + " + (SELECT count(*) FROM (SELECT * FROM " + schema + ".src EXCEPT SELECT * FROM public.src) b)")) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
