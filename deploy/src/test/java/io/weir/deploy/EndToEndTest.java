package io.weir.deploy;

import io.weir.persistence.testing.TestPostgres;
import java.util.ArrayList;
import java.util.List;
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
}
