package io.weir.node.tokens;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.node.OrderedLoads;
import io.weir.persistence.TokenKeyStore.KeyInfo;
import io.weir.persistence.TokenKeyStore.KeyRing;
import io.weir.protocol.token.ChangeCursor;
import io.weir.protocol.token.TokenSigner;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Reloads caused by tokens naming unknown key ids, without PostgreSQL: loads are counted. */
class TokenKeysTest {
  private static final long NOW = System.currentTimeMillis();

  private final ExecutorService blocking = Executors.newFixedThreadPool(2);
  private final AtomicInteger loads = new AtomicInteger();
  private final AtomicReference<KeyRing> stored = new AtomicReference<>(ring("k0"));

  @AfterEach
  void stop() {
    blocking.shutdownNow();
  }

  private static byte[] key(String kid) {
    byte[] k = new byte[32];
    new Random(kid.hashCode()).nextBytes(k);
    return k;
  }

  /** The keys {@code kids} (the last one signs). */
  private static KeyRing ring(String... kids) {
    Map<String, byte[]> keys = new java.util.LinkedHashMap<>();
    List<KeyInfo> info = new ArrayList<>();
    for (String kid : kids) {
      keys.put(kid, key(kid));
      info.add(new KeyInfo(kid, Instant.EPOCH, null, kid.equals(kids[kids.length - 1]), false));
    }
    return new KeyRing(kids[kids.length - 1], keys, Map.of(), info, 0, null);
  }

  /** A data source whose connections do nothing but close. */
  private static DataSource noDatabase() {
    Connection connection =
        (Connection)
            Proxy.newProxyInstance(
                Connection.class.getClassLoader(),
                new Class<?>[] {Connection.class},
                (proxy, method, args) -> null);
    return (DataSource)
        Proxy.newProxyInstance(
            DataSource.class.getClassLoader(),
            new Class<?>[] {DataSource.class},
            (proxy, method, args) -> method.getName().equals("getConnection") ? connection : null);
  }

  private TokenKeys keys(Duration gap, OrderedLoads.Loader<KeyRing> load) throws Exception {
    TokenKeys keys = new TokenKeys(noDatabase(), "weir", blocking, Duration.ZERO, load, gap);
    keys.reload().toCompletableFuture().get(5, TimeUnit.SECONDS);
    return keys;
  }

  private TokenKeys keys(Duration gap) throws Exception {
    return keys(
        gap,
        c -> {
          loads.incrementAndGet();
          return stored.get();
        });
  }

  private static String cursorSignedBy(String kid) {
    return new ChangeCursor(
            "notes", "ann", 1, 1, new byte[0], new byte[ChangeCursor.FENCE_BYTES], new long[] {0})
        .sign(TokenSigner.of(kid, key(kid)), NOW + 60_000);
  }

