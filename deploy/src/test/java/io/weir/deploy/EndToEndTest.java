package io.weir.deploy;

import static org.awaitility.Awaitility.await;

import io.weir.persistence.testing.TestPostgres;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;

/**
 * Base of the end-to-end tests: the node processes a test starts and its database, both cleaned up
 * after each test whatever its outcome (nodes first, so nothing holds the database).
 */
abstract class EndToEndTest {
  protected final List<NodeProcess> nodes = new ArrayList<>();
  protected TestPostgres.TestDatabase db;

  @AfterEach
  void cleanUpNodesAndDatabase() {
    nodes.forEach(NodeProcess::close);
    if (db != null) {
      db.close();
    }
  }

  /**
   * Starts a node named {@code prefix-<n>} on the test database with {@code config}; closed after
   * the test.
   */
  protected NodeProcess startNode(String prefix, Path config) {
    NodeProcess n =
        NodeProcess.start(
            new NodeProcess.Spec(prefix + "-" + nodes.size())
                .database(db)
                .args("--config", config.toString()));
    nodes.add(n);
    return n;
  }

  /**
   * How long a wait that includes a node's start-up (a JVM, the cluster, recovery) may take: a
   * start-up takes 5-20 s on a quiet machine, and the suite must pass on one four times slower.
   */
  protected static final Duration START_UP = Duration.ofSeconds(180);

  /**
   * Waits (at most {@link #START_UP}) until {@code pipeline} reports state running on {@code node}.
   */
  protected static void awaitRunning(NodeProcess node, String pipeline) {
    await("pipeline " + pipeline + " runs on " + node.name())
        .atMost(START_UP)
        .pollInterval(Duration.ofMillis(200))
        .until(
            () ->
                node.pipeline(pipeline)
                    .map(p -> p.get("state").asText().equals("running"))
                    .orElse(false));
  }

  /**
   * The crash loop: {@code kills} times, wait until {@code pipeline} runs, sleep a random 100 ms to
   * {@code 100 + maxDelayMillis} (recorded in {@code delays}), SIGKILL the node and start a new one
   * with the same configuration. Returns the last node started.
   */
  protected NodeProcess killAndRestart(
      NodeProcess node,
      int kills,
      Random random,
      int maxDelayMillis,
      String prefix,
      Path config,
      String pipeline,
      List<Long> delays)
      throws InterruptedException {
    for (int k = 0; k < kills; k++) {
      awaitRunning(node, pipeline);
      long delay = 100 + random.nextInt(maxDelayMillis);
      delays.add(delay);
      Thread.sleep(delay);
      node.kill();
      node = startNode(prefix, config);
    }
    return node;
  }

  /**
   * Waits (at most {@link #START_UP}) until {@code node} is ready with all {@code partitions}
   * running.
   */
  protected static void awaitReady(NodeProcess node, int partitions) {
    await(node.name() + " is ready with its partitions")
        .atMost(START_UP)
        .pollInterval(Duration.ofMillis(200))
        .until(
            () ->
                node.ready()
                    && node.partitions()
                        .map(p -> p.get("running").asInt() == partitions)
                        .orElse(false));
  }

