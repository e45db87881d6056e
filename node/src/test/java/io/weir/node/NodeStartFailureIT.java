package io.weir.node;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPorts;
import io.weir.persistence.testing.TestPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * A node whose start fails (its HTTP port is taken) against a real PostgreSQL: the start throws a
 * {@link WeirNode.NodeStartException} naming what failed, and only once the node's actor system has
 * stopped, so whoever starts again (the tests' next port after a lost bind, an operator's retry)
 * finds the cluster port free at once.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class NodeStartFailureIT {
  private TestPostgres.TestDatabase db;

  @BeforeAll
  void database() {
    db = TestPostgres.server().freshDatabase("start_failure_it");
  }

  @AfterAll
  void close() {
    if (db != null) {
      db.close();
    }
  }

  @Test
  void aTakenHttpPortFailsTheStartAfterTheNodeHasStopped() throws Exception {
    InetAddress loopback = InetAddress.getByName("127.0.0.1");
    try (ServerSocket taken = TestPorts.bound(p -> listen(loopback, p))) {
      int http = taken.getLocalPort();
      int cluster = TestPorts.free();
      Config config =
          ConfigFactory.load(
              ConfigFactory.parseMap(
                      Map.of(
                          "weir.admin-token",
                          "admin-token-for-start-failure-it",
                          "weir.http.host",
                          "127.0.0.1",
                          "weir.http.port",
                          http,
                          "weir.cluster.host",
                          "127.0.0.1",
                          "weir.cluster.port",
                          cluster,
                          "pekko.remote.artery.canonical.port",
                          cluster))
                  .withFallback(db.config())
                  .withFallback(ConfigFactory.defaultApplication()));

      assertThatThrownBy(() -> WeirNode.start(config, NodeSettings.create(config)))
          .isInstanceOf(WeirNode.NodeStartException.class)
          .hasMessage("cannot bind HTTP on 127.0.0.1:" + http);

      // The node's cluster port was bound while it started; it is free when the start has thrown.
      try (ServerSocket again = new ServerSocket()) {
        again.setReuseAddress(true);
        again.bind(new InetSocketAddress(loopback, cluster));
        assertThat(again.isBound())
            .as("the failed node's cluster port %d should be free once the start threw", cluster)
            .isTrue();
      }
    }
  }

  private static ServerSocket listen(InetAddress host, int port) {
    try {
      return new ServerSocket(port, 1, host);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
