package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.metrics.Exposition;
import io.weir.node.metrics.RouteTemplates;
import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineMetrics;
import io.weir.persistence.testing.TestPostgres;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * {@code GET /metrics} of a real node process with a streaming pipeline into its partitions: the
 * scrape token opens it; rows, transactions, HTTP requests and persisted frames are counted; the
 * lag in bytes and seconds rises while the partitions' outboxes are full (quota refusals counted,
 * the fullest partition's quota use at 1) and falls back to 0 once they are purged and the pipeline
 * has caught up. Row values, document ids and collection names written with distinctive canaries
 * never appear in the output, and every label takes its values from a bounded set.
 */
class MetricsIT extends EndToEndTest {
  private static final int PARTITIONS = 4;
  private static final int QUOTA = 40;
  private static final String SCRAPE_TOKEN = "e2e-scrape-token-0123456789";
  private static final String ROW_CANARY = "ROWCANARY9f3b";
  private static final String ID_CANARY = "idcanary4c7e";
  private static final String COLLECTION_CANARY = "collcanary2a8d";
  private final ObjectMapper json = new ObjectMapper();

  @Test
  void lagRowsAndRequestsMoveAndNoValueOrUnboundedLabelAppears() throws Exception {
    db = TestPostgres.server().freshDatabase("metrics");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.src (id bigint PRIMARY KEY, note text NOT NULL)");
      s.execute("CREATE PUBLICATION metrics_pub FOR TABLE public.src");
    }
    Path config = Files.createTempFile("weir-metrics", ".conf");
    Files.writeString(
        config,
        String.join(
            "\n",
            "weir.partitions.outbox.max-entries = " + QUOTA,
            "weir.pipelines.src {",
            "  slot = metrics_slot_" + db.name().substring(db.name().length() - 10),
            "  publications = [metrics_pub]",
            "  min-backoff = 200ms",
            "  max-backoff = 1s",
            "  max-command-retries = 1000",
            "  sink { type = partitions, collections { \"public.src\" = src } }",
            "}"));
    NodeProcess node =
        NodeProcess.start(
            new NodeProcess.Spec("metrics")
                .database(db)
                .env("WEIR_PARTITIONS", Integer.toString(PARTITIONS))
                .env("WEIR_METRICS_TOKEN", SCRAPE_TOKEN)
                .args("--config", config.toString()));
    nodes.add(node);
    awaitReady(node, PARTITIONS);
    awaitRunning(node, "src");

