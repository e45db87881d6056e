package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * The changes feed under SIGKILL: a writer keeps creating and updating documents of a collection
 * with an ACL row rule (every fifth document is visible to another principal only), a reader
 * follows the feed as a restricted principal, saving its cursor after applying each page, and a
 * killer SIGKILLs the node at random moments and starts a new one. The reader goes on with the
 * cursor the dead node signed.
 *
 * <p>Beside it, the same principal follows a pushed live query over the collection ({@code GET
 * /v1/query/live/stream}): when the node dies under it, it reconnects to the next one with the id
 * of the last event it applied as {@code Last-Event-ID}.
 *
 * <p>Afterwards every acknowledged write of a visible document was seen exactly once by each
 * follower (loss, dup), no invisible document was shown (leaks), and positions grew within every
 * partition (order). Prints the counts. Size: {@code -Dweir.crash.feed-kills} (default 3), {@code
 * -Dweir.crash.feed-writes} (default 1200).
 */
class ChangesFeedCrashIT extends EndToEndTest {
  private static final org.slf4j.Logger LOG =
      org.slf4j.LoggerFactory.getLogger(ChangesFeedCrashIT.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int PARTITIONS = 8;

  /** How long the writer or the reader may go without an answer: a restart, on a slow machine. */
  private static final java.time.Duration STALL = START_UP.plusSeconds(60);

  private final AtomicReference<NodeProcess> current = new AtomicReference<>();

  @Test
  void aFollowerOfTheFeedLosesAndRepeatsNothingWhileNodesAreKilled() throws Exception {
    int kills = Integer.getInteger("weir.crash.feed-kills", 3);
    int writes = Integer.getInteger("weir.crash.feed-writes", 1200);
    long seed = Long.getLong("weir.crash.seed", System.nanoTime());
    Random random = new Random(seed);
    db = TestPostgres.server().freshDatabase("feedcrash");
    Path config = Files.createTempFile("weir-feedcrash", ".conf");
    // The streams' safety read is put off past the test: only outbox signals (the cluster topic)
    // wake the pushed follower.
    Files.writeString(
        config,
        "weir.partitions.count = " + PARTITIONS + "\nweir.feeds.live-streams.recheck = 10m\n");
    config.toFile().deleteOnExit();
    current.set(startNode("feedcrash", config));
    awaitReady(current.get(), PARTITIONS);
    call("PUT", "/admin/policies/feed", "{\"visibility\":\"acl\",\"field\":\"acl\"}");
    String token =
        callOnce(current.get(), "POST", "/admin/principals", "{\"id\":\"follower\"}")
            .get("token")
            .asText();
    for (String grant : List.of("ChangesRead", "DocumentsRead", "QueryRead")) {
      call(
          "POST",
          "/admin/principals/follower/grants",
          "{\"collection\":\"feed\",\"grant\":\"" + grant + "\"}");
    }
    call(
        "POST",
        "/admin/principals/follower/grants",
        "{\"collection\":\"feed\",\"grant\":\"FieldUse\",\"field\":\"i\"}");
    HttpResponse<String> liveStart =
        current
            .get()
            .send(
                "POST",
                "/v1/query/live/start",
                "{\"query\":" + LIVE_QUERY + "}",
                Map.of("Authorization", "Bearer " + token, "Content-Type", "application/json"))
            .orElseThrow();
    assertThat(liveStart.statusCode()).as("%s", liveStart.body()).isEqualTo(200);
    String liveCursor = JSON.readTree(liveStart.body()).get("cursor").asText();

    Map<String, Long> acked = new ConcurrentHashMap<>(); // "id/revision" -> 1 for visible writes
    AtomicReference<Throwable> writerError = new AtomicReference<>();
    Thread writer =
        new Thread(
            () -> {
              try {
                for (int i = 0; i < writes; i++) {
                  int doc = i % 300;
                  String acl = doc % 5 == 0 ? "[\"someone-else\"]" : "[\"follower\"]";
                  String body = "{\"acl\":" + acl + ",\"i\":" + i + "}";
                  // Retried with its Idempotency-Key until acknowledged, through restarts.
                  long since = System.nanoTime();
                  while (true) {
                    progressWithin(since, STALL, "write " + i);
                    Optional<HttpResponse<String>> r =
                        current
                            .get()
                            .send(
                                "PUT",
                                "/v1/documents/feed/d" + doc,
                                body,
                                Map.of("Idempotency-Key", "w-" + i));
                    if (r.isPresent() && r.get().statusCode() == 200) {
                      if (doc % 5 != 0) {
                        acked.put(
                            "d"
                                + doc
                                + "/"
                                + JSON.readTree(r.get().body()).get("revision").asLong(),
                            1L);
                      }
                      break;
                    }
                    if (r.isPresent()
                        && r.get().statusCode() != 503
                        && r.get().statusCode() != 429) {
                      throw new AssertionError(
                          "a write failed with " + r.get().statusCode() + ": " + r.get().body());
                    }
                    Thread.sleep(100);
                  }
                }
              } catch (Throwable t) {
                writerError.set(t);
              }
            },
            "feedcrash-writer");
    writer.setDaemon(true);
    AtomicBoolean killing = new AtomicBoolean(true);
    List<Long> delays = new ArrayList<>();
    AtomicReference<Throwable> killerError = new AtomicReference<>();
    PushedFollower pushed = new PushedFollower(token, liveCursor);
    Thread killer =
        new Thread(
            () -> {
              try {
                for (int k = 0; k < kills; k++) {
                  // Each kill cuts a pushed stream: the follower has one open on this node (on a
                  // loaded machine its first read on a fresh node can outlast the random delay).
                  int opened = k + 1;
                  org.awaitility.Awaitility.await(
                          "the pushed follower's stream " + opened + " opens")
                      .atMost(STALL)
                      .pollInterval(java.time.Duration.ofMillis(50))
                      .until(() -> pushed.streams >= opened || pushed.error.get() != null);
                  long delay = 500 + random.nextInt(2500);
                  delays.add(delay);
                  Thread.sleep(delay);
                  current.get().kill();
                  NodeProcess next = startNode("feedcrash", config);
                  awaitReady(next, PARTITIONS);
                  current.set(next);
                }
              } catch (Throwable t) {
                killerError.set(t);
              } finally {
                killing.set(false);
              }
            },
            "feedcrash-killer");
    killer.setDaemon(true);
    pushed.start();
    writer.start();
    killer.start();

    Map<String, Integer> seen = new HashMap<>();
    Set<String> leaks = new HashSet<>();
    long[] lastSequence = new long[PARTITIONS];
    int orderErrors = 0;
    int pages = 0;
    int retries = 0;
    String cursor = null;
    long answeredAt = System.nanoTime();
    while (true) {
      // Taken before the read: only a page read after the writer's last acknowledgement (and the
      // killer's end) may end the loop. Checked after the read, a page read just before the last
      // write committed would end it and count that write as lost.
      boolean finished = !writer.isAlive() && !killing.get();
      Optional<HttpResponse<String>> r =
          readChanges(current.get(), token, changesRequest("feed", cursor, 40));
      if (r.isEmpty() || r.get().statusCode() == 503) {
        progressWithin(answeredAt, STALL, "the changes feed answers");
        retries++;
        Thread.sleep(100);
        continue;
      }
      answeredAt = System.nanoTime();
      assertThat(r.get().statusCode()).as("%s", r.get().body()).isEqualTo(200);
      JsonNode page = JSON.readTree(r.get().body());
      for (JsonNode c : page.get("changes")) {
        int p = c.get("partition").asInt();
        long sequence = c.get("sequence").asLong();
        if (sequence <= lastSequence[p]) {
          orderErrors++;
        }
        lastSequence[p] = sequence;
        String key = c.get("id").asText() + "/" + c.get("revision").asLong();
        if (!c.get("after").get("acl").toString().contains("follower")) {
          leaks.add(key);
        }
        seen.merge(key, 1, Integer::sum);
      }
      cursor = page.get("cursor").asText(); // saved only after the page was applied
      pages++;
      if (!page.get("hasMore").asBoolean()) {
        if (finished) {
          break;
        }
        Thread.sleep(50);
      }
    }
    assertThat(writerError.get()).as("writer").isNull();
    assertThat(killerError.get()).as("killer").isNull();
    // The pushed follower has every acknowledged write once the feed reader has (or its deadline).
    try {
      org.awaitility.Awaitility.await("the pushed follower saw every acknowledged write")
          .atMost(STALL)
          .pollInterval(java.time.Duration.ofMillis(100))
          .until(
              () -> pushed.error.get() != null || pushed.seen.keySet().containsAll(acked.keySet()));
    } catch (org.awaitility.core.ConditionTimeoutException late) {
      // counted as loss below, with the figures printed first
    }
    pushed.stop();
    assertThat(pushed.error.get()).as("pushed follower").isNull();
    long pushedLoss = acked.keySet().stream().filter(k -> !pushed.seen.containsKey(k)).count();
    long pushedDup = pushed.seen.values().stream().filter(n -> n > 1).count();
    long pushedUnacked = pushed.seen.keySet().stream().filter(k -> !acked.containsKey(k)).count();
    LOG.info(
        "live-stream crash: kills={} streams={} events={} deltas={} loss={} dup={}"
            + " unacknowledged-seen={} leaks={}",
        kills,
        pushed.streams,
        pushed.events,
        pushed.seen.size(),
        pushedLoss,
        pushedDup,
        pushedUnacked,
        pushed.leaks.size());
    assertThat(pushedLoss).as("acknowledged writes the pushed follower never saw").isZero();
    assertThat(pushedDup).as("deltas pushed twice").isZero();
    assertThat(pushedUnacked).as("deltas no write acknowledged").isZero();
    assertThat(pushed.leaks).as("deltas of documents the follower may not see").isEmpty();
    // The killer waited for a stream on each node before killing it: one stream per node.
    assertThat(pushed.streams).as("streams opened, one on each node").isGreaterThan(kills);
    long loss = acked.keySet().stream().filter(k -> !seen.containsKey(k)).count();
    long dup = seen.values().stream().filter(n -> n > 1).count();
    long unacked = seen.keySet().stream().filter(k -> !acked.containsKey(k)).count();
    LOG.info(
        "changes-feed crash: seed={} kills={} delays={} writes={} visible-acked={} seen={} pages={}"
            + " retries={} loss={} dup={} unacknowledged-seen={} leaks={} order-errors={}",
        seed,
        kills,
        delays,
        writes,
        acked.size(),
        seen.size(),
        pages,
        retries,
        loss,
        dup,
        unacked,
        leaks.size(),
        orderErrors);
    assertThat(loss).as("acknowledged writes never seen").isZero();
    assertThat(dup).as("changes seen twice").isZero();
    assertThat(unacked).as("changes no write acknowledged").isZero();
    assertThat(leaks).as("changes of documents the follower may not see").isEmpty();
    assertThat(orderErrors).as("positions out of order within a partition").isZero();
  }

  /** Every document of the collection: each visible write is an upsert delta. */
  private static final String LIVE_QUERY =
      "{\"collection\":\"feed\",\"where\":{\"op\":\"ge\",\"field\":\"i\",\"value\":0}}";

  /**
   * Follows the pushed live query on whichever node runs, resuming each new stream with the id of
   * the last event applied; counts every upsert delta by "id/revision".
   */
  private final class PushedFollower {
    final Map<String, Integer> seen = new ConcurrentHashMap<>();
    final Set<String> leaks = ConcurrentHashMap.newKeySet();
    final AtomicReference<Throwable> error = new AtomicReference<>();
    volatile int streams;
    volatile int events;
    private final String token;
    private volatile String lastId;
    private volatile boolean stopped;
    private volatile java.util.stream.Stream<String> open;
    private final Thread thread;

    PushedFollower(String token, String cursor) {
      this.token = token;
      this.lastId = cursor;
      this.thread = new Thread(this::run, "feedcrash-pushed");
      thread.setDaemon(true);
    }

    void start() {
      thread.start();
    }

    void stop() throws InterruptedException {
      stopped = true;
      java.util.stream.Stream<String> s = open;
      if (s != null) {
        s.close();
      }
      thread.join(10_000);
    }

    private void run() {
      java.net.http.HttpClient client =
          java.net.http.HttpClient.newBuilder()
              .connectTimeout(java.time.Duration.ofSeconds(5))
              .build();
      try {
        while (!stopped) {
          // Empty once the follower stops; the next stream, on whichever node runs, otherwise.
          Optional<HttpResponse<java.util.stream.Stream<String>>> r =
              org.awaitility.Awaitility.await("the live-query stream opens")
                  .atMost(STALL)
                  .pollInterval(java.time.Duration.ofMillis(100))
                  .until(() -> tryOpen(client), java.util.Objects::nonNull);
          if (r.isEmpty()) {
            return;
          }
          streams++;
          open = r.get().body();
          follow(r.get().body());
        }
      } catch (Throwable t) {
        if (!stopped) {
          error.set(t);
        }
      }
    }

    /**
     * One attempt to open the stream, resuming after the last event applied: the response, null
     * while the node is down or starting (asked again), empty once the follower stops.
     */
    private Optional<HttpResponse<java.util.stream.Stream<String>>> tryOpen(
        java.net.http.HttpClient client) throws Exception {
      if (stopped) {
        return Optional.empty();
      }
      java.net.http.HttpRequest request =
          java.net.http.HttpRequest.newBuilder(
                  java.net.URI.create(
                      "http://127.0.0.1:"
                          + current.get().httpPort()
                          + "/v1/query/live/stream?query="
                          + java.net.URLEncoder.encode(
                              LIVE_QUERY, java.nio.charset.StandardCharsets.UTF_8)))
              .header("Authorization", "Bearer " + token)
              .header("Last-Event-ID", lastId)
              .build();
      HttpResponse<java.util.stream.Stream<String>> r;
      try {
        r = client.send(request, HttpResponse.BodyHandlers.ofLines());
      } catch (java.io.IOException e) {
        return null; // the node is down or starting
      }
      if (r.statusCode() == 503) {
        r.body().close();
        return null;
      }
      if (r.statusCode() != 200) {
        String body;
        try (var lines = r.body()) {
          body = lines.collect(java.util.stream.Collectors.joining("\n"));
        }
        throw new AssertionError("the stream was refused: " + r.statusCode() + " " + body);
      }
      return Optional.of(r);
    }

    /** Applies events until the stream ends (the node died, or the follower stops). */
    private void follow(java.util.stream.Stream<String> lines) throws Exception {
      String type = null;
      String id = null;
      StringBuilder data = new StringBuilder();
      try (lines) {
        for (var it = lines.iterator(); it.hasNext(); ) {
          String line = it.next();
          if (line.startsWith("event:")) {
            type = line.substring(6).trim();
          } else if (line.startsWith("id:")) {
            id = line.substring(3).trim();
          } else if (line.startsWith("data:")) {
            data.append(line.substring(5).trim());
          } else if (line.isEmpty()) {
            if (data.length() > 0) {
              apply(type, id, data.toString());
            }
            type = null;
            id = null;
            data.setLength(0);
          }
        }
      } catch (java.io.UncheckedIOException ended) {
        // the node died under the stream: resume with the last id on the next one
      }
    }

    private void apply(String type, String id, String data) throws Exception {
      events++;
      if ("end".equals(type)) {
        if (!JSON.readTree(data).get("retryable").asBoolean()) {
          throw new AssertionError("the stream ended with " + data);
        }
        return; // e.g. the node shuts down: resume with the last id on the next one
      }
      if ("deltas".equals(type)) {
        for (JsonNode d : JSON.readTree(data).get("deltas")) {
          assertThat(d.get("op").asText()).isEqualTo("upsert");
          String key = d.get("id").asText() + "/" + d.get("revision").asLong();
          if (!d.get("row").get("acl").toString().contains("follower")) {
            leaks.add(key);
          }
          seen.merge(key, 1, Integer::sum);
        }
      }
      if (id != null) {
        lastId = id; // only after the event was applied
      }
    }
  }

  private JsonNode call(String method, String path, String body) throws Exception {
    return call(current::get, method, path, body);
  }
}
