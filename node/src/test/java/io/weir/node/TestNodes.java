package io.weir.node;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPorts;
import java.util.Map;

/** Nodes the in-process tests start. */
public final class TestNodes {
  private TestNodes() {}

  /**
   * A node started in this JVM with {@code config} (loaded), its HTTP API and its cluster port on
   * ports from {@link TestPorts}: started again on two others when a bind is lost (a failed start
   * leaves nothing running).
   */
  public static WeirNode start(Config config) {
    return TestPorts.bound(
        http -> {
          int cluster = TestPorts.free();
          Config bound =
              ConfigFactory.parseMap(
                      Map.of(
                          "weir.http.port", http,
                          "weir.cluster.port", cluster,
                          "pekko.remote.artery.canonical.port", cluster))
                  .withFallback(config);
          return WeirNode.start(bound, NodeSettings.create(bound));
        });
  }
}
