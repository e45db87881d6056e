package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.weir.persistence.testing.TestPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Cluster bootstrap instead of seed nodes: three node processes with no seed list find each other's
 * contact points through Pekko Discovery (the {@code config} method here, standing in for {@code
 * kubernetes-api}, which needs a Kubernetes API server) and form one cluster; a fourth node started
 * later joins it. A node configured with both seed nodes and bootstrap refuses to start.
 */
class ClusterBootstrapIT extends EndToEndTest {

  @Test
  void nodesWithoutSeedsFormOneClusterThroughDiscovery() throws Exception {
    db = TestPostgres.server().freshDatabase("bootstrap");
    int[] management = new int[4];
    StringBuilder endpoints = new StringBuilder();
    for (int i = 0; i < management.length; i++) {
      management[i] = NodeProcess.freePort();
      endpoints
          .append(i == 0 ? "" : ", ")
          .append("{ host = \"127.0.0.1\", port = ")
          .append(management[i])
          .append(" }");
    }
    Path config = Files.createTempFile("weir-bootstrap", ".conf");
    config.toFile().deleteOnExit();
    Files.writeString(
        config,
        String.join(
            "\n",
            "weir.cluster.bootstrap { discovery-method = config, service-name = weir-test, required-contact-points = 3 }",
            "pekko.discovery.config.services.weir-test.endpoints = [" + endpoints + "]",
            // Every node here has its own management port on one host: keep them all as contact
            // points
            // (by default only those on this node's own management port would count).
            "pekko.management.cluster.bootstrap.contact-point.filter-on-fallback-port = false",
            // The fourth endpoint has no node until later: form the cluster from the three that
            // answer.
            "pekko.management.cluster.bootstrap.contact-point-discovery.contact-with-all-contact-points = false",
            // Probe quickly so the test is short (defaults: 1 s interval, 5 s stable margin).
            "pekko.management.cluster.bootstrap.contact-point-discovery.interval = 500ms",
            "pekko.management.cluster.bootstrap.contact-point-discovery.stable-margin = 2s",
            // When the fourth node joins, shards move to it one per rebalance tick (10 s) and a
            // moved
            // partition runs again at the keeper's next tick (or on its next message). With both
            // ticks
            // at 10 s their phase decided whether all 64 were ever seen running at once while the
            // moves
            // went on (once they were not, within 2 minutes). The keeper ticks every second here.
            "weir.partitions.keep-alive-interval = 1s",
            ""));
    long t0 = System.nanoTime();
    for (int i = 0; i < 3; i++) {
      nodes.add(
          NodeProcess.start(
              new NodeProcess.Spec("bootstrap-" + (i + 1))
                  .database(db)
                  .env("WEIR_MANAGEMENT_PORT", Integer.toString(management[i]))
                  .args("--config", config.toString())));
    }
    awaitMembers(3);
    System.out.printf(
        "bootstrap: 3 nodes without seeds formed one cluster in %.1f s%n",
        (System.nanoTime() - t0) / 1e9);
    Set<String> leaders = new HashSet<>();
    nodes.forEach(n -> leaders.add(n.clusterNow().get("leader").asText()));
    assertThat(leaders).as("one cluster, one leader").hasSize(1);

    long t1 = System.nanoTime();
    nodes.add(
        NodeProcess.start(
            new NodeProcess.Spec("bootstrap-4")
                .database(db)
                .env("WEIR_MANAGEMENT_PORT", Integer.toString(management[3]))
                .args("--config", config.toString())));
    awaitMembers(4);
    System.out.printf(
        "bootstrap: a fourth node joined the running cluster in %.1f s%n",
        (System.nanoTime() - t1) / 1e9);
    // Shards move to the fourth node one per rebalance tick: give the moves time on a slow machine.
    await("partitions run")
        .atMost(Duration.ofMinutes(4))
        .pollInterval(Duration.ofMillis(500))
        .until(
            () -> nodes.get(0).partitions().map(p -> p.get("running").asInt() == 64).orElse(false));

    NodeProcess both =
        NodeProcess.start(
            new NodeProcess.Spec("bootstrap-and-seeds")
                .database(db)
                .env("WEIR_SEED_NODES", "127.0.0.1:1")
                .args("--config", config.toString()));
    nodes.add(both);
    assertThat(both.waitForExit(Duration.ofSeconds(120)))
        .as("seed nodes and bootstrap together: exit status 2")
        .isEqualTo(2);
    assertThat(both.log())
        .contains("weir.cluster.bootstrap.discovery-method")
        .contains("weir.cluster.seed-nodes");
  }

  private void awaitMembers(int count) {
    await(count + " members up on every node")
        .atMost(START_UP)
        .pollInterval(Duration.ofMillis(500))
        .until(
            () ->
                nodes.stream()
                    .allMatch(
                        n -> {
                          Map<String, String> members = n.memberStatuses();
                          return members.size() == count
                              && members.values().stream().allMatch("up"::equals)
                              && n.ready();
                        }));
  }
}
