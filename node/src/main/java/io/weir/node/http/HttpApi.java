package io.weir.node.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.NodeView;
import io.weir.node.cdc.PipelineAdmin;
import io.weir.node.auth.Authenticator;
import io.weir.node.auth.Principal;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.http.ErrorBody;
import io.weir.protocol.http.Readiness;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import java.util.function.Supplier;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.RawHeader;
import org.apache.pekko.http.javadsl.server.AllDirectives;
import org.apache.pekko.http.javadsl.server.ExceptionHandler;
import org.apache.pekko.http.javadsl.server.MethodRejection;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Rejection;
import org.apache.pekko.http.javadsl.server.RejectionHandler;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.http.javadsl.unmarshalling.Unmarshaller;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node's HTTP API.
 *
 * <ul>
 *   <li>{@code GET /health/alive}: 200 while the process serves HTTP.
 *   <li>{@code GET /health/ready}: 200 when the node is an Up cluster member and its journal
 *       answers, else 503; the body lists each check ({@link Readiness}).
 *   <li>{@code GET /admin/cluster}: cluster membership ({@link io.weir.protocol.http.ClusterStatus}).
 *   <li>{@code GET /admin/partitions}: how many partitions run, per node ({@link
 *       io.weir.protocol.http.PartitionsStatus}).
 * </ul>
 *
 * <p>{@code /admin/*} needs a cluster administrator's bearer token: 401 without a token or with an
 * unknown one, 403 for an authenticated principal who is not an administrator. Every error is a
 * JSON {@link ErrorBody} with a typed code; no reply or log line carries a token or a row value.
 */
public final class HttpApi extends AllDirectives {
  private static final Logger log = LoggerFactory.getLogger(HttpApi.class);
  private static final String BEARER = "bearer ";

  private final ObjectMapper json;
  private final Authenticator authenticator;
  private final NodeView node;
  private final PipelineAdmin pipelines;
  private final Supplier<String> metrics;

  /**
   * @param pipelines pipeline operations, or null on a node built without them (routes answer 404)
   * @param metrics Prometheus text exposition of the node's meters, or null for none
   */
  public HttpApi(
      ObjectMapper json, Authenticator authenticator, NodeView node, PipelineAdmin pipelines, Supplier<String> metrics) {
    this.json = json;
    this.authenticator = authenticator;
    this.node = node;
    this.pipelines = pipelines;
    this.metrics = metrics;
  }

  public Route routes() {
    return handleExceptions(
        exceptionHandler(),
        () ->
            handleRejections(
                rejectionHandler(),
                () ->
                    concat(
                        pathPrefix("health", this::healthRoutes),
                        pathPrefix("admin", () -> administrator(principal -> adminRoutes())))));
  }

  private Route healthRoutes() {
    return concat(
        path("alive", () -> get(() -> json(200, Map.of("status", "alive")))),
        path("ready", () -> get(() -> extractRequestContext(ctx -> {
          Readiness r = node.readiness();
          return json(r.ready() ? 200 : 503, r);
        }))));
  }

  private Route adminRoutes() {
    return concat(
        path("cluster", () -> get(() -> jsonLazy(200, node::clusterStatus))),
        path("partitions", () -> get(() -> onComplete(node.partitionsStatus(), result -> result.isSuccess()
            ? json(200, result.get())
            : error(ErrorCode.UNAVAILABLE, "the shard regions did not answer in time; retry")))),
        path("metrics", () -> get(() -> extractRequestContext(ctx -> metrics == null
            ? error(ErrorCode.NOT_FOUND, "no such resource")
            : complete(HttpResponse.create().withEntity(
                ContentTypes.create(org.apache.pekko.http.javadsl.model.MediaTypes.TEXT_PLAIN, org.apache.pekko.http.javadsl.model.HttpCharsets.UTF_8),
                metrics.get()))))),
        pathPrefix("pipelines", this::pipelineRoutes));
  }

  /**
   * {@code GET /admin/pipelines}, {@code GET /admin/pipelines/{name}}, {@code POST
   * /admin/pipelines/{name}/start|stop}: each replies with pipeline status JSON. {@code POST
   * /admin/pipelines/{name}/snapshot} with {@code {"tables":["schema.table",...]}} (or no body: every
   * published table) starts an incremental snapshot: 202 and the status, 400 for a table not
   * published or a malformed body, 409 when the pipeline is not streaming or a snapshot runs.
   */
  private Route pipelineRoutes() {
    if (pipelines == null) {
      return error(ErrorCode.NOT_FOUND, "no such resource");
    }
    return concat(
        pathEndOrSingleSlash(() -> get(() -> reply(pipelines.list()))),
        pathPrefix(PathMatchers.segment(), name -> {
          if (!pipelines.exists(name)) {
            return error(ErrorCode.NOT_FOUND, "no pipeline of that name is configured");
          }
          return concat(
              pathEndOrSingleSlash(() -> get(() -> reply(pipelines.status(name)))),
              path("start", () -> post(() -> reply(pipelines.start(name)))),
              path("stop", () -> post(() -> reply(pipelines.stop(name)))),
              path("snapshot", () -> post(() -> entity(Unmarshaller.entityToString(), body -> snapshot(name, body)))));
        }));
  }

  private static final java.util.regex.Pattern TABLE_NAME = java.util.regex.Pattern.compile("[^.\\s]{1,63}\\.[^.\\s]{1,63}");
  private static final int MAX_SNAPSHOT_TABLES = 1000;

  private Route snapshot(String name, String body) {
    List<String> tables = new ArrayList<>();
    if (!body.isBlank()) {
      try {
        com.fasterxml.jackson.databind.JsonNode root = json.readTree(body);
        com.fasterxml.jackson.databind.JsonNode list = root == null ? null : root.get("tables");
        if (root == null || !root.isObject() || (list != null && !list.isArray())) {
          return error(ErrorCode.BAD_REQUEST, "the body must be {\"tables\": [\"schema.table\", ...]}");
        }
        if (list != null) {
          for (com.fasterxml.jackson.databind.JsonNode t : list) {
            if (!t.isTextual() || !TABLE_NAME.matcher(t.asText()).matches()) {
              return error(ErrorCode.BAD_REQUEST, "each table must be a string schema.table");
            }
            tables.add(t.asText());
          }
        }
      } catch (JsonProcessingException e) {
        return error(ErrorCode.BAD_REQUEST, "the body is not valid JSON");
      }
    }
    if (tables.size() > MAX_SNAPSHOT_TABLES) {
      return error(ErrorCode.BAD_REQUEST, "at most " + MAX_SNAPSHOT_TABLES + " tables per snapshot");
    }
    return onComplete(pipelines.snapshot(name, List.copyOf(new java.util.LinkedHashSet<>(tables))), result -> {
      if (!result.isSuccess()) {
        return error(ErrorCode.UNAVAILABLE, "the pipeline manager did not answer in time; retry");
      }
      io.weir.persistence.cdc.CdcPipeline.SnapshotReply reply = result.get();
      if (reply.error() == null) {
        return json(202, reply.status());
      }
      return switch (reply.error()) {
        case "unknown-table" -> error(ErrorCode.BAD_REQUEST, reply.message());
        case "not-running", "snapshot-in-progress" -> error(ErrorCode.CONFLICT, reply.message());
        default -> error(ErrorCode.UNAVAILABLE, reply.message());
      };
    });
  }

  private Route reply(CompletionStage<?> answer) {
    return onComplete(answer, result -> result.isSuccess()
        ? json(200, result.get())
        : error(ErrorCode.UNAVAILABLE, "the pipeline manager did not answer in time; retry"));
  }

  /** Runs {@code inner} for a cluster administrator; 401 or 403 otherwise. */
  private Route administrator(Function<Principal, Route> inner) {
    return optionalHeaderValueByName(
        "Authorization",
        header -> {
          Optional<Principal> principal = header.flatMap(HttpApi::bearerToken).flatMap(authenticator::authenticate);
          if (principal.isEmpty()) {
            return complete(
                response(401, ErrorBody.of(ErrorCode.UNAUTHENTICATED, "a valid bearer token is required"))
                    .addHeader(RawHeader.create("WWW-Authenticate", "Bearer realm=\"weir\"")));
          }
          if (!principal.get().administrator()) {
            return error(ErrorCode.FORBIDDEN, "this operation requires a cluster administrator");
          }
          return inner.apply(principal.get());
        });
  }

  static Optional<String> bearerToken(String authorization) {
    if (authorization.length() > BEARER.length()
        && authorization.substring(0, BEARER.length()).toLowerCase(Locale.ROOT).equals(BEARER)) {
      return Optional.of(authorization.substring(BEARER.length()).trim());
    }
    return Optional.empty();
  }

  private RejectionHandler rejectionHandler() {
    return RejectionHandler.newBuilder()
        .handleAll(MethodRejection.class, rejections -> error(ErrorCode.METHOD_NOT_ALLOWED, "method not allowed on this path"))
        .handle(Rejection.class, rejection -> error(ErrorCode.BAD_REQUEST, "request rejected (" + rejection.getClass().getSimpleName() + ")"))
        .handleNotFound(error(ErrorCode.NOT_FOUND, "no such resource"))
        .build();
  }

  private ExceptionHandler exceptionHandler() {
    return ExceptionHandler.newBuilder()
        .matchAny(e -> {
          log.error("request failed: {}", SafeErrors.describe(e));
          return error(ErrorCode.INTERNAL, "internal error; see the node's log");
        })
        .build();
  }

  private Route error(ErrorCode code, String message) {
    return json(code.httpStatus(), ErrorBody.of(code, message));
  }

  private Route json(int status, Object body) {
    return complete(response(status, body));
  }

  private Route jsonLazy(int status, Supplier<?> body) {
    return extractRequestContext(ctx -> json(status, body.get()));
  }

  private HttpResponse response(int status, Object body) {
    try {
      return HttpResponse.create()
          .withStatus(StatusCodes.get(status))
          .withEntity(ContentTypes.APPLICATION_JSON, json.writeValueAsBytes(body));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot encode a reply of type " + body.getClass().getSimpleName(), e);
    }
  }
}
