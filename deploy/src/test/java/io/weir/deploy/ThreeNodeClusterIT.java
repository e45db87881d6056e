package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPorts;
import io.weir.persistence.testing.TestPostgres;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Three real node processes on loopback form one cluster on one PostgreSQL; the node consuming the
 * CDC pipeline's slot is frozen (SIGSTOP, cut off like the minority of a network partition) and the
 * split-brain resolver (keep-majority) on the two others downs it while they stay ready. Its
 * walsender stays connected, holding the slot; the pipeline's new owner ends it (ADR 0037) and
 * streams well before {@code wal_sender_timeout}. Running again, the downed node exits (status 4).
 */
class ThreeNodeClusterIT extends EndToEndTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final org.slf4j.Logger LOG =
      org.slf4j.LoggerFactory.getLogger(ThreeNodeClusterIT.class);

  @Test
  void majorityRemovesAKilledNodeAndStaysReady() throws Exception {
    db = TestPostgres.server().freshDatabase("three_nodes");
    try (java.sql.Connection c = db.connect();
        java.sql.Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.src (id bigint PRIMARY KEY, v bigint NOT NULL)");
      s.execute("CREATE PUBLICATION three_pub FOR TABLE public.src");
    }
    java.nio.file.Path config = java.nio.file.Files.createTempFile("weir-three-nodes", ".conf");
    config.toFile().deleteOnExit();
    java.nio.file.Files.writeString(
        config,
        String.join(
            "\n",
            "weir.pipelines.three {",
            "  slot = three_slot_" + db.name().substring(db.name().length() - 10),
            "  publications = [three_pub]",
            "  min-backoff = 200ms",
            "  max-backoff = 2s",
            "  sink { type = partitions, collections { \"public.src\" = src } }",
            "}"));
    int seed1 = NodeProcess.freePort();
    int seed2 = NodeProcess.freePort();
    String seeds = "127.0.0.1:" + seed1 + ",127.0.0.1:" + seed2;
    List<String> gateways = new java.util.ArrayList<>();
    for (int i = 1; i <= 3; i++) {
      int gatewayPort = NodeProcess.freePort();
      gateways.add("127.0.0.1:" + gatewayPort);
      NodeProcess.Spec spec =
          new NodeProcess.Spec("three-node-" + i)
              .database(db)
              .env("WEIR_SEED_NODES", seeds)
              // Pekko's default waits 20 s for stable membership before downing; 3 s keeps the test
              // short.
              .prop("pekko.cluster.split-brain-resolver.stable-after", "3s")
              // Members Up only once all three joined: partitions are placed across them from the
              // start
              // rather than all on the first and then moved one by one (docs/deploy.md).
              .prop("pekko.cluster.min-nr-of-members", "3")
              // No scheduled principals reload within the test: changes must reach the other nodes
              // by their announcement (and a refused grant by the second look before a 403).
              .prop("weir.principals.refresh", "1h")
              // No safety read of pushed live queries within the test: their deltas must come by
              // the partitions' signals, from whichever node hosts them.
              .prop("weir.feeds.live-streams.recheck", "10m")
              // Protocol clients reach the nodes here, never through the cluster port.
              .env("WEIR_GATEWAY_ENABLED", "on")
              .env("WEIR_GATEWAY_PORT", Integer.toString(gatewayPort))
              .args("--config", config.toString());
      if (i == 1) {
        spec.clusterPort(seed1);
      } else if (i == 2) {
        spec.clusterPort(seed2);
      }
      nodes.add(NodeProcess.start(spec));
    }
    long t0 = System.nanoTime();
    awaitOrDump(
        START_UP,
        "every node should see 3 Up members and be ready",
        () -> {
          // Asked each time: a node that lost a bind race for its cluster port has a new one.
          Set<String> all = new HashSet<>();
          nodes.forEach(n -> all.add(n.clusterAddress()));
          return nodes.stream()
              .allMatch(
                  n -> {
                    Map<String, String> members = n.memberStatuses();
                    return members.keySet().equals(all)
                        && members.values().stream().allMatch("up"::equals)
                        && n.ready();
                  });
        });
    LOG.info(
        String.format(
            "cluster-formed: 3 members Up and ready after %.1f s", (System.nanoTime() - t0) / 1e9));

    long p0 = System.nanoTime();
    awaitOrDump(
        START_UP,
        "all 64 partitions should run, spread over the 3 nodes",
        () ->
            nodes
                .get(0)
                .partitions()
                .map(p -> p.get("running").asInt() == 64 && p.get("byNode").size() == 3)
                .orElse(false));
    LOG.info(
        String.format(
            "partitions-started: 64 on 3 nodes %.1f s after the cluster formed (%s)",
            (System.nanoTime() - p0) / 1e9, nodes.get(0).partitionsNow().get("byNode")));

    pushedStreamsHearEveryNodesPartitions();

    // Documents near the size limit, written through one node and read through another: most of
    // their partitions run on other nodes, so the messages cross the cluster (Pekko's default frame
    // of 256 KiB would drop them).
    String big = "{\"pad\":\"" + "x".repeat(900_000) + "\"}";
    for (int i = 0; i < 12; i++) {
      // With an Idempotency-Key, so a retry after a 503 (the partition did not answer in time on a
      // busy machine) cannot write a second revision: the document is at revision 1 after it.
      var put =
          nodes
              .get(0)
              .sendIdempotent(
                  "PUT", "/v1/documents/big/doc-" + i, big, Map.of("Idempotency-Key", "big-" + i));
      assertThat(put.statusCode())
          .as("PUT of a 900 KB document %d: %s", i, put.body().length() > 300 ? "" : put.body())
          .isEqualTo(200);
      assertThat(JSON.readTree(put.body()).get("revision").asLong())
          .as("one revision, however often the PUT was sent")
          .isEqualTo(1);
      var get = nodes.get(1).sendIdempotent("GET", "/v1/documents/big/doc-" + i, null, Map.of());
      assertThat(get.statusCode()).isEqualTo(200);
      assertThat(get.body()).as("the document read through another node").isEqualTo(big);
    }
    LOG.info(
        "large-documents: 12 documents of 900 KB written through one node and read through another");

    principalsReachEveryNode();
    protocolClientWorksWithTheSameAuthorisation(String.join(",", gateways));
    GatewayBypass.clientsCannotBypassTheGateway(nodes, seeds, gateways);

    Set<String> clusterIds = new HashSet<>();
    nodes.forEach(n -> clusterIds.add(n.clusterNow().get("clusterId").asText()));
    assertThat(clusterIds)
        .as("every node should report the one cluster identity kept in PostgreSQL")
        .hasSize(1);

    // The slot's consumer freezes (SIGSTOP): to the others it is cut off, the minority of a
    // partition; to PostgreSQL its walsender is still connected and holds the slot.
    insertAndAwait(nodes, 1);
    String owner =
        await("one node consumes the slot")
            .atMost(START_UP)
            .until(
                () ->
                    nodes
                        .get(0)
                        .cluster()
                        .map(c -> c.get("slotOwner"))
                        .filter(o -> !o.isNull())
                        .map(o -> o.asText())
                        .orElse(null),
                java.util.Objects::nonNull);
    NodeProcess victim =
        nodes.stream()
            .filter(
                n ->
                    owner.endsWith(
                        n.clusterAddress().substring(n.clusterAddress().lastIndexOf(':'))))
            .findFirst()
            .orElseThrow();
    List<NodeProcess> survivors = nodes.stream().filter(n -> n != victim).toList();
    victim.signal("STOP");
    long frozenAt = System.nanoTime();

    awaitOrDump(
        Duration.ofSeconds(150),
        "the majority should down the frozen node and stay ready",
        () ->
            survivors.stream()
                .allMatch(
                    n -> {
                      Map<String, String> members = n.memberStatuses();
                      return members.size() == 2
                          && !members.containsKey(victim.clusterAddress())
                          && members.values().stream().allMatch("up"::equals)
                          && n.ready();
                    }));
    LOG.info(
        String.format(
            "frozen-node-removed: after %.1f s (stable-after 3 s)",
            (System.nanoTime() - frozenAt) / 1e9));
    awaitOrDump(
        Duration.ofSeconds(150),
        "the frozen node's partitions should run again on the survivors",
        () ->
            survivors
                .get(0)
                .partitions()
                .map(
                    p ->
                        p.get("running").asInt() == 64
                            && p.get("byNode").size() == 2
                            && !p.get("byNode").has(victim.clusterAddress()))
                .orElse(false));
    LOG.info(
        String.format(
            "partitions-restarted: all 64 on the 2 survivors %.1f s after the freeze",
            (System.nanoTime() - frozenAt) / 1e9));
    // A row committed now reaches the partitions through the pipeline on a survivor: its new
    // owner took the slot over from the frozen node's walsender (PostgreSQL's default
    // wal_sender_timeout would hold it 60 s).
    insertAndAwait(survivors, 2);
    double streaming = (System.nanoTime() - frozenAt) / 1e9;
    assertThat(
            survivors.stream()
                .anyMatch(n -> n.log().contains("of a cluster member that was downed; ended it")))
        .as("the new owner ended the downed member's walsender")
        .isTrue();
    LOG.info(
        String.format(
            "slot-taken-over: the pipeline streams on a survivor %.1f s after the freeze",
            streaming));
    for (NodeProcess n : survivors) {
      assertThat(n.clusterNow().get("unreachable"))
          .as("%s should see no unreachable member", n.name())
          .isEmpty();
      assertThat(n.isAlive()).as("%s should still run", n.name()).isTrue();
    }
    // Running again, the downed node learns it was removed and stops: it serves nothing more.
    victim.signal("CONT");
    long resumed = System.nanoTime();
    assertThat(victim.waitForExit(Duration.ofSeconds(120)))
        .as("a downed node exits with status 4")
        .isEqualTo(4);
    LOG.info(
        String.format(
            "downed-node-exit: status 4, %.1f s after it ran again",
            (System.nanoTime() - resumed) / 1e9));
    var put =
        survivors.get(0).sendOnce("PUT", "/v1/documents/big/after-down", "{\"n\":1}", Map.of());
    assertThat(put.statusCode()).as("the majority keeps serving writes").isEqualTo(200);
  }

  /**
   * A principal created, granted and revoked through node 1 is known, granted and refused by nodes
   * 2 and 3 without a scheduled reload (weir.principals.refresh is 1 h here).
   */
  /**
   * A pushed live query on the first node hears of writes to partitions on every node: documents
   * are written one at a time through the second node, each awaited before the next, and with the
   * streams' safety read off (recheck 10 minutes) only the signal of the partition's host, over the
   * cluster topic, can bring the delta. Sixteen documents land on partitions of the other two nodes
   * all but certainly (the chance that all sixteen are on the first is 3^-16).
   */
  private void pushedStreamsHearEveryNodesPartitions() throws Exception {
    String query =
        "{\"collection\":\"pushed\",\"where\":{\"op\":\"ge\",\"field\":\"i\",\"value\":0}}";
    var start =
        nodes
            .get(0)
            .sendIdempotent(
                "POST",
                "/v1/query/live/start",
                "{\"query\":" + query + "}",
                Map.of("Content-Type", "application/json"));
    assertThat(start.statusCode()).as("live start: %s", start.body()).isEqualTo(200);
    String cursor = JSON.readTree(start.body()).get("cursor").asText();
    java.util.concurrent.BlockingQueue<String> deltas =
        new java.util.concurrent.LinkedBlockingQueue<>();
    java.net.http.HttpClient client = java.net.http.HttpClient.newHttpClient();
    var response =
        client.send(
            java.net.http.HttpRequest.newBuilder(
                    java.net.URI.create(
                        "http://127.0.0.1:"
                            + nodes.get(0).httpPort()
                            + "/v1/query/live/stream?query="
                            + java.net.URLEncoder.encode(
                                query, java.nio.charset.StandardCharsets.UTF_8)))
                .header("Authorization", "Bearer " + NodeProcess.ADMIN_TOKEN)
                .header("Last-Event-ID", cursor)
                .build(),
            java.net.http.HttpResponse.BodyHandlers.ofLines());
    assertThat(response.statusCode()).as("the stream opens").isEqualTo(200);
    Thread reader =
        new Thread(
            () -> {
              try (var lines = response.body()) {
                lines
                    .filter(l -> l.startsWith("data:") && l.contains("\"deltas\""))
                    .forEach(
                        l -> {
                          try {
                            for (var d : JSON.readTree(l.substring(5)).get("deltas")) {
                              deltas.add(d.get("id").asText());
                            }
                          } catch (java.io.IOException e) {
                            throw new java.io.UncheckedIOException(e);
                          }
                        });
              } catch (RuntimeException closed) {
                // the stream is closed at the end of this check
              }
            },
            "three-node-pushed");
    reader.setDaemon(true);
    reader.start();
    try {
      long worst = 0;
      for (int i = 0; i < 16; i++) {
        String id = "p-" + i;
        var put =
            nodes
                .get(1)
                .sendIdempotent(
                    "PUT",
                    "/v1/documents/pushed/" + id,
                    "{\"i\":" + i + "}",
                    Map.of("Idempotency-Key", "pushed-" + i));
        assertThat(put.statusCode()).as("PUT %s: %s", id, put.body()).isEqualTo(200);
        long t0 = System.nanoTime();
        String seen;
        do {
          seen = deltas.poll(90, java.util.concurrent.TimeUnit.SECONDS);
          assertThat(seen)
              .as("the pushed stream on the first node hears of %s within 90 s", id)
              .isNotNull();
        } while (!seen.equals(id));
        worst = Math.max(worst, System.nanoTime() - t0);
      }
      LOG.info(
          String.format(
              "pushed-across-nodes: 16 writes through the second node, each delta on the first"
                  + " node's stream within %.1f s (safety read off)",
              worst / 1e9));
    } finally {
      response.body().close();
    }
  }

  private void principalsReachEveryNode() throws Exception {
    NodeProcess admin = nodes.get(0);
    var created =
        admin.sendOnce(
            "POST",
            "/admin/principals",
            "{\"id\":\"reader\"}",
            Map.of("Content-Type", "application/json"));
    assertThat(created.statusCode()).isEqualTo(201);
    String token = new ObjectMapper().readTree(created.body()).get("token").asText();
    Map<String, String> asReader = Map.of("Authorization", "Bearer " + token);
    for (NodeProcess n : nodes.subList(1, 3)) {
      assertThat(n.sendIdempotent("GET", "/v1/documents/big/doc-0", null, asReader).statusCode())
          .as(
              "%s knows the new principal (an unknown token reloads before 401) but it holds no grant",
              n.name())
          .isEqualTo(403);
    }
    // Granting what is granted changes nothing: repeated while the node does not answer.
    var granted =
        admin.sendIdempotent(
            "POST",
            "/admin/principals/reader/grants",
            "{\"collection\":\"big\",\"grant\":\"DocumentsRead\"}",
            Map.of("Content-Type", "application/json"));
    assertThat(granted.statusCode()).isEqualTo(200);
    for (NodeProcess n : nodes.subList(1, 3)) {
      assertThat(n.sendIdempotent("GET", "/v1/documents/big/doc-0", null, asReader).statusCode())
          .as("%s honours a grant given through another node at once", n.name())
          .isEqualTo(200);
    }
    assertThat(
            admin
                .sendIdempotent("POST", "/admin/principals/reader/revoke", "", Map.of())
                .statusCode())
        .isEqualTo(200);
    long revokedAt = System.nanoTime();
    for (NodeProcess n : nodes.subList(1, 3)) {
      await(n.name() + " refuses the revoked principal")
          .atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(50))
          .until(
              () ->
                  n.send("GET", "/v1/documents/big/doc-0", null, asReader)
                      .map(r -> r.statusCode() == 401)
                      .orElse(false));
    }
    LOG.info(
        String.format(
            "principals-across-nodes: grant honoured at once on other nodes; revocation refused"
                + " everywhere %.2f s after it committed (scheduled reload 1 h)",
            (System.nanoTime() - revokedAt) / 1e9));
  }

  /**
   * The example application (deploy/example-client, weir-protocol only) uses the nodes' gateway
   * ports without joining the cluster: documents written, read and deleted, a stale compare-and-set
   * refused, the changes feed followed to its end. The cluster keeps its 3 server members. Run
   * again with the token of a principal without grants, its first write is refused 403, as over
   * HTTP.
   */
  private void protocolClientWorksWithTheSameAuthorisation(String gateways) throws Exception {
    NodeProcess admin = nodes.get(0);
    var json = new ObjectMapper();
    Map<String, String> jsonType = Map.of("Content-Type", "application/json");
    String appToken =
        json.readTree(
                admin
                    .sendOnce("POST", "/admin/principals", "{\"id\":\"example-app\"}", jsonType)
                    .body())
            .get("token")
            .asText();
    for (String grant : List.of("DocumentsRead", "DocumentsWrite", "ChangesRead")) {
      assertThat(
              admin
                  .sendIdempotent(
                      "POST",
                      "/admin/principals/example-app/grants",
                      "{\"collection\":\"example\",\"grant\":\"" + grant + "\"}",
                      jsonType)
                  .statusCode())
          .isEqualTo(200);
    }
    String strangerToken =
        json.readTree(
                admin
                    .sendOnce("POST", "/admin/principals", "{\"id\":\"stranger\"}", jsonType)
                    .body())
            .get("token")
            .asText();
    Set<String> servers = new HashSet<>();
    nodes.forEach(n -> servers.add(n.clusterAddress()));

    long t0 = System.nanoTime();
    Process client = startClient("example-client", gateways, appToken);
    Set<String> hosts = new HashSet<>();
    while (client.isAlive() && System.nanoTime() - t0 < Duration.ofSeconds(180).toNanos()) {
      admin.partitions().ifPresent(p -> p.get("byNode").fieldNames().forEachRemaining(hosts::add));
      Thread.sleep(250);
    }
    assertThat(client.waitFor(10, java.util.concurrent.TimeUnit.SECONDS))
        .as("the example client ends")
        .isTrue();
    String out = java.nio.file.Files.readString(clientLog("example-client"));
    out.lines().filter(l -> l.startsWith("client-")).forEach(LOG::info);
    assertThat(client.exitValue())
        .as("the example client's exit status; its output:%n%s", tail(out))
        .isEqualTo(0);
    assertThat(out)
        .contains("(not a cluster member)")
        .contains(
            "client-documents: written=10 replayed=true read-equal=10"
                + " stale-write=409/conflict deleted=1")
        .contains("client-batch: applied=5 again-applied=5 replayed=true")
        .contains("client-changes: upserts=15 deletes=1")
        .contains("client-ok");
    assertThat(hosts).as("partitions run on server nodes only").isSubsetOf(servers);
    assertThat(admin.memberStatuses().keySet())
        .as("the client never became a member")
        .isEqualTo(servers);
    var doc = nodes.get(2).sendIdempotent("GET", "/v1/documents/example/doc-3", null, Map.of());
    assertThat(json.readTree(doc.body()))
        .as("a document the client wrote, read over HTTP")
        .isEqualTo(json.readTree("{\"n\":3,\"text\":\"note 3\"}"));
    LOG.info(
        String.format(
            "protocol-client: example application passed through the gateway ports in %.1f s",
            (System.nanoTime() - t0) / 1e9));

    Process refused = startClient("example-client-stranger", gateways, strangerToken);
    assertThat(refused.waitFor(180, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
    String refusedOut = java.nio.file.Files.readString(clientLog("example-client-stranger"));
    assertThat(refused.exitValue())
        .as("a principal without grants fails; output:%n%s", tail(refusedOut))
        .isEqualTo(1);
    assertThat(refusedOut)
        .contains("client-failed: PUT /v1/documents/{collection}/{id} answered 403 forbidden");
    LOG.info(
        "protocol-client-authorisation: a principal without grants is refused 403 through the protocol");
  }

  private static java.nio.file.Path clientLog(String name) {
    return NodeProcess.logs().resolve(name + ".log");
  }

  /**
   * Starts the example client with its Artery on a port from {@link TestPorts}; once it has bound
   * (it logs {@code client-started}) returns it. A client whose bind was lost ends before that,
   * having sent nothing: it is started again on another port, at most 3 times.
   */
  private static Process startClient(String name, String gateways, String token)
      throws java.io.IOException, InterruptedException {
    for (int attempt = 1; ; attempt++) {
      Process process = launchClient(name, gateways, token, TestPorts.free());
      org.awaitility.Awaitility.await("the example client binds its port or ends")
          .atMost(Duration.ofSeconds(120))
          .pollInterval(Duration.ofMillis(100))
          .until(
              () ->
                  !process.isAlive()
                      || java.nio.file.Files.readString(clientLog(name))
                          .contains("client-started"));
      String out = java.nio.file.Files.readString(clientLog(name));
      boolean lostBind =
          !out.contains("client-started")
              && (out.contains("Address already in use") || out.contains("BindException"));
      if (!lostBind || attempt == 3) {
        return process;
      }
      process.waitFor(30, java.util.concurrent.TimeUnit.SECONDS);
    }
  }

  private static Process launchClient(String name, String gateways, String token, int port)
      throws java.io.IOException {
    java.nio.file.Path jar =
        TestPostgres.repoRoot().resolve("deploy/example-client/target/weir-example-client.jar");
    assertThat(jar).as("built by mvn package").isRegularFile();
    ProcessBuilder pb =
        new ProcessBuilder(
                java.nio.file.Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx128m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-jar",
                jar.toString())
            .redirectErrorStream(true)
            .redirectOutput(clientLog(name).toFile());
    pb.environment().keySet().removeIf(k -> k.startsWith("WEIR_"));
    pb.environment().put("WEIR_GATEWAYS", gateways);
    pb.environment().put("WEIR_CLIENT_TOKEN", token);
    pb.environment().put("WEIR_CLIENT_PORT", Integer.toString(port));
    Process process = pb.start();
    Runtime.getRuntime().addShutdownHook(new Thread(process::destroyForcibly));
    return process;
  }

  private void awaitOrDump(
      Duration timeout, String what, java.util.concurrent.Callable<Boolean> condition) {
    try {
      await(what).atMost(timeout).pollInterval(Duration.ofMillis(500)).until(condition);
    } catch (org.awaitility.core.ConditionTimeoutException e) {
      nodes.forEach(n -> System.err.println("---- log of " + n.name() + " ----\n" + tail(n.log())));
      throw e;
    }
  }

  static String tail(String log) {
    return log.length() > 6000 ? log.substring(log.length() - 6000) : log;
  }

  /** Commits source row {@code id} and waits until a node of {@code via} serves its document. */
  private void insertAndAwait(List<NodeProcess> via, long id) throws Exception {
    try (java.sql.Connection c = db.connect();
        java.sql.Statement s = c.createStatement()) {
      s.execute("INSERT INTO public.src VALUES (" + id + ", " + id + ")");
    }
    awaitOrDump(
        Duration.ofSeconds(150),
        "source row " + id + " should reach the partitions through the pipeline",
        () ->
            via.stream()
                .anyMatch(
                    n ->
                        n.send("GET", "/v1/documents/src/" + id, null, Map.of())
                            .map(r -> r.statusCode() == 200)
                            .orElse(false)));
  }
}
