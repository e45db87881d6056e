package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/**
 * {@code weir ctl grants list|grant|revoke}: principals' grants per collection ({@code
 * /admin/principals/{id}/grants[/revoke]}). A field grant is written {@code FieldRead:FIELD} or
 * {@code FieldUse:FIELD}, as {@code list} shows it.
 */
@Command(
    name = "grants",
    mixinStandardHelpOptions = true,
    description = "Grants of principals per collection: list, grant, revoke.")
final class GrantCommands extends Group {
  @ParentCommand CtlCommand ctl;

  @Command(
      name = "list",
      mixinStandardHelpOptions = true,
      description = "Grants of every principal, or of one.")
  int list(
      @Parameters(paramLabel = "PRINCIPAL", arity = "0..1", description = "Only this principal's.")
          String principal) {
    AdminClient.Reply reply = ctl.client().get("/admin/principals");
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    if (principal != null && !known(reply.json(), principal)) {
      throw CtlFailure.failed("not-found", "no principal " + principal, null);
    }
    ctl.out().print(render(reply.json(), principal));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "grant",
      aliases = "add",
      mixinStandardHelpOptions = true,
      description =
          "Grant a principal DocumentsRead, DocumentsWrite, ChangesRead, QueryRead or ContinuousQuery on a "
              + "collection (a scope for ContinuousQuery), or FieldRead:FIELD / FieldUse:FIELD (FieldUse:* every field "
              + "that is not sensitive).")
  int grant(
      @Parameters(index = "0", paramLabel = "PRINCIPAL", description = "The principal's id.")
          String principal,
      @Parameters(
              index = "1",
              paramLabel = "COLLECTION",
              description = "The collection (or scope).")
          String collection,
      @Parameters(
              index = "2",
              paramLabel = "GRANT",
              description = "The grant, e.g. DocumentsRead or FieldRead:ssn.")
          String grant) {
    return change(principal, collection, grant, true);
  }

  @Command(
      name = "revoke",
      aliases = "remove",
      mixinStandardHelpOptions = true,
      description = "Take a grant away from a principal (same arguments as grant).")
  int revoke(
      @Parameters(index = "0", paramLabel = "PRINCIPAL", description = "The principal's id.")
          String principal,
      @Parameters(
              index = "1",
              paramLabel = "COLLECTION",
              description = "The collection (or scope).")
          String collection,
      @Parameters(
              index = "2",
              paramLabel = "GRANT",
              description = "The grant, e.g. DocumentsRead or FieldRead:ssn.")
          String grant) {
    return change(principal, collection, grant, false);
  }

  private int change(String principal, String collection, String grant, boolean add) {
    AdminClient.Reply reply =
        ctl.client()
            .post(
                "/admin/principals/"
                    + AdminClient.segment(principal)
                    + (add ? "/grants" : "/grants/revoke"),
                body(collection, grant));
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    ctl.out()
        .println(
            (add ? "granted " : "revoked ")
                + grant
                + " on "
                + collection
                + (add ? " to " : " from ")
                + principal);
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  /** {@code {"collection","grant"}}, or with {@code "field"} for {@code Grant:field}. */
  static ObjectNode body(String collection, String grant) {
    ObjectNode body = AdminClient.JSON.createObjectNode();
    body.put("collection", collection);
    int colon = grant.indexOf(':');
    if (colon > 0) {
      body.put("grant", grant.substring(0, colon));
      body.put("field", grant.substring(colon + 1));
    } else {
      body.put("grant", grant);
    }
    return body;
  }

  private static boolean known(JsonNode reply, String id) {
    for (JsonNode p : reply.path("principals")) {
      if (p.path("id").asText().equals(id)) {
        return true;
      }
    }
    return false;
  }

  static String render(JsonNode reply, String only) {
    TextTable table = new TextTable("PRINCIPAL", "COLLECTION", "GRANT");
    for (JsonNode p : reply.path("principals")) {
      String id = p.path("id").asText();
      if (only != null && !only.equals(id)) {
        continue;
      }
      if (p.path("administrator").asBoolean()) {
        table.row(id, "*", "administrator (every grant)");
      }
      List<String> collections = new ArrayList<>();
      p.path("grants").fieldNames().forEachRemaining(collections::add);
      Collections.sort(collections);
      for (String c : collections) {
        for (JsonNode g : p.path("grants").get(c)) {
          table.row(id, c, g.asText());
        }
      }
    }
    return table.render();
  }
}