  @Test
  void forgedKeyIdsInARowDoNotCostAReloadEach() throws Exception {
    TokenKeys keys = keys(Duration.ofHours(1));
    assertThat(loads).hasValue(1);
    keys.reloadForUnknownKey().toCompletableFuture().get(5, TimeUnit.SECONDS);
    assertThat(loads).as("the first unknown key id reloads at once").hasValue(2);
    // 50 forged cursors naming unknown key ids, one after another (each given 20 ms).
    List<CompletableFuture<TokenSigner>> waiting = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      CompletableFuture<TokenSigner> reload = keys.reloadForUnknownKey().toCompletableFuture();
      try {
        reload.get(20, TimeUnit.MILLISECONDS);
      } catch (TimeoutException e) {
        waiting.add(reload);
      }
    }
    Thread.sleep(100);
    assertThat(loads)
        .as("no further reload within the gap, however many forged key ids arrive")
        .hasValue(2);
    assertThat(waiting).hasSize(50).noneMatch(CompletableFuture::isDone);
  }

  @Test
  void callersWithinTheGapShareOneReloadAfterIt() throws Exception {
    TokenKeys keys = keys(Duration.ofMillis(300));
    long first = System.nanoTime();
    keys.reloadForUnknownKey().toCompletableFuture().get(5, TimeUnit.SECONDS);
    List<CompletableFuture<TokenSigner>> callers = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      callers.add(keys.reloadForUnknownKey().toCompletableFuture());
    }
    CompletableFuture.allOf(callers.toArray(CompletableFuture[]::new)).get(5, TimeUnit.SECONDS);
    assertThat(System.nanoTime() - first)
        .as("the second reload starts no sooner than the gap after the first")
        .isGreaterThanOrEqualTo(Duration.ofMillis(300).toNanos());
    assertThat(loads)
        .as("the initial load, the first unknown key, and one for all 200")
        .hasValue(3);
  }

  @Test
  void aCallerWaitsForAReloadThatStartedAfterItAsked() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    AtomicInteger started = new AtomicInteger();
    TokenKeys keys =
        keys(
            Duration.ofMillis(50),
            c -> {
              KeyRing ring = stored.get();
              if (started.incrementAndGet() == 2) {
                release.await(5, TimeUnit.SECONDS); // the first unknown-key reload is slow
              }
              return ring;
            });
    CompletableFuture<TokenSigner> first = keys.reloadForUnknownKey().toCompletableFuture();
    while (started.get() < 2) {
      Thread.sleep(5);
    }
    // Another node rotates to k1 while that reload is under way, and this node sees a k1 cursor.
    stored.set(ring("k0", "k1"));
    CompletableFuture<TokenSigner> second = keys.reloadForUnknownKey().toCompletableFuture();
    release.countDown();
    assertThat(first.get(5, TimeUnit.SECONDS).activeKeyId()).isEqualTo("k0");
    TokenSigner reloaded = second.get(5, TimeUnit.SECONDS);
    assertThat(ChangeCursor.verify(reloaded, cursorSignedBy("k1"), NOW).principal())
        .isEqualTo("ann");
  }

  @Test
  void aFailedReloadFailsItsCallersAndTheNextOneRetries() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    TokenKeys keys =
        keys(
            Duration.ofMillis(20),
            c -> {
              if (calls.incrementAndGet() == 2) {
                throw new java.sql.SQLException("connection refused");
              }
              return stored.get();
            });
    CompletableFuture<TokenSigner> failed = keys.reloadForUnknownKey().toCompletableFuture();
    assertThat(failed).failsWithin(Duration.ofSeconds(5));
    assertThat(keys.reloadForUnknownKey().toCompletableFuture().get(5, TimeUnit.SECONDS))
        .isNotNull();
    assertThat(calls).hasValue(3);
  }

  @Test
  void replayTokensAreVerifiedWithoutEverReloading() throws Exception {
    // What continuous queries verify a Last-Event-ID with (ContinuousQueries.resume gets
    // tokenKeys::signer, never TokenKeys itself): SSE clients reconnect with it on their own, so a
    // token naming an unknown key id must be refused without costing a load.
    TokenKeys keys = keys(Duration.ZERO);
    assertThat(loads).hasValue(1);
    String known =
        new io.weir.protocol.token.ReplayToken("sub-1", 7)
            .sign(TokenSigner.of("k0", key("k0")), NOW + 60_000);
    String unknown =
        new io.weir.protocol.token.ReplayToken("sub-1", 7)
            .sign(TokenSigner.of("k9", key("k9")), NOW + 60_000);
    for (int i = 0; i < 100; i++) {
      TokenSigner signer = keys.signer().orElseThrow();
      assertThat(io.weir.protocol.token.ReplayToken.verify(signer, known, NOW).sequence())
          .isEqualTo(7);
      try {
        io.weir.protocol.token.ReplayToken.verify(signer, unknown, NOW);
        throw new AssertionError("a replay token under an unknown key verified");
      } catch (TokenSigner.InvalidToken e) {
        assertThat(e.failure()).isEqualTo(TokenSigner.Failure.UNKNOWN_KEY);
      }
    }
    // Nothing may start a load later either: the count holds for a while.
    org.awaitility.Awaitility.await("no load for any replay token, unknown key id or not")
        .during(java.time.Duration.ofMillis(500))
        .atMost(java.time.Duration.ofSeconds(5))
        .until(() -> loads.get() == 1);
  }
}
