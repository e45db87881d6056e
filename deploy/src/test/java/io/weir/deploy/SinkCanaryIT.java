package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.partition.Partitioning;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Row values never reach logs, errors, metrics or status from the file sink and the partition sink
 * (issue 24; the mirror sink is {@link CdcCanaryIT}). One node runs seven pipelines, each driven
 * into one failure with canary values in its rows, keys, logical messages and snapshot rows:
 *
 * <ul>
 *   <li>file sink whose target is a directory (unwritable), with an incremental snapshot at start
 *       and logical messages: the snapshot chunk, the streamed row and the messages are refused,
 *       the pipeline backs off again and again naming only the exception class; once the directory
 *       is gone the file holds every canary (they did reach the sink);
 *   <li>file sink, a transaction over {@code max-transaction-changes}: halt {@code
 *       transaction-too-large};
 *   <li>file sink streaming a large transaction that spills past {@code spill.max-bytes}: halt
 *       {@code spill-limit-exceeded} and its alert;
 *   <li>partition sink, an update leaving a TOASTed column unchanged on a row the partitions never
 *       saw (its key a canary): the partition refuses it, halt {@code sink-rejected};
 *   <li>partition sink, a row whose id column is NULL: halt {@code sink-rejected};
 *   <li>partition sink, a row whose document is over 2 MiB: halt {@code sink-rejected};
 *   <li>partition sink into full outboxes (a quota of 8 entries): the pipeline backs off ({@code
 *       outbox is full}), and a document write with a canary id and body is 429 {@code
 *       quota-exceeded}.
 * </ul>
 *
 * Admin calls carrying canaries (pipeline names, a snapshot table, a drop confirmation) are refused
 * with typed codes. Then the node's whole log, every error answer, {@code /metrics} and the admin
 * status routes are searched for every canary ({@link Canaries}): 0 hits.
 */
class SinkCanaryIT extends EndToEndTest {
  private static final int PARTITIONS = 4;
  private static final int QUOTA = 8;
  private static final List<String> PIPELINES =
      List.of(
          "file_blocked",
          "file_large",
          "file_spill",
          "part_toast",
          "part_nullkey",
          "part_large",
          "part_quota");

  private final Canaries canaries = new Canaries("sink-canary");

  /** The node's configuration, the file sinks' files and the spill directory. */
  private Path work;

