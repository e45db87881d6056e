package io.weir.persistence.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
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
 * started again on another port by its helper (see {@code NodeProcess}); {@code deploy/bin/pg.sh}
 * picks from its own range (15432 and up) and retries a lost bind itself.
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
