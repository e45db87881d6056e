package io.weir.node.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.auth.Principal;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.query.Q1Query;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The stream manager's scheduling with a stand-in for the read ({@link LiveStreams.Reader}): at
 * most {@code maxReads} reads at once, wakes coalesced per stream, a backoff that signals do not
 * cut short and that ends in {@code unavailable}, refusals that end a stream and give its slot
 * back, a principal revoked before a read. The reads against real partitions are in LiveStreamIT.
 */
class LiveStreamsTest {
  private static final Duration WAIT = Duration.ofSeconds(30);
  private static final Principal ALICE = new Principal("alice", false);
  private final Queue<CompletableFuture<Feeds.LivePage>> pending = new ConcurrentLinkedQueue<>();
  private final AtomicInteger reads = new AtomicInteger();
  private final AtomicBoolean revoked = new AtomicBoolean();
  private LiveStreams streams;

  private static Q1Query query() throws Exception {
    return Q1Query.parse(
        new ObjectMapper()
            .readTree(
                "{\"collection\":\"c\",\"where\":{\"op\":\"eq\",\"field\":\"a\",\"value\":1}}"));
  }

  private LiveStreams streams(int maxReads, Duration retryFor, LiveStreams.Reader reader) {
    streams =
        new LiveStreams(
            reader,
            new LiveStreams.Settings(
                100, 100, maxReads, Duration.ofMinutes(10), retryFor, 64, Duration.ofSeconds(15)),
            p -> revoked.get() ? Optional.empty() : Optional.of(p),
            () -> CompletableFuture.completedFuture(null),
            (p, q) -> null);
    return streams;
  }

  /** Reads that wait until the test completes them. */
  private LiveStreams.Reader held() {
    return (p, q, cursor, limit, maxBytes) -> {
      reads.incrementAndGet();
      CompletableFuture<Feeds.LivePage> f = new CompletableFuture<>();
      pending.add(f);
      return f;
    };
  }

  private static Feeds.LivePage empty(String cursor) {
    return new Feeds.LivePage(List.of(), cursor, false);
  }

  /** Records the events a stream's client would get. */
  private static final class Client implements LiveStreams.Sink {
    final Queue<String> events = new ConcurrentLinkedQueue<>();
    volatile boolean accept = true;

    @Override
    public boolean page(Feeds.LivePage page) {
      events.add("deltas");
      return accept;
    }

    @Override
    public boolean progress(String cursor) {
      events.add("progress");
      return accept;
    }

    @Override
    public void end(ErrorCode code, String message) {
      events.add("end:" + code.wire());
    }

    @Override
    public void close() {
      events.add("closed");
    }
  }

  private LiveStreams.Stream open(Client client) throws Exception {
    assertThat(streams.admit(ALICE)).isNull();
    return streams.start(ALICE, query(), "c0", 100, 1 << 20, client);
  }

  @AfterEach
  void close() {
    if (streams != null) {
      streams.close();
    }
  }

  @Test
  void atMostMaxReadsRunAndWakesAreCoalescedPerStream() throws Exception {
    streams(2, Duration.ofSeconds(60), held());
    for (int i = 0; i < 6; i++) {
      open(new Client());
    }
    for (int round = 0; round < 3; round++) {
      streams.wake(); // three signals before any read finished
    }
    await().atMost(WAIT).until(() -> pending.size() == 2);
    await("no more than max-reads at once")
        .during(Duration.ofMillis(200))
        .atMost(WAIT)
        .until(() -> reads.get() == 2);
    // Each read finishing lets a queued one start. The two streams read while the second and third
    // signals came read once more after; the four queued ones read once (a read takes in every
    // wake before it began).
    for (int completed = 1; completed <= 8; completed++) {
      await().atMost(WAIT).until(() -> !pending.isEmpty());
      pending.poll().complete(empty("c" + completed));
      assertThat(pending.size()).isLessThanOrEqualTo(2);
    }
    await("no read after the eighth")
        .during(Duration.ofMillis(300))
        .atMost(WAIT)
        .until(() -> pending.isEmpty());
    assertThat(reads.get())
        .as("one read per stream, one more for wakes during a read")
        .isEqualTo(8);
  }

