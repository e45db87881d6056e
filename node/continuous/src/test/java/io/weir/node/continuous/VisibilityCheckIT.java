package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.weir.persistence.PostgresSettings;
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

/**
 * {@link ScopeReader#invisible}: the read's own snapshot must include every delivered transaction.
 */
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
    try (Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT txid_current()")) {
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
            .as("an open transaction is not in the snapshot")
            .isEqualTo(1);
        writer.commit();
        assertThat(ScopeReader.invisible(before, List.of(xid)))
            .as("a repeatable-read snapshot taken before the commit still misses it")
            .isEqualTo(1);
        before.rollback();
      }
      try (Connection after = readTransaction(db)) {
        assertThat(ScopeReader.invisible(after, List.of(xid)))
            .as("a snapshot taken after the commit includes it")
            .isZero();
        assertThat(ScopeReader.invisible(after, List.of(xid, xid + 1_000_000L)))
            .as("an xid that was never assigned is not visible")
            .isEqualTo(1);
        assertThat(ScopeReader.invisible(after, List.of())).isZero();
        after.rollback();
      }
    }
  }

  /**
   * The widening at epochs above 0, where a wrong guess of the epoch makes a running xid look
   * committed.
   */
  @Test
  void xidsWidenAroundTheSnapshotsXmaxInEveryEpoch() throws Exception {
    long e5 = 5L << 32;
    long[][] cases = {
      // {xm (64-bit), x (32-bit), expected 64-bit xid}
      {
        e5 | 1000, 1000, e5 | 1000
      }, // at xmax: still running for this snapshot, never the previous epoch
      {e5 | 1000, 1005, e5 | 1005}, // above xmax
      {e5 | 1000, 999, e5 | 999},
      {e5 | 1000, 4294967000L, (4L << 32) | 4294967000L}, // just before the epoch turned
      {e5 | 4294967000L, 200, (6L << 32) | 200}, // xmax just before a wrap, the xid just after it
      {1000, 1000, 1000}, // epoch 0
      {
        1000, 4294967000L, 4294967000L - 4294967296L
      }, // "previous epoch" at epoch 0: negative, never assigned
    };
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      for (long[] t : cases) {
        try (ResultSet rs =
            s.executeQuery("SELECT " + ScopeReader.widened(t[0] + "::bigint", t[1] + "::bigint"))) {
          rs.next();
          assertThat(rs.getLong(1)).as("xm=%d x=%d", t[0], t[1]).isEqualTo(t[2]);
        }
      }
    }
  }

  /**
   * Each scope keeps its own delivered xids (issue 27): a read on one scope's connection proves
   * nothing of another's (it may read a standby that has not replayed the commit yet), so after
   * scope a's read saw a transaction, scope b still checks it on its own next read.
   */
  @Test
  void eachScopeChecksTheDeliveredTransactionsOnItsOwnRead() throws Exception {
    Config config =
        ConfigFactory.parseString(
                "weir.continuous.scopes.a { user = \""
                    + db.server().user()
                    + "\", password = \""
                    + db.server().password()
                    + "\" }\n"
                    + "weir.continuous.scopes.b { user = \""
                    + db.server().user()
                    + "\", password = \""
                    + db.server().password()
                    + "\" }")
            .withFallback(db.config())
            .withFallback(ConfigFactory.parseResources("reference.conf"))
            .resolve(ConfigResolveOptions.noSystem());
    ContinuousSettings settings = ContinuousSettings.create(config);
    try (ScopeReaders readers = new ScopeReaders(settings, PostgresSettings.create(config))) {
      VisibilityGate gate = new VisibilityGate(settings, readers);
      long xid;
      try (Connection writer = db.connect()) {
        xid = xidOfOpenTransaction(writer);
        writer.commit();
      }
      gate.delivered(xid);
      assertThat(gate.waiting("a")).isEqualTo(1);
      assertThat(gate.waiting("b")).isEqualTo(1);

      Integer read = gate.read(session("a"), c -> 1);
      assertThat(read).isEqualTo(1);
      assertThat(gate.waiting("a")).as("scope a's read saw it").isZero();
      assertThat(gate.waiting("b")).as("scope b has not read since").isEqualTo(1);

      Integer again = gate.read(session("b"), c -> 2);
      assertThat(again).isEqualTo(2);
      assertThat(gate.waiting("b")).isZero();
    }
  }

  private static Session session(String scope) {
    return TestSessions.session(
        "cq_" + scope,
        scope,
        TestSessions.definition("id", 1, List.of("id"), List.of(), List.of("int4"), null),
        10);
  }
}
