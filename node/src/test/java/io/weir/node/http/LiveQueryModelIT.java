package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Model-based tests of live queries and the changes feed over HTTP against PostgreSQL: seeded
 * random workloads of writes, deletes, ACL changes, policy changes and grant changes. After every
 * step, for every principal, the live query's initial result plus every delta since equals the
 * ordinary Q1 result; a fenced cursor (ACL, policy or grant change) is refused with
 * token-invalidated and the session starts again from a new baseline; every change the feed shows a
 * principal is one it may see, without fields it may not read.
 *
 * <p>{@code -Dweir.model.live-seeds=N} and {@code -Dweir.model.live-steps=M} (pass them through
 * {@code -Dweir.test.argLine="..."}) run more; the defaults keep CI short.
 */
class LiveQueryModelIT extends FeedNodeFixture {
  private static final int SEEDS = Integer.getInteger("weir.model.live-seeds", 4);
  private static final int STEPS = Integer.getInteger("weir.model.live-steps", 40);
  private static final String[] ACLS = {
    "[\"m0\"]",
    "[\"m1\"]",
    "[\"group:g0\"]",
    "[\"m0\",\"m1\"]",
    "[\"group:g1\",\"m2\"]",
    "[]",
    "[\"m0\",\"m1\",\"m2\"]"
  };

  @Override
  String databaseName() {
    return "live_query_model_it";
  }

  /** One principal's view: its live query, its maintained result and its changes cursor. */
  private final class Session {
    final String id;
    final String token;
    final String query;
    final boolean readsS;
    Map<String, JsonNode> rows = new HashMap<>();
    String liveCursor;
    String feedCursor;
    int restarts;
    int deltas;

    Session(String id, String token, String query, boolean readsS) {
      this.id = id;
      this.token = token;
      this.query = query;
      this.readsS = readsS;
    }

    void start() throws Exception {
      JsonNode r = ok(post("/v1/query/live/start", queryBody(query, null), token));
      rows = new HashMap<>();
      r.get("rows").forEach(x -> rows.put(x.get("id").asText(), x.get("row")));
      liveCursor = r.get("cursor").asText();
      restarts++;
    }

    /** Reads deltas until caught up; a fenced cursor restarts the session. */
    void catchUp() throws Exception {
      while (true) {
        ObjectNode read = queryBody(query, null);
        read.put("cursor", liveCursor);
        read.put("limit", 7);
        HttpResponse<String> r = post("/v1/query/live/read", read, token);
        if (r.statusCode() == 409) {
          assertThat(json.readTree(r.body()).get("error").asText()).isEqualTo("token-invalidated");
          start();
          continue;
        }
        JsonNode page = ok(r);
        for (JsonNode d : page.get("deltas")) {
          deltas++;
          if (d.get("op").asText().equals("upsert")) {
            rows.put(d.get("id").asText(), d.get("row"));
          } else {
            rows.remove(d.get("id").asText());
          }
        }
        liveCursor = page.get("cursor").asText();
        if (!page.get("hasMore").asBoolean()) {
          return;
        }
      }
    }

    Map<String, JsonNode> expected() throws Exception {
      Map<String, JsonNode> out = new HashMap<>();
      ok(post("/v1/query", queryBody(query, null), token))
          .get("rows")
          .forEach(x -> out.put(x.get("id").asText(), x.get("row")));
      return out;
    }

    /**
     * Reads the changes feed until caught up and checks each change is one this principal may see.
     */
    void checkFeed(String collection) throws Exception {
      while (true) {
        HttpResponse<String> r =
            feedCursor == null
                ? changesRaw(collection, "beginning", false, token, 11, null)
                : changesRaw(collection, feedCursor, true, token, 11, null);
        if (r.statusCode() == 409) {
          feedCursor = null;
          continue;
        }
        JsonNode page = ok(r);
        for (JsonNode c : page.get("changes")) {
          // The row's current ACL (a tombstone keeps its row's) must admit the reader, and a before
          // image is shown only with the after image (or a deletion).
          String now = aclNow.get(collection).get(c.get("id").asText());
          assertThat(visible(json.readTree(now)))
              .as("%s sees a change of a row it may not see now", id)
              .isTrue();
          if (!c.get("before").isNull() && !c.get("deleted").asBoolean()) {
            assertThat(c.get("after").isNull())
                .as("%s sees a before image without its after image", id)
                .isFalse();
          }
          for (String image : List.of("before", "after")) {
            JsonNode body = c.get(image);
            if (!body.isNull()) {
              assertThat(visible(body.get("acl"))).as("%s sees an image it may not", id).isTrue();
              assertThat(body.has("s"))
                  .as("%s sees the sensitive field", id)
                  .isEqualTo(readsS && body.has("s"));
            }
          }
          assertThat(c.get("before").isNull() && c.get("after").isNull())
              .as("a change without images")
              .isFalse();
        }
        feedCursor = page.get("cursor").asText();
        if (!page.get("hasMore").asBoolean()) {
          return;
        }
      }
    }

