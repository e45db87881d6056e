package io.weir.persistence.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** {@link TestPorts}: ports below the ephemeral range, and a lost bind race started again. */
class TestPortsTest {
  @Test
  void portsComeFromBelowTheEphemeralRange() {
    for (int i = 0; i < 20; i++) {
      assertThat(TestPorts.free()).isBetween(TestPorts.LOW, TestPorts.HIGH - 1).isLessThan(32768);
    }
  }

  @Test
  void aServerThatLosesTheBindRaceStartsAgainOnAnotherPort() throws IOException {
    try (ServerSocket taken = new ServerSocket()) {
      taken.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), TestPorts.free()));
      int free = TestPorts.free();
      int[] offered = {taken.getLocalPort(), free};
      AtomicInteger next = new AtomicInteger();
      List<Integer> tried = new ArrayList<>();
      try (ServerSocket server =
          TestPorts.bound(
              () -> offered[next.getAndIncrement()],
              port -> {
                tried.add(port);
                return listen(port);
              })) {
        assertThat(server.getLocalPort()).isEqualTo(free);
      }
      assertThat(tried).containsExactly(taken.getLocalPort(), free);
    }
  }

  @Test
  void otherFailuresAndEndlessLossesAreThrown() throws IOException {
    AtomicInteger calls = new AtomicInteger();
    assertThatThrownBy(
            () ->
                TestPorts.bound(
                    TestPorts::free,
                    port -> {
                      calls.incrementAndGet();
                      throw new IllegalStateException("not a bind failure");
                    }))
        .hasMessage("not a bind failure");
    assertThat(calls).hasValue(1);

    try (ServerSocket taken = new ServerSocket()) {
      taken.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), TestPorts.free()));
      calls.set(0);
      assertThatThrownBy(
              () ->
                  TestPorts.bound(
                      taken::getLocalPort,
                      port -> {
                        calls.incrementAndGet();
                        return listen(port);
                      }))
          .hasRootCauseInstanceOf(java.net.BindException.class);
      assertThat(calls).hasValue(TestPorts.BIND_ATTEMPTS);
    }
  }

  private static ServerSocket listen(int port) {
    try {
      ServerSocket s = new ServerSocket();
      try {
        s.setReuseAddress(false);
        s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
        return s;
      } catch (IOException e) {
        s.close();
        throw e;
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
