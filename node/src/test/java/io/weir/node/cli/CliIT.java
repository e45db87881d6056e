package io.weir.node.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.node.Main;
import io.weir.node.TestNodes;
import io.weir.node.WeirNode;
import io.weir.persistence.testing.TestPorts;
import io.weir.persistence.testing.TestPostgres;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.sql.Connection;
import java.sql.Statement;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * {@code weir ctl} in-process against a real node (in this JVM) on a real PostgreSQL: a CDC
 * pipeline streams a table into the node's partitions, and the CLI reads the cluster, drives the
 * pipeline (an incremental snapshot with progress, stop, start), reads the outbox, runs a
 * projection consumer, manages a principal and its grants, and fails with the documented exit
 * statuses. The address and token come from the environment the CLI is given (WEIR_URL,
 * WEIR_ADMIN_TOKEN).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class CliIT {
  private static final String ADMIN = "admin-token-for-cli-it";
  private static final int PARTITIONS = 8;
  private final ObjectMapper json = new ObjectMapper();
  private final String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
  private TestPostgres.TestDatabase db;
  private WeirNode node;
  private Map<String, String> env;

  /** Every command with its output, written to target/cli-it-transcript.txt for reading. */
  private final StringBuilder transcript = new StringBuilder();

  record Run(int exit, String out, String err) {}

  @BeforeAll
  void start() throws Exception {
    db = TestPostgres.server().freshDatabase("cli_it");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE cli_orders (id int PRIMARY KEY, status text NOT NULL)");
      s.execute("CREATE PUBLICATION cli_pub FOR TABLE cli_orders");
      // Rows from before the pipeline: only a snapshot brings them into the partitions.
      s.execute("INSERT INTO cli_orders SELECT i, 'old' FROM generate_series(1, 50) i");
      s.execute("ANALYZE cli_orders");
    }
    Map<String, Object> m = new HashMap<>();
    m.put("weir.admin-token", ADMIN);
    m.put("weir.partitions.count", PARTITIONS);
    m.put("weir.pipelines.orders.slot", "cli_slot_" + suffix);
    m.put("weir.pipelines.orders.publications", List.of("cli_pub"));
    m.put("weir.pipelines.orders.sink.type", "partitions");
    Config config =
        ConfigFactory.load(
            ConfigFactory.parseMap(m)
                .withFallback(
                    ConfigFactory.parseString(
                        "weir.pipelines.orders.sink.collections { \"public.cli_orders\" = orders }"))
                .withFallback(db.config())
                .withFallback(ConfigFactory.defaultApplication()));
    node = TestNodes.start(config);
    env = Map.of("WEIR_URL", "http://127.0.0.1:" + node.httpPort(), "WEIR_ADMIN_TOKEN", ADMIN);
    awaitPipeline("running");
  }

  @AfterAll
  void stop() throws Exception {
    java.nio.file.Files.writeString(
        java.nio.file.Path.of("target", "cli-it-transcript.txt"), transcript.toString());
    if (node != null) {
      node.stop();
    }
    if (db != null) {
      db.close();
    }
  }

  private Run weir(String... args) {
    return weir(env, args);
  }

  private Run weir(Map<String, String> environment, String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    var cli = Main.commandLine(environment);
    cli.setOut(new PrintWriter(out, true));
    cli.setErr(new PrintWriter(err, true));
    Run run = new Run(cli.execute(args), out.toString(), err.toString());
    transcript
        .append("$ weir ")
        .append(String.join(" ", args).replaceAll("--token \\S+", "--token <token>"))
        .append('\n')
        .append(run.out())
        .append(run.err().isEmpty() ? "" : "[stderr]\n" + run.err())
        .append("[exit ")
        .append(run.exit())
        .append("]\n\n");
    return run;
  }

  /** Runs a command that must succeed and returns its stdout. */
  private String ok(String... args) {
    Run r = weir(args);
    assertThat(r.exit())
        .as("weir %s should succeed; stderr: %s", String.join(" ", args), r.err())
        .isZero();
    return r.out();
  }

  private JsonNode okJson(String... args) throws Exception {
    String[] all = java.util.Arrays.copyOf(args, args.length + 1);
    all[args.length] = "--json";
    return json.readTree(ok(all));
  }

  private void awaitPipeline(String state) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (System.nanoTime() < deadline) {
      Run r = weir("ctl", "pipelines", "status", "orders", "--json");
      if (r.exit() == 0 && json.readTree(r.out()).path("state").asText().equals(state)) {
        return;
      }
      Thread.sleep(200);
    }
    throw new AssertionError("pipeline orders should be " + state + " within 120 s");
  }

  private void sql(String statement) throws Exception {
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute(statement);
    }
  }

  /** Documents in all partitions, from {@code outbox status --json}. */
  private long documents() throws Exception {
    long n = 0;
    for (JsonNode p : okJson("ctl", "outbox", "status")) {
      n += p.path("documents").asLong();
    }
    return n;
  }

  // ---- tests ----

  @Test
  @Order(1)
  void clusterStatusShowsThisNodeUp() throws Exception {
    String table = ok("ctl", "cluster", "status");
    JsonNode status = okJson("ctl", "cluster", "status");
    String self = status.get("self").asText();
    assertThat(status.get("members")).hasSize(1);
    assertThat(status.get("members").get(0).get("status").asText()).isEqualTo("up");
    assertThat(table).contains("this node:  " + self).contains("ADDRESS").contains(self + "  up");
    assertThat(table).as("the slot owner runs pipeline orders").contains("orders=running");
    JsonNode partitions = okJson("ctl", "cluster", "partitions");
    assertThat(partitions.get("count").asInt()).isEqualTo(PARTITIONS);
  }

  @Test
  @Order(2)
  void pipelinesListStatusAndASnapshotWithProgress() throws Exception {
    String list = ok("ctl", "pipelines", "list");
    assertThat(list).containsPattern("(?m)^orders +running +- +cli_slot_" + suffix);
    assertThat(ok("ctl", "pipelines", "status", "orders")).contains("state:").contains("running");
    assertThat(ok("ctl", "pipelines", "check", "orders"))
        .containsPattern("(?m)^public\\.cli_orders +by-document-id +- +collection orders")
        .contains("1 published table(s), 0 refused (pipeline orders)");
    assertThat(documents())
        .as("rows from before the pipeline are not in the partitions yet")
        .isZero();

    Run snapshot =
        weir(
            "ctl",
            "pipelines",
            "snapshot",
            "orders",
            "--table",
            "public.cli_orders",
            "--interval",
            "200");
    assertThat(snapshot.exit()).as(snapshot.err()).isZero();
    assertThat(snapshot.err())
        .as("progress on stderr")
        .contains("incremental snapshot")
        .contains("100% tables 1/1");
    assertThat(snapshot.out()).contains("pipeline orders: snapshot done, 1 tables, 50 rows");
    JsonNode status = okJson("ctl", "pipelines", "status", "orders");
    assertThat(status.get("snapshot").get("state").asText()).isEqualTo("done");
    assertThat(documents()).as("the snapshot wrote every row as a document").isEqualTo(50);

    Run unknownTable = weir("ctl", "pipelines", "snapshot", "orders", "--table", "public.nope");
    assertThat(unknownTable.exit()).isEqualTo(1);
    assertThat(unknownTable.err()).startsWith("bad-request: ");
  }

  @Test
  @Order(3)
  void outboxStatusAndAProjectionConsumerRoundTrip() throws Exception {
    sql("INSERT INTO cli_orders VALUES (1001, 'new')");
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
    while (documents() < 51 && System.nanoTime() < deadline) {
      Thread.sleep(200);
    }
    assertThat(documents()).as("a streamed row reaches the partitions").isEqualTo(51);
    String table = ok("ctl", "outbox", "status");
    assertThat(table).contains("PARTITION").contains(PARTITIONS + " partitions, ");
    int partition = -1;
    for (JsonNode p : okJson("ctl", "outbox", "status")) {
      if (p.path("outboxEntries").asLong() > 0) {
        partition = p.path("partition").asInt();
        break;
      }
    }
    assertThat(partition).as("some partition has outbox entries").isNotNegative();
    JsonNode one = okJson("ctl", "outbox", "status", "--partition", Integer.toString(partition));
    assertThat(one.get("partition").asInt()).isEqualTo(partition);
    long entries = one.get("outboxEntries").asLong();

    String p = Integer.toString(partition);
    assertThat(
            ok(
                "ctl",
                "projections",
                "configure",
                "--partition",
                p,
                "--consumer",
                "cli",
                "--generation",
                "1",
                "--collection",
                "orders",
                "--start-after",
                "0"))
        .contains("consumer cli generation 1 on partition " + p + ": created");
    String human =
        ok(
            "ctl",
            "projections",
            "read",
            "--partition",
            p,
            "--consumer",
            "cli",
            "--generation",
            "1");
    assertThat(human).contains("SEQUENCE").contains("orders").contains("batch token: ");
    JsonNode batch =
        okJson(
            "ctl",
            "projections",
            "read",
            "--partition",
            p,
            "--consumer",
            "cli",
            "--generation",
            "1");
    assertThat(batch.get("entries").size())
        .as("the batch holds the partition's entries")
        .isEqualTo((int) Math.min(entries, 100));
    String token = batch.get("token").asText();
    assertThat(ok("ctl", "projections", "commit", "--batch-token", token))
        .startsWith(
            "committed: partition "
                + p
                + " consumer cli generation 1, checkpoint "
                + batch.get("through").asLong());
    assertThat(ok("ctl", "projections", "commit", "--batch-token", token))
        .as("a retried commit")
        .contains("already processed");
    assertThat(
            okJson("ctl", "outbox", "status", "--partition", p)
                .get("consumers")
                .get(0)
                .get("checkpoint")
                .asLong())
        .isEqualTo(batch.get("through").asLong());
    assertThat(
            ok(
                "ctl",
                "projections",
                "release",
                "--partition",
                p,
                "--consumer",
                "cli",
                "--generation",
                "1"))
        .contains(": released");
    Run released =
        weir(
            "ctl",
            "projections",
            "read",
            "--partition",
            p,
            "--consumer",
            "cli",
            "--generation",
            "1");
    assertThat(released.exit()).as("a released generation is refused").isEqualTo(1);
    assertThat(released.err()).matches("(?s)[a-z-]+: .+");

    String purged =
        ok(
            "ctl",
            "outbox",
            "purge",
            "--partition",
            p,
            "--through",
            batch.get("through").asText(),
            "--all");
    assertThat(purged)
        .startsWith(
            "partition "
                + p
                + ": purged "
                + batch.get("through").asLong()
                + " entries; outbox now "
                + (batch.get("through").asLong() + 1)
                + "..");
    assertThat(okJson("ctl", "outbox", "status", "--partition", p).get("outboxEntries").asLong())
        .isEqualTo(entries - batch.get("through").asLong());
    Run purge = weir("ctl", "outbox", "purge", "--partition", p, "--through", "1000000000");
    assertThat(purge.exit()).as("purging past the outbox's end is refused").isEqualTo(1);
    assertThat(purge.err()).startsWith("bad-request: ");
  }

  @Test
  @Order(4)
  void documentsWriteLoadsJsonLinesInBatchesAndARerunWithTheKeyWritesNothingTwice()
      throws Exception {
    java.nio.file.Path input = java.nio.file.Files.createTempFile("cli-documents", ".jsonl");
    StringBuilder lines = new StringBuilder();
    for (int i = 0; i < 25; i++) {
      lines
          .append("{\"op\":\"put\",\"collection\":\"cli_notes\",\"id\":\"n")
          .append(i)
          .append("\",\"body\":{\"i\":")
          .append(i)
          .append("}}\n");
      if (i == 10) {
        lines.append("\n"); // a blank line is skipped
      }
    }
    // Line 27 expects a revision n0 does not have: its item fails, with its group of batch 3.
    lines
        .append("{\"op\":\"put\",\"collection\":\"cli_notes\",\"id\":\"n0\",\"body\":{},")
        .append("\"ifMatch\":7}\n");
    java.nio.file.Files.writeString(input, lines.toString());
    Run first =
        weir(
            "ctl",
            "documents",
            "write",
            "--file",
            input.toString(),
            "--batch-size",
            "10",
            "--idempotency-key",
            "cli-load-" + suffix);
    assertThat(first.exit()).as(first.err()).isEqualTo(1);
    assertThat(first.out())
        .contains("line 27: conflict (conflict)")
        .contains("26 items in 3 batches: ")
        .doesNotContain("n0");
    JsonNode again =
        okJsonAllowingFailures(
            "ctl",
            "documents",
            "write",
            "--file",
            input.toString(),
            "--batch-size",
            "10",
            "--idempotency-key",
            "cli-load-" + suffix);
    assertThat(again.get("batches").asInt()).isEqualTo(3);
    assertThat(again.get("applied").asLong()).isEqualTo(25);
    assertThat(again.get("failures")).hasSize(1);
    assertThat(again.get("failures").get(0).get("line").asLong()).isEqualTo(27);
    // Every document of the first two batches was written once: revision 1 after the rerun.
    HttpClientHolder http = new HttpClientHolder();
    for (int i = 0; i < 25; i++) {
      assertThat(http.revision(env.get("WEIR_URL"), ADMIN, "cli_notes", "n" + i))
          .as("n%d written once", i)
          .isEqualTo(1);
    }
    Run malformed = weir("ctl", "documents", "write", "--file", input + ".missing");
    assertThat(malformed.exit()).isEqualTo(2);
  }

  /** {@code --json} output of a command that may exit 1 (some items not written). */
  private JsonNode okJsonAllowingFailures(String... args) throws Exception {
    String[] all = java.util.Arrays.copyOf(args, args.length + 1);
    all[args.length] = "--json";
    Run r = weir(all);
    assertThat(r.exit()).as(r.err()).isIn(0, 1);
    return json.readTree(r.out());
  }

  /** Reads a document's revision over HTTP (its ETag). */
  private static final class HttpClientHolder {
    private final java.net.http.HttpClient client = java.net.http.HttpClient.newHttpClient();

    long revision(String base, String token, String collection, String id) throws Exception {
      java.net.http.HttpResponse<String> r =
          client.send(
              java.net.http.HttpRequest.newBuilder(
                      java.net.URI.create(base + "/v1/documents/" + collection + "/" + id))
                  .header("Authorization", "Bearer " + token)
                  .build(),
              java.net.http.HttpResponse.BodyHandlers.ofString());
      assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
      return Long.parseLong(r.headers().firstValue("ETag").orElseThrow().replace("\"", ""));
    }
  }

  @Test
  @Order(4)
  void principalsAndGrants() throws Exception {
    String alice = "cli-alice-" + suffix;
    Run created = weir("ctl", "principals", "create", alice, "--group", "ops");
    assertThat(created.exit()).as(created.err()).isZero();
    String aliceToken = created.out().strip();
    assertThat(aliceToken).as("stdout is the token alone").isNotEmpty().doesNotContain(" ");
    assertThat(ok("ctl", "grants", "grant", alice, "orders", "DocumentsRead"))
        .contains("granted DocumentsRead on orders");
    assertThat(ok("ctl", "grants", "grant", alice, "orders", "FieldRead:status"))
        .contains("granted FieldRead:status");
    assertThat(ok("ctl", "grants", "list", alice))
        .containsPattern(alice + " +orders +DocumentsRead")
        .containsPattern(alice + " +orders +FieldRead:status");
    assertThat(ok("ctl", "grants", "revoke", alice, "orders", "FieldRead:status"))
        .contains("revoked");
    JsonNode listed = null;
    for (JsonNode p : okJson("ctl", "principals", "list").get("principals")) {
      if (p.get("id").asText().equals(alice)) {
        listed = p;
      }
    }
    assertThat(listed).as("the new principal is listed").isNotNull();
    assertThat(listed.get("grants").get("orders").toString()).isEqualTo("[\"DocumentsRead\"]");
    assertThat(listed.get("groups").toString()).isEqualTo("[\"ops\"]");
    assertThat(ok("ctl", "principals", "list")).containsPattern(alice + " +no +ops +1 ");

    // A principal who is no administrator is refused: exit 1 and the node's typed error.
    Run forbidden = weir("ctl", "--token", aliceToken, "cluster", "status");
    assertThat(forbidden.exit()).isEqualTo(1);
    assertThat(forbidden.err().strip())
        .isEqualTo("forbidden: this operation requires a cluster administrator");
    Run forbiddenJson = weir("ctl", "--token", aliceToken, "cluster", "status", "--json");
    assertThat(json.readTree(forbiddenJson.out()).get("error").asText()).isEqualTo("forbidden");

    Run duplicate = weir("ctl", "principals", "create", alice);
    assertThat(duplicate.exit()).isEqualTo(1);
    assertThat(duplicate.err()).startsWith("conflict: ");

    assertThat(ok("ctl", "principals", "delete", alice))
        .contains("principal " + alice + " revoked");
    Run revoked = weir("ctl", "--token", aliceToken, "cluster", "status");
    assertThat(revoked.exit()).isEqualTo(1);
    assertThat(revoked.err()).startsWith("unauthenticated: ");
    Run unknown = weir("ctl", "grants", "grant", "cli-nobody-" + suffix, "orders", "DocumentsRead");
    assertThat(unknown.exit()).isEqualTo(1);
    assertThat(unknown.err()).startsWith("not-found: ");
  }

  @Test
  @Order(4)
  void partitionsStatusAndAcceptingAStorageLossThatDidNotHappen() throws Exception {
    String status = ok("ctl", "partitions", "status");
    assertThat(status)
        .contains("storage copies: 1 of 1 required")
        .contains("storage-behind: 0")
        .contains("PARTITION")
        .contains("TIMELINE")
        .contains("serving");
    JsonNode all = okJson("ctl", "partitions", "status");
    assertThat(all.size()).isEqualTo(PARTITIONS);
    for (JsonNode p : all) {
      assertThat(p.path("storage").path("state").asText()).isEqualTo("serving");
      // Purges are journal events a mark does not cover; every write is covered.
      long journal = p.path("journalEvents").asLong();
      assertThat(p.path("storage").path("acknowledged").asLong())
          .as("the mark of what the partition acknowledged")
          .isBetween(journal > 0 ? 1L : 0L, journal);
      // The storage the partition checked its journal on, and the one its mark was raised on.
      JsonNode checked = p.path("storage").path("checkedOn");
      assertThat(checked.path("systemIdentifier").asText()).matches("[0-9]{10,20}");
      assertThat(checked.path("timeline").asInt()).isPositive();
      if (journal > 0) {
        assertThat(p.path("storage").path("acknowledgedOn")).isEqualTo(checked);
      }
    }
    Run unconfirmed = weir("ctl", "partitions", "accept-storage-loss", "0");
    assertThat(unconfirmed.exit()).isEqualTo(2);
    assertThat(unconfirmed.err()).contains("--confirm");
    Run notBehind = weir("ctl", "partitions", "accept-storage-loss", "0", "--confirm");
    assertThat(notBehind.exit()).isEqualTo(1);
    assertThat(notBehind.err()).startsWith("not-storage-behind: ");
    Run outOfRange = weir("ctl", "partitions", "accept-storage-loss", "999", "--confirm");
    assertThat(outOfRange.exit()).isEqualTo(1);
    assertThat(outOfRange.err()).startsWith("bad-request: ");
  }

  @Test
  @Order(5)
  void refusedUnreachableAndUnauthenticated() throws Exception {
    Run unknown = weir("ctl", "pipelines", "status", "nosuch");
    assertThat(unknown.exit()).isEqualTo(1);
    assertThat(unknown.err().strip())
        .isEqualTo("not-found: no pipeline of that name is configured");
    Run noToken = weir(Map.of("WEIR_URL", env.get("WEIR_URL")), "ctl", "pipelines", "list");
    assertThat(noToken.exit()).isEqualTo(1);
    assertThat(noToken.err()).startsWith("unauthenticated: ");
    int closed = TestPorts.free(); // nothing listens there, and no other test takes it
    Run unreachable = weir("ctl", "--url", "http://127.0.0.1:" + closed, "cluster", "status");
    assertThat(unreachable.exit()).isEqualTo(3);
    assertThat(unreachable.err()).startsWith("unreachable: ");
  }

  @Test
  @Order(6)
  void stopAndStartThePipeline() throws Exception {
    assertThat(ok("ctl", "pipelines", "stop", "orders")).startsWith("pipeline orders: ");
    awaitPipeline("stopped");
    assertThat(ok("ctl", "pipelines", "list")).containsPattern("(?m)^orders +stopped");
    Run notStreaming = weir("ctl", "pipelines", "snapshot", "orders");
    assertThat(notStreaming.exit()).as("a stopped pipeline takes no snapshot").isEqualTo(1);
    assertThat(notStreaming.err()).startsWith("conflict: ");
    assertThat(ok("ctl", "pipelines", "start", "orders")).startsWith("pipeline orders: ");
    awaitPipeline("running");
  }
}