    boolean visible(JsonNode acl) {
      if (acl == null || !acl.isArray()) {
        return false;
      }
      for (JsonNode e : acl) {
        String v = e.asText();
        if (v.equals(id)
            || (v.equals("group:g0") && id.equals("m0"))
            || (v.equals("group:g1") && id.equals("m1"))) {
          return true;
        }
      }
      return false;
    }
  }

  @Test
  void initialResultsPlusLiveDeltasEqualTheOrdinaryQueryAtEveryStep() throws Exception {
    int checks = 0;
    int restarts = 0;
    int deltas = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
      Random random = new Random(seed);
      String c = "model" + seed;
      policy(c, List.of("s"), "acl", "acl");
      List<Session> sessions = sessionsFor(c, seed);
      for (Session s : sessions) {
        s.start();
      }
      for (int step = 0; step < STEPS; step++) {
        step(random, c, seed);
        for (Session s : sessions) {
          s.catchUp();
          assertThat(s.rows)
              .as("seed %d step %d principal %s", seed, step, s.id)
              .isEqualTo(s.expected());
          checks++;
          if (step % 5 == 4) {
            s.checkFeed(c);
          }
        }
      }
      for (Session s : sessions) {
        restarts += s.restarts;
        deltas += s.deltas;
      }
    }
    System.out.printf(
        "live-query model: seeds=%d steps=%d checks=%d deltas=%d restarts=%d divergences=0%n",
        SEEDS, STEPS, checks, deltas, restarts);
  }

  private int version;

  /**
   * The principals m0 (group g0, may use s in predicates), m1 (group g1, may read s), m2; grants on
   * {@code c}.
   */
  private List<Session> sessionsFor(String c, int seed) throws Exception {
    List<Session> out = new ArrayList<>();
    String[] groups = {"g0", "g1", null};
    String[] queries = {
      "{\"collection\":\""
          + c
          + "\",\"where\":{\"op\":\"or\",\"args\":[{\"op\":\"eq\",\"field\":\"k\",\"value\":1},"
          + "{\"op\":\"ge\",\"field\":\"s\",\"value\":5}]},\"select\":[\"k\",\"s\",\"acl\"]}",
      "{\"collection\":\"" + c + "\",\"where\":{\"op\":\"in\",\"field\":\"k\",\"values\":[0,2]}}",
      "{\"collection\":\""
          + c
          + "\",\"where\":{\"op\":\"not\",\"arg\":{\"op\":\"eq\",\"field\":\"k\",\"value\":3}}}"
    };
    for (int p = 0; p < 3; p++) {
      String id = "m" + p;
      String token =
          tokens.computeIfAbsent(
              id,
              k -> {
                try {
                  return principal(
                      k,
                      groups[Integer.parseInt(k.substring(1))] == null
                          ? List.of()
                          : List.of(groups[Integer.parseInt(k.substring(1))]),
                      c);
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              });
      for (String g : List.of("DocumentsRead", "ChangesRead", "QueryRead", "FieldUse:*")) {
        grant(id, c, g);
      }
      if (p == 0) {
        grant(id, c, "FieldUse:s");
      }
      if (p == 1) {
        grant(id, c, "FieldRead:s");
      }
      out.add(new Session(id, token, queries[p], p == 1));
    }
    return out;
  }

  private final Map<String, String> tokens = new HashMap<>();

  /** Per collection, each document's ACL as last written (a deletion keeps it). */
  private final Map<String, Map<String, String>> aclNow = new HashMap<>();

  /** One random workload step on collection {@code c} (written by the administrator). */
  private void step(Random random, String c, int seed) throws Exception {
    int op = random.nextInt(100);
    String id = "d" + random.nextInt(12);
    Map<String, String> acls = aclNow.computeIfAbsent(c, k -> new HashMap<>());
    if (op < 60) {
      // Upsert keeping the current ACL when the document exists (no fence), or a new one.
      JsonNode current = currentBody(c, id);
      String acl =
          current != null && current.has("acl")
              ? current.get("acl").toString()
              : ACLS[random.nextInt(ACLS.length)];
      acls.put(id, acl);
      ok(
          put(
              c,
              id,
              "{\"acl\":"
                  + acl
                  + ",\"k\":"
                  + random.nextInt(4)
                  + ",\"s\":"
                  + random.nextInt(10)
                  + "}",
              ADMIN));
    } else if (op < 75) {
      int expected = currentBody(c, id) == null ? 404 : 200;
      assertThat(send("DELETE", "/v1/documents/" + c + "/" + id, null, ADMIN).statusCode())
          .isEqualTo(expected);
    } else if (op < 90) {
      // An ACL change (of an existing document: fences every cursor of the collection).
      String acl = ACLS[random.nextInt(ACLS.length)];
      acls.put(id, acl);
      ok(
          put(
              c,
              id,
              "{\"acl\":"
                  + acl
                  + ",\"k\":"
                  + random.nextInt(4)
                  + ",\"s\":"
                  + random.nextInt(10)
                  + "}",
              ADMIN));
    } else if (op < 95) {
      policy(c, (version++ % 2 == 0) ? List.of("s", "t") : List.of("s"), "acl", "acl");
    } else {
      String who = "m" + random.nextInt(3);
      grant(
          who,
          c,
          (random.nextBoolean()
              ? "QueryRead"
              : "ChangesRead")); // grants again: the epoch still moves
    }
  }

  private JsonNode currentBody(String c, String id) throws Exception {
    HttpResponse<String> r = send("GET", "/v1/documents/" + c + "/" + id, null, ADMIN);
    return r.statusCode() == 404 ? null : ok(r);
  }

  @Test
  void aLiveStartRacingWritesMissesNothingAndReplaysAreIdempotent() throws Exception {
    String c = "race";
    String w =
        principal(
            "racer",
            List.of(),
            c,
            "DocumentsWrite",
            "DocumentsRead",
            "QueryRead",
            "ChangesRead",
            "FieldUse:*");
    String q = "{\"collection\":\"race\",\"where\":{\"op\":\"lt\",\"field\":\"v\",\"value\":1000}}";
    AtomicBoolean done = new AtomicBoolean();
    java.util.concurrent.atomic.AtomicInteger written =
        new java.util.concurrent.atomic.AtomicInteger();
    AtomicReference<Throwable> failed = new AtomicReference<>();
    Thread writer =
        new Thread(
            () -> {
              try {
                for (int i = 0; i < 300; i++) {
                  ok(put(c, "r" + (i % 40), "{\"v\":" + (i % 1100 < 1000 ? i : 2000) + "}", w));
                  written.incrementAndGet();
                }
              } catch (Throwable t) {
                failed.set(t);
              } finally {
                done.set(true);
              }
            });
    writer.start();
    List<Map<String, JsonNode>> views = new ArrayList<>();
    List<String> cursors = new ArrayList<>();
    while (!done.get() || views.isEmpty()) {
      JsonNode r = ok(post("/v1/query/live/start", queryBody(q, null), w));
      Map<String, JsonNode> view = new HashMap<>();
      r.get("rows").forEach(x -> view.put(x.get("id").asText(), x.get("row")));
      views.add(view);
      cursors.add(r.get("cursor").asText());
      // The next start after a few more writes (or the last ones).
      int seen = written.get();
      org.awaitility.Awaitility.await()
          .atMost(java.time.Duration.ofSeconds(120))
          .pollInterval(java.time.Duration.ofMillis(5))
          .until(() -> done.get() || written.get() >= seen + 3);
    }
    writer.join();
    assertThat(failed.get()).isNull();
    Map<String, JsonNode> expected = new HashMap<>();
    ok(post("/v1/query", queryBody(q, null), w))
        .get("rows")
        .forEach(x -> expected.put(x.get("id").asText(), x.get("row")));
    int replayed = 0;
    for (int i = 0; i < views.size(); i++) {
      Map<String, JsonNode> view = views.get(i);
      String cursor = cursors.get(i);
      boolean more = true;
      while (more) {
        ObjectNode read = queryBody(q, null);
        read.put("cursor", cursor);
        read.put("limit", 50);
        JsonNode page = ok(post("/v1/query/live/read", read, w));
        // Saving the cursor only after applying: a reconnect reads the same page again; applying
        // it twice (by id and revision) changes nothing.
        JsonNode again = ok(post("/v1/query/live/read", read, w));
        assertThat(again.get("deltas")).isEqualTo(page.get("deltas"));
        for (int twice = 0; twice < 2; twice++) {
          for (JsonNode d : page.get("deltas")) {
            if (d.get("op").asText().equals("upsert")) {
              view.put(d.get("id").asText(), d.get("row"));
            } else {
              view.remove(d.get("id").asText());
            }
          }
        }
        replayed++;
        cursor = page.get("cursor").asText();
        more = page.get("hasMore").asBoolean();
      }
      assertThat(view).as("session %d of %d", i, views.size()).isEqualTo(expected);
    }
    System.out.printf(
        "live start race: sessions=%d pages-replayed=%d divergences=0%n", views.size(), replayed);
  }
}
