package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code weir ctl outbox status|purge}: partitions' outboxes ({@code /admin/outbox/*}). */
@Command(
    name = "outbox",
    mixinStandardHelpOptions = true,
    description = "Partition outboxes: status and purge.")
final class OutboxCommands extends Group {
  @ParentCommand CtlCommand ctl;

  @Command(
      name = "status",
      mixinStandardHelpOptions = true,
      description =
          "Outbox counters, consumers and watermarks of one partition, or a summary of all "
              + "(GET /admin/outbox/status).")
  int status(
      @Option(
              names = "--partition",
              paramLabel = "N",
              description = "One partition (default: all).")
          Integer partition) {
    AdminClient.Reply reply =
        ctl.client()
            .get("/admin/outbox/status" + (partition == null ? "" : "?partition=" + partition));
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    ctl.out().print(partition == null ? renderAll(reply.json()) : renderOne(reply.json()));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "purge",
      mixinStandardHelpOptions = true,
      description = {
        "Reclaim a partition's outbox entries up to a sequence (POST /admin/outbox/purge). The node purges at "
            + "most 100,000 entries per request and never past an active consumer's checkpoint.",
        "With --all, asks again until nothing more can be purged, showing progress on stderr."
      })
  int purge(
      @Option(
              names = "--partition",
              required = true,
              paramLabel = "N",
              description = "The partition.")
          int partition,
      @Option(
              names = "--through",
              required = true,
              paramLabel = "SEQUENCE",
              description =
                  "The last outbox sequence to reclaim (must be below the outbox's next sequence).")
          long through,
      @Option(
              names = "--all",
              description = "Repeat until the node says there is no more to purge.")
          boolean all) {
    Map<String, Object> body = Map.of("partition", partition, "through", through);
    Progress progress = new Progress(ctl.err(), ctl.terminal(), 5_000);
    long total = 0;
    AdminClient.Reply reply;
    int requests = 0;
    while (true) {
      reply = ctl.client().post("/admin/outbox/purge", body);
      requests++;
      JsonNode r = reply.json();
      total += r.path("purged").asLong();
      boolean more = r.path("more").asBoolean();
      if (!all || !more || r.path("purged").asLong() == 0) {
        if (all && requests > 1) {
          progress.finish(purgeLine(partition, total, r));
        }
        break;
      }
      progress.update(purgeLine(partition, total, r));
    }
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    JsonNode r = reply.json();
    ctl.out()
        .println(
            purgeLine(partition, all ? total : r.path("purged").asLong(), r)
                + (r.path("more").asBoolean()
                    ? "; more can be purged: ask again" + (all ? "" : " (or use --all)")
                    : "")
                + (r.path("pinned").asBoolean()
                    ? "; stopped at an active consumer's checkpoint"
                    : ""));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  private static String purgeLine(int partition, long purged, JsonNode r) {
    return String.format(
        Locale.ROOT,
        "partition %d: purged %,d entries; outbox now %d..%d",
        partition,
        purged,
        r.path("outboxFirst").asLong(),
        r.path("outboxNext").asLong());
  }

  static String renderAll(JsonNode list) {
    TextTable table =
        new TextTable(
            "PARTITION",
            "DOCUMENTS",
            "FIRST",
            "NEXT",
            "ENTRIES",
            "BYTES",
            "JOURNAL",
            "CONSUMERS",
            "MAX-LAG");
    long entries = 0;
    long bytes = 0;
    for (JsonNode p : list) {
      long maxLag = -1;
      int active = 0;
      for (JsonNode c : p.path("consumers")) {
        if (!c.path("released").asBoolean()) {
          active++;
          maxLag = Math.max(maxLag, c.path("lag").asLong());
        }
      }
      entries += p.path("outboxEntries").asLong();
      bytes += p.path("outboxBytes").asLong();
      table.row(
          p.path("partition").asInt(),
          p.path("documents").asLong(),
          p.path("outboxFirst").asLong(),
          p.path("outboxNext").asLong(),
          p.path("outboxEntries").asLong(),
          p.path("outboxBytes").asLong(),
          p.path("journalEvents").asLong(),
          active,
          maxLag < 0 ? null : maxLag);
    }
    return table.render()
        + String.format(
            Locale.ROOT,
            "%n%d partitions, %,d retained entries, %,d bytes%n",
            table.size(),
            entries,
            bytes);
  }

  static String renderOne(JsonNode p) {
    Map<String, Object> fields = new LinkedHashMap<>();
    fields.put("partition", p.path("partition").asInt());
    fields.put("documents", p.path("documents").asLong());
    fields.put(
        "outbox",
        p.path("outboxFirst").asLong()
            + ".."
            + p.path("outboxNext").asLong()
            + " (first retained .. next)");
    fields.put("entries", p.path("outboxEntries").asLong());
    fields.put("bytes", p.path("outboxBytes").asLong());
    fields.put("journal events", p.path("journalEvents").asLong());
    StringBuilder out = new StringBuilder(PipelineCommands.keyValues(fields));
    TextTable consumers =
        new TextTable(
            "CONSUMER", "GENERATION", "CHECKPOINT", "LAG", "RELEASED", "COLLECTIONS", "KINDS");
    for (JsonNode c : p.path("consumers")) {
      consumers.row(
          c.path("consumer").asText(),
          c.path("generation").asLong(),
          c.path("checkpoint").asLong(),
          c.path("lag").asLong(),
          c.path("released").asBoolean() ? "yes" : "no",
          list(c.path("collections")),
          list(c.path("kinds")));
    }
    out.append('\n').append(consumers.size() == 0 ? "no consumers\n" : consumers.render());
    TextTable watermarks = new TextTable("SOURCE", "WATERMARK");
    List<String> sources = new ArrayList<>();
    p.path("watermarks").fieldNames().forEachRemaining(sources::add);
    Collections.sort(sources);
    for (String s : sources) {
      watermarks.row(s, p.path("watermarks").get(s).asText());
    }
    out.append('\n').append(watermarks.size() == 0 ? "no CDC watermarks\n" : watermarks.render());
    return out.toString();
  }

  /** A JSON array of strings as {@code a,b}; empty as {@code *} (all). */
  static String list(JsonNode array) {
    List<String> items = new ArrayList<>();
    array.forEach(i -> items.add(i.asText()));
    return items.isEmpty() ? "*" : String.join(",", items);
  }
}
