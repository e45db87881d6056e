package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.weir.persistence.testing.TestPostgres;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A node that is the first of its seed nodes and cannot reach the others must not form a second
 * cluster on a database whose cluster is alive (Pekko would let it join itself after its 5 s seed
 * timeout). Node A's seeds are itself and an address where nothing listens, while B and C run the
 * cluster: A stays outside for 20 s, B and C keep their two members; once B and C are stopped, A
 * forms a cluster of its own, since no member is alive any more.
 */
class SecondClusterGuardIT extends EndToEndTest {

  @Test
  void aFirstSeedDoesNotFormASecondClusterWhileOneIsAlive() throws Exception {
    db = TestPostgres.server().freshDatabase("second_cluster");
    int portB = NodeProcess.freePort();
    int portC = NodeProcess.freePort();
    String seedsBC = "127.0.0.1:" + portB + ",127.0.0.1:" + portC;
    NodeProcess b =
        NodeProcess.start(
            new NodeProcess.Spec("guard-b")
                .database(db)
                .clusterPort(portB)
                .env("WEIR_SEED_NODES", seedsBC));
    NodeProcess c =
        NodeProcess.start(
            new NodeProcess.Spec("guard-c")
                .database(db)
                .clusterPort(portC)
                .env("WEIR_SEED_NODES", seedsBC));
    nodes.add(b);
    nodes.add(c);
    await("B and C form the cluster")
        .atMost(START_UP)
        .pollInterval(Duration.ofMillis(500))
        .until(() -> b.ready() && c.ready() && b.memberStatuses().size() == 2);

    int portA = NodeProcess.freePort();
    int nowhere = NodeProcess.freePort();
    NodeProcess a =
        NodeProcess.start(
            new NodeProcess.Spec("guard-a")
                .database(db)
                .clusterPort(portA)
                .env("WEIR_SEED_NODES", "127.0.0.1:" + portA + ",127.0.0.1:" + nowhere));
    nodes.add(a);
    long until = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (System.nanoTime() < until) {
      assertThat(a.ready()).as("A must not become an Up member of a cluster of its own").isFalse();
      Map<String, String> members = b.memberStatusesNow(); // asked again until B answers
      assertThat(members).as("B's cluster keeps its two members").hasSize(2);
      Thread.sleep(1000);
    }
    System.out.println(
        "second-cluster guard: the first seed stayed outside for 20 s while a cluster was alive");

    b.kill();
    c.kill();
    long t0 = System.nanoTime();
    await("with no member alive, A forms a cluster")
        .atMost(Duration.ofMinutes(4))
        .pollInterval(Duration.ofMillis(500))
        .until(a::ready);
    System.out.printf(
        "second-cluster guard: A formed a cluster %.1f s after the others were killed%n",
        (System.nanoTime() - t0) / 1e9);
    assertThat(a.log()).contains("may form the cluster");
  }
}