    assertThat(scrapeAs(node, null).statusCode())
        .as("/metrics needs a token by default")
        .isEqualTo(401);
    // The shard region counts an entity as running once it starts; a partition reports its
    // outbox when it has recovered, and times its recovery when it serves reads (its documents
    // table caught up), a moment later.
    await("every partition's recovery is timed")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () ->
                scrape(node).sum("weir_partition_recovery_seconds_count", Map.of()) >= PARTITIONS);
    Exposition first = scrape(node);
    assertThat(first.value("weir_cdc_state", Map.of("pipeline", "src", "state", "running")))
        .hasValue(1.0);
    assertThat(first.value("weir_partitions_hosted", Map.of())).hasValue((double) PARTITIONS);

    // Documents through the API, with canaries in collection, id and body. The writes and the 404
    // are counted below by route and status: sent once (a repetition would count twice).
    for (int i = 0; i < 5; i++) {
      HttpResponse<String> put =
          node.sendOnce(
              "PUT",
              "/v1/documents/" + COLLECTION_CANARY + "/" + ID_CANARY + i,
              "{\"secret\":\"" + ROW_CANARY + "\"}",
              Map.of("Content-Type", "application/json"));
      assertThat(put.statusCode()).as("document write: %s", put.body()).isEqualTo(200);
      assertThat(
              node.sendIdempotent(
                      "GET",
                      "/v1/documents/" + COLLECTION_CANARY + "/" + ID_CANARY + i,
                      null,
                      Map.of())
                  .statusCode())
          .isEqualTo(200);
    }
    assertThat(
            node.sendOnce(
                    "GET",
                    "/v1/documents/" + COLLECTION_CANARY + "/missing" + ID_CANARY,
                    null,
                    Map.of())
                .statusCode())
        .isEqualTo(404);
    // The API's documents take 5 of the partitions' quota; purge them so the rows below fill it.
    purgeAll(node);

    // Rows within the quota: delivered, lag back to 0.
    int first10 = 10;
    insert(1, first10);
    await("the first rows are delivered")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(300))
        .until(
            () ->
                scrape(node)
                        .value(
                            "weir_cdc_rows_total", Map.of("pipeline", "src", "table", "public.src"))
                        .orElse(0.0)
                    >= first10);
    Exposition delivered = scrape(node);
    assertThat(delivered.value("weir_cdc_transactions_total", Map.of("pipeline", "src")))
        .hasValue((double) first10);
    assertThat(delivered.value("weir_partition_frames_total", Map.of()).orElse(0.0))
        .as("frames persisted: 5 documents and 10 CDC transactions at least")
        .isGreaterThanOrEqualTo(15);
    assertThat(
            delivered.value(
                "weir_http_requests_seconds_count",
                Map.of(
                    "method", "PUT", "route", "/v1/documents/{collection}/{id}", "status", "200")))
        .hasValue(5.0);
    assertThat(
            delivered.value(
                "weir_http_requests_seconds_count",
                Map.of(
                    "method", "GET", "route", "/v1/documents/{collection}/{id}", "status", "404")))
        .hasValue(1.0);

    // More rows than the quota holds: the pipeline backs off, lag builds up.
    int total = first10 + PARTITIONS * QUOTA + 60;
    insert(first10 + 1, total);
    await("the outboxes fill and the quota refuses frames")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(300))
        .until(
            () ->
                scrape(node).value("weir_partition_quota_refusals_total", Map.of()).orElse(0.0)
                    > 0);
    // Time passes while the outboxes are full (the point: the waiting transaction ages); the scrape
    // that shows it may come later on a busy machine, the outboxes stay full until the purges.
    Thread.sleep(2500);
    Exposition stalled =
        await("the lag in seconds shows the wait")
            .atMost(Duration.ofSeconds(60))
            .pollInterval(Duration.ofMillis(300))
            .until(
                () -> scrape(node),
                e -> e.value("weir_cdc_lag_seconds", Map.of("pipeline", "src")).orElse(0.0) > 1.5);
    double lagBytes = stalled.value("weir_cdc_lag_bytes", Map.of("pipeline", "src")).orElseThrow();
    double lagSeconds =
        stalled.value("weir_cdc_lag_seconds", Map.of("pipeline", "src")).orElseThrow();
    System.out.printf(
        "metrics: stalled lag %.0f bytes, %.1f s; quota use max %.2f; refusals %.0f%n",
        lagBytes,
        lagSeconds,
        stalled.value("weir_partitions_quota_use_max", Map.of()).orElse(-1.0),
        stalled.value("weir_partition_quota_refusals_total", Map.of()).orElse(-1.0));
    assertThat(lagBytes).as("WAL waits behind the confirmed position").isPositive();
    assertThat(lagSeconds)
        .as("the oldest waiting transaction's age grows while the outbox is full")
        .isGreaterThan(1.5);
    assertThat(stalled.value("weir_partitions_quota_use_max", Map.of()).orElseThrow())
        .as("the fullest partition uses its whole quota")
        .isGreaterThan(0.9);
    assertThat(stalled.labelValues("partition"))
        .as("per-partition series for P=4")
        .containsExactlyInAnyOrder("0", "1", "2", "3");

    // Purge until every row is delivered; the lag returns to 0.
    await("purging lets the pipeline catch up")
        .atMost(Duration.ofMinutes(4))
        .pollInterval(Duration.ofMillis(500))
        .until(
            () -> {
              purgeAll(node);
              Exposition e = scrape(node);
              return e.value(
                              "weir_cdc_rows_total",
                              Map.of("pipeline", "src", "table", "public.src"))
                          .orElse(0.0)
                      >= total
                  && e.value("weir_cdc_lag_seconds", Map.of("pipeline", "src")).orElse(1.0) == 0.0
                  && e.value("weir_cdc_state", Map.of("pipeline", "src", "state", "running"))
                          .orElse(0.0)
                      == 1.0;
            });
    Exposition caughtUp = scrape(node);
    // At least once: a transaction redelivered after a restart (applied, not yet confirmed) counts
    // again.
    assertThat(
            caughtUp
                .value("weir_cdc_rows_total", Map.of("pipeline", "src", "table", "public.src"))
                .orElseThrow())
        .as("every row counted as delivered")
        .isGreaterThanOrEqualTo(total);
    assertThat(caughtUp.sum("weir_cdc_restarts_total", Map.of("pipeline", "src")))
        .as("the full outboxes restarted the pipeline")
        .isPositive();
    // Quiet again, the confirmed position follows the server's: past the WAL written until now (the
    // documents table's last applies included). Other databases of this server (the other tests)
    // keep writing WAL, so the lag in bytes itself is 0 only between two keep-alives; what it
    // measures is that the slot no longer holds WAL back.
    long walNow = walPosition();
    await("the confirmed position passes the WAL written until the catch-up")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(500))
        .until(
            () -> {
              Exposition e = scrape(node);
              return e.value("weir_cdc_lag_bytes", Map.of("pipeline", "src")).orElse(1.0) == 0.0
                  || e.value("weir_cdc_confirmed_lsn", Map.of("pipeline", "src")).orElse(0.0)
                      >= walNow;
            });
    assertThat(
            caughtUp.value(
                "weir_cdc_halts_total", Map.of("pipeline", "src", "reason", "slot-lost")))
        .as("halt reasons are exported at 0")
        .hasValue(0.0);

    // No value, and bounded labels only.
    String text = scrapeAs(node, SCRAPE_TOKEN).body();
    // Kept as a test artifact: what a scrape of a node with one pipeline looks like.
    Files.writeString(NodeProcess.logs().resolve("metrics-scrape.txt"), text);
    Exposition last = Exposition.parse(text);
    assertThat(last.value("weir_partitions_outbox_entries", Map.of()))
        .as("the node's outbox total after the purges")
        .isPresent();
    assertThat(last.sum("weir_partition_outbox_entries", Map.of()))
        .as("the per-partition series add up to the total")
        .isEqualTo(last.value("weir_partitions_outbox_entries", Map.of()).orElseThrow());
    for (String canary : new String[] {ROW_CANARY, ID_CANARY, COLLECTION_CANARY}) {
      assertThat(text).as("the metrics must not contain %s", canary).doesNotContain(canary);
    }
    assertBoundedLabels(Exposition.parse(text));
    JsonAssert.noCanary(node, ROW_CANARY, nodes);
  }

  /** Every label takes its values from a known, small set (or is a JVM binder's own). */
  private static void assertBoundedLabels(Exposition e) {
    Set<String> partitions =
        IntStream.range(0, PARTITIONS).mapToObj(Integer::toString).collect(Collectors.toSet());
    Map<String, Set<String>> allowed =
        new java.util.HashMap<>(
            Map.of(
                "pipeline", Set.of("src"),
                "table", Set.of("public.src"),
                "route", Set.copyOf(RouteTemplates.node().labels()),
                "method",
                    Set.of("GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "OTHER"),
                "partition", partitions,
                "reason",
                    Arrays.stream(HaltReason.values())
                        .map(HaltReason::wire)
                        .collect(Collectors.toSet()),
                "state", Set.copyOf(PipelineMetrics.STATES),
                "operation", Set.copyOf(io.weir.node.metrics.FeedMetrics.OPERATIONS)));
    allowed.putAll(
        Map.of(
            "outcome",
                java.util.stream.Stream.concat(
                        java.util.stream.Stream.of("ok"),
                        Arrays.stream(io.weir.protocol.ErrorCode.values())
                            .map(io.weir.protocol.ErrorCode::wire))
                    .collect(Collectors.toSet()),
            "spilled", Set.of("true", "false"),
            "source",
                Stream.concat(
                        io.weir.node.metrics.PartitionMetrics.BEFORE_IMAGE_SOURCES.stream(),
                        io.weir.node.metrics.PartitionMetrics.RECEIPT_LOOKUP_SOURCES.stream())
                    .collect(Collectors.toSet()),
            "alert",
                Arrays.stream(HaltReason.values())
                    .map(HaltReason::wire)
                    .collect(Collectors.toSet())));
    for (Exposition.Sample s : e.samples()) {
      for (Map.Entry<String, String> label : s.labels().entrySet()) {
        String v = label.getValue();
        if (label.getKey().equals("state") && !s.name().startsWith("weir_")) {
          continue; // jvm_threads_states_threads{state=...}: the JVM's thread states
        }
        if (allowed.containsKey(label.getKey())) {
          assertThat(allowed.get(label.getKey()))
              .as("%s of %s", label.getKey(), s.name())
              .contains(v);
        } else if (label.getKey().equals("error") && s.name().startsWith("weir_cdc_restarts")) {
          assertThat(v)
              .as("a restart's error is an exception class name")
              .matches("[A-Za-z_$][A-Za-z0-9_$]*");
        } else if (label.getKey().equals("status")) {
          assertThat(v).as("status of %s", s.name()).matches("[1-5][0-9][0-9]");
        } else if (label.getKey().equals("le") || label.getKey().equals("quantile")) {
          assertThat(v).matches("[0-9.E+-]+|\\+Inf");
        } else {
          assertThat(s.name())
              .as("label %s=%s belongs to a JVM or process binder", label.getKey(), v)
              .matches("(jvm|process|system)_.*");
        }
      }
    }
    long series = e.samples().size();
    System.out.printf("metrics: %d samples in the exposition%n", series);
    assertThat(series).as("the exposition stays small").isLessThan(1500);
  }

  /** The server's current WAL position, as the number the confirmed-LSN gauge shows. */
  private long walPosition() throws Exception {
    try (Connection c = db.connect();
        java.sql.ResultSet rs =
            c.createStatement().executeQuery("SELECT (pg_current_wal_lsn() - '0/0')::bigint")) {
      rs.next();
      return rs.getLong(1);
    }
  }

  private void insert(int from, int to) throws Exception {
    try (Connection c = db.connect();
        PreparedStatement ps = c.prepareStatement("INSERT INTO public.src VALUES (?, ?)")) {
      for (int i = from; i <= to; i++) {
        ps.setLong(1, i);
        ps.setString(2, ROW_CANARY + " row " + i);
        ps.executeUpdate(); // autocommit: one transaction per row
      }
    }
  }

  /** Purges every partition's outbox to its end. */
  private void purgeAll(NodeProcess node) throws Exception {
    for (int p = 0; p < PARTITIONS; p++) {
      JsonNode status =
          node.jsonUntil("/admin/outbox/status?partition=" + p, NodeProcess.ANSWER_DEADLINE);
      long last = status.get("outboxNext").asLong() - 1;
      if (last >= status.get("outboxFirst").asLong()) {
        // Purging through a position again purges nothing more: a repetition is harmless.
        HttpResponse<String> r =
            node.sendIdempotent(
                "POST",
                "/admin/outbox/purge",
                "{\"partition\":" + p + ",\"through\":" + last + "}",
                Map.of("Content-Type", "application/json"));
        assertThat(r.statusCode()).as("purge: %s", r.body()).isEqualTo(200);
      }
    }
  }

  private static Exposition scrape(NodeProcess node) {
    HttpResponse<String> r = scrapeAs(node, SCRAPE_TOKEN);
    assertThat(r.statusCode()).as("the scrape token opens /metrics").isEqualTo(200);
    return Exposition.parse(r.body());
  }

  private static HttpResponse<String> scrapeAs(NodeProcess node, String token) {
    return node.sendIdempotent(
        "GET",
        "/metrics",
        null,
        Map.of("Authorization", token == null ? "None" : "Bearer " + token));
  }
}
