package io.weir.node.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.auth.Principal;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.query.Q1Query;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
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

  /** Reads the partition model answered up to a front ({@code through}), not to the tail. */
  private final AtomicInteger cappedReads = new AtomicInteger();

  private final AtomicBoolean revoked = new AtomicBoolean();

  /** The partition model's next reads fail (retryably) while this is above zero. */
  private final AtomicInteger failNext = new AtomicInteger();

  private LiveStreams streams;

  private static Q1Query query() throws Exception {
    return Q1Query.parse(
        new ObjectMapper()
            .readTree(
                "{\"collection\":\"c\",\"where\":{\"op\":\"eq\",\"field\":\"a\",\"value\":1}}"));
  }

  private LiveStreams streams(int maxReads, Duration retryFor, LiveStreams.Reader reader) {
    return streams(maxReads, retryFor, reader, true);
  }

  /** With {@code cohorts} false no stream rides another: the shared reads beneath, alone. */
  private LiveStreams streams(
      int maxReads, Duration retryFor, LiveStreams.Reader reader, boolean cohorts) {
    streams =
        new LiveStreams(
            reader,
            new LiveStreams.Settings(
                100, 100, maxReads, Duration.ofMinutes(10), retryFor, 64, Duration.ofSeconds(15)),
            p -> revoked.get() ? Optional.empty() : Optional.of(p),
            () -> CompletableFuture.completedFuture(null),
            (p, q) -> null,
            cohorts);
    return streams;
  }

  /** Reads that wait until the test completes them. */
  private LiveStreams.Reader held() {
    return (p, q, cursor, limit, maxBytes, through) -> {
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
  private static class Client implements LiveStreams.Sink {
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
        (p, q, cursor, limit, maxBytes, through) -> {
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
        (p, q, cursor, limit, maxBytes, through) ->
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

  /**
   * A model of the partitions for {@link #streamsOfOneQueryShareTheirReads}: one partition whose
   * tail is {@code tail}; a read from cursor {@code c<n>#<token>} answers an upsert for every
   * position after {@code n} up to the tail (or {@code through}), a fresh token (as an expiry would
   * make it) and the key of where it ends, a little later and on another thread, as a real read
   * does.
   */
  private LiveStreams.Reader partitionModel(AtomicLong tail, AtomicLong issued) {
    return partitionModel(tail, issued, new AtomicReference<>());
  }

  /** As above; while {@code gate} holds a future, reads answer only once it completes. */
  private LiveStreams.Reader partitionModel(
      AtomicLong tail, AtomicLong issued, AtomicReference<CompletableFuture<Void>> gate) {
    return (p, q, cursor, limit, maxBytes, through) -> {
      reads.incrementAndGet();
      if (failNext.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
        return CompletableFuture.failedFuture(new java.sql.SQLException("model"));
      }
      if (through != null) {
        cappedReads.incrementAndGet();
      }
      long from = Long.parseLong(cursor.substring(1, cursor.indexOf('#')));
      long to = tail.get();
      if (through != null) {
        to = Math.min(to, through[0]);
      }
      to = Math.max(to, from);
      List<Feeds.Delta> deltas = new ArrayList<>();
      for (long n = from + 1; n <= to; n++) {
        deltas.add(new Feeds.Delta(true, 0, n, "d" + n, n, "{}"));
      }
      Feeds.LivePage page =
          new Feeds.LivePage(
              deltas,
              "c" + to + "#" + issued.incrementAndGet(),
              false,
              false,
              new Feeds.LiveAt(new long[] {to}, "k" + to));
      CompletableFuture<Void> held = gate.get();
      return (held == null ? CompletableFuture.<Void>completedFuture(null) : held)
          .thenApplyAsync(v -> page, CompletableFuture.delayedExecutor(2, TimeUnit.MILLISECONDS));
    };
  }

  /** Records the positions of the deltas it gets. */
  private static final class Positions extends Client {
    final List<Long> seen = Collections.synchronizedList(new ArrayList<>());

    @Override
    public boolean page(Feeds.LivePage page) {
      page.deltas().forEach(d -> seen.add(d.sequence()));
      return super.page(page);
    }

    long last() {
      synchronized (seen) {
        return seen.isEmpty() ? -1 : seen.get(seen.size() - 1);
      }
    }
  }

  /**
   * Fifty streams of one query opened at five starting points over the partition model, each cursor
   * a token of its own; {@link #round} writes three changes, signals once and waits until every
   * open stream has them.
   */
  private final class Fifty {
    final AtomicLong tail = new AtomicLong(5);
    final Map<Positions, Long> started = new LinkedHashMap<>();
    final Map<Positions, LiveStreams.Stream> handles = new LinkedHashMap<>();

    Fifty(boolean cohorts) throws Exception {
      streams(4, Duration.ofSeconds(60), partitionModel(tail, new AtomicLong()), cohorts);
      for (int i = 0; i < 50; i++) {
        Positions client = new Positions();
        long at = i % 5;
        assertThat(streams.admit(ALICE)).isNull();
        handles.put(
            client, streams.start(ALICE, query(), "c" + at + "#s" + i, 100, 1 << 20, client));
        started.put(client, at);
      }
    }

    /** Reads made in each of {@code n} rounds. */
    int[] rounds(int n) {
      int[] perRound = new int[n];
      for (int round = 0; round < n; round++) {
        int before = reads.get();
        tail.addAndGet(3);
        streams.wake();
        long target = tail.get();
        await("every open stream reaches the tail, round " + round)
            .atMost(WAIT)
            .until(
                () ->
                    started.keySet().stream()
                        .allMatch(c -> c.events.contains("closed") || c.last() == target));
        perRound[round] = reads.get() - before;
      }
      return perRound;
    }

    /** Every stream still open got every change after its start once, in order. */
    void everyChangeOnceInOrder() {
      for (Map.Entry<Positions, Long> e : started.entrySet()) {
        if (e.getKey().events.contains("closed")) {
          continue;
        }
        List<Long> expected = new ArrayList<>();
        for (long n = e.getValue() + 1; n <= tail.get(); n++) {
          expected.add(n);
        }
        assertThat(e.getKey().seen).as("every change once, in order").isEqualTo(expected);
      }
    }

    LiveStreams.Stream lead() {
      return handles.values().stream().filter(s -> !s.rides()).findFirst().orElseThrow();
    }
  }

  private static int sum(int[] perRound, int from) {
    int n = 0;
    for (int round = from; round < perRound.length; round++) {
      n += perRound[round];
    }
    return n;
  }

  @Test
  void streamsOfOneQueryShareTheirReads() throws Exception {
    Fifty fifty = new Fifty(false); // the shared reads alone: every stream takes its own turns
    int[] perRound = fifty.rounds(20);
    fifty.everyChangeOnceInOrder();
    assertThat(sum(perRound, 10))
        .as(
            "reads in the last ten rounds (per round: %s): one per round once the streams"
                + " stand together, not one per stream (500)",
            Arrays.toString(perRound))
        .isLessThanOrEqualTo(20);
    assertThat(streams.groups()).isEqualTo(1);
  }

  @Test
  void streamsStandingTogetherRideOneLead() throws Exception {
    Fifty fifty = new Fifty(true);
    int[] perRound = fifty.rounds(20);
    fifty.everyChangeOnceInOrder();
    await("all but one ride the lead's reads").atMost(WAIT).until(() -> streams.riding() == 49);
    assertThat(sum(perRound, 10))
        .as("reads in the last ten rounds (per round: %s)", Arrays.toString(perRound))
        .isLessThanOrEqualTo(10);
  }

  @Test
  void ridersReadOnWhenTheirLeadLeavesWaitForItsRetriesAndOneBehindIsClosed() throws Exception {
    Fifty fifty = new Fifty(true);
    fifty.rounds(6);
    await().atMost(WAIT).until(() -> streams.riding() == 49);

    fifty.lead().close(); // its client left: the riders read on without it
    fifty.rounds(3);
    assertThat(streams.open()).isEqualTo(49);
    await().atMost(WAIT).until(() -> streams.riding() == 48);

    failNext.set(1); // the lead's next read fails: its riders wait for its retry
    int[] failing = fifty.rounds(1);
    assertThat(failing[0])
        .as("the failed read and its retry, not a read per rider")
        .isBetween(2, 3);
    assertThat(streams.riding()).isEqualTo(48);

    Positions behind =
        fifty.handles.entrySet().stream()
            .filter(e -> e.getValue().rides())
            .findFirst()
            .orElseThrow()
            .getKey();
    behind.accept = false; // its queue is full: the lead's next page closes it
    fifty.rounds(3);
    assertThat(behind.events).contains("closed");
    assertThat(streams.open()).isEqualTo(48);
    fifty.everyChangeOnceInOrder();
  }

  @Test
  void leadsClosedWhileTheirStreamsSettleLoseAndRepeatNothingForTheOthers() throws Exception {
    Fifty fifty = new Fifty(true);
    fifty.rounds(3);
    java.util.Random random = new java.util.Random(7);
    for (int round = 0; round < 12; round++) {
      fifty.tail.addAndGet(3);
      streams.wake();
      // Closed from this thread while the streams' turns end, settle and attach on theirs.
      Thread.sleep(random.nextInt(4));
      fifty.handles.entrySet().stream()
          .filter(e -> !e.getValue().rides() && !e.getKey().events.contains("closed"))
          .findFirst()
          .ifPresent(e -> e.getValue().close());
      fifty.rounds(1);
    }
    assertThat(streams.open()).as("a lead closed each round").isEqualTo(38);
    fifty.everyChangeOnceInOrder();
  }

  @Test
  void aStreamTakingASharedReadBegunBeforeItsSignalReadsAgainAfterIt() throws Exception {
    AtomicLong tail = new AtomicLong(5);
    AtomicReference<CompletableFuture<Void>> gate = new AtomicReference<>();
    streams(4, Duration.ofSeconds(60), partitionModel(tail, new AtomicLong(), gate), false);
    Positions a = new Positions();
    Positions b = new Positions();
    LiveStreams.Stream first = openAtZero(a, "a");
    LiveStreams.Stream second = openAtZero(b, "b");
    streams.wake();
    await().atMost(WAIT).until(() -> a.last() == 5 && b.last() == 5);
    int settled = reads.get();
    await("both idle")
        .during(Duration.ofMillis(200))
        .atMost(WAIT)
        .until(() -> reads.get() == settled);

    CompletableFuture<Void> open = new CompletableFuture<>();
    gate.set(open);
    tail.set(8);
    first.wake(); // its read (of positions up to 8) is held
    await().atMost(WAIT).until(() -> reads.get() == settled + 1);
    tail.set(11);
    second.wake(); // signalled after that read began: taking it alone would miss 9 to 11
    gate.set(null);
    open.complete(null);
    await("the second stream reads again after the shared read")
        .atMost(WAIT)
        .until(() -> b.last() == 11);
    assertThat(b.seen).containsExactly(1L, 2L, 3L, 4L, 5L, 6L, 7L, 8L, 9L, 10L, 11L);
    assertThat(a.seen).as("the first was signalled before 9 to 11").endsWith(8L);
  }

  /** A stream of ALICE's query at position 0, its cursor a token of its own. */
  private LiveStreams.Stream openAtZero(Positions client, String token) throws Exception {
    assertThat(streams.admit(ALICE)).isNull();
    return streams.start(ALICE, query(), "c0#" + token, 100, 1 << 20, client);
  }

  @Test
  void aGroupsFrontNeverMovesBack() {
    LiveStreams.Group group = new LiveStreams.Group();
    group.advanced(page(new long[] {5, 7}));
    group.advanced(page(new long[] {2, 9})); // a stream catching up, behind in partition 0
    assertThat(group.front().positions()).containsExactly(5, 7);
    group.advanced(page(new long[] {5, 8}));
    assertThat(group.front().positions()).containsExactly(5, 8);
  }

  private static Feeds.LivePage page(long[] positions) {
    return new Feeds.LivePage(
        List.of(),
        "c",
        false,
        false,
        new Feeds.LiveAt(positions, "k" + Arrays.toString(positions)));
  }

  @Test
  void aCompletedSharedReadIsNotTakenOnceOlderThanASecond() throws Exception {
    AtomicLong tail = new AtomicLong(5);
    streams(4, Duration.ofSeconds(60), partitionModel(tail, new AtomicLong()), false);
    Positions a = new Positions();
    Positions b = new Positions();
    LiveStreams.Stream first = openAtZero(a, "a");
    LiveStreams.Stream second = openAtZero(b, "b");
    streams.wake();
    await().atMost(WAIT).until(() -> a.last() == 5 && b.last() == 5);
    tail.set(8);
    first.wake(); // the group's read from 5 to 8, kept; the second stream stays at 5
    await().atMost(WAIT).until(() -> a.last() == 8);
    int capped = cappedReads.get();
    Thread.sleep(LiveStreams.KEPT_NANOS / 1_000_000 + 300); // the kept read grows too old
    second.wake();
    await().atMost(WAIT).until(() -> b.last() == 8);
    assertThat(cappedReads.get())
        .as("the second stream read up to the front itself instead of taking the old page")
        .isEqualTo(capped + 1);
    assertThat(b.seen).containsExactly(1L, 2L, 3L, 4L, 5L, 6L, 7L, 8L);
  }
}
