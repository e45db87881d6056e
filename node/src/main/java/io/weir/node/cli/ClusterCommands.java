package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParentCommand;

/**
 * {@code weir ctl cluster status|partitions}: {@code GET /admin/cluster}, {@code GET
 * /admin/partitions}.
 */
@Command(
    name = "cluster",
    mixinStandardHelpOptions = true,
    description = "Cluster membership and partition placement.")
final class ClusterCommands extends Group {
  @ParentCommand CtlCommand ctl;

  @Command(
      name = "status",
      mixinStandardHelpOptions = true,
      description =
          "Members with their status, roles, partitions and replication slots (GET /admin/cluster).")
  int status() {
    AdminClient.Reply reply = ctl.client().get("/admin/cluster");
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    ctl.out().print(render(reply.json()));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "partitions",
      mixinStandardHelpOptions = true,
      description = "How many partitions run, per node (GET /admin/partitions).")
  int partitions() {
    AdminClient.Reply reply = ctl.client().get("/admin/partitions");
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    JsonNode p = reply.json();
    ctl.out()
        .println(
            "partitions: "
                + p.path("running").asInt()
                + " of "
                + p.path("count").asInt()
                + " running");
    TextTable table = new TextTable("NODE", "PARTITIONS");
    List<String> nodes = new ArrayList<>();
    p.path("byNode").fieldNames().forEachRemaining(nodes::add);
    Collections.sort(nodes);
    for (String node : nodes) {
      table.row(node, p.path("byNode").get(node).asInt());
    }
    ctl.out().print(table.render());
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  /** The cluster status as a few summary lines and a members table. */
  static String render(JsonNode c) {
    StringBuilder out = new StringBuilder();
    out.append("cluster:    ").append(orDash(CtlCommand.text(c, "clusterId"))).append('\n');
    out.append("this node:  ").append(orDash(CtlCommand.text(c, "self"))).append('\n');
    out.append("leader:     ").append(orDash(CtlCommand.text(c, "leader"))).append('\n');
    out.append("slot owner: ").append(orDash(CtlCommand.text(c, "slotOwner"))).append('\n');
    List<String> unreachable = new ArrayList<>();
    c.path("unreachable").forEach(u -> unreachable.add(u.asText()));
    if (!unreachable.isEmpty()) {
      out.append("unreachable: ").append(String.join(", ", unreachable)).append('\n');
    }
    TextTable members =
        new TextTable("ADDRESS", "STATUS", "REACHABLE", "ROLES", "PARTITIONS", "SLOTS");
    for (JsonNode m : c.path("members")) {
      List<String> roles = new ArrayList<>();
      m.path("roles").forEach(r -> roles.add(r.asText()));
      List<String> slots = new ArrayList<>();
      m.path("slots")
          .forEach(s -> slots.add(s.path("pipeline").asText() + "=" + s.path("state").asText()));
      JsonNode partitions = m.get("partitions");
      members.row(
          m.path("address").asText(),
          m.path("status").asText(),
          m.path("reachable").asBoolean() ? "yes" : "no",
          String.join(",", roles),
          partitions == null || partitions.isNull() ? "?" : partitions.size(),
          slots.isEmpty() ? null : String.join(",", slots));
    }
    out.append('\n').append(members.render());
    return out.toString();
  }

  private static String orDash(String s) {
    return s == null ? "-" : s;
  }
}