  @AfterEach
  void deleteWork() throws java.io.IOException {
    if (work == null) {
      return;
    }
    try (java.util.stream.Stream<Path> files = Files.walk(work)) {
      for (Path f : files.sorted(java.util.Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(f);
      }
    }
  }

  @Test
  void refusedRowsLeaveNoValueInLogsErrorsMetricsOrStatus() throws Exception {
    long t0 = System.nanoTime();
    String blockedKey = canaries.next("snapshot-key");
    String blockedNote = canaries.next("snapshot-row");
    String streamedNote = canaries.next("file-row");
    String messagePrefix = canaries.next("message-prefix");
    String messageContent = canaries.next("message-content");
    String loosePrefix = canaries.next("loose-message-prefix");
    String looseContent = canaries.next("loose-message-content");
    String largeNote = canaries.next("large-transaction-row");
    String spillNote = canaries.next("spilled-row");
    String toastKey = canaries.next("toast-key");
    String toastValue = canaries.next("toast-value");
    String toastNote = canaries.next("toast-note");
    String nullKeyNote = canaries.next("null-key-row");
    String hugeValue = canaries.next("huge-row");
    String floodNote = canaries.next("flood-row");

    db = TestPostgres.server().freshDatabase("sinkleaks");
    work = Files.createTempDirectory("weir-sinks");
    Path blocked =
        Files.createDirectories(work.resolve("blocked.jsonl")); // a directory: unwritable
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.blocked (k text PRIMARY KEY, note text)");
      s.execute("INSERT INTO public.blocked VALUES ('" + blockedKey + "', '" + blockedNote + "')");
      s.execute("CREATE TABLE public.large (id int PRIMARY KEY, note text)");
      s.execute("CREATE TABLE public.spill (id int PRIMARY KEY, note text)");
      s.execute("CREATE TABLE public.toasty (k text PRIMARY KEY, big text, note text)");
      s.execute("ALTER TABLE public.toasty ALTER COLUMN big SET STORAGE EXTERNAL");
      // Before the slot exists: the partitions never receive this row.
      s.execute(
          "INSERT INTO public.toasty VALUES ('"
              + toastKey
              + "', '"
              + toastValue
              + "' || repeat('t', 8000), 'before')");
      s.execute("CREATE TABLE public.nullkey (ref text, note text)");
      s.execute("ALTER TABLE public.nullkey REPLICA IDENTITY FULL");
      s.execute("CREATE TABLE public.huge (id int PRIMARY KEY, body text)");
      s.execute("CREATE TABLE public.flood (id int PRIMARY KEY, note text)");
      for (String t : List.of("blocked", "large", "spill", "toasty", "nullkey", "huge", "flood")) {
        s.execute("CREATE PUBLICATION " + t + "_pub FOR TABLE public." + t);
      }
    }
    String suffix = db.name().substring(db.name().length() - 8);
    Path config = work.resolve("node.conf");
    Files.writeString(
        config,
        String.join(
            "\n",
            "weir.partitions.count = " + PARTITIONS,
            "weir.partitions.outbox.max-entries = " + QUOTA,
            "weir.pipelines.file_blocked {",
            "  slot = file_blocked_" + suffix,
            "  publications = [blocked_pub]",
            "  start-mode = [go-forward, incremental]",
            "  messages = true",
            "  min-backoff = 200ms, max-backoff = 1s",
            "  sink { type = file, path = \"" + blocked + "\" }",
            "}",
            "weir.pipelines.file_large {",
            "  slot = file_large_" + suffix,
            "  publications = [large_pub]",
            "  max-transaction-changes = 3",
            "  sink { type = file, path = \"" + work.resolve("large.jsonl") + "\" }",
            "}",
            "weir.pipelines.file_spill {",
            "  slot = file_spill_" + suffix,
            "  publications = [spill_pub]",
            "  streaming { enabled = true, decoding-work-mem = 64kB,",
            "    spill { directory = \""
                + work.resolve("spill")
                + "\", memory-bound = 1KiB, max-bytes = 16KiB } }",
            "  sink { type = file, path = \"" + work.resolve("spill.jsonl") + "\" }",
            "}",
            "weir.pipelines.part_toast { slot = part_toast_"
                + suffix
                + ", publications = [toasty_pub],",
            "  sink { type = partitions, collections { \"public.toasty\" = toasty } } }",
            "weir.pipelines.part_nullkey { slot = part_nullkey_"
                + suffix
                + ", publications = [nullkey_pub],",
            "  sink { type = partitions, collections { \"public.nullkey\" = nullkey },",
            "    id-columns { \"public.nullkey\" = [ref] } } }",
            "weir.pipelines.part_large { slot = part_large_"
                + suffix
                + ", publications = [huge_pub],",
            "  sink { type = partitions, collections { \"public.huge\" = huge } } }",
            "weir.pipelines.part_quota { slot = part_quota_"
                + suffix
                + ", publications = [flood_pub],",
            "  min-backoff = 200ms, max-backoff = 1s,",
            "  sink { type = partitions, collections { \"public.flood\" = flood } } }"));
    NodeProcess node = startNode("sinkleaks", config);
    awaitReady(node, PARTITIONS);
    for (String p : PIPELINES.subList(1, PIPELINES.size())) {
      awaitRunning(node, p);
    }

    // The file sink with an unwritable target: the snapshot chunk fails first, then streamed rows
    // and messages; each failure restarts the stream, naming the exception class only.
    awaitPipeline(
        node,
        "file_blocked",
        s ->
            s.get("restarts").asLong() >= 2
                && s.path("detail").asText().contains("file sink could not write"));
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("INSERT INTO public.blocked VALUES ('plain', '" + streamedNote + "')");
      s.execute(
          "SELECT pg_logical_emit_message(true, '"
              + messagePrefix
              + "', '"
              + messageContent
              + "')");
      s.execute(
          "SELECT pg_logical_emit_message(false, '" + loosePrefix + "', '" + looseContent + "')");
      // Over max-transaction-changes (3) in one transaction.
      s.execute(
          "INSERT INTO public.large SELECT g, '" + largeNote + "' FROM generate_series(1, 5) g");
      // About 600 kB in one transaction: streamed (64kB decoding memory), spilled past 16 KiB.
      s.execute(
          "INSERT INTO public.spill SELECT g, '"
              + spillNote
              + "' || repeat('s', 300) FROM generate_series(1, 2000) g");
      s.execute("UPDATE public.toasty SET note = '" + toastNote + "' WHERE k = '" + toastKey + "'");
      s.execute("INSERT INTO public.nullkey VALUES (NULL, '" + nullKeyNote + "')");
      s.execute("INSERT INTO public.huge VALUES (1, '" + hugeValue + "' || repeat('h', 2200000))");
    }
    Map<String, String[]> halts =
        Map.of(
            "file_large", new String[] {"transaction-too-large", "more than"},
            "file_spill", new String[] {"spill-limit-exceeded", ""},
            "part_toast", new String[] {"sink-rejected", "keeps unchanged (TOAST) fields"},
            "part_nullkey",
                new String[] {"sink-rejected", "a key column of nullkey carries no value"},
            "part_large", new String[] {"sink-rejected", "a row's document is larger than"});
    for (Map.Entry<String, String[]> h : halts.entrySet()) {
      String p = h.getKey();
      await("pipeline " + p + " halts")
          .atMost(Duration.ofSeconds(120))
          .pollInterval(Duration.ofMillis(200))
          .until(
              () ->
                  node.pipeline(p)
                      .map(s -> s.get("state").asText().equals("halted"))
                      .orElse(false));
      JsonNode status = node.pipelineNow(p);
      assertThat(status.get("reason").asText()).as("%s halts typed", p).isEqualTo(h.getValue()[0]);
      assertThat(status.get("detail").asText()).as("%s names why", p).contains(h.getValue()[1]);
      assertThat(Canaries.logs(node))
          .as("the log has %s's halt", p)
          .contains("pipeline " + p + ": halted (" + h.getValue()[0] + ")");
      System.out.printf(
          "sink-canary: %s halted %s: %s%n",
          p, status.get("reason").asText(), status.get("detail").asText());
    }