  @Test
  void slotsAreBoundedPerPrincipalAndPerNodeAndGivenBack() {
    streams =
        new LiveStreams(
            held(),
            new LiveStreams.Settings(
                3, 2, 1, Duration.ofMinutes(10), Duration.ofSeconds(1), 8, Duration.ofSeconds(15)),
            Optional::of,
            () -> CompletableFuture.completedFuture(null),
            (p, q) -> null);
    Principal bob = new Principal("bob", false);
    assertThat(streams.admit(ALICE)).isNull();
    assertThat(streams.admit(ALICE)).isNull();
    assertThat(streams.admit(ALICE).code()).isEqualTo(ErrorCode.TOO_MANY_STREAMS);
    assertThat(streams.admit(bob)).isNull();
    assertThat(streams.admit(bob).code()).as("the node's 3").isEqualTo(ErrorCode.TOO_MANY_STREAMS);
    streams.release(ALICE);
    assertThat(streams.admit(bob)).isNull();
    assertThat(streams.open()).isEqualTo(3);
    streams.release(ALICE);
    streams.release(bob);
    streams.release(bob);
    assertThat(streams.open()).isZero();
    assertThat(streams.principalsHolding()).isZero();
  }

  @Test
  void aNodeShuttingDownEndsItsStreamsWithARetryableEnd() throws Exception {
    streams(4, Duration.ofSeconds(60), held());
    Client client = new Client();
    open(client);
    streams.close();
    assertThat(client.events).containsExactly("end:unavailable");
    assertThat(ErrorCode.UNAVAILABLE.retryable()).as("the client resumes elsewhere").isTrue();
    assertThat(streams.open()).isZero();
    assertThat(streams.admit(ALICE).code()).isEqualTo(ErrorCode.UNAVAILABLE);
  }

  @Test
  void retryableFailuresBackOffWhateverTheSignalsThenEndUnavailable() throws Exception {
    streams(
        4,
        Duration.ofMillis(1200),
        (p, q, cursor, limit, maxBytes) -> {
          reads.incrementAndGet();
          return CompletableFuture.failedFuture(
              new Feeds.Refused(ErrorCode.BUSY, "too many reads"));
        });
    Client client = new Client();
    open(client).wake();
    await("the stream ends, while a signal comes every 10 ms (it must not cut the backoff short)")
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(10))
        .until(
            () -> {
              streams.wake();
              return client.events.contains("end:unavailable");
            });
    assertThat(client.events).containsExactly("end:unavailable");
    // 100, 200, 400, 800 ms between tries: five or six reads in 1.2 s, not one per signal.
    assertThat(reads.get()).isBetween(4, 7);
    assertThat(streams.open()).as("the slot is given back").isZero();
  }

  @Test
  void aRefusalEndsTheStreamAndGivesItsSlotBack() throws Exception {
    streams(
        4,
        Duration.ofSeconds(60),
        (p, q, cursor, limit, maxBytes) ->
            CompletableFuture.failedFuture(
                new java.util.concurrent.CompletionException(
                    new Feeds.Refused(ErrorCode.TOKEN_INVALIDATED, "fenced"))));
    Client client = new Client();
    open(client).wake();
    await().atMost(WAIT).until(() -> client.events.contains("end:token-invalidated"));
    assertThat(streams.open()).isZero();
    assertThat(streams.principalsHolding()).as("nothing kept per principal").isZero();
  }

  @Test
  void aRevokedPrincipalIsNotReadForAndAClientBehindIsDisconnected() throws Exception {
    streams(4, Duration.ofSeconds(60), held());
    Client revokedClient = new Client();
    LiveStreams.Stream first = open(revokedClient);
    revoked.set(true);
    first.wake();
    await().atMost(WAIT).until(() -> revokedClient.events.contains("end:unauthenticated"));
    assertThat(reads.get()).isZero();

    revoked.set(false);
    Client behind = new Client();
    behind.accept = false; // its queue is full
    open(behind).wake();
    await().atMost(WAIT).until(() -> pending.size() == 1);
    pending
        .poll()
        .complete(
            new Feeds.LivePage(List.of(new Feeds.Delta(true, 0, 1, "d1", 1, "{}")), "c9", false));
    await().atMost(WAIT).until(() -> behind.events.contains("closed"));
    assertThat(behind.events).doesNotContain("end:unavailable");
    assertThat(streams.open()).isZero();
  }
}
