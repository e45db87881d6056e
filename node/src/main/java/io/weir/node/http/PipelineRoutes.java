package io.weir.node.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.cdc.PipelineAdmin;
import io.weir.persistence.cdc.CdcPipeline;
import io.weir.protocol.ErrorCode;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.regex.Pattern;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * {@code GET /admin/pipelines}, {@code GET /admin/pipelines/{name}}, {@code POST
 * /admin/pipelines/{name}/start|stop}: each replies with pipeline status JSON. {@code POST
 * /admin/pipelines/{name}/snapshot} with {@code {"tables":["schema.table",...]}} (or no body: every
 * published table) starts an incremental snapshot: 202 and the status, 400 for a table not
 * published or a malformed body, 409 when the pipeline is not streaming or a snapshot runs.
 * Administrators only (the caller checks).
 */
final class PipelineRoutes extends JsonRoutes {
  private final PipelineAdmin pipelines;

  PipelineRoutes(ObjectMapper json, PipelineAdmin pipelines) {
    super(json);
    this.pipelines = pipelines;
  }

  /** The routes, below {@code /admin/pipelines}. */
  Route routes() {
    return concat(
        pathEndOrSingleSlash(() -> get(() -> reply(pipelines.list()))),
        pathPrefix(
            PathMatchers.segment(),
            name -> {
              if (!pipelines.exists(name)) {
                return error(ErrorCode.NOT_FOUND, "no pipeline of that name is configured");
              }
              return concat(
                  pathEndOrSingleSlash(
                      () ->
                          concat(
                              get(() -> reply(pipelines.status(name))),
                              delete(
                                  () ->
                                      parameterOptional(
                                          "confirm", confirm -> drop(name, confirm))))),
                  path("start", () -> post(() -> reply(pipelines.start(name)))),
                  path("stop", () -> post(() -> reply(pipelines.stop(name)))),
                  path("check", () -> get(() -> check(name))),
                  path(
                      "snapshot",
                      () -> post(() -> jsonBody(ADMIN_BODY, body -> snapshot(name, body)))));
            }));
  }

  /**
   * {@code GET /admin/pipelines/{name}/check}: how the pipeline's sink would handle each published
   * table; 503 when the source's catalog cannot be read.
   */
  private Route check(String name) {
    return onComplete(
        pipelines.check(name),
        result -> {
          if (!result.isSuccess()) {
            return error(
                ErrorCode.UNAVAILABLE, "the pipeline manager did not answer in time; retry");
          }
          CdcPipeline.CheckReply reply = result.get();
          return reply.error() == null
              ? json(200, reply)
              : error(ErrorCode.UNAVAILABLE, reply.message());
        });
  }

  /**
   * {@code DELETE /admin/pipelines/{name}?confirm={name}}: drops a stopped or halted pipeline's
   * slot and Weir's records of it. 400 without the confirmation, 409 while it runs or while another
   * connection holds the slot, 503 when the drop failed (nothing of Weir's records deleted).
   */
  private Route drop(String name, Optional<String> confirm) {
    if (confirm.isEmpty() || !confirm.get().equals(name)) {
      return error(
          ErrorCode.BAD_REQUEST,
          "dropping a pipeline deletes its slot and checkpoints; confirm with ?confirm=<the pipeline's name>");
    }
    return onComplete(
        pipelines.drop(name),
        result -> {
          if (!result.isSuccess()) {
            return error(
                ErrorCode.UNAVAILABLE,
                "the pipeline manager did not answer in time; ask for the status, then retry");
          }
          CdcPipeline.DropReply reply = result.get();
          if (reply.error() == null) {
            return json(200, reply.status());
          }
          return switch (reply.dropError().orElse(CdcPipeline.DropError.FAILED)) {
            case NOT_STOPPED, SLOT_ACTIVE -> error(ErrorCode.CONFLICT, reply.message());
            case FAILED -> error(ErrorCode.UNAVAILABLE, reply.message());
          };
        });
  }

  private static final Pattern TABLE_NAME = Pattern.compile("[^.\\s]{1,63}\\.[^.\\s]{1,63}");
  private static final int MAX_SNAPSHOT_TABLES = 1000;

  private Route snapshot(String name, JsonNode root) {
    List<String> tables = new ArrayList<>();
    if (root != null) {
      JsonNode list = root.get("tables");
      if (!root.isObject() || (list != null && !list.isArray())) {
        return error(
            ErrorCode.BAD_REQUEST, "the body must be {\"tables\": [\"schema.table\", ...]}");
      }
      if (list != null) {
        for (JsonNode t : list) {
          if (!t.isTextual() || !TABLE_NAME.matcher(t.asText()).matches()) {
            return error(ErrorCode.BAD_REQUEST, "each table must be a string schema.table");
          }
          tables.add(t.asText());
        }
      }
    }
    if (tables.size() > MAX_SNAPSHOT_TABLES) {
      return error(
          ErrorCode.BAD_REQUEST, "at most " + MAX_SNAPSHOT_TABLES + " tables per snapshot");
    }
    return onComplete(
        pipelines.snapshot(name, List.copyOf(new LinkedHashSet<>(tables))),
        result -> {
          if (!result.isSuccess()) {
            return error(
                ErrorCode.UNAVAILABLE, "the pipeline manager did not answer in time; retry");
          }
          CdcPipeline.SnapshotReply reply = result.get();
          if (reply.error() == null) {
            return json(202, reply.status());
          }
          return switch (reply.error()) {
            // The pipeline's message names the table as the caller spelt it: not passed on.
            case "unknown-table" ->
                error(
                    ErrorCode.BAD_REQUEST,
                    "a requested table is not in the pipeline's publications (schema.table, as"
                        + " PostgreSQL names it)");
            case "unsupported", "not-running", "snapshot-in-progress" ->
                error(ErrorCode.CONFLICT, reply.message());
            default -> error(ErrorCode.UNAVAILABLE, reply.message());
          };
        });
  }

  private Route reply(CompletionStage<?> answer) {
    return onComplete(
        answer,
        result ->
            result.isSuccess()
                ? json(200, result.get())
                : error(
                    ErrorCode.UNAVAILABLE, "the pipeline manager did not answer in time; retry"));
  }
}