    adminRefusals(node);

    // The outboxes fill up (8 entries each): the pipeline pauses, and the document API refuses.
    try (Connection c = db.connect();
        PreparedStatement ps = c.prepareStatement("INSERT INTO public.flood VALUES (?, ?)")) {
      for (int i = 1; i <= 12 * PARTITIONS; i++) {
        ps.setInt(1, i);
        ps.setString(2, floodNote);
        ps.executeUpdate(); // one transaction each
      }
    }
    awaitPipeline(
        node,
        "part_quota",
        s ->
            s.get("restarts").asLong() >= 2
                && s.path("detail").asText().contains("outbox is full"));
    int full = fullPartition(node);
    String idBase = canaries.next("document-id");
    String docId = null;
    for (int i = 0; docId == null; i++) {
      if (Partitioning.partitionOf("notes", idBase + i, PARTITIONS) == full) {
        docId = idBase + i;
      }
    }
    String docValue = canaries.next("document-body");
    String idempotencyKey = canaries.next("idempotency-key");
    canaries.refused(
        "a write into a full outbox",
        node.sendOnce(
            "PUT",
            "/v1/documents/notes/" + docId,
            "{\"note\":\"" + docValue + "\"}",
            Map.of("Content-Type", "application/json", "Idempotency-Key", idempotencyKey)),
        429,
        "quota-exceeded");

