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
 * commits transactions and an SSE client follows the events, reconnecting with its last event id
 * (a signed replay token) whenever the stream ends. The node is killed at random points and
 * restarted. Then: the durable replay log runs from 1 without a gap or a repeat, a new
 * InitialResult follows every restart, the client received every sequence exactly once across its
 * reconnections, and the result it built from the events equals the query run directly as the
 * scope's role. Prints {@code loss=0 dup=0}. Size: {@code -Dweir.crash.continuous-kills} (default 3).
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
    db = TestPostgres.server().freshDatabase("cqcrash");
    try (Connection c = TestPostgres.server().connect("postgres"); Statement s = c.createStatement()) {
      s.execute("CREATE ROLE " + role + " LOGIN PASSWORD '" + password + "'");
    }
    try {
      try (Connection c = db.connect(); Statement s = c.createStatement()) {
        s.execute("CREATE TABLE items (id int PRIMARY KEY, score int NOT NULL)");
        s.execute("INSERT INTO items SELECT g, (g * 37) % 1000 FROM generate_series(1, 200) g");
        s.execute("GRANT SELECT ON items TO " + role);
        s.execute("CREATE PUBLICATION cq_crash_pub FOR TABLE items");
      }
      Path config = Files.createTempFile("weir-cq-crash", ".conf");
      Files.writeString(config, String.join("\n",
          "weir.pipelines.live {",
          "  slot = cq_crash_" + suffix,
          "  publications = [cq_crash_pub]",
          "  sink.type = continuous",
          "  min-backoff = 200ms",
          "  max-backoff = 2s",
          "}",
          "weir.continuous.scopes.crash { user = \"" + role + "\", password = \"" + password + "\" }",
          "weir.continuous.refresh = 500ms"));
      NodeProcess node = startNode("cq-crash", config);
      awaitRunning(node, "live");
      ObjectNode body = JSON.createObjectNode().put("scope", "crash").put("sql", QUERY).put("limit", 40);
      body.putArray("keyColumns").add("id");
      body.putArray("orderBy").addObject().put("column", "score").put("direction", "desc");
      HttpResponse<String> registered = node.post("/v1/continuous", body.toString()).orElseThrow();
      assertThat(registered.statusCode()).as(registered.body()).isEqualTo(201);
      String id = JSON.readTree(registered.body()).get("id").asText();

      // The writer: small random transactions until told to stop.
      AtomicBoolean stop = new AtomicBoolean();
      AtomicLong transactions = new AtomicLong();
      AtomicReference<Throwable> writerError = new AtomicReference<>();
      Thread writer = new Thread(() -> {
        Random r = new Random(seed + 1);
        try (Connection c = db.connect(); Statement s = c.createStatement()) {
          while (!stop.get()) {
            int key = 1 + r.nextInt(260);
            switch (r.nextInt(4)) {
              case 0 -> s.execute("INSERT INTO items VALUES (" + key + ", " + r.nextInt(1200)
                  + ") ON CONFLICT (id) DO UPDATE SET score = excluded.score");
              case 1 -> s.execute("DELETE FROM items WHERE id = " + key);
              default -> s.execute("UPDATE items SET score = " + r.nextInt(1200) + " WHERE id = " + key);
            }
            transactions.incrementAndGet();
            Thread.sleep(20);
          }
        } catch (Throwable t) {
          writerError.set(t);
        }
      }, "cq-crash-writer");

      Client client = new Client(id);
      AtomicReference<NodeProcess> current = new AtomicReference<>(node);
      Thread reader = new Thread(() -> client.follow(current, stop), "cq-crash-reader");
      // The client subscribes before the first write, so that its first event is the log's first
      // (a later first subscription starts at the current sequence, with a fresh initial result).
      reader.start();
      await("the client receives the first InitialResult").atMost(Duration.ofSeconds(60))
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
      Thread.sleep(1000);
      stop.set(true);
      writer.join(10_000);
      assertThat(writerError.get()).as("the writer should not fail").isNull();
      // Let the session handle the last transaction, and the client receive its last event.
      String lsn;
      try (Connection c = db.connect(); Statement s = c.createStatement();
          ResultSet rs = s.executeQuery("SELECT pg_current_wal_lsn()::text")) {
        rs.next();
        lsn = rs.getString(1);
      }
      try (Connection c = db.connect(); Statement s = c.createStatement()) {
        s.execute("UPDATE items SET score = score WHERE id = (SELECT min(id) FROM items)"); // a last transaction past lsn
      }
      NodeProcess last = current.get();
      await("the session handles the last transaction").atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
          .until(() -> status(last, id).map(st -> !st.get("lastLsn").isNull()
              && io.weir.protocol.Lsn.parse(st.get("lastLsn").asText()).compareTo(io.weir.protocol.Lsn.parse(lsn)) > 0
              && st.get("repairPending").isNull()).orElse(false));
      long finalSequence = status(last, id).orElseThrow().get("sequence").asLong();
      await("the client receives every event").atMost(Duration.ofSeconds(60)).until(() -> client.lastSequence() >= finalSequence);
      client.stop();
      reader.join(10_000);

      // The durable log.
      List<Long> logged = new ArrayList<>();
      int initialResults = 0;
      try (Connection c = db.connect(); Statement s = c.createStatement();
          // The session entity's journal (ADR 0025): one JSON event per replay event, in journal order.
          ResultSet rs = s.executeQuery("SELECT (e->>'sequence')::bigint, e->>'type' FROM (SELECT sequence_number,"
              + " convert_from(event_payload, 'UTF8')::jsonb AS e FROM weir.event_journal"
              + " WHERE persistence_id = 'weir-continuous-session|" + id + "') AS log ORDER BY sequence_number")) {
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
      try (Connection c = DriverManager.getConnection(db.url(), role, password); Statement s = c.createStatement();
          ResultSet rs = s.executeQuery(QUERY + " ORDER BY score DESC, id ASC LIMIT 40")) {
        while (rs.next()) {
          expected.add(rs.getInt(1) + ":" + rs.getInt(2));
        }
      }
      boolean equal = client.result().equals(expected);
      // The session entity's durable result (its journal applied across every restart) is the same.
      JsonNode durable = JSON.readTree(last.get("/v1/continuous/" + id + "/result", true).orElseThrow().body());
      List<String> durableRows = new ArrayList<>();
      durable.get("rows").forEach(r -> durableRows.add(r.get("row").get("id").asInt() + ":" + r.get("row").get("score").asInt()));
      boolean durableEqual = durableRows.equals(expected) && durable.get("sequence").asLong() == finalSequence;
      System.out.printf("continuous-crash: kills=%d transactions=%d log-events=%d log-first=%d initial-results=%d"
              + " loss=%d dup=%d client-events=%d client-reconnects=%d client-gaps=%d client-dups=%d resets=%d result-equal=%s"
              + " durable-result-equal=%s seed=%d delays-ms=%s%n", kills, transactions.get(), logged.size(),
          logged.isEmpty() ? 0 : logged.get(0), initialResults, logGaps, logged.size() - logged.stream().distinct().count(),
          seen.size(), client.reconnects.get(), clientGaps, clientDups, client.resets.get(), equal, durableEqual, seed, delays);
      assertThat(logged).as("the replay log starts at 1").startsWith(1L);
      assertThat(logGaps).as("no gap in the durable replay log (loss)").isZero();
      assertThat(initialResults).as("an InitialResult starts the log and follows every restart").isEqualTo(kills + 1);
      assertThat(seen.get(0)).isEqualTo(1L);
      assertThat(clientGaps).as("the client missed no event across reconnections").isZero();
      assertThat(clientDups).as("the client received no event twice").isZero();
      assertThat(client.resets.get()).as("every reconnection resumed (no ResultReset)").isZero();
      assertThat(durableEqual).as("the session entity's result equals the query at the last sequence").isTrue();
      assertThat(client.result()).as("the result built from the events equals the query").isEqualTo(expected);
    } finally {
      nodes.forEach(NodeProcess::close);
      try (Connection c = TestPostgres.server().connect("postgres"); Statement s = c.createStatement()) {
        if (db != null) {
          db.close();
          db = null;
        }
        s.execute("DROP ROLE IF EXISTS " + role);
      }
    }
  }

  private static java.util.Optional<JsonNode> status(NodeProcess node, String id) {
    return node.get("/v1/continuous/" + id + "/status", true).filter(r -> r.statusCode() == 200).map(r -> {
      try {
        return JSON.readTree(r.body());
      } catch (java.io.IOException e) {
        throw new IllegalStateException(e);
      }
    });
  }

  private static void awaitCurrent(NodeProcess node, String id) {
    await("the session is current on " + node.name()).atMost(Duration.ofSeconds(120)).pollInterval(Duration.ofMillis(200))
        .until(() -> status(node, id).map(s -> s.get("state").asText().equals("current")).orElse(false));
  }

  /** An SSE client that reconnects with its last event id and applies the events to its own copy of the result. */
  private static final class Client {
    private final String id;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
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
          HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + node.get().httpPort()
              + "/v1/continuous/" + id + "/events")).header("Authorization", "Bearer " + NodeProcess.ADMIN_TOKEN);
          if (lastId != null) {
            b.header("Last-Event-ID", lastId);
          }
          HttpResponse<Stream<String>> r = http.send(b.build(), HttpResponse.BodyHandlers.ofLines());
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
        case "RowAdded" -> rows.add(e.get("position").asInt(), new String[] {e.get("key").toString(), cell(e.get("row"))});
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
            rows.stream().filter(r -> r[0].equals(k.toString())).findFirst().ifPresent(reordered::add);
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

    void stop() {
      stopped = true;
      Stream<String> s = open;
      if (s != null) {
        s.close();
      }
    }
  }
}
