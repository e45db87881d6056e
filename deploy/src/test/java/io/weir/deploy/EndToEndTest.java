package io.weir.deploy;

import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import static org.awaitility.Awaitility.await;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
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

  /** Starts a node named {@code prefix-<n>} on the test database with {@code config}; closed after the test. */
  protected NodeProcess startNode(String prefix, Path config) {
    NodeProcess n = NodeProcess.start(new NodeProcess.Spec(prefix + "-" + nodes.size()).database(db).args("--config", config.toString()));
    nodes.add(n);
    return n;
  }

  /** Waits (at most 2 minutes) until {@code pipeline} reports state running on {@code node}. */
  protected static void awaitRunning(NodeProcess node, String pipeline) {
    await("pipeline " + pipeline + " runs on " + node.name()).atMost(Duration.ofSeconds(120)).pollInterval(Duration.ofMillis(200))
        .until(() -> node.pipeline(pipeline).map(p -> p.get("state").asText().equals("running")).orElse(false));
  }

  /**
   * The crash loop: {@code kills} times, wait until {@code pipeline} runs, sleep a random 100 ms to
   * {@code 100 + maxDelayMillis} (recorded in {@code delays}), SIGKILL the node and start a new one
   * with the same configuration. Returns the last node started.
   */
  protected NodeProcess killAndRestart(
      NodeProcess node, int kills, Random random, int maxDelayMillis, String prefix, Path config, String pipeline,
      List<Long> delays) throws InterruptedException {
    for (int k = 0; k < kills; k++) {
      awaitRunning(node, pipeline);
      long delay = 100 + random.nextInt(maxDelayMillis);
      delays.add(delay);
      Thread.sleep(delay);
      node.kill();
      node = startNode(prefix, config);
    }
    return node;
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
