package io.weir.sharding;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPorts;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.cluster.typed.Cluster;
import org.junit.jupiter.api.Test;

/**
 * The in-process tests' actor systems listen on a port from {@link TestPorts} (below the ephemeral
 * range), and one whose port was taken before Artery bound it starts again on another.
 */
class ArteryPortTest {
  @Test
  void anActorSystemWhosePortWasTakenStartsOnAnother() throws Exception {
    try (ServerSocket taken = new ServerSocket()) {
      taken.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), TestPorts.free()));
      int free = TestPorts.free();
      int[] offered = {taken.getLocalPort(), free};
      AtomicInteger next = new AtomicInteger();
      List<Integer> tried = new ArrayList<>();
      ActorTestKit kit =
          TestPorts.bound(
              () -> offered[next.getAndIncrement()],
              port -> {
                tried.add(port);
                return ActorTestKit.create(
                    "weir",
                    ConfigFactory.parseString(
                        "pekko.actor.provider = cluster\n"
                            + "pekko.remote.artery.canonical.hostname = 127.0.0.1\n"
                            + "pekko.remote.artery.canonical.port = "
                            + port));
              });
      try {
        assertThat(tried).containsExactly(taken.getLocalPort(), free);
        assertThat(Cluster.get(kit.system()).selfMember().address().getPort()).contains(free);
      } finally {
        kit.shutdownTestKit();
      }
    }
  }
}
