package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/**
 * {@code weir ctl projections configure|read|commit|release}: projection consumers over a
 * partition's outbox ({@code /admin/projections/*}, docs/projections.md).
 */
@Command(
    name = "projections",
    aliases = "projection",
    mixinStandardHelpOptions = true,
    description =
        "Projection consumers over a partition's outbox: configure, read, commit, release.")
final class ProjectionCommands extends Group {
  @ParentCommand CtlCommand ctl;

  @Command(
      name = "configure",
      mixinStandardHelpOptions = true,
      description =
          "Create a consumer generation on a partition, or confirm it exists with the same definition.")
  int configure(
      @Option(
              names = "--partition",
              required = true,
              paramLabel = "N",
              description = "The partition (0 to P-1).")
          int partition,
      @Option(
              names = "--consumer",
              required = true,
              paramLabel = "NAME",
              description = "The consumer's name.")
          String consumer,
      @Option(
              names = "--generation",
              required = true,
              paramLabel = "G",
              description = "The consumer generation (from 1).")
          long generation,
      @Option(
              names = "--collection",
              paramLabel = "COLLECTION",
              description = "Only entries of this collection (repeatable; default: all).")
          List<String> collections,
      @Option(
              names = "--kind",
              paramLabel = "KIND",
              description =
                  "Only entries of this kind: upsert, delete, snapshot (repeatable; default: all).")
          List<String> kinds,
      @Option(
              names = "--start-after",
              paramLabel = "SEQUENCE",
              description =
                  "The last position counted as processed (default: the retained beginning).")
          Long startAfter) {
    ObjectNode body = identity(partition, consumer, generation);
    if (collections != null) {
      collections.forEach(body.putArray("collections")::add);
    }
    if (kinds != null) {
      kinds.forEach(body.putArray("kinds")::add);
    }
    if (startAfter != null) {
      body.put("startAfter", startAfter);
    }
    AdminClient.Reply reply = ctl.client().post("/admin/projections/configure", body);
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    JsonNode c = reply.json().path("consumer");
    ctl.out()
        .println(
            consumerLine(partition, c)
                + ": "
                + (reply.json().path("created").asBoolean() ? "created" : "already configured")
                + ", checkpoint "
                + c.path("checkpoint").asLong()
                + ", collections "
                + OutboxCommands.list(c.path("collections"))
                + ", kinds "
                + OutboxCommands.list(c.path("kinds")));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "read",
      mixinStandardHelpOptions = true,
      description = {
        "Read the consumer's next batch after its checkpoint. The table leaves out the entries' images "
            + "(use --json); the batch token printed last is what 'commit' takes."
      })
  int read(
      @Option(
              names = "--partition",
              required = true,
              paramLabel = "N",
              description = "The partition (0 to P-1).")
          int partition,
      @Option(
              names = "--consumer",
              required = true,
              paramLabel = "NAME",
              description = "The consumer's name.")
          String consumer,
      @Option(
              names = "--generation",
              required = true,
              paramLabel = "G",
              description = "The consumer generation (from 1).")
          long generation,
      @Option(
              names = "--max-entries",
              paramLabel = "N",
              description = "At most this many entries (default: the node's).")
          Integer maxEntries,
      @Option(
              names = "--max-bytes",
              paramLabel = "BYTES",
              description = "At most this many payload bytes (default: the node's).")
          Long maxBytes) {
    ObjectNode body = identity(partition, consumer, generation);
    if (maxEntries != null) {
      body.put("maxEntries", maxEntries);
    }
    if (maxBytes != null) {
      body.put("maxBytes", maxBytes);
    }
    AdminClient.Reply reply = ctl.client().post("/admin/projections/read", body);
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    ctl.out().print(renderBatch(reply.json()));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "commit",
      mixinStandardHelpOptions = true,
      description =
          "Commit a batch (its token from 'read') with optional document effects, moving the checkpoint.")
  int commit(
      @Option(
              names = "--batch-token",
              required = true,
              paramLabel = "TOKEN",
              description = "The batch token 'read' printed.")
          String batchToken,
      @Option(
              names = "--command-id",
              paramLabel = "ID",
              description = "An idempotency key for the commit.")
          String commandId,
      @Option(
              names = "--effects",
              paramLabel = "FILE",
              description =
                  "A JSON array of effects ({\"op\":\"upsert\"|\"delete\",\"collection\",\"id\",\"expectedRevision\",\"document\"?}); - reads stdin.")
          String effects) {
    ObjectNode body = AdminClient.JSON.createObjectNode();
    body.put("token", batchToken);
    if (commandId != null) {
      body.put("commandId", commandId);
    }
    if (effects != null) {
      JsonNode array;
      try (InputStream in =
          effects.equals("-") ? System.in : Files.newInputStream(Path.of(effects))) {
        array = AdminClient.JSON.readTree(in);
      } catch (IOException e) {
        throw ctl.usage("--effects must name a readable file holding a JSON array of effects");
      }
      if (array == null || !array.isArray()) {
        throw ctl.usage("--effects must hold a JSON array of effects");
      }
      body.set("effects", (ArrayNode) array);
    }
    AdminClient.Reply reply = ctl.client().post("/admin/projections/commit", body);
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    JsonNode r = reply.json();
    ctl.out()
        .println(
            String.format(
                Locale.ROOT,
                "committed: partition %d consumer %s generation %d, checkpoint %d, %d effects%s",
                r.path("partition").asInt(),
                r.path("consumer").asText(),
                r.path("generation").asLong(),
                r.path("checkpoint").asLong(),
                r.path("receipt").path("revisions").size(),
                r.path("alreadyProcessed").asBoolean()
                    ? " (already processed: this batch was committed before, nothing written again)"
                    : ""));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  @Command(
      name = "release",
      mixinStandardHelpOptions = true,
      description =
          "Release a consumer generation: it stops pinning the outbox and its tokens are refused.")
  int release(
      @Option(
              names = "--partition",
              required = true,
              paramLabel = "N",
              description = "The partition (0 to P-1).")
          int partition,
      @Option(
              names = "--consumer",
              required = true,
              paramLabel = "NAME",
              description = "The consumer's name.")
          String consumer,
      @Option(
              names = "--generation",
              required = true,
              paramLabel = "G",
              description = "The consumer generation (from 1).")
          long generation) {
    AdminClient.Reply reply =
        ctl.client().post("/admin/projections/release", identity(partition, consumer, generation));
    if (ctl.json()) {
      ctl.printJson(reply);
      return CtlCommand.EXIT_OK;
    }
    ctl.out()
        .println(
            consumerLine(partition, reply.json().path("consumer"))
                + (reply.json().path("alreadyReleased").asBoolean()
                    ? ": already released"
                    : ": released"));
    ctl.out().flush();
    return CtlCommand.EXIT_OK;
  }

  private static ObjectNode identity(int partition, String consumer, long generation) {
    ObjectNode body = AdminClient.JSON.createObjectNode();
    body.put("partition", partition);
    body.put("consumer", consumer);
    body.put("generation", generation);
    return body;
  }

  private static String consumerLine(int partition, JsonNode c) {
    return "consumer "
        + c.path("consumer").asText()
        + " generation "
        + c.path("generation").asLong()
        + " on partition "
        + partition;
  }

  static String renderBatch(JsonNode b) {
    StringBuilder out = new StringBuilder();
    int n = b.path("entries").size();
    out.append(
        String.format(
            Locale.ROOT,
            "partition %d consumer %s generation %d: %d entries, positions %d..%d, tail %d%s%n",
            b.path("partition").asInt(),
            b.path("consumer").asText(),
            b.path("generation").asLong(),
            n,
            b.path("start").asLong(),
            b.path("through").asLong(),
            b.path("tail").asLong(),
            b.path("hasMore").asBoolean() ? ", more to read" : ""));
    if (n > 0) {
      TextTable table =
          new TextTable(
              "SEQUENCE", "ORDINAL", "COLLECTION", "ID", "KIND", "REVISION", "COMMIT-LSN");
      for (JsonNode e : b.path("entries")) {
        table.row(
            e.path("sequence").asLong(),
            e.path("ordinal").asInt(),
            e.path("collection").asText(),
            e.path("id").asText(),
            e.path("kind").asText(),
            e.path("revision").asLong(),
            CtlCommand.text(e, "commitLsn"));
      }
      out.append('\n').append(table.render()).append('\n');
    }
    out.append("batch token: ").append(b.path("token").asText()).append('\n');
    return out.toString();
  }
}
