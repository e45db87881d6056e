package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/**
 * {@code weir ctl pipelines list|status|check|start|stop|snapshot}: the CDC pipelines ({@code
 * /admin/pipelines}). {@code snapshot} waits for the snapshot to finish, drawing its progress on
 * stderr, unless {@code --no-wait}.
 */
@Command(
    name = "pipelines",
    aliases = "pipeline",
    mixinStandardHelpOptions = true,
    description = "CDC pipelines: list, status, start, stop, incremental snapshots.")
final class PipelineCommands extends Group {
  @ParentCommand CtlCommand ctl;

  @Command(
      name = "list",
      mixinStandardHelpOptions = true,
      description = "Every configured pipeline (GET /admin/pipelines).")
  int list() {
    AdminClient.Reply reply = ctl.client().get("/admin/pipelines");
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    ctl.out().print(renderList(reply.json()));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "status",
      mixinStandardHelpOptions = true,
      description = "One pipeline's status (GET /admin/pipelines/NAME).")
  int status(@Parameters(paramLabel = "NAME", description = "The pipeline's name.") String name) {
    AdminClient.Reply reply = ctl.client().get(path(name));
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    ctl.out().print(renderStatus(reply.json()));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "start",
      mixinStandardHelpOptions = true,
      description = "Start a stopped or halted pipeline.")
  int start(@Parameters(paramLabel = "NAME", description = "The pipeline's name.") String name) {
    return command(name, "start");
  }

  @Command(
      name = "stop",
      mixinStandardHelpOptions = true,
      description = "Stop a pipeline (its slot and checkpoint stay).")
  int stop(@Parameters(paramLabel = "NAME", description = "The pipeline's name.") String name) {
    return command(name, "stop");
  }

  @Command(
      name = "check",
      mixinStandardHelpOptions = true,
      description = {
        "How the pipeline's sink will handle each published table (GET /admin/pipelines/NAME/check):"
            + " by primary key, by identity index, by full image, inserts only, by document id, as"
            + " delivered, or refused with the typed reason and what to do. Reads catalogs only.",
        "Exit status 1 when a table is refused."
      })
  int check(@Parameters(paramLabel = "NAME", description = "The pipeline's name.") String name) {
    AdminClient.Reply reply = ctl.client().get(path(name) + "/check");
    boolean refused = false;
    for (JsonNode t : reply.json().path("tables")) {
      refused |= t.hasNonNull("reason");
    }
    if (ctl.json()) {
      ctl.printJson(reply);
    } else {
      ctl.out().print(renderCheck(reply.json()));
      ctl.out().flush();
    }
    return refused ? CtlCommand.EXIT_REFUSED : CtlCommand.EXIT_OK;
  }

  static String renderCheck(JsonNode check) {
    TextTable table = new TextTable("TABLE", "HANDLING", "REASON", "DETAIL");
    int refused = 0;
    int count = 0;
    for (JsonNode t : check.path("tables")) {
      count++;
      if (t.hasNonNull("reason")) {
        refused++;
      }
      table.row(
          t.path("table").asText(),
          t.path("handling").asText(),
          CtlCommand.text(t, "reason"),
          CtlCommand.text(t, "detail"));
    }
    return table.render()
        + "\n"
        + count
        + " published table(s), "
        + refused
        + " refused (pipeline "
        + check.path("pipeline").asText()
        + ")\n";
  }

