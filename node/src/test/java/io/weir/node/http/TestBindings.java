package io.weir.node.http;

import io.weir.persistence.testing.TestPorts;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.ClassicActorSystemProvider;
import org.apache.pekko.http.javadsl.Http;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.http.javadsl.server.Route;

/** The in-process tests' HTTP servers. */
public final class TestBindings {
  private TestBindings() {}

  /**
   * {@code routes} served on 127.0.0.1 at a port from {@link TestPorts} (again on another when the
   * bind is lost), bound within 10 s.
   */
  public static ServerBinding bind(ClassicActorSystemProvider system, Route routes) {
    return TestPorts.bound(
        port ->
            Http.get(system)
                .newServerAt("127.0.0.1", port)
                .bind(routes)
                .toCompletableFuture()
                .orTimeout(10, TimeUnit.SECONDS)
                .join());
  }
}
