package io.weir.persistence.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.weir.persistence.testing.TestPorts;
import io.weir.persistence.testing.TestPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A slot the server invalidates because it held more WAL than {@code max_slot_wal_keep_size}
 * (pg_replication_slots.wal_status = lost) halts its pipeline {@code slot-lost}, whether the
 * invalidation happened while the pipeline was stopped or while it streamed (the server then ends
 * the walsender holding the slot). On a PostgreSQL of this test's own, since the setting is
 * server-wide: 1MB, so a checkpoint after a few WAL segment switches invalidates a slot behind
 * them.
 */
class SlotInvalidationIT {
  private static Map<String, String> pgEnv;
  private static TestPostgres server;
  private PipelineHarness h;

  @BeforeAll
  static void startServer() throws Exception {
    Path home = Files.createTempDirectory("weir-slot-lost-pg");
    pgEnv =
        Map.of(
            "WEIR_PG_HOME",
            home.toString(),
            "WEIR_PG_PORT_BASE",
            Integer.toString(TestPorts.freeBlock(4)));
    server = TestPostgres.privateServer(pgEnv);
    try (Connection c =
            DriverManager.getConnection(server.url(), server.user(), server.password());
        Statement s = c.createStatement()) {
      s.execute("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'");
      s.execute("SELECT pg_reload_conf()");
    }
  }

  @AfterAll
  static void destroyServer() {
    if (pgEnv != null) {
      TestPostgres.pgScript(pgEnv, "destroy");
    }
  }

  @AfterEach
  void close() {
    if (h != null) {
      h.close();
    }
  }

  private PipelineSettings settings() {
    return PipelineSettings.of("p_" + h.slot(), h.slot(), List.of("pub"))
        .withRetries(3, Duration.ofMillis(100), Duration.ofMillis(500))
        .withStatusInterval(Duration.ofSeconds(1));
  }

  private void setUp(String name) throws Exception {
    h = new PipelineHarness(name, server);
    h.sql(
        "CREATE TABLE items (id int PRIMARY KEY, v text)",
        "CREATE TABLE filler (v text)",
        "CREATE PUBLICATION pub FOR TABLE items");
  }

  /** Moves the server a few WAL segments on (unpublished writes) and checkpoints. */
  private void burnWal() throws Exception {
    for (int i = 0; i < 4; i++) {
      h.sql(
          "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 200)",
          "SELECT pg_switch_wal()");
    }
    h.sql("CHECKPOINT");
  }

  /** Burns WAL and checkpoints until the server reports the slot lost. */
  private void awaitInvalidated() {
    await("the server invalidates the slot")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(500))
        .until(
            () -> {
              burnWal();
              return walStatus().equals("lost");
            });
  }

  private String walStatus() throws Exception {
    try (Connection c = h.db().connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT wal_status FROM pg_replication_slots WHERE slot_name = '"
                        + h.slot()
                        + "'")) {
      return rs.next() ? rs.getString(1) : "missing";
    }
  }

  @Test
  void aSlotInvalidatedWhileThePipelineWasStoppedHaltsItAtStart() throws Exception {
    setUp("slot-lost-stopped");
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = h.start(h.source(), settings(), sink);
    h.awaitState(p, "running", Duration.ofSeconds(60));
    h.sql("INSERT INTO items VALUES (1, 'before')");
    await().atMost(Duration.ofSeconds(60)).until(() -> sink.applied().size() == 1);
    var stopped = h.kit().<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Stop(stopped.ref()));
    stopped.receiveMessage(Duration.ofSeconds(30));

    h.sql("INSERT INTO items VALUES (2, 'while stopped')");
    awaitInvalidated();
    var again = h.kit().<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Start(again.ref()));
    again.receiveMessage(Duration.ofSeconds(30));
    PipelineStatus halted = h.awaitState(p, "halted", Duration.ofSeconds(60));
    assertThat(halted.reason()).isEqualTo("slot-lost");
    assertThat(halted.detail()).contains("wal_status lost");
    assertThat(sink.applied()).as("nothing is read from a lost slot").hasSize(1);
  }

  @Test
  void aSlotInvalidatedWhileThePipelineStreamsHaltsIt() throws Exception {
    setUp("slot-lost-streaming");
    RecordingSink sink = new RecordingSink();
    ActorRef<CdcPipeline.Command> p = h.start(h.source(), settings(), sink);
    h.awaitState(p, "running", Duration.ofSeconds(60));
    // The sink stalls on the next transaction: nothing after it is confirmed, so the slot keeps
    // WAL back while the server writes on.
    sink.delayNext(Duration.ofSeconds(20));
    h.sql("INSERT INTO items VALUES (1, 'stalled')");
    awaitInvalidated();
    PipelineStatus halted = h.awaitState(p, "halted", Duration.ofSeconds(90));
    assertThat(halted.reason()).isEqualTo("slot-lost");
  }
}
