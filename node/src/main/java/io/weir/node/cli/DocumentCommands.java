package io.weir.node.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code weir ctl documents write}: document writes in batches ({@code /v1/documents/batch}). */
@Command(
    name = "documents",
    mixinStandardHelpOptions = true,
    description = "Documents: write many in batches.")
final class DocumentCommands extends Group {
  @ParentCommand CtlCommand ctl;

  /** Bytes of items one request may carry, below the node's default 4 MiB. */
  private static final long REQUEST_BYTES = 3L << 20;

  /** One failed item: its line in the input, status, error and message (no values). */
  record Failure(long line, String status, String error, String message) {}

  @Command(
      name = "write",
      mixinStandardHelpOptions = true,
      description = {
        "Write documents from JSON Lines: one item per line, {\"op\":\"put\",\"collection\":...,"
            + "\"id\":...,\"body\":{...},\"ifMatch\"?:N} or {\"op\":\"delete\",\"collection\":...,"
            + "\"id\":...,\"ifMatch\"?:N}. Sent in batches (POST /v1/documents/batch); each"
            + " batch's items of one partition are written atomically. Progress goes to stderr;"
            + " every item not written is listed by its line number. Exit status 1 when any"
            + " item was not written.",
        "With --idempotency-key K, batch n is sent with the key K:n, so running the same command"
            + " again with the same input, --batch-size and key writes only what was not written."
      })
  int write(
      @Option(
              names = "--file",
              required = true,
              paramLabel = "FILE",
              description = "The JSON Lines file; - reads standard input.")
          String file,
      @Option(
              names = "--batch-size",
              defaultValue = "500",
              paramLabel = "N",
              description =
                  "Items per request, 1 to the node's weir.documents.batch.max-items (default"
                      + " ${DEFAULT-VALUE}).")
          int batchSize,
      @Option(
              names = "--idempotency-key",
              paramLabel = "KEY",
              description = "A key for this load: 1 to 240 printable ASCII characters, no space.")
          String key) {
    if (batchSize < 1) {
      throw ctl.usage("--batch-size must be at least 1");
    }
    if (key != null
        && (key.isEmpty()
            || key.length() > 240
            || !key.chars().allMatch(c -> c > 0x20 && c < 0x7f))) {
      throw ctl.usage("--idempotency-key must be 1 to 240 printable ASCII characters, no space");
    }
    Progress progress = new Progress(ctl.err(), ctl.terminal(), 5_000);
    List<Failure> failures = new ArrayList<>();
    long applied = 0;
    long items = 0;
    int batches = 0;
    try (BufferedReader in = open(file)) {
      List<JsonNode> batch = new ArrayList<>();
      List<Long> lines = new ArrayList<>();
      long bytes = 0;
      long lineNumber = 0;
      for (String line = in.readLine(); ; line = in.readLine()) {
        boolean end = line == null;
        if (!end) {
          lineNumber++;
          if (line.isBlank()) {
            continue;
          }
        }
        if (!batch.isEmpty()
            && (end || batch.size() >= batchSize || bytes + utf8(line) > REQUEST_BYTES)) {
          JsonNode reply;
          try {
            reply = send(batch, key == null ? null : key + ":" + batches);
          } catch (CtlFailure refused) {
            progress.finish(line(items, applied, batches));
            ctl.err()
                .println(
                    "the batch of lines "
                        + lines.get(0)
                        + " to "
                        + lines.get(lines.size() - 1)
                        + " was refused whole (its items are counted from 0); nothing of it was"
                        + " written, and the lines after it were not sent");
            ctl.err().flush();
            throw refused;
          }
          batches++;
          items += batch.size();
          for (JsonNode r : reply.path("results")) {
            if (r.path("status").asText().equals("applied")) {
              applied++;
            } else {
              failures.add(
                  new Failure(
                      lines.get(r.path("index").asInt()),
                      r.path("status").asText(),
                      r.path("error").asText(null),
                      r.path("message").asText("")));
            }
          }
          progress.update(line(items, applied, batches));
          batch.clear();
          lines.clear();
          bytes = 0;
        }
        if (end) {
          break;
        }
        JsonNode item;
        try {
          item = AdminClient.JSON.readTree(line);
        } catch (IOException e) {
          throw ctl.usage("line " + lineNumber + " of the input is not JSON");
        }
        if (item == null || !item.isObject()) {
          throw ctl.usage("line " + lineNumber + " of the input is not a JSON object");
        }
        batch.add(item);
        lines.add(lineNumber);
        bytes += utf8(line) + 1;
      }
    } catch (IOException e) {
      throw ctl.usage("the input cannot be read: " + e.getClass().getSimpleName());
    }
    progress.finish(line(items, applied, batches));
    if (ctl.json()) {
      ObjectNode out = AdminClient.JSON.createObjectNode();
      out.put("batches", batches);
      out.put("items", items);
      out.put("applied", applied);
      ArrayNode f = out.putArray("failures");
      failures.forEach(x -> f.add(AdminClient.JSON.valueToTree(x)));
      ctl.out().println(out.toPrettyString());
    } else {
      for (Failure x : failures) {
        ctl.out()
            .println(
                "line "
                    + x.line()
                    + ": "
                    + x.status()
                    + (x.error() == null ? "" : " (" + x.error() + ")")
                    + (x.message().isEmpty() ? "" : ": " + x.message()));
      }
      ctl.out().println(line(items, applied, batches));
    }
    ctl.out().flush();
    return applied == items && failures.isEmpty() ? CtlCommand.EXIT_OK : CtlCommand.EXIT_REFUSED;
  }

  private static long utf8(String line) {
    return line.getBytes(StandardCharsets.UTF_8).length;
  }

  private BufferedReader open(String file) throws IOException {
    if (file.equals("-")) {
      return new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    }
    Path path = Path.of(file);
    if (!Files.isReadable(path)) {
      throw ctl.usage("cannot read " + file);
    }
    return Files.newBufferedReader(path, StandardCharsets.UTF_8);
  }

  private JsonNode send(List<JsonNode> batch, String key) {
    ObjectNode body = AdminClient.JSON.createObjectNode();
    body.putArray("items").addAll(batch);
    return ctl.client()
        .send(
            "POST",
            "/v1/documents/batch",
            body,
            key == null ? Map.of() : Map.of("Idempotency-Key", key))
        .json();
  }

  private static String line(long items, long applied, int batches) {
    return String.format(
        Locale.ROOT,
        "%,d items in %,d batch%s: %,d written, %,d not written",
        items,
        batches,
        batches == 1 ? "" : "es",
        applied,
        items - applied);
  }
}