  /**
   * The JSON of a 2xx answer to a POST; empty when the node does not answer or answers 503 (it is
   * down or recovering); any other status fails the test.
   */
  protected static java.util.Optional<com.fasterxml.jackson.databind.JsonNode> answer(
      NodeProcess node, String path, String body) throws Exception {
    java.util.Optional<java.net.http.HttpResponse<String>> r = node.post(path, body);
    if (r.isEmpty() || r.get().statusCode() == 503) {
      return java.util.Optional.empty();
    }
    org.assertj.core.api.Assertions.assertThat(r.get().statusCode())
        .as("%s: %s", path, r.get().body())
        .isBetween(200, 299);
    return java.util.Optional.of(
        new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.get().body()));
  }

  /**
   * An idempotent request as the administrator (a read, a PUT of the same state, a configure with
   * the same definition, a commit of the same batch, a grant, a revoke), retried for up to {@link
   * NodeProcess#ANSWER_DEADLINE} while the node, which {@code node} supplies anew each time (a
   * killed one is replaced), does not answer or answers 502/503/504; the JSON of its 2xx answer,
   * any other status fails the test. A request whose repetition would double an effect goes through
   * {@link #callOnce}.
   */
  protected static com.fasterxml.jackson.databind.JsonNode call(
      java.util.function.Supplier<NodeProcess> node, String method, String path, String body)
      throws Exception {
    java.net.http.HttpResponse<String> r =
        NodeProcess.sendIdempotent(
            node,
            method,
            path,
            body,
            Map.of("Content-Type", "application/json"),
            NodeProcess.ANSWER_DEADLINE);
    org.assertj.core.api.Assertions.assertThat(r.statusCode())
        .as("%s: %s", path, r.body())
        .isBetween(200, 299);
    return new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.body());
  }

  /**
   * A request as the administrator whose repetition would double its effect (creating a principal,
   * rotating a token or a key): sent once ({@link NodeProcess#sendOnce}: repeated only while the
   * node refuses the connection), and again only when it answers 503 (unavailable, as {@link #call}
   * always did), within {@link NodeProcess#ANSWER_DEADLINE}; the JSON of its 2xx answer, any other
   * status fails the test.
   */
  protected static com.fasterxml.jackson.databind.JsonNode callOnce(
      NodeProcess node, String method, String path, String body) throws Exception {
    long deadline = System.nanoTime() + NodeProcess.ANSWER_DEADLINE.toNanos();
    java.net.http.HttpResponse<String> r;
    while ((r = node.sendOnce(method, path, body, Map.of("Content-Type", "application/json")))
                .statusCode()
            == 503
        && System.nanoTime() < deadline) {
      Thread.sleep(250);
    }
    org.assertj.core.api.Assertions.assertThat(r.statusCode())
        .as("%s: %s", path, r.body())
        .isBetween(200, 299);
    return new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.body());
  }

  /**
   * For a loop that retries until it makes progress: fails when its last progress, at {@code
   * sinceNanos} ({@link System#nanoTime()}), is more than {@code limit} ago.
   */
  protected static void progressWithin(long sinceNanos, Duration limit, String what) {
    if (System.nanoTime() - sinceNanos > limit.toNanos()) {
      throw new AssertionError(what + ": no progress within " + limit);
    }
  }

  /**
   * The body of a changes-feed read of {@code collection}: from the beginning when {@code cursor}
   * is null.
   */
  protected static String changesRequest(String collection, String cursor, int limit) {
    return cursor == null
        ? "{\"collection\":\"" + collection + "\",\"start\":\"beginning\",\"limit\":" + limit + "}"
        : "{\"collection\":\""
            + collection
            + "\",\"cursor\":\""
            + cursor
            + "\",\"limit\":"
            + limit
            + "}";
  }

  /**
   * POST /v1/changes/read as the principal holding {@code token}; empty when the node does not
   * answer.
   */
  protected static java.util.Optional<java.net.http.HttpResponse<String>> readChanges(
      NodeProcess node, String token, String request) {
    return node.send(
        "POST",
        "/v1/changes/read",
        request,
        Map.of("Authorization", "Bearer " + token, "Content-Type", "application/json"));
  }

  /**
   * How often the mirror in {@code schema} applied each source xid (its applied-transactions log).
   */
  protected Map<Long, Integer> appliedCounts(String schema) throws SQLException {
    Map<Long, Integer> out = new HashMap<>();
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT xid, count(*) FROM " + schema + ".weir_mirror_applied GROUP BY xid")) {
      while (rs.next()) {
        out.put(rs.getLong(1), rs.getInt(2));
      }
    }
    return out;
  }

  /** Rows of {@code public.src} and {@code <schema>.src} that are not in the other. */
  protected long mirrorDifferences(String schema) throws SQLException {
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT (SELECT count(*) FROM (SELECT * FROM public.src EXCEPT SELECT * FROM "
                        + schema
                        + ".src) a)"
                        + " + (SELECT count(*) FROM (SELECT * FROM "
                        + schema
                        + ".src EXCEPT SELECT * FROM public.src) b)")) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
