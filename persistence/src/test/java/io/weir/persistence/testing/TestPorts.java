package io.weir.persistence.testing;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.IntFunction;
import java.util.function.IntSupplier;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;

/**
 * Listening ports for the servers a test starts (nodes, PostgreSQL clusters of its own, stubs).
 *
 * <p>A port comes from {@value #LOW}..{@value #HIGH}, below Linux's ephemeral range (32768-60999 by
 * default): an outbound connection of any process on the machine takes its local port from that
 * range, so a port picked there can be taken between the pick and the server's bind (this failed
 * the suite on a busy machine). Below it, only listeners compete. Against other listeners — the
 * parallel test JVMs of this build — a port is handed out only when it binds here at the moment of
 * the pick and when this JVM holds an exclusive lock on {@code <tmp>/weir-test-ports/<port>}, kept
 * until the JVM exits; other JVMs skip locked ports. A server that still loses a bind race is
 * started again on another port: in-process servers (the tests' actor systems, whose Artery listens
 * too) through {@link #bound}, node processes by their helper (see {@code NodeProcess}); {@code
 * deploy/bin/pg.sh} picks from its own range (15432 and up) and retries a lost bind itself.
 */
public final class TestPorts {
  /** Lowest port handed out. */
  public static final int LOW = 20000;

  /** One past the highest port handed out (below 32768, where the ephemeral range starts). */
  public static final int HIGH = 32000;

  private static final int ATTEMPTS = 2000;
  private static final Path LOCKS =
      Path.of(System.getProperty("java.io.tmpdir"), "weir-test-ports");
  private static final Map<Integer, FileLock> HELD = new ConcurrentHashMap<>();

  private TestPorts() {}

  /** A port no other test JVM holds and that nothing listens on now. */
  public static int free() {
    ThreadLocalRandom random = ThreadLocalRandom.current();
    for (int i = 0; i < ATTEMPTS; i++) {
      int port = random.nextInt(LOW, HIGH);
      if (!HELD.containsKey(port) && lock(port) && bindsNow(port)) {
        return port;
      }
    }
    throw new IllegalStateException(
        "no free port found in " + LOW + ".." + HIGH + " after " + ATTEMPTS + " attempts");
  }

  /** Attempts of {@link #bound} before it gives up. */
  static final int BIND_ATTEMPTS = 5;

  /**
   * Starts a server (an actor system's Artery listener, a stub) on a port from {@link #free()}, and
   * again on another one when it loses the bind race (a listener outside the test JVMs took the
   * port between the pick and the bind), at most {@value #BIND_ATTEMPTS} times. Any other failure
   * of {@code start} is thrown at once.
   */
  public static <T> T bound(IntFunction<T> start) {
    return bound(TestPorts::free, start);
  }

  /** Like {@link #bound(IntFunction)}, with the ports to try from {@code ports}. */
  public static <T> T bound(IntSupplier ports, IntFunction<T> start) {
    RuntimeException lost = null;
    for (int attempt = 0; attempt < BIND_ATTEMPTS; attempt++) {
      try {
        return start.apply(ports.getAsInt());
      } catch (RuntimeException e) {
        if (!lostBind(e)) {
          throw e;
        }
        lost = e;
      }
    }
    throw lost;
  }

  /**
   * An actor test kit named {@code name} with {@code config}, its Artery listening on 127.0.0.1 at
   * a port from {@link #free()} ({@link #bound}: again on another when the bind is lost).
   */
  public static ActorTestKit kit(String name, Config config) {
    return bound(
        port ->
            ActorTestKit.create(
                name,
                ConfigFactory.parseString(
                        "pekko.remote.artery.canonical.hostname = 127.0.0.1\n"
                            + "pekko.remote.artery.canonical.port = "
                            + port)
                    .withFallback(config)));
  }

  /** Whether {@code failure} (or a cause of it) says the port was taken. */
  static boolean lostBind(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (t instanceof BindException
          || t.getClass().getSimpleName().equals("BindFailedException")
          || String.valueOf(t.getMessage()).contains("Address already in use")) {
        return true;
      }
      if (t.getCause() == t) {
        break;
      }
    }
    return false;
  }

  /**
   * The start of a block of {@code count} consecutive free ports (for {@code deploy/bin/pg.sh}'s
   * {@code WEIR_PG_PORT_BASE} and {@code pg-rf3.sh}'s {@code WEIR_PG_RF3_PORT_BASE}, which pick
   * upwards from a base).
   */
  public static int freeBlock(int count) {
    ThreadLocalRandom random = ThreadLocalRandom.current();
    for (int i = 0; i < ATTEMPTS; i++) {
      int base = random.nextInt(LOW, HIGH - count);
      boolean all = true;
      for (int p = base; p < base + count && all; p++) {
        all = !HELD.containsKey(p) && lock(p) && bindsNow(p);
      }
      if (all) {
        return base;
      }
    }
    throw new IllegalStateException("no block of " + count + " free ports found");
  }

  private static boolean lock(int port) {
    try {
      Files.createDirectories(LOCKS);
      FileChannel channel =
          FileChannel.open(
              LOCKS.resolve(Integer.toString(port)),
              StandardOpenOption.CREATE,
              StandardOpenOption.WRITE);
      FileLock lock;
      try {
        lock = channel.tryLock();
      } catch (OverlappingFileLockException e) {
        lock = null;
      }
      if (lock == null) {
        channel.close();
        return false;
      }
      if (HELD.putIfAbsent(port, lock) != null) {
        lock.release();
        channel.close();
        return false;
      }
      return true;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot lock a test port in " + LOCKS, e);
    }
  }

  private static boolean bindsNow(int port) {
    for (InetAddress address : new InetAddress[] {InetAddress.getLoopbackAddress(), anyLocal()}) {
      try (ServerSocket s = new ServerSocket()) {
        s.setReuseAddress(false);
        s.bind(new InetSocketAddress(address, port));
      } catch (IOException taken) {
        return false;
      }
    }
    return true;
  }

  private static InetAddress anyLocal() {
    return new InetSocketAddress(0).getAddress();
  }
}