  private int command(String name, String verb) {
    AdminClient.Reply reply = ctl.client().post(path(name) + "/" + verb, null);
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    JsonNode s = reply.json();
    ctl.out()
        .println(
            "pipeline "
                + s.path("name").asText(name)
                + ": "
                + s.path("state").asText()
                + (s.hasNonNull("reason") ? " (" + s.get("reason").asText() + ")" : ""));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "snapshot",
      mixinStandardHelpOptions = true,
      description = {
        "Start an incremental snapshot of published tables while the pipeline streams "
            + "(POST /admin/pipelines/NAME/snapshot), then show its progress on stderr until it is done.",
        "Exit status 1 when the snapshot fails or the pipeline stops meanwhile."
      })
  int snapshot(
      @Parameters(paramLabel = "NAME", description = "The pipeline's name.") String name,
      @Option(
              names = "--table",
              paramLabel = "SCHEMA.TABLE",
              description = "A table to snapshot (repeatable; default: every published table).")
          List<String> tables,
      @Option(names = "--no-wait", description = "Return once the snapshot has started.")
          boolean noWait,
      @Option(
              names = "--interval",
              paramLabel = "MILLIS",
              defaultValue = "1000",
              description = "How often to ask for progress (default: ${DEFAULT-VALUE}).")
          long interval)
      throws InterruptedException {
    if (interval < 100) {
      throw ctl.usage("--interval must be at least 100 milliseconds");
    }
    Object body = tables == null || tables.isEmpty() ? null : Map.of("tables", tables);
    AdminClient.Reply started = ctl.client().post(path(name) + "/snapshot", body);
    if (noWait) {
      if (ctl.json()) {
        ctl.printJson(started);
      } else {
        ctl.out()
            .println(
                "pipeline " + name + ": " + Progress.snapshotLine(started.json().get("snapshot")));
        ctl.out().flush();
      }
      return CtlCommand.EXIT_OK;
    }
    Progress progress = new Progress(ctl.err(), ctl.terminal(), 10_000);
    AdminClient.Reply last = started;
    while (true) {
      JsonNode status = last.json();
      JsonNode snap = status.get("snapshot");
      String state = status.path("state").asText();
      String snapState = snap == null || snap.isNull() ? null : snap.path("state").asText();
      if ("done".equals(snapState)) {
        progress.finish(Progress.snapshotLine(snap));
        break;
      }
      if ("failed".equals(snapState)) {
        progress.finish(Progress.snapshotLine(snap));
        throw CtlFailure.failed(
            "snapshot-failed",
            "the snapshot of pipeline "
                + name
                + " failed"
                + (status.hasNonNull("detail") ? ": " + status.get("detail").asText() : ""),
            last.body());
      }
      if (List.of("halted", "stopped", "dropping", "dropped").contains(state)) {
        progress.finish(
            snap == null || snap.isNull() ? "no snapshot" : Progress.snapshotLine(snap));
        throw CtlFailure.failed(
            "pipeline-" + state,
            "pipeline "
                + name
                + " is "
                + state
                + " before its snapshot finished"
                + (status.hasNonNull("reason") ? " (" + status.get("reason").asText() + ")" : ""),
            last.body());
      }
      progress.update(
          snapState == null
              ? "pipeline " + name + " is " + state + "; waiting for its snapshot to show"
              : Progress.snapshotLine(snap));
      Thread.sleep(interval);
      try {
        last = ctl.client().get(path(name));
      } catch (CtlFailure f) {
        if (!"unavailable".equals(f.code())) {
          throw f;
        }
        // The pipeline manager is moving to another node: ask again.
        progress.update("the pipeline manager did not answer; asking again");
      }
    }
    if (ctl.json()) {
      ctl.printJson(last);
    } else {
      JsonNode snap = last.json().get("snapshot");
      ctl.out()
          .println(
              "pipeline "
                  + name
                  + ": snapshot done, "
                  + snap.path("tablesDone").asInt()
                  + " tables, "
                  + String.format(Locale.ROOT, "%,d", snap.path("rowsDone").asLong())
                  + " rows in "
                  + Progress.duration(snap.path("elapsedMillis").asLong()));
      ctl.out().flush();
    }
    return CtlCommand.EXIT_OK;
  }

  private static String path(String name) {
    return "/admin/pipelines/" + AdminClient.segment(name);
  }

  static String renderList(JsonNode list) {
    StringBuilder out = new StringBuilder();
    out.append("pipeline manager on: ")
        .append(list.hasNonNull("owner") ? list.get("owner").asText() : "-")
        .append("\n\n");
    TextTable table =
        new TextTable(
            "NAME",
            "STATE",
            "REASON",
            "SLOT",
            "CONFIRMED",
            "LAG-BYTES",
            "TRANSACTIONS",
            "ROWS",
            "RESTARTS",
            "SNAPSHOT");
    for (JsonNode p : list.path("pipelines")) {
      JsonNode snap = p.get("snapshot");
      table.row(
          p.path("name").asText(),
          p.path("state").asText(),
          CtlCommand.text(p, "reason"),
          CtlCommand.text(p, "slot"),
          CtlCommand.text(p, "confirmedLsn"),
          p.path("lagBytes").asLong(),
          p.path("transactions").asLong(),
          p.path("rows").asLong(),
          p.path("restarts").asInt(),
          snap == null || snap.isNull()
              ? null
              : snap.path("kind").asText() + " " + snap.path("state").asText());
    }
    out.append(table.render());
    return out.toString();
  }

  static String renderStatus(JsonNode p) {
    Map<String, Object> fields = new LinkedHashMap<>();
    fields.put("pipeline", p.path("name").asText());
    fields.put("state", p.path("state").asText());
    fields.put("reason", CtlCommand.text(p, "reason"));
    fields.put("detail", CtlCommand.text(p, "detail"));
    fields.put("slot", CtlCommand.text(p, "slot"));
    fields.put("confirmed LSN", CtlCommand.text(p, "confirmedLsn"));
    fields.put("lag", String.format(Locale.ROOT, "%,d bytes", p.path("lagBytes").asLong()));
    fields.put("transactions", p.path("transactions").asLong());
    fields.put("rows", p.path("rows").asLong());
    fields.put("restarts", p.path("restarts").asInt());
    fields.put("incarnation", CtlCommand.text(p, "incarnation"));
    JsonNode snap = p.get("snapshot");
    fields.put("snapshot", snap == null || snap.isNull() ? null : Progress.snapshotLine(snap));
    return keyValues(fields);
  }

  /** {@code key: value} lines, values aligned; null shows as {@code -}. */
  static String keyValues(Map<String, Object> fields) {
    int width = fields.keySet().stream().mapToInt(String::length).max().orElse(0) + 1;
    StringBuilder out = new StringBuilder();
    fields.forEach(
        (k, v) ->
            out.append(k)
                .append(':')
                .append(" ".repeat(width - k.length()))
                .append(v == null ? "-" : v.toString())
                .append('\n'));
    return out.toString();
  }
}
