package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/**
 * {@code weir ctl principals list|create|revoke|rotate}: principals ({@code /admin/principals}).
 * Principals are never deleted (an id is never reused): {@code delete} is another name for {@code
 * revoke}, which stops its tokens.
 */
@Command(
    name = "principals",
    aliases = "principal",
    mixinStandardHelpOptions = true,
    description = "Principals: list, create, revoke (delete), rotate their tokens.")
final class PrincipalCommands extends Group {
  @ParentCommand CtlCommand ctl;

  @Command(
      name = "list",
      mixinStandardHelpOptions = true,
      description = "Every principal with its groups and grants.")
  int list() {
    AdminClient.Reply reply = ctl.client().get("/admin/principals");
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    ctl.out().print(render(reply.json()));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "create",
      mixinStandardHelpOptions = true,
      description =
          "Create a principal; its bearer token is printed this once (keep it: only its hash is stored).")
  int create(
      @Parameters(paramLabel = "ID", description = "1 to 64 of A-Z a-z 0-9 _ . @ -") String id,
      @Option(
              names = "--administrator",
              description = "A cluster administrator (holds every grant).")
          boolean administrator,
      @Option(
              names = "--group",
              paramLabel = "GROUP",
              description = "A group it belongs to (repeatable).")
          List<String> groups) {
    ObjectNode body = AdminClient.JSON.createObjectNode();
    body.put("id", id);
    if (administrator) {
      body.put("administrator", true);
    }
    if (groups != null) {
      groups.forEach(body.putArray("groups")::add);
    }
    AdminClient.Reply reply = ctl.client().post("/admin/principals", body);
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    ctl.err()
        .println(
            "principal "
                + reply.json().path("id").asText()
                + " created; its token (shown this once) follows");
    ctl.err().flush();
    ctl.out().println(reply.json().path("token").asText());
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "revoke",
      aliases = "delete",
      mixinStandardHelpOptions = true,
      description =
          "Revoke a principal: its tokens stop working at once on this node, on the others within the "
              + "principals refresh. Its record stays (ids are never reused).")
  int revoke(@Parameters(paramLabel = "ID", description = "The principal's id.") String id) {
    AdminClient.Reply reply =
        ctl.client().post("/admin/principals/" + AdminClient.segment(id) + "/revoke", null);
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    ctl.out().println("principal " + id + " revoked");
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "rotate",
      mixinStandardHelpOptions = true,
      description =
          "Give a principal a new token (printed this once); the previous one keeps working for the grace period.")
  int rotate(
      @Parameters(paramLabel = "ID", description = "The principal's id.") String id,
      @Option(
              names = "--grace-seconds",
              paramLabel = "SECONDS",
              description =
                  "How long the previous token stays valid (default: weir.principals.rotation-grace).")
          Long grace) {
    Object body = grace == null ? null : Map.of("graceSeconds", grace);
    AdminClient.Reply reply =
        ctl.client().post("/admin/principals/" + AdminClient.segment(id) + "/rotate", body);
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    JsonNode r = reply.json();
    ctl.err()
        .println(
            "principal "
                + id
                + " has a new token (shown this once, follows); the previous one "
                + (r.hasNonNull("previousValidUntil")
                    ? "is valid until " + r.get("previousValidUntil").asText()
                    : "stopped at once"));
    ctl.err().flush();
    ctl.out().println(r.path("token").asText());
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  static String render(JsonNode reply) {
    TextTable table = new TextTable("ID", "ADMIN", "GROUPS", "GRANTS", "CREATED", "REVOKED");
    for (JsonNode p : reply.path("principals")) {
      int grants = 0;
      for (JsonNode perCollection : p.path("grants")) {
        grants += perCollection.size();
      }
      table.row(
          p.path("id").asText(),
          p.path("administrator").asBoolean() ? "yes" : "no",
          groups(p),
          grants,
          CtlCommand.text(p, "createdAt"),
          CtlCommand.text(p, "revokedAt"));
    }
    return table.render();
  }

  private static String groups(JsonNode p) {
    List<String> out = new ArrayList<>();
    p.path("groups").forEach(g -> out.add(g.asText()));
    return out.isEmpty() ? null : String.join(",", out);
  }
}
