package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.persistence.testing.TestPostgres;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Continuous queries under SIGKILL: a real node process maintains a top-N query while a writer
 * commits transactions and an SSE client follows the events, reconnecting with its last event id (a
 * signed replay token) whenever the stream ends. The node is killed at random points and restarted.
 * Then: the durable replay log runs from 1 without a gap or a repeat, a new InitialResult follows
 * every restart, the client received every sequence exactly once across its reconnections, and the
 * result it built from the events equals the query run directly as the scope's role. Prints {@code
 * loss=0 dup=0}. Size: {@code -Dweir.crash.continuous-kills} (default 3).
 */
class ContinuousCrashIT extends EndToEndTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String QUERY = "SELECT id, score FROM items";

  @Test
  void replayLogAndClientSeeEveryEventOnceAcrossKills() throws Exception {
    int kills = Integer.getInteger("weir.crash.continuous-kills", 3);
    long seed = Long.getLong("weir.crash.seed", System.nanoTime());
    Random random = new Random(seed);
    String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    String role = "cq_crash_" + suffix;
    String password = "pw-" + suffix;
    prepareDatabase(role, password);
    try {
      Path config = Files.createTempFile("weir-cq-crash", ".conf");
      Files.writeString(
          config,
          String.join(
              "\n",
              "weir.pipelines.live {",
              "  slot = cq_crash_" + suffix,
              "  publications = [cq_crash_pub]",
              "  sink.type = continuous",
              "  min-backoff = 200ms",
              "  max-backoff = 2s",
              "}",
              "weir.continuous.scopes.crash { user = \""
                  + role
                  + "\", password = \""
                  + password
                  + "\" }",
              "weir.continuous.refresh = 500ms"));
      NodeProcess node = startNode("cq-crash", config);
      awaitRunning(node, "live");
      String id = register(node);

      // The writer: small random transactions until told to stop.
      AtomicBoolean stop = new AtomicBoolean();
      AtomicLong transactions = new AtomicLong();
      AtomicReference<Throwable> writerError = new AtomicReference<>();
      Thread writer = writer(seed, stop, transactions, writerError);

      Client client = new Client(id);
      AtomicReference<NodeProcess> current = new AtomicReference<>(node);
      Thread reader = new Thread(() -> client.follow(current, stop), "cq-crash-reader");
      // The client subscribes before the first write, so that its first event is the log's first
      // (a later first subscription starts at the current sequence, with a fresh initial result).
      reader.start();
      await("the client receives the first InitialResult")
          .atMost(Duration.ofSeconds(120))
          .until(() -> client.lastSequence() >= 1);
      writer.start();
      List<Long> delays = new ArrayList<>();
      for (int k = 0; k < kills; k++) {
        awaitCurrent(current.get(), id);
        long delay = 500 + random.nextInt(2500);
        delays.add(delay);
        Thread.sleep(delay);
        current.get().kill();
        NodeProcess next = startNode("cq-crash", config);
        awaitRunning(next, "live");
        current.set(next);
      }
      awaitCurrent(current.get(), id);
      awaitMoreTransactions(transactions, 40, "the writer goes on after the last restart");
      stop.set(true);
      writer.join(60_000);
      assertThat(writer.isAlive()).as("the writer stops").isFalse();
      assertThat(writerError.get()).as("the writer should not fail").isNull();
      NodeProcess last = current.get();
      long finalSequence = drain(last, id, client, reader);

      Figures f = figures(id, client, last, role, password, finalSequence);
      System.out.printf(
          "continuous-crash: kills=%d transactions=%d %s seed=%d delays-ms=%s%n",
          kills, transactions.get(), f, seed, delays);
      assertThat(f.initialResults())
          .as("an InitialResult starts the log and follows every restart")
          .isEqualTo(kills + 1);
      f.check();
    } finally {
      nodes.forEach(NodeProcess::close);
      try (Connection c = TestPostgres.server().connect("postgres");
          Statement s = c.createStatement()) {
        if (db != null) {
          db.close();
          db = null;
        }
        s.execute("DROP ROLE IF EXISTS " + role);
      }
    }
  }

  /**
   * Three nodes: the client follows the events on a node that does not maintain the session (served
   * from the session entity's journal), the maintaining node is SIGKILLed (the pipeline and the
   * sessions move to a survivor; the client's stream goes on), the killed node comes back and the
   * client reconnects there with its last id. The same checks as above.
   */
  @Test
  void eventsServedByEveryNodeAcrossTheMaintainingNodesDeath() throws Exception {
    long seed = Long.getLong("weir.crash.seed", System.nanoTime());
    String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    String role = "cq_nodes_" + suffix;
    String password = "pw-" + suffix;
    prepareDatabase(role, password);
    try {
      Path config = Files.createTempFile("weir-cq-nodes", ".conf");
      Files.writeString(
          config,
          String.join(
              "\n",
              "weir.pipelines.live {",
              "  slot = cq_nodes_" + suffix,
              "  publications = [cq_crash_pub]",
              "  sink.type = continuous",
              "  min-backoff = 200ms",
              "  max-backoff = 2s",
              "}",
              "weir.continuous.scopes.crash { user = \""
                  + role
                  + "\", password = \""
                  + password
                  + "\" }",
              "weir.continuous.refresh = 500ms"));
      int[] http = {NodeProcess.freePort(), NodeProcess.freePort(), NodeProcess.freePort()};
      int[] cluster = {NodeProcess.freePort(), NodeProcess.freePort(), NodeProcess.freePort()};
      String seeds = "127.0.0.1:" + cluster[0] + ",127.0.0.1:" + cluster[1];
      java.util.function.BiFunction<Integer, String, NodeProcess> start =
          (i, name) -> {
            NodeProcess n =
                NodeProcess.start(
                    new NodeProcess.Spec(name)
                        .database(db)
                        .httpPort(http[i])
                        .clusterPort(cluster[i])
                        .env("WEIR_SEED_NODES", seeds)
                        .prop("pekko.cluster.split-brain-resolver.stable-after", "3s")
                        // Members Up only once all three joined: partitions are placed across them
                        // from the start
                        // rather than all on the first and then moved one by one (docs/deploy.md).
                        .prop("pekko.cluster.min-nr-of-members", "3")
                        .args("--config", config.toString()));
            nodes.add(n);
            return n;
          };
      NodeProcess[] up = {
        start.apply(0, "cq-nodes-a"), start.apply(1, "cq-nodes-b"), start.apply(2, "cq-nodes-c")
      };
      awaitRunning(up[0], "live");
      await("the three nodes are ready")
          .atMost(START_UP)
          .pollInterval(Duration.ofMillis(250))
          .until(() -> Stream.of(up).allMatch(NodeProcess::ready));
      String id = register(up[1]);
      // Which node maintains the session (status is served there only)?
      int maintaining =
          await("one node maintains the session")
              .atMost(START_UP)
              .pollInterval(Duration.ofMillis(200))
              .until(() -> maintainer(up, id), i -> i >= 0);
      int other = (maintaining + 1) % 3;
      awaitCurrent(up[maintaining], id);

      AtomicBoolean stop = new AtomicBoolean();
      AtomicLong transactions = new AtomicLong();
      AtomicReference<Throwable> writerError = new AtomicReference<>();
      Thread writer = writer(seed, stop, transactions, writerError);
      Client client = new Client(id);
      AtomicReference<NodeProcess> current = new AtomicReference<>(up[other]);
      Thread reader = new Thread(() -> client.follow(current, stop), "cq-nodes-reader");
      reader.start();
      await("the client receives the first InitialResult from the other node")
          .atMost(Duration.ofSeconds(120))
          .until(() -> client.lastSequence() >= 1);
      writer.start();
      awaitMoreTransactions(transactions, 120, "the writer runs before the kill");
      long reconnectsBefore = client.reconnects.get();
      up[maintaining].kill();
      // The sessions move to a survivor; the client's stream, served from the journal, goes on.
      NodeProcess[] survivors = {up[other], up[(maintaining + 2) % 3]};
      int survivor =
          await("a survivor maintains the session")
              .atMost(START_UP)
              .pollInterval(Duration.ofMillis(200))
              .until(() -> maintainer(survivors, id), i -> i >= 0);
      NodeProcess maintainer = survivors[survivor];
      awaitCurrent(maintainer, id);
      awaitMoreTransactions(transactions, 80, "the writer goes on after the move");
      long reconnectsAfterMove = client.reconnects.get() - reconnectsBefore;
      up[maintaining] = start.apply(maintaining, "cq-nodes-" + (maintaining == 0 ? "a2" : "b2"));
      await("the killed node is back and serves the events")
          .atMost(START_UP)
          .pollInterval(Duration.ofMillis(250))
          .until(
              () ->
                  up[maintaining]
                      .get("/v1/continuous/" + id + "/result", true)
                      .map(r -> r.statusCode() == 200)
                      .orElse(false));
      current.set(up[maintaining]);
      long reconnectsBeforeResume = client.reconnects.get();
      client.reconnect(); // resumes on the restarted node, which does not maintain the session
      await("the client resumes on the restarted node")
          .atMost(Duration.ofSeconds(120))
          .pollInterval(Duration.ofMillis(100))
          .until(() -> client.reconnects.get() > reconnectsBeforeResume);
      awaitMoreTransactions(transactions, 120, "the writer goes on while the client follows there");
      stop.set(true);
      writer.join(60_000);
      assertThat(writer.isAlive()).as("the writer stops").isFalse();
      assertThat(writerError.get()).as("the writer should not fail").isNull();
      long finalSequence = drain(maintainer, id, client, reader);
      Figures f = figures(id, client, up[maintaining], role, password, finalSequence);
      System.out.printf(
          "continuous-any-node: transactions=%d %s reconnects-while-the-session-moved=%d seed=%d%n",
          transactions.get(), f, reconnectsAfterMove, seed);
      assertThat(f.initialResults())
          .as("the first InitialResult and the one after the move")
          .isGreaterThanOrEqualTo(2);
      assertThat(client.reconnects.get())
          .as("connected to the other node, then to the restarted one")
          .isGreaterThanOrEqualTo(2);
      f.check();
    } finally {
      nodes.forEach(NodeProcess::close);
      try (Connection c = TestPostgres.server().connect("postgres");
          Statement s = c.createStatement()) {
        if (db != null) {
          db.close();
          db = null;
        }
        s.execute("DROP ROLE IF EXISTS " + role);
      }
    }
  }

  /**
   * Registers the test's query on {@code node}; its id. The registration's identity is
   * deterministic (docs/continuous.md, "Identity"), so it is retried while the node does not answer
   * or is unavailable: a first attempt that was stored but not answered makes the retry's answer
   * 200 with {@code created: false} for the same registration.
   */
  private static String register(NodeProcess node) throws Exception {
    ObjectNode body =
        JSON.createObjectNode().put("scope", "crash").put("sql", QUERY).put("limit", 40);
    body.putArray("keyColumns").add("id");
    body.putArray("orderBy").addObject().put("column", "score").put("direction", "desc");
    NodeProcess.Retried attempt =
        node.sendRetrying(
            "POST",
            "/v1/continuous",
            body.toString(),
            java.util.Map.of("Content-Type", "application/json"),
            START_UP,
            true);
    HttpResponse<String> registered = attempt.response();
    if (attempt.uncertain() > 0 && registered.statusCode() == 200) {
      assertThat(JSON.readTree(registered.body()).get("created").asBoolean())
          .as("the earlier unanswered attempt created it")
          .isFalse();
    } else {
      assertThat(registered.statusCode()).as(registered.body()).isEqualTo(201);
    }
    return JSON.readTree(registered.body()).get("id").asText();
  }

  /** Waits until the writer committed {@code more} transactions after now. */
  private static void awaitMoreTransactions(AtomicLong transactions, long more, String what) {
    long target = transactions.get() + more;
    await(what)
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(50))
        .until(() -> transactions.get() >= target);
  }

  /**
   * After the writer stopped: commits one last transaction, waits until {@code maintainer}'s
   * session handled it and the client received every event, stops the client; the session's last
   * sequence.
   */
  private long drain(NodeProcess maintainer, String id, Client client, Thread reader)
      throws Exception {
    String lsn;
    try (Connection c = db.connect();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT pg_current_wal_lsn()::text")) {
      rs.next();
      lsn = rs.getString(1);
    }
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("UPDATE items SET score = score WHERE id = (SELECT min(id) FROM items)"); // a last
      // transaction
      // past lsn
    }
    await("the session handles the last transaction")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () ->
                status(maintainer, id)
                    .map(
                        st ->
                            !st.get("lastLsn").isNull()
                                && io.weir.protocol.Lsn.parse(st.get("lastLsn").asText())
                                        .compareTo(io.weir.protocol.Lsn.parse(lsn))
                                    > 0
                                && st.get("repairPending").isNull()
                                && !st.get("settling").asBoolean())
                    .orElse(false));
    long finalSequence =
        maintainer
            .jsonUntil("/v1/continuous/" + id + "/status", NodeProcess.ANSWER_DEADLINE)
            .get("sequence")
            .asLong();
    await("the client receives every event")
        .atMost(Duration.ofSeconds(120))
        .until(() -> client.lastSequence() >= finalSequence);
    client.stop();
    reader.join(10_000);
    return finalSequence;
  }

  /**
   * The index of the node among {@code candidates} that maintains session {@code id} (serves its
   * status), or -1.
   */
  private static int maintainer(NodeProcess[] candidates, String id) {
    for (int i = 0; i < candidates.length; i++) {
      if (status(candidates[i], id).isPresent()) {
        return i;
      }
    }
    return -1;
  }

  /** The writer: small random transactions on items until {@code stop}. */
  private Thread writer(
      long seed,
      AtomicBoolean stop,
      AtomicLong transactions,
      AtomicReference<Throwable> writerError) {
    return new Thread(
        () -> {
          Random r = new Random(seed + 1);
          try (Connection c = db.connect();
              Statement s = c.createStatement()) {
            while (!stop.get()) {
              int key = 1 + r.nextInt(260);
              switch (r.nextInt(4)) {
                case 0 ->
                    s.execute(
                        "INSERT INTO items VALUES ("
                            + key
                            + ", "
                            + r.nextInt(1200)
                            + ") ON CONFLICT (id) DO UPDATE SET score = excluded.score");
                case 1 -> s.execute("DELETE FROM items WHERE id = " + key);
                default ->
                    s.execute("UPDATE items SET score = " + r.nextInt(1200) + " WHERE id = " + key);
              }
              transactions.incrementAndGet();
              Thread.sleep(20);
            }
          } catch (Throwable t) {
            writerError.set(t);
          }
        },
        "cq-crash-writer");
  }

  /** A fresh database with the scope's login role, the table and its publication. */
  private void prepareDatabase(String role, String password) throws Exception {
    db = TestPostgres.server().freshDatabase("cqcrash");
    try (Connection c = TestPostgres.server().connect("postgres");
        Statement s = c.createStatement()) {
      s.execute("CREATE ROLE " + role + " LOGIN PASSWORD '" + password + "'");
    }
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE items (id int PRIMARY KEY, score int NOT NULL)");
      s.execute("INSERT INTO items SELECT g, (g * 37) % 1000 FROM generate_series(1, 200) g");
      s.execute("GRANT SELECT ON items TO " + role);
      s.execute("CREATE PUBLICATION cq_crash_pub FOR TABLE items");
    }
  }

  /** What the log, the client and the durable result show at the end of a run. */
  private record Figures(
      List<Long> logged,
      int initialResults,
      long logGaps,
      long logDups,
      List<Long> seen,
      long clientGaps,
      long clientDups,
      long reconnects,
      long resets,
      boolean equal,
      boolean durableEqual,
      List<String> expected,
      List<String> clientResult) {
    @Override
    public String toString() {
      return String.format(
          "log-events=%d log-first=%d initial-results=%d loss=%d dup=%d client-events=%d"
              + " client-reconnects=%d client-gaps=%d client-dups=%d resets=%d result-equal=%s durable-result-equal=%s",
          logged.size(),
          logged.isEmpty() ? 0 : logged.get(0),
          initialResults,
          logGaps,
          logDups,
          seen.size(),
          reconnects,
          clientGaps,
          clientDups,
          resets,
          equal,
          durableEqual);
    }

    void check() {
      assertThat(logged).as("the replay log starts at 1").startsWith(1L);
      assertThat(logGaps).as("no gap in the durable replay log (loss)").isZero();
      assertThat(logDups).as("no sequence twice in the durable replay log").isZero();
      assertThat(seen.get(0)).isEqualTo(1L);
      assertThat(clientGaps).as("the client missed no event across reconnections").isZero();
      assertThat(clientDups).as("the client received no event twice").isZero();
      assertThat(resets).as("every reconnection resumed (no ResultReset)").isZero();
      assertThat(durableEqual)
          .as("the session entity's result equals the query at the last sequence")
          .isTrue();
      assertThat(clientResult)
          .as("the result built from the events equals the query")
          .isEqualTo(expected);
    }
  }

  private Figures figures(
      String id, Client client, NodeProcess node, String role, String password, long finalSequence)
      throws Exception {
    NodeProcess last = node;
    // The durable log.
    List<Long> logged = new ArrayList<>();
    int initialResults = 0;
    try (Connection c = db.connect();
        Statement s = c.createStatement();
        // The session entity's journal (ADR 0025): one JSON event per replay event, in journal
        // order.
        ResultSet rs =
            s.executeQuery(
                "SELECT (e->>'sequence')::bigint, e->>'type' FROM (SELECT sequence_number,"
                    + " convert_from(event_payload, 'UTF8')::jsonb AS e FROM weir.event_journal"
                    + " WHERE persistence_id = 'weir-continuous-session|"
                    + id
                    + "') AS log ORDER BY sequence_number")) {
      while (rs.next()) {
        logged.add(rs.getLong(1));
        initialResults += rs.getString(2).equals("InitialResult") ? 1 : 0;
      }
    }
    long logGaps = 0;
    for (int i = 1; i < logged.size(); i++) {
      logGaps += logged.get(i) - logged.get(i - 1) - 1;
    }
    // What the client received across its reconnections.
    long clientGaps = 0;
    long clientDups = 0;
    List<Long> seen = client.sequences();
    for (int i = 1; i < seen.size(); i++) {
      long step = seen.get(i) - seen.get(i - 1);
      if (step <= 0) {
        clientDups++;
      } else {
        clientGaps += step - 1;
      }
    }
    List<String> expected = new ArrayList<>();
    try (Connection c = DriverManager.getConnection(db.url(), role, password);
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(QUERY + " ORDER BY score DESC, id ASC LIMIT 40")) {
      while (rs.next()) {
        expected.add(rs.getInt(1) + ":" + rs.getInt(2));
      }
    }
    boolean equal = client.result().equals(expected);
    // The session entity's durable result (its journal applied across every restart) is the same.
    JsonNode durable =
        last.jsonUntil("/v1/continuous/" + id + "/result", NodeProcess.ANSWER_DEADLINE);
    List<String> durableRows = new ArrayList<>();
    durable
        .get("rows")
        .forEach(
            r ->
                durableRows.add(
                    r.get("row").get("id").asInt() + ":" + r.get("row").get("score").asInt()));
    boolean durableEqual =
        durableRows.equals(expected) && durable.get("sequence").asLong() == finalSequence;
    return new Figures(
        logged,
        initialResults,
        logGaps,
        logged.size() - logged.stream().distinct().count(),
        seen,
        clientGaps,
        clientDups,
        client.reconnects.get(),
        client.resets.get(),
        equal,
        durableEqual,
        expected,
        client.result());
  }

  private static java.util.Optional<JsonNode> status(NodeProcess node, String id) {
    return node.get("/v1/continuous/" + id + "/status", true)
        .filter(r -> r.statusCode() == 200)
        .map(
            r -> {
              try {
                return JSON.readTree(r.body());
              } catch (java.io.IOException e) {
                throw new IllegalStateException(e);
              }
            });
  }

  private static void awaitCurrent(NodeProcess node, String id) {
    await("the session is current on " + node.name())
        .atMost(START_UP)
        .pollInterval(Duration.ofMillis(200))
        .until(
            () ->
                status(node, id).map(s -> s.get("state").asText().equals("current")).orElse(false));
  }

  /**
   * An SSE client that reconnects with its last event id and applies the events to its own copy of
   * the result.
   */
  private static final class Client {
    private final String id;
    private final HttpClient http =
        HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    private final List<Long> sequences = new CopyOnWriteArrayList<>();
    private final List<String[]> rows = new ArrayList<>(); // {key text, "id:score"}
    final AtomicLong reconnects = new AtomicLong();
    final AtomicLong resets = new AtomicLong();
    private volatile boolean stopped;
    private volatile Stream<String> open;
    private String lastId;

    Client(String id) {
      this.id = id;
    }

    void follow(AtomicReference<NodeProcess> node, AtomicBoolean unused) {
      while (!stopped) {
        try {
          HttpRequest.Builder b =
              HttpRequest.newBuilder(
                      URI.create(
                          "http://127.0.0.1:"
                              + node.get().httpPort()
                              + "/v1/continuous/"
                              + id
                              + "/events"))
                  .header("Authorization", "Bearer " + NodeProcess.ADMIN_TOKEN);
          if (lastId != null) {
            b.header("Last-Event-ID", lastId);
          }
          HttpResponse<Stream<String>> r =
              http.send(b.build(), HttpResponse.BodyHandlers.ofLines());
          if (r.statusCode() != 200) {
            r.body().close();
            Thread.sleep(200);
            continue;
          }
          reconnects.incrementAndGet();
          open = r.body();
          String type = null;
          String eventId = null;
          StringBuilder data = new StringBuilder();
          for (var it = r.body().iterator(); it.hasNext() && !stopped; ) {
            String line = it.next();
            if (line.isEmpty()) {
              if (type != null && data.length() > 0) {
                apply(type, JSON.readTree(data.toString()));
                if (eventId != null && !eventId.isEmpty()) {
                  lastId = eventId;
                }
              }
              type = null;
              eventId = null;
              data.setLength(0);
            } else if (line.startsWith("id:")) {
              eventId = line.substring(3).trim();
            } else if (line.startsWith("event:")) {
              type = line.substring(6).trim();
            } else if (line.startsWith("data:")) {
              data.append(line.substring(5).trim());
            }
          }
        } catch (Exception e) {
          // the node died: reconnect
        }
        try {
          Thread.sleep(100);
        } catch (InterruptedException e) {
          return;
        }
      }
    }

    private synchronized void apply(String type, JsonNode e) {
      if (type.equals("ResultReset")) {
        resets.incrementAndGet();
        return;
      }
      sequences.add(e.get("sequence").asLong());
      switch (type) {
        case "InitialResult" -> {
          rows.clear();
          for (JsonNode r : e.get("rows")) {
            rows.add(new String[] {r.get("key").toString(), cell(r.get("row"))});
          }
        }
        case "RowRemoved" -> rows.removeIf(r -> r[0].equals(e.get("key").toString()));
        case "RowAdded" ->
            rows.add(
                e.get("position").asInt(),
                new String[] {e.get("key").toString(), cell(e.get("row"))});
        case "RowUpdated" -> {
          for (String[] r : rows) {
            if (r[0].equals(e.get("key").toString())) {
              r[1] = cell(e.get("row"));
            }
          }
        }
        case "ResultReordered" -> {
          List<String[]> reordered = new ArrayList<>();
          for (JsonNode k : e.get("keys")) {
            rows.stream()
                .filter(r -> r[0].equals(k.toString()))
                .findFirst()
                .ifPresent(reordered::add);
          }
          rows.clear();
          rows.addAll(reordered);
        }
        default -> throw new IllegalStateException("unknown event type " + type);
      }
    }

    private static String cell(JsonNode row) {
      return row.get("id").asInt() + ":" + row.get("score").asInt();
    }

    long lastSequence() {
      return sequences.isEmpty() ? 0 : sequences.get(sequences.size() - 1);
    }

    List<Long> sequences() {
      return List.copyOf(sequences);
    }

    synchronized List<String> result() {
      return rows.stream().map(r -> r[1]).toList();
    }

    /**
     * Ends the open stream: the client connects again (to whatever node is current) with its last
     * id.
     */
    void reconnect() {
      Stream<String> s = open;
      if (s != null) {
        s.close();
      }
    }

    void stop() {
      stopped = true;
      Stream<String> s = open;
      if (s != null) {
        s.close();
      }
    }
  }
}