    // The blocked file sink recovers once its target can be created: every canary reached it (the
    // snapshot rows come with the chunk's high watermark, after the rows streamed before it).
    Files.delete(blocked);
    java.util.Base64.Encoder base64 = java.util.Base64.getEncoder();
    List<String> delivered =
        List.of(
            blockedKey,
            blockedNote,
            streamedNote,
            messagePrefix,
            loosePrefix,
            base64.encodeToString(messageContent.getBytes(java.nio.charset.StandardCharsets.UTF_8)),
            base64.encodeToString(looseContent.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
    await("the file sink writes every refused row and message once its target is a file")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> {
              if (!Files.isRegularFile(blocked)) {
                return false;
              }
              String text = Files.readString(blocked);
              return delivered.stream().allMatch(text::contains);
            });
    assertThat(canaries.found(Files.readString(blocked)))
        .as("the scan finds the canaries where they are by design")
        .hasSizeGreaterThanOrEqualTo(7);
    awaitPipeline(node, "file_blocked", s -> s.get("state").asText().equals("running"));

    String log = Canaries.logs(node);
    assertThat(log)
        .as("the refused deliveries were logged, value-free")
        .contains("pipeline file_blocked: file sink could not write: ")
        .contains("pipeline part_quota: partition ")
        .contains(
            "refused method=PUT route=/v1/documents/{collection}/{id} status=429"
                + " reason=quota-exceeded");
    String metrics = node.getUntil("/metrics", true).body();
    assertThat(metrics)
        .as("halts, alerts and restarts are counted by reason and class")
        .contains(
            "weir_cdc_halts_total{pipeline=\"file_large\",reason=\"transaction-too-large\"} 1.0")
        .contains(
            "weir_cdc_halts_total{pipeline=\"file_spill\",reason=\"spill-limit-exceeded\"} 1.0")
        .contains(
            "weir_cdc_alerts_total{alert=\"spill-limit-exceeded\",pipeline=\"file_spill\"} 1.0")
        .contains("weir_cdc_halts_total{pipeline=\"part_toast\",reason=\"sink-rejected\"} 1.0")
        .contains("weir_cdc_halts_total{pipeline=\"part_nullkey\",reason=\"sink-rejected\"} 1.0")
        .contains("weir_cdc_halts_total{pipeline=\"part_large\",reason=\"sink-rejected\"} 1.0")
        .contains("weir_cdc_restarts_total{error=\"SinkException\",pipeline=\"file_blocked\"}")
        .contains("weir_cdc_restarts_total{error=\"SinkException\",pipeline=\"part_quota\"}");
    assertThat(metrics).contains("weir_partition_quota_refusals_total");
    assertThat(metrics)
        .as("the file sink's store retries are counted (none here: the store is up)")
        .contains("weir_cdc_checkpoint_retries_total{pipeline=\"file_large\"} 0.0");

    canaries.assertNoLeak(node, nodes, PIPELINES);
    System.out.printf(
        "sink-canary: pipelines=%d halted=%d run-s=%.1f%n",
        PIPELINES.size(), halts.size(), (System.nanoTime() - t0) / 1e9);
  }

  /** Admin requests whose path, query or body carries a canary: typed refusals, nothing echoed. */
  private void adminRefusals(NodeProcess node) {
    String name = canaries.next("pipeline-name");
    canaries.refused(
        "status of an unknown pipeline",
        node.getUntil("/admin/pipelines/" + name, true),
        404,
        "not-found");
    canaries.refused(
        "start of an unknown pipeline",
        node.sendIdempotent("POST", "/admin/pipelines/" + name + "/start", null, Map.of()),
        404,
        "not-found");
    canaries.refused(
        "a drop confirmed with another name",
        node.sendIdempotent(
            "DELETE",
            "/admin/pipelines/part_toast?confirm=" + canaries.next("drop-confirmation"),
            null,
            Map.of()),
        400,
        "bad-request");
    canaries.refused(
        "a snapshot of a table outside the publications",
        node.sendIdempotent(
            "POST",
            "/admin/pipelines/part_quota/snapshot",
            "{\"tables\":[\"public." + canaries.next("snapshot-table") + "\"]}",
            Map.of("Content-Type", "application/json")),
        400,
        "bad-request");
    canaries.refused(
        "a snapshot body of the wrong shape",
        node.sendIdempotent(
            "POST",
            "/admin/pipelines/part_quota/snapshot",
            "{\"tables\":\"" + canaries.next("snapshot-tables") + "\"}",
            Map.of("Content-Type", "application/json")),
        400,
        "bad-request");
    canaries.refused(
        "a purge body of the wrong shape",
        node.sendIdempotent(
            "POST",
            "/admin/outbox/purge",
            "{\"partition\":\"" + canaries.next("purge-partition") + "\",\"through\":1}",
            Map.of("Content-Type", "application/json")),
        400,
        "bad-request");
    canaries.refused(
        "outbox status of a partition that is not a number",
        node.getUntil("/admin/outbox/status?partition=" + canaries.next("partition"), true),
        400,
        "bad-request");
  }

  /** Waits until {@code pipeline}'s status satisfies {@code condition}. */
  private static void awaitPipeline(
      NodeProcess node, String pipeline, Predicate<JsonNode> condition) {
    await("pipeline " + pipeline)
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(200))
        .until(() -> node.pipeline(pipeline).map(condition::test).orElse(false));
  }

  /** A partition whose outbox holds its quota. */
  private static int fullPartition(NodeProcess node) {
    return await("an outbox is full")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> {
              HttpResponse<String> r = node.getUntil("/admin/outbox/status", true);
              for (JsonNode p :
                  new com.fasterxml.jackson.databind.ObjectMapper().readTree(r.body())) {
                if (p.get("outboxEntries").asLong() >= QUOTA) {
                  return p.get("partition").asInt();
                }
              }
              return -1;
            },
            p -> p >= 0);
  }
}
