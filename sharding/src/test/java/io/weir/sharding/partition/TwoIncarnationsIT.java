package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.Test;

/**
 * Two incarnations of one partition running at once, as two nodes would on either side of a network
 * partition before the minority has shut down (ADR 0045: with the acknowledged marks on, Weir
 * shortens Pekko's removal margin to 1 s). Each incarnation plans a write from the state it
 * recovered; the journal's (persistence_id, sequence_number) key refuses whichever writes second at
 * a sequence number, and that incarnation stops without acknowledging. Afterwards a third
 * incarnation must hold exactly the acknowledged writes, in the journal and in the documents table,
 * and none of the refused ones.
 */
class TwoIncarnationsIT {
  private static final Duration WAIT = Duration.ofSeconds(60);
  private static final Duration REFUSED_WITHIN = Duration.ofSeconds(20);
  private static final int P = 5;

  @Test
  void theJournalKeyLetsOnlyOneOfTwoLiveIncarnationsWriteEachSequence() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("two_incarnations");
        Node a = new Node(db, "a");
        Node b = new Node(db, "b")) {
      List<String> acknowledged = new ArrayList<>();
      List<String> refused = new ArrayList<>();

      ActorRef<Command> pa = a.start();
      assertThat(a.write(pa, "a1")).isInstanceOf(Applied.class);
      acknowledged.add("a1");
      // a's table holds a1 before b claims the partition's rows: an apply of a's still pending
      // then would be refused (ADR 0060) and stop a before it writes a2.
      a.caughtUp(pa);
      ActorRef<Command> pb = b.start();
      assertThat(b.read(pb, "a1")).as("b recovered a1").isPresent();

      // a writes first at the next sequence number; b, planning from the same recovered state,
      // collides with it and must not acknowledge.
      assertThat(a.write(pa, "a2")).isInstanceOf(Applied.class);
      acknowledged.add("a2");
      b.writeRefused(pb, "b1");
      refused.add("b1");

      // b starts again (a new incarnation on the same node), sees a2 and writes; now a is stale.
      pb = b.start();
      assertThat(b.read(pb, "a2")).as("the restarted b recovered a2").isPresent();
      assertThat(b.write(pb, "b2")).isInstanceOf(Applied.class);
      acknowledged.add("b2");
      a.writeRefused(pa, "a3");
      refused.add("a3");

      // A third incarnation reads exactly the acknowledged writes, from the table.
      try (Node c = new Node(db, "c")) {
        ActorRef<Command> pc = c.start();
        for (String id : acknowledged) {
          assertThat(c.read(pc, id)).as("acknowledged %s survives", id).isPresent();
        }
        for (String id : refused) {
          assertThat(c.read(pc, id)).as("refused %s was never written", id).isEmpty();
        }
      }
      assertThat(JdbcPartitions.journalRows(db, P))
          .as("one journal row per acknowledged write, none for the refused ones")
          .isEqualTo(acknowledged.size());
      assertThat(tableIds(db))
          .as("the documents table")
          .containsExactlyInAnyOrderElementsOf(acknowledged);
    }
  }

  private static List<String> tableIds(TestPostgres.TestDatabase db) throws SQLException {
    List<String> ids = new ArrayList<>();
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT id FROM weir.documents WHERE partition_id = "
                        + P
                        + " AND NOT deleted")) {
      while (rs.next()) {
        ids.add(rs.getString(1));
      }
    }
    return ids;
  }

  /** One actor system on the shared database: a node of the cluster, say. */
  private static final class Node implements AutoCloseable {
    private final JdbcPartitions jdbc;
    private final ActorTestKit kit;

    Node(TestPostgres.TestDatabase db, String name) {
      Config config =
          ConfigFactory.load(
              db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
      jdbc = new JdbcPartitions(config, "two-incarnations-" + name);
      kit = ActorTestKit.create("two-incarnations-" + name, config);
    }

    ActorRef<Command> start() {
      return kit.spawn(Partition.create(P, jdbc.wiring()));
    }

    FrameReply write(ActorRef<Command> p, String id) {
      TestProbe<FrameReply> probe = kit.createTestProbe();
      p.tell(frame(id, probe.ref()));
      return probe.receiveMessage(WAIT);
    }

    /** Writes {@code id} and expects no acknowledgement: the incarnation stops instead. */
    void writeRefused(ActorRef<Command> p, String id) {
      TestProbe<FrameReply> probe = kit.createTestProbe();
      TestProbe<Object> watcher = kit.createTestProbe();
      p.tell(frame(id, probe.ref()));
      watcher.expectTerminated(p, REFUSED_WITHIN);
      probe.expectNoMessage(Duration.ofMillis(200));
    }

    /** Waits until {@code p}'s documents table holds every event its journal has. */
    void caughtUp(ActorRef<Command> p) {
      org.awaitility.Awaitility.await("the documents table holds every persisted event")
          .atMost(WAIT)
          .pollInterval(Duration.ofMillis(50))
          .until(
              () -> {
                TestProbe<StatusProtocol.PartitionStatus> s = kit.createTestProbe();
                p.tell(new StatusProtocol.GetStatus(s.ref()));
                StatusProtocol.PartitionStatus status = s.receiveMessage(WAIT);
                return status.table().state().equals("running")
                    && status.table().appliedThrough() == status.journalEvents()
                    && status.table().lagEvents() == 0;
              });
    }

    Optional<ReadProtocol.Document> read(ActorRef<Command> p, String id) {
      TestProbe<DocumentReply> probe = kit.createTestProbe();
      p.tell(new GetDocument("orders", id, probe.ref()));
      return probe.receiveMessage(WAIT).document();
    }

    private static ApplyFrame frame(String id, ActorRef<FrameReply> replyTo) {
      return new ApplyFrame(
          "cmd-" + id,
          List.of(new Upsert("orders", id, "{\"by\":\"" + id + "\"}", Optional.empty())),
          Optional.empty(),
          replyTo);
    }

    @Override
    public void close() {
      kit.shutdownTestKit();
      jdbc.close();
    }
  }
}
