package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import io.weir.protocol.pgoutput.TupleData;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The {@code duplicateTransactions} counter (issue 27): a transaction delivered again after a
 * stream restart, at or below the last commit a session handled, is counted and skipped, never
 * maintained twice; a later one is handled. Driven through {@link Maintenance} with a transaction
 * of a table the session does not read, so no database is needed.
 */
class DuplicateTransactionsTest {
  private static final TableSchema OTHER =
      new TableSchema(
          16_500,
          "public",
          "other",
          ReplicaIdentity.DEFAULT,
          List.of(new TableSchema.Column("id", 23, -1, true)));

  private static Transaction transaction(long xid, String commitLsn) {
    Lsn commit = Lsn.parse(commitLsn);
    return new Transaction(
        xid,
        commit,
        Lsn.of(commit.asLong() + 8),
        Instant.EPOCH,
        List.<Change>of(new Change.Insert(OTHER, TupleData.ofText(Long.toString(xid)))),
        List.of());
  }

  private static Session session() {
    return TestSessions.session(
        "cq_1",
        "scope",
        TestSessions.definition(
            "score",
            5,
            List.of("id", "score"),
            List.of("public.items"),
            List.of("int4", "int4"),
            null),
        10);
  }

  @Test
  void aTransactionDeliveredAgainIsCountedAndNotHandledTwice() {
    ContinuousSettings settings =
        ContinuousSettings.create(
            ConfigFactory.parseString("weir.postgres.url = \"jdbc:postgresql://127.0.0.1/weir\"")
                .withFallback(ConfigFactory.parseResources("reference.conf"))
                .resolve(ConfigResolveOptions.noSystem()));
    Session s = session();
    Map<String, Session> sessions = new LinkedHashMap<>();
    sessions.put("cq_1", s);
    Maintenance m =
        new Maintenance(
            settings,
            null,
            null,
            null,
            List.of(),
            sessions,
            new ScopeReaders(settings, null),
            Map.of(),
            Map.of(),
            () -> null,
            () -> (principal, scope) -> true,
            (id, seq) -> "",
            () -> {});

    m.transaction(transaction(700, "0/100"));
    assertThat(s.unrelatedTransactions).isEqualTo(1);
    assertThat(s.handledThrough).isEqualTo(Lsn.parse("0/100"));

    // The stream restarted from an older confirmed position: 0/100 again, then an older one.
    m.transaction(transaction(700, "0/100"));
    m.transaction(transaction(699, "0/80"));
    assertThat(s.duplicateTransactions).isEqualTo(2);
    assertThat(s.unrelatedTransactions).as("not handled again").isEqualTo(1);
    assertThat(s.handledThrough).isEqualTo(Lsn.parse("0/100"));

    m.transaction(transaction(701, "0/200"));
    assertThat(s.unrelatedTransactions).isEqualTo(2);
    assertThat(s.duplicateTransactions).isEqualTo(2);
    assertThat(s.status(true).get("duplicateTransactions").asLong()).isEqualTo(2);
  }
}
