package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.feed.LiveStreams;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * Pushed live queries ({@code GET /v1/query/live/stream}) on one node over the real JDBC journal. A
 * stream's safety read comes only every 10 minutes here, so every delta that arrives in time was
 * pushed by a signal from the partitions. Checked: the deltas equal the polling read's and rebuild
 * the query's result; a stream resumed with its last event id sees each change once; refusals are
 * typed HTTP errors before a stream starts; the bounds per principal and per node; a revoked
 * principal, a removed grant and a fenced cursor end the stream with a typed {@code end} event.
 */
class LiveStreamIT extends FeedNodeFixture {
  /** A wait for an event: well under a second here, bounded for a machine four times slower. */
  private static final Duration WAIT = Duration.ofSeconds(60);

  private final HttpClient client =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  @Override
  String databaseName() {
    return "live_stream_it";
  }

  @Override
  LiveStreams.Settings liveStreamSettings() {
    return new LiveStreams.Settings(
        6, 3, 4, Duration.ofMinutes(10), Duration.ofSeconds(10), 64, Duration.ofSeconds(1));
  }

  /**
   * Each test closes its streams; the node notices a closed connection at its next write (a
   * heartbeat at most a second later) and gives the slot back before the next test counts slots.
   */
  @org.junit.jupiter.api.AfterEach
  void streamsClosed() {
    await("every stream's slot is given back")
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(100))
        .until(() -> liveStreams.open() == 0);
  }

  private static final String OPEN =
      "{\"collection\":\"%s\",\"where\":{\"op\":\"eq\",\"field\":\"state\",\"value\":\"open\"}}";

  private String token(String id, String collection) throws Exception {
    return principal(
        id,
        List.of(),
        collection,
        "DocumentsWrite",
        "DocumentsRead",
        "QueryRead",
        "ChangesRead",
        "FieldUse:*");
  }

  private ObjectNode body(String query) throws Exception {
    ObjectNode b = json.createObjectNode();
    b.set("query", json.readTree(query));
    return b;
  }

  /** The live start's cursor, with its rows put into {@code view}. */
  private String start(String query, String token, Map<String, JsonNode> view) throws Exception {
    JsonNode start = ok(post("/v1/query/live/start", body(query), token));
    start.get("rows").forEach(r -> view.put(r.get("id").asText(), r.get("row")));
    return start.get("cursor").asText();
  }

  /** The stream's response: 200 with its events, or the error as text. */
  private Object open(String query, String cursor, String lastEventId, String token, String extra)
      throws Exception {
    StringBuilder path = new StringBuilder("/v1/query/live/stream?");
    if (query != null) {
      path.append("query=").append(URLEncoder.encode(query, StandardCharsets.UTF_8));
    }
    if (cursor != null) {
      path.append("&cursor=").append(URLEncoder.encode(cursor, StandardCharsets.UTF_8));
    }
    if (extra != null) {
      path.append('&').append(extra);
    }
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(base() + path))
            .header("Authorization", "Bearer " + token)
            .header("Accept", "text/event-stream");
    if (lastEventId != null) {
      b.header("Last-Event-ID", lastEventId);
    }
    HttpResponse<java.util.stream.Stream<String>> r =
        client.send(b.build(), HttpResponse.BodyHandlers.ofLines());
    if (r.statusCode() == 200) {
      return new SseEvents(r);
    }
    String text;
    try (var lines = r.body()) {
      text = lines.collect(Collectors.joining("\n"));
    }
    return new Refused(r.statusCode(), json.readTree(text));
  }

  private record Refused(int status, JsonNode body) {}

  private SseEvents stream(String query, String cursor, String lastEventId, String token)
      throws Exception {
    Object r = open(query, cursor, lastEventId, token, null);
    assertThat(r).as("the stream opens").isInstanceOf(SseEvents.class);
    return (SseEvents) r;
  }

  private void refused(Object r, int status, String code) {
    assertThat(r).isInstanceOf(Refused.class);
    Refused refused = (Refused) r;
    assertThat(refused.status()).as("%s", refused.body()).isEqualTo(status);
    assertThat(refused.body().get("error").asText()).isEqualTo(code);
  }

  /** The next event that is not progress, within {@link #WAIT}. */
  private SseEvents.Event nextOtherThanProgress(SseEvents s) throws Exception {
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (System.nanoTime() < deadline) {
      SseEvents.Event e = s.next(Duration.ofMillis(200));
      if (e != null && !e.type().equals("progress")) {
        return e;
      }
    }
    throw new AssertionError("no event other than progress within " + WAIT);
  }

  /** Applies a deltas event to {@code view}; returns each delta's (partition, sequence). */
  private List<String> apply(SseEvents.Event e, Map<String, JsonNode> view) throws Exception {
    assertThat(e.type()).as("%s", e).isEqualTo("deltas");
    JsonNode data = json.readTree(e.data());
    assertThat(data.get("cursor").asText()).isEqualTo(e.id());
    List<String> positions = new ArrayList<>();
    for (JsonNode d : data.get("deltas")) {
      positions.add(d.get("partition").asInt() + "/" + d.get("sequence").asLong());
      if (d.get("op").asText().equals("upsert")) {
        view.put(d.get("id").asText(), d.get("row"));
      } else {
        assertThat(d.has("row")).isFalse();
        view.remove(d.get("id").asText());
      }
    }
    return positions;
  }

  private Map<String, JsonNode> fresh(String query, String token) throws Exception {
    Map<String, JsonNode> rows = new HashMap<>();
    ok(post("/v1/query", body(query), token))
        .get("rows")
        .forEach(r -> rows.put(r.get("id").asText(), r.get("row")));
    return rows;
  }

  @Test
  void deltasArePushedAndAResumedStreamSeesEachChangeOnce() throws Exception {
    String w = token("push-writer", "push");
    for (int i = 0; i < 6; i++) {
      ok(
          put(
              "push",
              "p" + i,
              "{\"state\":\"" + (i < 3 ? "open" : "closed") + "\",\"n\":" + i + "}",
              w));
    }
    String q = OPEN.formatted("push");
    Map<String, JsonNode> view = new HashMap<>();
    String cursor = start(q, w, view);
    assertThat(view.keySet()).containsExactlyInAnyOrder("p0", "p1", "p2");
    Set<String> seen = new HashSet<>();
    String resumeAt;
    try (SseEvents s = stream(q, cursor, null, w)) {
      SseEvents.Event first = s.next(WAIT);
      assertThat(first.type()).as("nothing changed since the start").isEqualTo("progress");
      assertThat(json.readTree(first.data()).get("cursor").asText()).isEqualTo(first.id());

      ok(put("push", "p3", "{\"state\":\"open\",\"n\":3}", w)); // enters
      ok(put("push", "p0", "{\"state\":\"closed\",\"n\":0}", w)); // leaves
      ok(send("DELETE", "/v1/documents/push/p1", null, w)); // deleted
      ok(put("push", "p4", "{\"state\":\"closed\",\"n\":44}", w)); // never matches
      ok(put("push", "p2", "{\"state\":\"open\",\"n\":22}", w)); // changes inside
      Map<String, JsonNode> expected = fresh(q, w);
      assertThat(expected.keySet()).containsExactlyInAnyOrder("p2", "p3");
      while (!view.equals(expected)) {
        for (String p : apply(nextOtherThanProgress(s), view)) {
          assertThat(seen.add(p)).as("delta %s sent once", p).isTrue();
        }
      }
      assertThat(seen).hasSize(4); // p3 enters, p0 leaves, p1 deleted, p2 changes inside
      resumeAt = s.lastId();
    }
    // Changes while no stream is open reach the next one, resumed where the last event left it.
    ok(put("push", "p5", "{\"state\":\"open\",\"n\":5}", w));
    ok(put("push", "p3", "{\"state\":\"closed\",\"n\":3}", w));
    Map<String, JsonNode> expected = fresh(q, w);
    try (SseEvents s = stream(q, "not-used-when-last-event-id-is-sent", resumeAt, w)) {
      while (!view.equals(expected)) {
        for (String p : apply(nextOtherThanProgress(s), view)) {
          assertThat(seen.add(p)).as("delta %s sent once, also across streams", p).isTrue();
        }
      }
    }
    assertThat(seen).hasSize(6);
    assertThat(view.keySet()).containsExactlyInAnyOrder("p2", "p5");
  }

  @Test
  void streamsOfOneQueryShareTheirReadsAndEachSeesEveryChangeOnce() throws Exception {
    String w = token("share-writer", "share");
    for (int i = 0; i < 4; i++) {
      ok(put("share", "s" + i, "{\"state\":\"open\",\"n\":" + i + "}", w));
    }
    String q = OPEN.formatted("share");
    List<SseEvents> streams = new ArrayList<>();
    List<Map<String, JsonNode>> views = new ArrayList<>();
    List<Set<String>> seen = new ArrayList<>();
    try {
      // Three streams opened at different positions (a write between each), so they first stand
      // apart and must catch up to one another before they can share.
      for (int k = 0; k < 3; k++) {
        Map<String, JsonNode> view = new HashMap<>();
        String cursor = start(q, w, view);
        streams.add(stream(q, cursor, null, w));
        views.add(view);
        seen.add(new HashSet<>());
        ok(put("share", "s" + k, "{\"state\":\"" + (k % 2 == 0 ? "closed" : "open") + "\"}", w));
        await().atMost(WAIT).until(() -> liveStreams.open() == streams.size());
      }
      catchUp(q, w, streams, views, seen);
      int before = liveStreamReads.get();
      int writes = 12;
      for (int i = 0; i < writes; i++) {
        ok(
            put(
                "share",
                "s" + (i % 6),
                "{\"state\":\"" + (i % 3 == 0 ? "closed" : "open") + "\",\"i\":" + i + "}",
                w));
        catchUp(q, w, streams, views, seen);
      }
      int reads = liveStreamReads.get() - before;
      assertThat(reads)
          .as(
              "reads for %d writes, each followed by %d streams: one shared read per write (a"
                  + " signal may bring a second), not one per stream",
              writes, streams.size())
          .isLessThanOrEqualTo(2 * writes)
          .isPositive();
    } finally {
      for (SseEvents s : streams) {
        s.close();
      }
    }
  }

  /**
   * Reads every stream's events until its view equals the query's result now; each delta's position
   * at most once per stream.
   */
  private void catchUp(
      String q,
      String w,
      List<SseEvents> streams,
      List<Map<String, JsonNode>> views,
      List<Set<String>> seen)
      throws Exception {
    Map<String, JsonNode> expected = fresh(q, w);
    for (int k = 0; k < streams.size(); k++) {
      while (!views.get(k).equals(expected)) {
        for (String p : apply(nextOtherThanProgress(streams.get(k)), views.get(k))) {
          assertThat(seen.get(k).add(p)).as("delta %s sent once to stream %d", p, k).isTrue();
        }
      }
    }
  }

  @Test
  void refusalsAreTypedHttpErrorsBeforeTheStreamStarts() throws Exception {
    String w = token("push-refusals", "refusals");
    String reader =
        principal("push-no-changes", List.of(), "refusals", "DocumentsRead", "QueryRead");
    String q = OPEN.formatted("refusals");
    String cursor = start(q, w, new HashMap<>());
    refused(open(null, cursor, null, w, null), 400, "bad-request");
    refused(open("{\"collection\":", cursor, null, w, null), 400, "malformed-json");
    refused(open(q, null, null, w, null), 400, "bad-request");
    refused(open(q, "garbage", null, w, null), 400, "invalid-token");
    refused(open(q, cursor, null, w, "limit=0"), 400, "bad-request");
    refused(open(q, cursor, null, w, "maxBytes=x"), 400, "bad-request");
    refused(open(q, cursor, null, reader, null), 403, "forbidden");
    String other =
        "{\"collection\":\"refusals\",\"where\":{\"op\":\"eq\",\"field\":\"state\",\"value\":\"shut\"}}";
    refused(open(other, cursor, null, w, null), 400, "token-mismatch");
    Object anonymous = open(q, cursor, null, "not-a-token", null);
    refused(anonymous, 401, "unauthenticated");
  }

  @Test
  void streamsAreBoundedPerPrincipalAndPerNode() throws Exception {
    String a = token("push-a", "bounded");
    String b = token("push-b", "bounded");
    String c = token("push-c", "bounded");
    String q = OPEN.formatted("bounded");
    String cursor = start(q, a, new HashMap<>());
    List<SseEvents> held = new ArrayList<>();
    try {
      for (int i = 0; i < 3; i++) {
        held.add(stream(q, cursor, null, a));
      }
      refused(open(q, cursor, null, a, null), 429, "too-many-streams");
      String cursorB = start(q, b, new HashMap<>());
      for (int i = 0; i < 3; i++) {
        held.add(stream(q, cursorB, null, b));
      }
      String cursorC = start(q, c, new HashMap<>());
      refused(open(q, cursorC, null, c, null), 429, "too-many-streams"); // the node's 6
      // A stream its client closed gives its slot back once the node notices (its next heartbeat).
      held.remove(0).close();
      await("a's closed stream is given back")
          .atMost(WAIT)
          .pollInterval(Duration.ofMillis(200))
          .until(
              () -> {
                Object r = open(q, cursorC, null, c, null);
                if (r instanceof SseEvents s) {
                  held.add(s);
                  return true;
                }
                return false;
              });
    } finally {
      held.forEach(SseEvents::close);
    }
  }

  @Test
  void aRevokedPrincipalOrARemovedGrantEndsItsStreamWithATypedEvent() throws Exception {
    String r1 = token("push-revoked", "ends");
    String r2 = token("push-ungranted", "ends");
    String q = OPEN.formatted("ends");
    try (SseEvents revoked = stream(q, start(q, r1, new HashMap<>()), null, r1);
        SseEvents ungranted = stream(q, start(q, r2, new HashMap<>()), null, r2)) {
      ok(post("/admin/principals/push-revoked/revoke", "{}", ADMIN));
      ok(
          post(
              "/admin/principals/push-ungranted/grants/revoke",
              Map.of("collection", "ends", "grant", "ChangesRead"),
              ADMIN));
      // No write follows and the safety read is 10 minutes away: the once-a-second check of idle
      // streams ends them. (A read's own check is LiveStreamsTest's.)
      assertEnd(revoked, "unauthenticated");
      assertEnd(ungranted, "forbidden");
    }
  }

  @Test
  void aCursorFencedByAnAclChangeEndsTheStreamWithATypedEvent() throws Exception {
    policy("fenced", List.of(), "owner", "owner");
    String w = token("push-fenced", "fenced");
    ok(put("fenced", "f1", "{\"state\":\"open\",\"owner\":\"push-fenced\"}", w));
    String q = OPEN.formatted("fenced");
    try (SseEvents s = stream(q, start(q, w, new HashMap<>()), null, w)) {
      assertThat(s.next(WAIT).type()).isEqualTo("progress");
      await("an idle stream sends heartbeats (every second here)")
          .atMost(WAIT)
          .until(() -> s.heartbeats() >= 1);
      // An ACL change of an existing document fences every cursor of the collection.
      ok(put("fenced", "f1", "{\"state\":\"open\",\"owner\":\"someone-else\"}", ADMIN));
      assertEnd(s, "token-invalidated");
    }
  }

  @Test
  void aPolicyChangeEndsTheStreamAtItsNextRead() throws Exception {
    String w = token("push-policy", "policied");
    String q = OPEN.formatted("policied");
    try (SseEvents s = stream(q, start(q, w, new HashMap<>()), null, w)) {
      assertThat(s.next(WAIT).type()).isEqualTo("progress");
      // A new version of the collection's policy: cursors issued under the old one are fenced.
      policy("policied", List.of("secret"), "none", null);
      ok(put("policied", "p1", "{\"state\":\"open\"}", w));
      assertEnd(s, "token-invalidated");
    }
  }

  @Test
  void aFirstChangeLargerThanMaxBytesIsRefusedBeforeTheStreamStarts() throws Exception {
    String w = token("push-budget", "budget");
    String q = OPEN.formatted("budget");
    String cursor = start(q, w, new HashMap<>());
    ok(put("budget", "b1", "{\"state\":\"open\",\"pad\":\"" + "x".repeat(500) + "\"}", w));
    refused(open(q, cursor, null, w, "maxBytes=100"), 413, "budget-exceeded");
    try (SseEvents s = stream(q, cursor, null, w)) {
      assertThat(nextOtherThanProgress(s).type())
          .as("with the default budget the same cursor streams the change")
          .isEqualTo("deltas");
    }
  }

  /** The stream's next event other than progress is {@code end} with {@code code}: no delta. */
  private void assertEnd(SseEvents s, String code) throws Exception {
    SseEvents.Event e = nextOtherThanProgress(s);
    assertThat(e.type()).as("%s", e).isEqualTo("end");
    JsonNode body = json.readTree(e.data());
    assertThat(body.get("error").asText()).isEqualTo(code);
    assertThat(body.has("message")).isTrue();
    assertThat(s.next(WAIT)).as("the stream ends after its end event").isSameAs(SseEvents.CLOSED);
  }
}
