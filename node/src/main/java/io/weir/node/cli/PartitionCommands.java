package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/**
 * {@code weir ctl partitions status|accept-storage-loss}: whether each partition's journal holds
 * what it acknowledged, the storage's copies, and the operator's answer to a storage that lost
 * acknowledged writes (ADR 0036).
 */
@Command(
    name = "partitions",
    mixinStandardHelpOptions = true,
    description = "Partitions and their storage: copies, storage-behind, accepting a loss.")
final class PartitionCommands extends Group {
  @ParentCommand CtlCommand ctl;

  @Command(
      name = "status",
      mixinStandardHelpOptions = true,
      description = {
        "The storage's durable copies of a commit as this node reads them (GET /health/ready), and"
            + " per partition its storage check: serving, checking, unchecked or storage-behind,"
            + " the journal sequence it acknowledged, its journal's tail and its epoch (GET"
            + " /admin/outbox/status)."
      })
  int status() {
    AdminClient.Reply ready = ctl.client().getAnyStatus("/health/ready");
    AdminClient.Reply all = ctl.client().get("/admin/outbox/status");
    if (ctl.json()) {
      ctl.printJson(all);
      return CtlCommand.EXIT_OK;
    }
    ctl.out().print(render(ready.json(), all.json()));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "accept-storage-loss",
      mixinStandardHelpOptions = true,
      description = {
        "Give a partition halted storage-behind (its journal lacks writes it acknowledged, after a"
            + " failover to a copy that was behind) a new incarnation at its journal's tail (POST"
            + " /admin/partitions/N/accept-storage-loss). The writes the storage lost stay lost;"
            + " the partition's batch tokens and cursors then answer token-invalidated; writes go"
            + " again. Try restoring the lost copy first (docs/operations.md)."
      })
  int acceptStorageLoss(
      @Parameters(index = "0", paramLabel = "N", description = "The partition.") int partition,
      @Option(
              names = "--confirm",
              description = "Required: you accept that the lost writes are gone.")
          boolean confirm) {
    if (!confirm) {
      throw ctl.usage(
          "accepting a storage loss gives up the writes the storage lost and invalidates the"
              + " partition's tokens and cursors; add --confirm");
    }
    AdminClient.Reply reply =
        ctl.client()
            .post(
                "/admin/partitions/" + partition + "/accept-storage-loss?confirm=" + partition,
                null);
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    JsonNode r = reply.json();
    ctl.out()
        .println(
            "partition "
                + partition
                + ": new incarnation at journal sequence "
                + r.path("journalTail").asLong()
                + " (epoch "
                + r.path("epoch").asLong()
                + "); acknowledged journal events lost: "
                + (r.path("lost").asLong() > 0 ? r.path("lost").asText() : "unknown"));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  /**
   * The timeline the partition checked its journal on, and the one its last acknowledged commit was
   * written to when that differs ({@code 4 (ack 3)}: acknowledged before a promotion).
   */
  static String timelines(JsonNode storage) {
    JsonNode checked = storage.path("checkedOn");
    JsonNode acked = storage.path("acknowledgedOn");
    String on = checked.isObject() ? Integer.toString(checked.path("timeline").asInt()) : "-";
    if (acked.isObject() && acked.path("timeline").asInt() != checked.path("timeline").asInt(-1)) {
      on += " (ack " + acked.path("timeline").asInt() + ")";
    }
    return on;
  }

  /**
   * A documents table's unapplied events and their bytes, e.g. {@code 12 (3.1 KiB)}; {@code -}
   * without a table.
   */
  static String tableLag(JsonNode table) {
    if (!table.isObject()) {
      return "-";
    }
    long bytes = table.path("lagBytes").asLong();
    String size =
        bytes < 1024
            ? bytes + " B"
            : bytes < 1024 * 1024
                ? String.format(java.util.Locale.ROOT, "%.1f KiB", bytes / 1024.0)
                : String.format(java.util.Locale.ROOT, "%.1f MiB", bytes / (1024.0 * 1024));
    return table.path("lagEvents").asLong() + " (" + size + ")";
  }

  /** The copies line and one row per partition; storage-behind ones counted first. */
  static String render(JsonNode ready, JsonNode partitions) {
    StringBuilder out = new StringBuilder();
    JsonNode checks = ready == null ? null : ready.path("checks");
    String copies = checks == null ? null : CtlCommand.text(checks, "storage-copies");
    out.append("storage copies: ").append(copies == null ? "-" : copies).append('\n');
    String system = checks == null ? null : CtlCommand.text(checks, "storage-system");
    if (system != null) {
      out.append("storage:        ").append(system).append('\n');
    }
    int behind = 0;
    TextTable table =
        new TextTable(
            "PARTITION",
            "STORAGE",
            "ACKNOWLEDGED",
            "JOURNAL",
            "EPOCH",
            "COPIES",
            "TIMELINE",
            "TABLE",
            "TABLE-LAG");
    for (JsonNode p : partitions) {
      JsonNode s = p.path("storage");
      String state = s.isObject() ? s.path("state").asText() : "-";
      if ("storage-behind".equals(state)) {
        behind++;
      }
      table.row(
          p.path("partition").asInt(),
          state,
          s.isObject() ? s.path("acknowledged").asLong() : "-",
          p.path("journalEvents").asLong(),
          s.isObject() ? s.path("epoch").asLong() : "-",
          !s.isObject() || s.path("copies").asInt(-1) < 0 ? "-" : s.path("copies").asInt(),
          timelines(s),
          p.path("documentsTable").isObject()
              ? p.path("documentsTable").path("state").asText()
              : "-",
          tableLag(p.path("documentsTable")));
    }
    out.append("storage-behind: ").append(behind).append('\n');
    out.append(table.render());
    return out.toString();
  }
}
