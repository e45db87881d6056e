package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/** {@link ScopeReader#invisible}: the read's own snapshot must include every delivered transaction. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class VisibilityCheckIT {
  private TestPostgres.TestDatabase db;

  @BeforeAll
  void start() {
    db = TestPostgres.server().freshDatabase("cq_visibility");
  }

  @AfterAll
  void stop() {
    db.close();
  }

  private static long xidOfOpenTransaction(Connection c) throws SQLException {
    c.setAutoCommit(false);
    try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT txid_current()")) {
      rs.next();
      return rs.getLong(1) & 0xFFFFFFFFL; // pgoutput reports the 32-bit xid
    }
  }

  private static Connection readTransaction(TestPostgres.TestDatabase db) throws SQLException {
    Connection c = db.connect();
    c.setAutoCommit(false);
    try (Statement s = c.createStatement()) {
      s.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
    }
    return c;
  }

  @Test
  void aTransactionCountsOnlyOnceTheReadsSnapshotIncludesIt() throws Exception {
    try (Connection writer = db.connect()) {
      long xid = xidOfOpenTransaction(writer);
      try (Connection before = readTransaction(db)) {
        assertThat(ScopeReader.invisible(before, List.of(xid)))
            .as("an open transaction is not in the snapshot").isEqualTo(1);
        writer.commit();
        assertThat(ScopeReader.invisible(before, List.of(xid)))
            .as("a repeatable-read snapshot taken before the commit still misses it").isEqualTo(1);
        before.rollback();
      }
      try (Connection after = readTransaction(db)) {
        assertThat(ScopeReader.invisible(after, List.of(xid)))
            .as("a snapshot taken after the commit includes it").isZero();
        assertThat(ScopeReader.invisible(after, List.of(xid, xid + 1_000_000L)))
            .as("an xid that was never assigned is not visible").isEqualTo(1);
        assertThat(ScopeReader.invisible(after, List.of())).isZero();
        after.rollback();
      }
    }
  }
}
