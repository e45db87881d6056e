package io.weir.node.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.Documents;
import io.weir.node.NodeView;
import io.weir.node.auth.Access;
import io.weir.node.auth.Authenticator;
import io.weir.node.auth.Principal;
import io.weir.node.cdc.PipelineAdmin;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.Lsn;
import io.weir.protocol.http.DocumentWritten;
import io.weir.protocol.http.ErrorBody;
import io.weir.protocol.http.OutboxStatus;
import io.weir.protocol.http.Readiness;
import io.weir.protocol.http.RevisionConflict;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.Conflict;
import io.weir.sharding.partition.PartitionProtocol.Document;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.PartitionStatus;
import io.weir.sharding.partition.PartitionProtocol.QuotaExceeded;
import io.weir.sharding.partition.PartitionProtocol.Rejected;
import java.nio.charset.StandardCharsets;
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
import org.apache.pekko.http.javadsl.model.headers.ETag;
import org.apache.pekko.http.javadsl.model.headers.EntityTag;
import org.apache.pekko.http.javadsl.server.ExceptionHandler;
import org.apache.pekko.http.javadsl.server.MethodRejection;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Rejection;
import org.apache.pekko.http.javadsl.server.RejectionHandler;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.http.scaladsl.model.EntityStreamSizeException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node's HTTP API.
 *
 * <ul>
 *   <li>{@code GET /openapi.json}: the OpenAPI 3 description of every route here ({@link OpenApi}),
 *       without a token.
 *   <li>{@code GET /health/alive}: 200 while the process serves HTTP.
 *   <li>{@code GET /health/ready}: 200 when the node is an Up cluster member and its journal
 *       answers, else 503; the body lists each check ({@link Readiness}).
 *   <li>{@code GET /metrics}: the node's meters in Prometheus text format, for a cluster
 *       administrator, the scrape token ({@code weir.metrics.token}) or anyone with {@code
 *       weir.metrics.anonymous} (docs/metrics.md); {@code GET /admin/metrics} serves the same to
 *       administrators.
 *   <li>{@code GET /admin/cluster}: cluster membership ({@link
 *       io.weir.protocol.http.ClusterStatus}).
 *   <li>{@code GET /admin/partitions}: how many partitions run, per node ({@link
 *       io.weir.protocol.http.PartitionsStatus}).
 *   <li>{@code GET /admin/outbox/status[?partition=N]}: one partition's outbox counters and
 *       watermarks, or every partition's ({@link OutboxStatus}).
 *   <li>{@code GET /admin/outbox/settings}: the outbox quota and retention every partition runs
 *       under ({@link io.weir.protocol.http.OutboxSettings}).
 *   <li>{@code GET /admin/slots}: each pipeline's replication slot as its source reports it: lag
 *       and retained WAL in bytes ({@link io.weir.node.cdc.SlotLag}).
 *   <li>{@code GET /console}: the operator console, static files that call the admin routes with
 *       the token the operator enters ({@link ConsoleRoutes}); no token needed for the files.
 *   <li>{@code PUT|GET|DELETE /v1/documents/{collection}/{id}}: the document API (see {@link
 *       #documentRoutes()}).
 *   <li>{@code POST /admin/projections/configure|read|commit|release}: projection consumers ({@link
 *       ProjectionRoutes}).
 *   <li>{@code GET /admin/tokens/keys}, {@code POST /admin/tokens/rotate|retire}: the cluster's
 *       token-signing keys ({@link TokenRoutes}).
 *   <li>{@code POST /v1/continuous}, {@code GET /v1/continuous/{id}/events|status}, {@code DELETE
 *       /v1/continuous/{id}}: continuous queries ({@link ContinuousRoutes}; grant {@code
 *       ContinuousQuery} on the query's scope).
 * </ul>
 *
 * <p>{@code /admin/*} needs a cluster administrator's bearer token: 401 without a token or with an
 * unknown one, 403 for an authenticated principal who is not an administrator. {@code /v1/*} needs
 * the collection's grant ({@code DocumentsRead} or {@code DocumentsWrite}; administrators hold
 * every grant), 403 without it. Every error is a JSON {@link ErrorBody} with a typed code; no reply
 * or log line carries a token, a row value or a document body.
 */
public final class HttpApi extends JsonRoutes {
  private static final Logger log = LoggerFactory.getLogger(HttpApi.class);
  private static final String BEARER = "bearer ";

  private final Authenticator authenticator;
  private final NodeView node;
  private final PipelineAdmin pipelines;
  private final Supplier<String> metrics;
  private final Documents documents;
  private final long maxDocumentBytes;
  private final ProjectionRoutes projections;
  private final TokenRoutes tokens;
  private final PrincipalRoutes principals;
  private final io.weir.node.auth.Policies policies;
  private final PolicyRoutes policyRoutes;
  private final FeedRoutes feedRoutes;
  private final ContinuousRoutes continuousRoutes;

  /**
   * @param pipelines pipeline operations, or null on a node built without them (routes answer 404)
   * @param metrics Prometheus text exposition of the node's meters, or null for none
   */
  public HttpApi(
      ObjectMapper json,
      Authenticator authenticator,
      NodeView node,
      PipelineAdmin pipelines,
      Supplier<String> metrics) {
    this(json, authenticator, node, pipelines, metrics, null, 0);
  }

  /**
   * @param documents the document API and outbox status, or null for none (routes answer 404)
   * @param maxDocumentBytes the largest request body a document PUT accepts
   */
  public HttpApi(
      ObjectMapper json,
      Authenticator authenticator,
      NodeView node,
      PipelineAdmin pipelines,
      Supplier<String> metrics,
      Documents documents,
      long maxDocumentBytes) {
    this(
        json,
        authenticator,
        node,
        pipelines,
        metrics,
        documents,
        maxDocumentBytes,
        null,
        null,
        null);
  }

  /**
   * @param projections projection consumers, or null for none (routes answer 404)
   * @param tokenKeys the cluster's token keys, or null for none (routes answer 404)
   */
  public HttpApi(
      ObjectMapper json,
      Authenticator authenticator,
      NodeView node,
      PipelineAdmin pipelines,
      Supplier<String> metrics,
      Documents documents,
      long maxDocumentBytes,
      io.weir.node.Projections projections,
      io.weir.node.TokenKeys tokenKeys) {
    this(
        json,
        authenticator,
        node,
        pipelines,
        metrics,
        documents,
        maxDocumentBytes,
        projections,
        tokenKeys,
        null);
  }

  /**
   * @param principals the stored principals, or null for none ({@code /admin/principals} answers
   *     404)
   */
  public HttpApi(
      ObjectMapper json,
      Authenticator authenticator,
      NodeView node,
      PipelineAdmin pipelines,
      Supplier<String> metrics,
      Documents documents,
      long maxDocumentBytes,
      io.weir.node.Projections projections,
      io.weir.node.TokenKeys tokenKeys,
      io.weir.node.auth.Principals principals) {
    this(
        json,
        authenticator,
        node,
        pipelines,
        metrics,
        documents,
        maxDocumentBytes,
        projections,
        tokenKeys,
        principals,
        null,
        null);
  }

  /**
   * @param policies collection policies, or null for none (every collection unrestricted; {@code
   *     /admin/policies} answers 404)
   * @param feeds the changes feed and queries, or null for none ({@code /v1/changes}, {@code
   *     /v1/query} answer 404)
   */
  public HttpApi(
      ObjectMapper json,
      Authenticator authenticator,
      NodeView node,
      PipelineAdmin pipelines,
      Supplier<String> metrics,
      Documents documents,
      long maxDocumentBytes,
      io.weir.node.Projections projections,
      io.weir.node.TokenKeys tokenKeys,
      io.weir.node.auth.Principals principals,
      io.weir.node.auth.Policies policies,
      io.weir.node.Feeds feeds) {
    this(
        json,
        authenticator,
        node,
        pipelines,
        metrics,
        documents,
        maxDocumentBytes,
        projections,
        tokenKeys,
        principals,
        policies,
        feeds,
        null);
  }

  /**
   * @param continuous continuous queries, or null for none ({@code /v1/continuous} answers 404)
   */
  public HttpApi(
      ObjectMapper json,
      Authenticator authenticator,
      NodeView node,
      PipelineAdmin pipelines,
      Supplier<String> metrics,
      Documents documents,
      long maxDocumentBytes,
      io.weir.node.Projections projections,
      io.weir.node.TokenKeys tokenKeys,
      io.weir.node.auth.Principals principals,
      io.weir.node.auth.Policies policies,
      io.weir.node.Feeds feeds,
      io.weir.node.continuous.ContinuousQueries continuous) {
    super(json);
    this.continuousRoutes = continuous == null ? null : new ContinuousRoutes(json, continuous);
    this.policies = policies;
    this.policyRoutes = policies == null ? null : new PolicyRoutes(json, policies);
    this.feedRoutes = feeds == null ? null : new FeedRoutes(json, feeds, authenticator);
    this.principals = principals == null ? null : new PrincipalRoutes(json, principals);
    this.projections =
        projections == null
            ? null
            : new ProjectionRoutes(json, projections, documents, maxDocumentBytes);
    this.tokens = tokenKeys == null ? null : new TokenRoutes(json, tokenKeys);
    this.authenticator = authenticator;
    this.node = node;
    this.pipelines = pipelines;
    this.metrics = metrics;
    this.documents = documents;
    this.maxDocumentBytes = maxDocumentBytes;
  }

  private final ConsoleRoutes console = new ConsoleRoutes(json);
  private io.weir.protocol.http.OutboxSettings outboxSettings;

  private io.weir.node.cdc.SlotLag slotLag;

  /** Serves the pipelines' replication slots at {@code GET /admin/slots} (404 until set). */
  public HttpApi withSlotLag(io.weir.node.cdc.SlotLag slots) {
    this.slotLag = slots;
    return this;
  }

  /** Serves {@code settings} at {@code GET /admin/outbox/settings} (404 until set). */
  public HttpApi withOutboxSettings(io.weir.protocol.http.OutboxSettings settings) {
    this.outboxSettings = settings;
    return this;
  }

  private io.weir.node.metrics.HttpMetrics httpMetrics;
  private io.weir.node.metrics.MetricsSettings metricsAccess =
      io.weir.node.metrics.MetricsSettings.DEFAULTS;

  /**
   * Times and counts every request on {@code http} (call before {@link #routes()}), and opens
   * {@code GET /metrics} as {@code access} says.
   */
  public HttpApi withMetrics(
      io.weir.node.metrics.HttpMetrics http, io.weir.node.metrics.MetricsSettings access) {
    this.httpMetrics = http;
    this.metricsAccess = access;
    return this;
  }

  /**
   * Every route, in the order a request meets them: the request timeout's answer (503 {@code
   * unavailable} as JSON), the one {@link RequestLog} line of an error answer, the exception and
   * rejection handlers (typed JSON errors), the encoding check of the raw path and query ({@link
   * #badEncoding}), then the routes.
   */
  public Route routes() {
    Route all =
        extractRequest(
            request -> {
              // The server's request timeout answers with timedOut (JSON) instead of its plain
              // text. A request without the header (the protocol gateway's) has no server timeout.
              // Whichever answer comes first, the timeout's or the route's, is the one logged.
              java.util.concurrent.atomic.AtomicBoolean answered =
                  new java.util.concurrent.atomic.AtomicBoolean();
              request
                  .getHeader(org.apache.pekko.http.javadsl.model.headers.TimeoutAccess.class)
                  .ifPresent(
                      t ->
                          t.timeoutAccess()
                              .updateHandler(
                                  late -> timedOut(late, answered.compareAndSet(false, true))));
              return mapResponse(
                  response -> {
                    if (answered.compareAndSet(false, true)) {
                      RequestLog.answered(request, response);
                    }
                    return response;
                  },
                  () ->
                      handleExceptions(
                          exceptionHandler(),
                          () ->
                              handleRejections(
                                  rejectionHandler(), () -> strictlyEncoded(this::served))));
            });
    return httpMetrics == null ? all : httpMetrics.measured(() -> all);
  }

  /**
   * The answer to a request that outlived {@code pekko.http.server.request-timeout}; its {@link
   * RequestLog} line when {@code log}.
   */
  private static HttpResponse timedOut(
      org.apache.pekko.http.javadsl.model.HttpRequest request, boolean log) {
    if (log) {
      RequestLog.refused(
          RequestLog.method(request),
          RequestLog.route(request),
          ErrorCode.UNAVAILABLE.httpStatus(),
          ErrorCode.UNAVAILABLE.wire());
    }
    return HttpLayerErrors.response(
        ErrorCode.UNAVAILABLE.httpStatus(),
        ErrorBody.of(
            ErrorCode.UNAVAILABLE,
            "the node did not answer within pekko.http.server.request-timeout; retry"));
  }

  /**
   * {@code inner} when the request's raw path and query (the {@code Raw-Request-URI} header the
   * node's server adds, {@link NodeHttpServer}) percent-decode to valid UTF-8; else 400 {@code
   * invalid-name} for a path segment, {@code bad-request} for the query. Pekko decodes an invalid
   * sequence such as {@code %FF} to U+FFFD, so two different ids would name one document. A request
   * without the header (the protocol gateway's, built from strings) is not checked.
   */
  private Route strictlyEncoded(Supplier<Route> inner) {
    return extractRequest(
        request -> {
          Optional<org.apache.pekko.http.javadsl.model.headers.RawRequestURI> raw =
              request.getHeader(org.apache.pekko.http.javadsl.model.headers.RawRequestURI.class);
          ErrorCode bad = raw.isPresent() ? badEncoding(raw.get().uri()) : null;
          if (bad == ErrorCode.INVALID_NAME) {
            return error(
                ErrorCode.INVALID_NAME,
                "a path segment is not valid percent-encoded UTF-8 (collections and ids are UTF-8)");
          }
          if (bad != null) {
            return error(
                ErrorCode.BAD_REQUEST, "the query string is not valid percent-encoded UTF-8");
          }
          return inner.get();
        });
  }

  /**
   * {@link ErrorCode#INVALID_NAME} when a path segment of the raw request target {@code raw} does
   * not percent-decode to valid UTF-8, {@link ErrorCode#BAD_REQUEST} when its query does not, null
   * when both do.
   */
  static ErrorCode badEncoding(String raw) {
    String target = raw;
    int hash = target.indexOf('#');
    if (hash >= 0) {
      target = target.substring(0, hash);
    }
    int q = target.indexOf('?');
    String path = q < 0 ? target : target.substring(0, q);
    String query = q < 0 ? "" : target.substring(q + 1);
    int scheme = path.indexOf("://");
    if (!path.startsWith("/") && scheme >= 0) { // absolute form: http://host:port/path
      int slash = path.indexOf('/', scheme + 3);
      path = slash < 0 ? "" : path.substring(slash);
    }
    for (String segment : path.split("/", -1)) {
      if (!percentEncodedUtf8(segment)) {
        return ErrorCode.INVALID_NAME;
      }
    }
    return percentEncodedUtf8(query) ? null : ErrorCode.BAD_REQUEST;
  }

  /** Whether {@code s} (ASCII with %XX escapes) decodes to valid UTF-8. */
  static boolean percentEncodedUtf8(String s) {
    java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream(s.length());
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '%') {
        if (i + 2 >= s.length()
            || Character.digit(s.charAt(i + 1), 16) < 0
            || Character.digit(s.charAt(i + 2), 16) < 0) {
          return false;
        }
        bytes.write(
            Character.digit(s.charAt(i + 1), 16) * 16 + Character.digit(s.charAt(i + 2), 16));
        i += 2;
      } else if (c > 0x7E || c < 0x20) {
        return false; // the raw target is ASCII; anything else was not (U+FFFD) or is a control
      } else {
        bytes.write(c);
      }
    }
    try {
      utf8(bytes.toByteArray());
      return true;
    } catch (MalformedBody e) {
      return false;
    }
  }

  /** The routes themselves. */
  private Route served() {
    return concat(
        path(
            "openapi.json",
            () ->
                get(
                    () ->
                        complete(
                            HttpResponse.create()
                                .withEntity(ContentTypes.APPLICATION_JSON, OpenApi.document())))),
        path("metrics", () -> get(this::metricsEndpoint)),
        pathPrefix("console", console::routes),
        pathPrefix("health", this::healthRoutes),
        pathPrefix("admin", () -> administrator(principal -> adminRoutes())),
        pathPrefix(
            "v1",
            () ->
                authenticated(
                    principal ->
                        concat(
                            pathPrefix(
                                "continuous",
                                () ->
                                    continuousRoutes == null
                                        ? error(
                                            ErrorCode.NOT_FOUND,
                                            "continuous queries are not configured: no pipeline has sink.type = continuous")
                                        : continuousRoutes.routes(principal)),
                            documentRoutes(principal)))));
  }

  /**
   * {@code GET /metrics}: open with {@code weir.metrics.anonymous}; else for the scrape token or a
   * cluster administrator (401 without a valid token, 403 for another principal). 404 when metrics
   * are off.
   */
  private Route metricsEndpoint() {
    if (metrics == null || !metricsAccess.enabled()) {
      return error(ErrorCode.NOT_FOUND, "no such resource");
    }
    if (metricsAccess.anonymous()) {
      return exposition();
    }
    return optionalHeaderValueByName(
        "Authorization",
        header -> {
          Optional<String> token = header.flatMap(HttpApi::bearerToken);
          if (token.isPresent()
              && metricsAccess.scrapeToken().isPresent()
              && java.security.MessageDigest.isEqual(
                  token.get().getBytes(StandardCharsets.UTF_8),
                  metricsAccess.scrapeToken().get().getBytes(StandardCharsets.UTF_8))) {
            return exposition();
          }
          return administrator(principal -> exposition());
        });
  }

  /** The Prometheus text exposition format, version 0.0.4. */
  private static final org.apache.pekko.http.javadsl.model.ContentType.NonBinary PROMETHEUS_TEXT =
      (org.apache.pekko.http.javadsl.model.ContentType.NonBinary)
          ContentTypes.parse("text/plain; version=0.0.4; charset=utf-8");

  private Route exposition() {
    return extractRequestContext(
        ctx -> complete(HttpResponse.create().withEntity(PROMETHEUS_TEXT, metrics.get())));
  }

  private Route healthRoutes() {
    return concat(
        path("alive", () -> get(() -> json(200, Map.of("status", "alive")))),
        path(
            "ready",
            () ->
                get(
                    () ->
                        extractRequestContext(
                            ctx -> {
                              Readiness r = node.readiness();
                              return json(r.ready() ? 200 : 503, r);
                            }))));
  }

  private Route adminRoutes() {
    return concat(
        path(
            "cluster",
            () ->
                get(
                    () ->
                        onComplete(
                            node.clusterStatus(),
                            result ->
                                result.isSuccess()
                                    ? json(200, result.get())
                                    : error(
                                        ErrorCode.UNAVAILABLE,
                                        "the cluster state could not be collected in time; retry")))),
        path(
            "partitions",
            () ->
                get(
                    () ->
                        onComplete(
                            node.partitionsStatus(),
                            result ->
                                result.isSuccess()
                                    ? json(200, result.get())
                                    : error(
                                        ErrorCode.UNAVAILABLE,
                                        "the shard regions did not answer in time; retry")))),
        path(
            "metrics",
            () ->
                get(
                    () ->
                        metrics == null || !metricsAccess.enabled()
                            ? error(ErrorCode.NOT_FOUND, "no such resource")
                            : exposition())),
        path(
            PathMatchers.segment("partitions")
                .slash(PathMatchers.integerSegment())
                .slash("accept-storage-loss"),
            n ->
                post(() -> parameterOptional("confirm", confirm -> acceptStorageLoss(n, confirm)))),
        path(
            PathMatchers.segment("outbox").slash("settings"),
            () ->
                get(
                    () ->
                        outboxSettings == null
                            ? error(ErrorCode.NOT_FOUND, "no such resource")
                            : json(200, outboxSettings))),
        path(
            PathMatchers.segment("outbox").slash("status"),
            () -> get(() -> parameterOptional("partition", this::outboxStatus))),
        path(
            PathMatchers.segment("outbox").slash("purge"),
            () -> post(() -> jsonBody(ADMIN_BODY, this::purge))),
        pathPrefix("pipelines", this::pipelineRoutes),
        path(
            "slots",
            () ->
                get(
                    () ->
                        slotLag == null
                            ? error(ErrorCode.NOT_FOUND, "no such resource")
                            : onComplete(
                                slotLag.report(),
                                result ->
                                    result.isSuccess()
                                        ? json(200, result.get())
                                        : error(
                                            ErrorCode.UNAVAILABLE,
                                            "the replication slots could not be read; retry")))),
        pathPrefix(
            "projections",
            () ->
                projections == null
                    ? error(ErrorCode.NOT_FOUND, "no such resource")
                    : projections.routes()),
        pathPrefix(
            "tokens",
            () ->
                tokens == null ? error(ErrorCode.NOT_FOUND, "no such resource") : tokens.routes()),
        pathPrefix(
            "principals",
            () ->
                principals == null
                    ? error(ErrorCode.NOT_FOUND, "no such resource")
                    : principals.routes()),
        pathPrefix(
            "policies",
            () ->
                policyRoutes == null
                    ? error(ErrorCode.NOT_FOUND, "no such resource")
                    : policyRoutes.routes()));
  }

  /**
   * {@code GET /admin/outbox/status?partition=N}: partition N's {@link OutboxStatus} (400 for N
   * outside 0 to P-1); without {@code partition}, a list of all P, asked in parallel. 503 when a
   * partition does not answer in time.
   */
  private Route outboxStatus(Optional<String> partition) {
    if (documents == null) {
      return error(ErrorCode.NOT_FOUND, "no such resource");
    }
    if (partition.isEmpty()) {
      return onComplete(
          documents.statusAll(),
          result ->
              result.isSuccess()
                  ? json(200, result.get().stream().map(HttpApi::outboxStatus).toList())
                  : partitionUnavailable(result.failed().get()));
    }
    int n;
    try {
      n = Integer.parseInt(partition.get());
    } catch (NumberFormatException e) {
      n = -1;
    }
    if (n < 0 || n >= documents.partitions()) {
      return error(
          ErrorCode.BAD_REQUEST,
          "partition must be a number from 0 to " + (documents.partitions() - 1));
    }
    return onComplete(
        documents.status(n),
        result ->
            result.isSuccess()
                ? json(200, outboxStatus(result.get()))
                : partitionUnavailable(result.failed().get()));
  }

  /**
   * {@code POST /admin/partitions/{n}/accept-storage-loss?confirm={n}}: gives partition N, halted
   * {@code storage-behind} because its journal lacks writes it acknowledged, a new incarnation at
   * its journal's tail (ADR 0036). 200 {@code {"partition", "epoch", "journalTail", "lost"}}; 400
   * without the confirmation or for N out of range; 409 {@code not-storage-behind} when the
   * partition's journal holds everything it acknowledged.
   */
  private Route acceptStorageLoss(int n, Optional<String> confirm) {
    if (documents == null) {
      return error(ErrorCode.NOT_FOUND, "no such resource");
    }
    if (n < 0 || n >= documents.partitions()) {
      return error(
          ErrorCode.BAD_REQUEST,
          "partition must be a number from 0 to " + (documents.partitions() - 1));
    }
    if (confirm.isEmpty() || !confirm.get().equals(Integer.toString(n))) {
      return error(
          ErrorCode.BAD_REQUEST,
          "accepting a storage loss gives up the writes the storage lost and invalidates the"
              + " partition's tokens and cursors; confirm with ?confirm=<the partition's number>");
    }
    return onComplete(
        documents.acceptStorageLoss(n),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          if (result.get()
              instanceof io.weir.sharding.partition.PartitionProtocol.StorageLossRefused r) {
            return error(ErrorCode.NOT_STORAGE_BEHIND, r.reason());
          }
          var a = (io.weir.sharding.partition.PartitionProtocol.StorageLossAccepted) result.get();
          return json(
              200,
              Map.of(
                  "partition",
                  n,
                  "epoch",
                  a.epoch(),
                  "journalTail",
                  a.journalTail(),
                  "lost",
                  a.lost()));
        });
  }

  /** Outbox entries one purge request reclaims at most (a bounded prefix; ask again for more). */
  static final long MAX_PURGE_ENTRIES = 100_000;

  /**
   * {@code POST /admin/outbox/purge} with {@code {"partition": N, "through": S}}: reclaims
   * partition N's outbox entries up to S, at most {@link #MAX_PURGE_ENTRIES} per request (the
   * reply's {@code more} says to ask again). 200 {@code {"partition", "outboxFirst", "outboxNext",
   * "purged", "more"}}; 400 for a bad body, a partition out of range, or S at or past the outbox's
   * end (nothing is purged then).
   */
  private Route purge(com.fasterxml.jackson.databind.JsonNode root) {
    if (documents == null) {
      return error(ErrorCode.NOT_FOUND, "no such resource");
    }
    if (root == null
        || !root.isObject()
        || !root.path("partition").canConvertToInt()
        || !root.path("partition").isIntegralNumber()
        || !root.path("through").isIntegralNumber()
        || !root.path("through").canConvertToLong()) {
      return error(
          ErrorCode.BAD_REQUEST, "the body must be {\"partition\": N, \"through\": sequence}");
    }
    int n = root.get("partition").intValue();
    long through = root.get("through").longValue();
    if (n < 0 || n >= documents.partitions()) {
      return error(
          ErrorCode.BAD_REQUEST,
          "partition must be a number from 0 to " + (documents.partitions() - 1));
    }
    if (through < 0) {
      return error(ErrorCode.BAD_REQUEST, "through must not be negative");
    }
    int partition = n;
    return onComplete(
        documents.purge(n, through, MAX_PURGE_ENTRIES),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          if (result.get() instanceof io.weir.sharding.partition.PartitionProtocol.PurgeRefused r) {
            return error(ErrorCode.BAD_REQUEST, r.reason());
          }
          var p = (io.weir.sharding.partition.PartitionProtocol.OutboxPurged) result.get();
          return json(
              200,
              Map.of(
                  "partition",
                  partition,
                  "outboxFirst",
                  p.outboxFirst(),
                  "outboxNext",
                  p.outboxNext(),
                  "purged",
                  p.purged(),
                  "more",
                  p.more(),
                  "pinned",
                  p.pinned()));
        });
  }

  private static OutboxStatus outboxStatus(PartitionStatus s) {
    Map<String, String> watermarks = new java.util.TreeMap<>();
    s.watermarks().forEach((source, lsn) -> watermarks.put(source, Lsn.of(lsn).toString()));
    List<OutboxStatus.Consumer> consumers =
        s.consumers().stream()
            .map(
                c ->
                    new OutboxStatus.Consumer(
                        c.name(),
                        c.generation(),
                        c.collections(),
                        c.kinds(),
                        c.startAfter(),
                        c.checkpoint(),
                        s.outboxNext() - 1 - c.checkpoint(),
                        c.released()))
            .toList();
    return new OutboxStatus(
        s.partition(),
        s.documents(),
        s.outboxFirst(),
        s.outboxNext(),
        s.outboxEntries(),
        s.outboxBytes(),
        s.journalEvents(),
        watermarks,
        consumers,
        s.storage() == null
            ? null
            : new OutboxStatus.Storage(
                s.storage().state(),
                s.storage().acknowledged(),
                s.storage().epoch(),
                s.storage().copies(),
                identity(s.storage().checkedOn()),
                identity(s.storage().acknowledgedOn())),
        s.table() == null
            ? null
            : new OutboxStatus.DocumentsTable(
                s.table().state(),
                s.table().appliedThrough(),
                s.table().lagEvents(),
                s.table().failures(),
                s.table().lastError(),
                s.table().moved(),
                s.table().toMove()));
  }

  private static OutboxStatus.StorageIdentity identity(io.weir.persistence.StorageSystem s) {
    return s == null
        ? null
        : new OutboxStatus.StorageIdentity(
            Long.toUnsignedString(s.systemIdentifier()), s.timeline());
  }

  /**
   * The document API. A document is a JSON object in a collection, identified by an id, with a
   * revision that counts its versions (a delete is one too).
   *
   * <ul>
   *   <li>{@code PUT}: the body (a JSON object, at most {@code weir.documents.max-bytes}, stored
   *       compacted) creates or replaces the document. 200 {@link DocumentWritten} with {@code
   *       ETag: "<revision>"}.
   *   <li>{@code GET}: 200 with the body and its {@code ETag}; 404 when absent or deleted.
   *   <li>{@code DELETE}: 200 {@link DocumentWritten} ({@code deleted: true}); 404 without writing
   *       when absent or already deleted.
   * </ul>
   *
   * <p>Writes take {@code If-Match: <revision>} (or {@code "<revision>"}; 0: must not exist), 409
   * {@link RevisionConflict} when it does not match, and {@code Idempotency-Key}: a retry with the
   * same key by the same principal with the same request (method, document, {@code If-Match}, body)
   * gets the first reply again with {@code replayed: true} and writes nothing, as long as the
   * partition remembers it (its last 10,000 keyed commands); the same key with another request is
   * 409 {@code idempotency-key-reused}; another principal's key never matches. Collections are
   * 1-128 of {@code [A-Za-z0-9_-]} for writes ({@code .} also for reads: CDC collections), ids
   * 1-512 characters without control characters (400 {@code invalid-name}); collections a
   * pipeline's partition sink names are read-only (409 {@code collection-fed-by-cdc}). A full
   * outbox is 429 {@code quota-exceeded}; a partition that does not answer in time 503 {@code
   * unavailable}, both retryable.
   */
  private Route documentRoutes(Principal principal) {
    if (documents == null) {
      return error(ErrorCode.NOT_FOUND, "no such resource");
    }
    return concat(
        path(
            PathMatchers.segment("documents")
                .slash(PathMatchers.segment())
                .slash(PathMatchers.segment()),
            (collection, id) ->
                concat(
                    put(
                        () ->
                            granted(
                                principal,
                                "DocumentsWrite",
                                collection,
                                p ->
                                    writeHeaders(
                                        (expected, key) ->
                                            putDocument(p, collection, id, expected, key)))),
                    get(
                        () ->
                            granted(
                                principal,
                                "DocumentsRead",
                                collection,
                                p -> getDocument(p, collection, id))),
                    delete(
                        () ->
                            granted(
                                principal,
                                "DocumentsWrite",
                                collection,
                                p ->
                                    writeHeaders(
                                        (expected, key) ->
                                            deleteDocument(p, collection, id, expected, key)))))),
        feedRoutes == null ? reject() : feedRoutes.routes(principal));
  }

  /**
   * {@code inner} when {@code principal} holds {@code grant} on {@code collection} (administrators
   * hold all); 403 otherwise, after a second look at freshly loaded principals ({@link
   * #grantChecked}).
   */
  private Route granted(
      Principal principal, String grant, String collection, Function<Principal, Route> inner) {
    return grantChecked(
        authenticator,
        principal,
        p ->
            p.may(grant, collection)
                ? inner.apply(p)
                : new MissingGrant(
                    "this operation requires the grant " + grant + " on this collection"));
  }

  /**
   * The collection's policy when it governs {@code principal} (not an administrator); empty without
   * policies. Throws {@link io.weir.node.auth.Policies.PoliciesUnavailable} before the policies are
   * loaded. A governed request checks that the partition runs the same policy version ({@link
   * #stalePolicy}): a policy that has not reached this node or that partition is never used.
   */
  private Optional<CollectionPolicy> governing(Principal principal, String collection) {
    if (policies == null || principal.administrator()) {
      return Optional.empty();
    }
    return Optional.of(policies.policy(collection));
  }

  /**
   * Whether partition {@code reply} came from runs another row-rule version than {@code policy}
   * (then the rule is sent to it again, or this node reloads its policies, and the request fails as
   * retryable).
   */
  private boolean stalePolicy(
      CollectionPolicy policy, String collection, String id, long installed) {
    if (installed == policy.version()) {
      return false;
    }
    policies.reconcile(
        policy, installed < 0 ? -1 : documents.partitionOf(collection, id), installed);
    return true;
  }

  private Route policyPropagating() {
    return error(
        ErrorCode.UNAVAILABLE,
        "the collection's policy is not yet the same on this node and its partition; retry");
  }

  /** An expected revision no document has: a write with it can only be answered by a receipt. */
  private static final long NO_REVISION = -1;

  private Route policiesUnavailable() {
    return error(ErrorCode.UNAVAILABLE, "the collection policies are not loaded yet; retry");
  }

  private Route putDocument(
      Principal principal,
      String collection,
      String id,
      Optional<Long> expected,
      Optional<String> key) {
    Route refused = refuseWrite(collection, id);
    if (refused != null) {
      return refused;
    }
    Optional<CollectionPolicy> policy;
    try {
      policy = governing(principal, collection);
    } catch (io.weir.node.auth.Policies.PoliciesUnavailable e) {
      return policiesUnavailable();
    }
    return documentBody(
        bytes -> {
          String body;
          try {
            body = canonicalObject(bytes);
          } catch (MalformedDocument e) {
            return error(ErrorCode.MALFORMED_JSON, e.getMessage());
          }
          Optional<Documents.Idempotency> idempotency =
              key.map(
                  k ->
                      Documents.Idempotency.of(
                          principal.id(), k, "PUT", collection, id, expected, body));
          if (policy.isPresent()) {
            return guardedPut(principal, policy.get(), collection, id, body, expected, idempotency);
          }
          return onComplete(
              documents.put(collection, id, body, expected, idempotency),
              result ->
                  result.isSuccess()
                      ? written(collection, id, result.get(), false)
                      : partitionUnavailable(result.failed().get()));
        });
  }

  /**
   * A write under a restricting policy: the current document must be visible to the writer, and so
   * must the new one (nobody writes rows they could not read back); sensitive fields the writer may
   * not read cannot be written and keep their current values. The write expects the revision just
   * checked, so a concurrent change (say, of the ACL) makes it a conflict rather than slip through;
   * an {@code If-Match} other than the checked revision can only get a retried write's receipt.
   */
  private Route guardedPut(
      Principal principal,
      CollectionPolicy policy,
      String collection,
      String id,
      String body,
      Optional<Long> expected,
      Optional<Documents.Idempotency> key) {
    com.fasterxml.jackson.databind.node.ObjectNode next;
    try {
      next = (com.fasterxml.jackson.databind.node.ObjectNode) Access.JSON.readTree(body);
    } catch (java.io.IOException e) {
      return error(ErrorCode.MALFORMED_JSON, "the body is not valid JSON");
    }
    java.util.function.Predicate<String> hidden = Access.omitted(principal, policy);
    for (String f : policy.sensitiveFields()) {
      if (hidden.test(f) && next.has(f)) {
        return error(
            ErrorCode.FORBIDDEN,
            "the field " + f + " is sensitive; writing it requires FieldRead on it");
      }
    }
    return onComplete(
        documents
            .get(collection, id)
            .thenCompose(
                reply -> {
                  if (stalePolicy(policy, collection, id, reply.ruleVersion())) {
                    return java.util.concurrent.CompletableFuture.completedFuture((Object) "stale");
                  }
                  Optional<Document> live = reply.document().filter(d -> !d.deleted());
                  com.fasterxml.jackson.databind.node.ObjectNode merged = next;
                  if (live.isPresent()) {
                    com.fasterxml.jackson.databind.JsonNode current;
                    try {
                      current = Access.JSON.readTree(live.get().body());
                    } catch (java.io.IOException e) {
                      return java.util.concurrent.CompletableFuture.completedFuture(
                          (Object) ErrorCode.INTERNAL);
                    }
                    if (!Access.visibleRow(principal, policy, current)) {
                      return java.util.concurrent.CompletableFuture.completedFuture(
                          (Object) "hidden");
                    }
                    merged = next.deepCopy();
                    for (String f : policy.sensitiveFields()) {
                      if (hidden.test(f) && current.has(f)) {
                        merged.set(f, current.get(f));
                      }
                    }
                  }
                  if (!Access.visibleRow(principal, policy, merged)) {
                    return java.util.concurrent.CompletableFuture.completedFuture(
                        (Object) "invisible");
                  }
                  long checked = reply.document().map(Document::revision).orElse(0L);
                  Optional<Long> pinned =
                      Optional.of(
                          expected.isPresent() && expected.get() != checked
                              ? NO_REVISION
                              : checked);
                  String text;
                  try {
                    text = Access.JSON.writeValueAsString(merged);
                  } catch (JsonProcessingException e) {
                    return java.util.concurrent.CompletableFuture.completedFuture(
                        (Object) ErrorCode.INTERNAL);
                  }
                  return documents
                      .put(collection, id, text, pinned, key)
                      .thenApply(r -> (Object) r);
                }),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          Object r = result.get();
          if (r instanceof FrameReply reply) {
            return written(collection, id, reply, false);
          }
          if ("hidden".equals(r)) {
            return error(
                ErrorCode.FORBIDDEN,
                "this principal may not change this document (its row is not visible to it)");
          }
          if ("invisible".equals(r)) {
            return error(
                ErrorCode.FORBIDDEN,
                "the new document would not be visible to this principal (row visibility)");
          }
          if ("stale".equals(r)) {
            return policyPropagating();
          }
          return error(ErrorCode.INTERNAL, "internal error; see the node's log");
        });
  }

  private Route getDocument(Principal principal, String collection, String id) {
    if (!Documents.readableCollection(collection) || !Documents.validId(id)) {
      return invalidName();
    }
    Optional<CollectionPolicy> policy;
    try {
      policy = governing(principal, collection);
    } catch (io.weir.node.auth.Policies.PoliciesUnavailable e) {
      return policiesUnavailable();
    }
    return onComplete(
        documents.get(collection, id),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          if (policy.isPresent()
              && stalePolicy(policy.get(), collection, id, result.get().ruleVersion())) {
            return policyPropagating();
          }
          Optional<Document> doc = result.get().document().filter(d -> !d.deleted());
          if (doc.isEmpty()) {
            return error(ErrorCode.NOT_FOUND, "no such document");
          }
          String body = doc.get().body();
          if (policy.isPresent() && !Access.unrestricted(policy.get())) {
            try {
              com.fasterxml.jackson.databind.JsonNode tree = Access.JSON.readTree(body);
              if (!tree.isObject() || !Access.visibleRow(principal, policy.get(), tree)) {
                return error(ErrorCode.NOT_FOUND, "no such document");
              }
              body =
                  Access.JSON.writeValueAsString(
                      Access.project(
                          principal,
                          policy.get(),
                          (com.fasterxml.jackson.databind.node.ObjectNode) tree));
            } catch (java.io.IOException e) {
              return error(ErrorCode.INTERNAL, "internal error; see the node's log");
            }
          }
          return complete(
              HttpResponse.create()
                  .withEntity(ContentTypes.APPLICATION_JSON, body.getBytes(StandardCharsets.UTF_8))
                  .addHeader(etag(doc.get().revision())));
        });
  }

  private Route deleteDocument(
      Principal principal,
      String collection,
      String id,
      Optional<Long> expected,
      Optional<String> idempotencyKey) {
    Route refused = refuseWrite(collection, id);
    if (refused != null) {
      return refused;
    }
    Optional<Documents.Idempotency> key =
        idempotencyKey.map(
            k ->
                Documents.Idempotency.of(
                    principal.id(), k, "DELETE", collection, id, expected, null));
    Optional<CollectionPolicy> policy;
    try {
      policy = governing(principal, collection);
    } catch (io.weir.node.auth.Policies.PoliciesUnavailable e) {
      return policiesUnavailable();
    }
    if (policy.isPresent()) {
      // Only a principal who sees the row may delete it; the delete expects the revision checked
      // (an If-Match other than it, or no live document, can only get a retried delete's receipt).
      return onComplete(
          documents.get(collection, id),
          read -> {
            if (!read.isSuccess()) {
              return partitionUnavailable(read.failed().get());
            }
            if (stalePolicy(policy.get(), collection, id, read.get().ruleVersion())) {
              return policyPropagating();
            }
            Optional<Document> live = read.get().document().filter(d -> !d.deleted());
            try {
              if (live.isPresent()
                  && !Access.visibleRow(
                      principal, policy.get(), Access.JSON.readTree(live.get().body()))) {
                return error(ErrorCode.NOT_FOUND, "no such document");
              }
            } catch (java.io.IOException e) {
              return error(ErrorCode.INTERNAL, "internal error; see the node's log");
            }
            long checked = live.map(Document::revision).orElse(NO_REVISION);
            Optional<Long> pinned =
                Optional.of(
                    expected.isPresent() && expected.get() != checked ? NO_REVISION : checked);
            return deleteDocument(collection, id, pinned, key);
          });
    }
    return deleteDocument(collection, id, expected, key);
  }

  private Route deleteDocument(
      String collection, String id, Optional<Long> expected, Optional<Documents.Idempotency> key) {
    return onComplete(
        documents.delete(collection, id, expected, key),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          return result.get().isEmpty()
              ? error(ErrorCode.NOT_FOUND, "no such document")
              : written(collection, id, result.get().get(), true);
        });
  }

  /** 400 for a malformed name, 409 for a collection fed by CDC; null when the API may write it. */
  private Route refuseWrite(String collection, String id) {
    if (!Documents.writableCollection(collection) || !Documents.validId(id)) {
      return invalidName();
    }
    if (documents.fedByCdc(collection)) {
      return error(
          ErrorCode.COLLECTION_FED_BY_CDC,
          "this collection is written by a CDC pipeline; the API may only read it");
    }
    return null;
  }

  private Route invalidName() {
    return error(
        ErrorCode.INVALID_NAME,
        "collections are 1 to 128 of A-Z a-z 0-9 _ - (and . for reading CDC collections); ids are 1 to "
            + Documents.MAX_ID_LENGTH
            + " characters without control characters");
  }

  /** {@code If-Match} as an expected revision and {@code Idempotency-Key}; 400 when malformed. */
  private Route writeHeaders(
      java.util.function.BiFunction<Optional<Long>, Optional<String>, Route> inner) {
    return optionalHeaderValueByName(
        "If-Match",
        ifMatch ->
            optionalHeaderValueByName(
                "Idempotency-Key",
                key -> {
                  Optional<Long> expected = Optional.empty();
                  if (ifMatch.isPresent()) {
                    expected = parseRevision(ifMatch.get());
                    if (expected.isEmpty()) {
                      return error(
                          ErrorCode.BAD_REQUEST,
                          "If-Match must be a document revision: a decimal number, optionally quoted");
                    }
                  }
                  if (key.isPresent() && !Documents.validIdempotencyKey(key.get())) {
                    return error(
                        ErrorCode.BAD_REQUEST,
                        "Idempotency-Key must be 1 to "
                            + Documents.MAX_IDEMPOTENCY_KEY_LENGTH
                            + " printable ASCII characters");
                  }
                  return inner.apply(expected, key);
                }));
  }

  private static final java.util.regex.Pattern REVISION =
      java.util.regex.Pattern.compile("\\s*\"?([0-9]{1,18})\"?\\s*");

  /** {@code 3} or {@code "3"} (an entity tag as this API sends it); empty for anything else. */
  static Optional<Long> parseRevision(String header) {
    java.util.regex.Matcher m = REVISION.matcher(header);
    if (!m.matches() || header.trim().startsWith("\"") != header.trim().endsWith("\"")) {
      return Optional.empty();
    }
    return Optional.of(Long.parseLong(m.group(1)));
  }

  /**
   * The request body as bytes, at most {@code weir.documents.max-bytes}: 413 {@code
   * document-too-large} for a longer one, refused by its Content-Length before it is read when the
   * client sends one.
   */
  private Route documentBody(Function<byte[], Route> inner) {
    return body(maxDocumentBytes, this::documentTooLarge, inner);
  }

  private Route documentTooLarge() {
    return error(
        ErrorCode.DOCUMENT_TOO_LARGE,
        "the body is larger than weir.documents.max-bytes (" + maxDocumentBytes + " bytes)");
  }

  /**
   * Reads documents strictly (no trailing content, no duplicate field names) and keeps numbers
   * exact, so the compact form written back is the same value.
   */
  private static final ObjectMapper DOCUMENT_JSON =
      com.fasterxml.jackson.databind.json.JsonMapper.builder()
          .enable(com.fasterxml.jackson.core.StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          .enable(com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
          .enable(com.fasterxml.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
          .nodeFactory(
              com.fasterxml.jackson.databind.node.JsonNodeFactory.withExactBigDecimals(true))
          .build();

  /**
   * The body as compact JSON; it must be one JSON object in valid UTF-8 ({@link #utf8}). The
   * exception's message names what was wrong, never the content (Jackson's messages quote it, so
   * they are not passed on).
   */
  static String canonicalObject(byte[] body) throws MalformedDocument {
    com.fasterxml.jackson.databind.JsonNode node;
    try {
      node = DOCUMENT_JSON.readTree(utf8(body));
    } catch (MalformedBody e) {
      throw new MalformedDocument(e.getMessage());
    } catch (java.io.IOException | RuntimeException e) {
      throw new MalformedDocument("the body is not valid JSON");
    }
    if (node == null || !node.isObject()) {
      throw new MalformedDocument("the body must be a JSON object");
    }
    try {
      return DOCUMENT_JSON.writeValueAsString(node);
    } catch (JsonProcessingException e) {
      throw new MalformedDocument("the body cannot be stored as JSON");
    }
  }

  /** A document body that is not a JSON object; the message is value-free. */
  static final class MalformedDocument extends Exception {
    MalformedDocument(String message) {
      super(message, null, false, false);
    }
  }

  private Route written(String collection, String id, FrameReply reply, boolean delete) {
    if (reply instanceof Applied a) {
      long revision = a.revisions().get(0);
      HttpResponse response =
          response(200, new DocumentWritten(collection, id, revision, delete, a.replayed()));
      return complete(delete ? response : response.addHeader(etag(revision)));
    }
    if (reply instanceof Conflict c) {
      return json(ErrorCode.CONFLICT.httpStatus(), RevisionConflict.of(c.actualRevision()));
    }
    if (reply instanceof QuotaExceeded) {
      return error(
          ErrorCode.QUOTA_EXCEEDED,
          "the partition's outbox is full; retry once entries are purged");
    }
    if (reply instanceof io.weir.sharding.partition.PartitionProtocol.StorageRefused s) {
      return error(
          ErrorCode.STORAGE_COPIES_INSUFFICIENT,
          "the storage keeps "
              + new io.weir.sharding.partition.StorageGate.Refusal(s.copies(), s.required())
                  .describe()
              + "; nothing was written; retry once the copies are back");
    }
    if (reply instanceof io.weir.sharding.partition.PartitionProtocol.StorageBehind) {
      return error(
          ErrorCode.STORAGE_BEHIND,
          "the partition's storage lost writes it acknowledged; nothing was written; an operator"
              + " must accept the loss (weir ctl partitions accept-storage-loss)");
    }
    if (reply instanceof Rejected r) {
      return error(ErrorCode.BAD_REQUEST, r.reason());
    }
    if (reply instanceof io.weir.sharding.partition.PartitionProtocol.KeyReused) {
      return error(
          ErrorCode.IDEMPOTENCY_KEY_REUSED,
          "this Idempotency-Key was used by this principal for another request; use a new key"
              + " for a new request");
    }
    log.error(
        "a document write got an unexpected reply of type {}", reply.getClass().getSimpleName());
    return error(ErrorCode.INTERNAL, "internal error; see the node's log");
  }

  private static ETag etag(long revision) {
    return ETag.create(EntityTag.create(Long.toString(revision), false));
  }

  /**
   * {@code GET /admin/pipelines}, {@code GET /admin/pipelines/{name}}, {@code POST
   * /admin/pipelines/{name}/start|stop}: each replies with pipeline status JSON. {@code POST
   * /admin/pipelines/{name}/snapshot} with {@code {"tables":["schema.table",...]}} (or no body:
   * every published table) starts an incremental snapshot: 202 and the status, 400 for a table not
   * published or a malformed body, 409 when the pipeline is not streaming or a snapshot runs.
   */
  private Route pipelineRoutes() {
    if (pipelines == null) {
      return error(ErrorCode.NOT_FOUND, "no such resource");
    }
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
          io.weir.persistence.cdc.CdcPipeline.CheckReply reply = result.get();
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
  private Route drop(String name, java.util.Optional<String> confirm) {
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
          io.weir.persistence.cdc.CdcPipeline.DropReply reply = result.get();
          if (reply.error() == null) {
            return json(200, reply.status());
          }
          return switch (reply.error()) {
            case "not-stopped", "slot-active" -> error(ErrorCode.CONFLICT, reply.message());
            default -> error(ErrorCode.UNAVAILABLE, reply.message());
          };
        });
  }

  private static final java.util.regex.Pattern TABLE_NAME =
      java.util.regex.Pattern.compile("[^.\\s]{1,63}\\.[^.\\s]{1,63}");
  private static final int MAX_SNAPSHOT_TABLES = 1000;

  private Route snapshot(String name, com.fasterxml.jackson.databind.JsonNode root) {
    List<String> tables = new ArrayList<>();
    if (root != null) {
      com.fasterxml.jackson.databind.JsonNode list = root.get("tables");
      if (!root.isObject() || (list != null && !list.isArray())) {
        return error(
            ErrorCode.BAD_REQUEST, "the body must be {\"tables\": [\"schema.table\", ...]}");
      }
      if (list != null) {
        for (com.fasterxml.jackson.databind.JsonNode t : list) {
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
        pipelines.snapshot(name, List.copyOf(new java.util.LinkedHashSet<>(tables))),
        result -> {
          if (!result.isSuccess()) {
            return error(
                ErrorCode.UNAVAILABLE, "the pipeline manager did not answer in time; retry");
          }
          io.weir.persistence.cdc.CdcPipeline.SnapshotReply reply = result.get();
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

  /** Runs {@code inner} for a cluster administrator; 401 or 403 otherwise. */
  private Route administrator(Function<Principal, Route> inner) {
    return authenticated(
        principal ->
            principal.administrator()
                ? inner.apply(principal)
                : error(ErrorCode.FORBIDDEN, "this operation requires a cluster administrator"));
  }

  /** Runs {@code inner} for an authenticated principal; 401 otherwise. */
  private Route authenticated(Function<Principal, Route> inner) {
    return optionalHeaderValueByName(
        "Authorization",
        header -> {
          Optional<String> token = header.flatMap(HttpApi::bearerToken);
          if (token.isEmpty()) {
            return unauthenticated();
          }
          // An unknown token is looked up again after a fresh load (a principal created through
          // another node a moment ago); a load that fails answers 503, not a misleading 401.
          return onComplete(
              authenticator.authenticateFresh(token.get()),
              result -> {
                if (result.isFailure()) {
                  log.warn(
                      "principals could not be loaded: {}",
                      SafeErrors.describe(result.failed().get()));
                  return error(ErrorCode.UNAVAILABLE, "principals could not be loaded; retry");
                }
                return result.get().isPresent()
                    ? inner.apply(result.get().get())
                    : unauthenticated();
              });
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
        .handleAll(
            MethodRejection.class,
            rejections -> error(ErrorCode.METHOD_NOT_ALLOWED, "method not allowed on this path"))
        .handle(
            Rejection.class,
            rejection ->
                error(
                    ErrorCode.BAD_REQUEST,
                    "request rejected (" + rejection.getClass().getSimpleName() + ")"))
        .handleNotFound(error(ErrorCode.NOT_FOUND, "no such resource"))
        .build();
  }

  /**
   * Exceptions Pekko raises from the request while a route reads it (a query string that does not
   * parse, a header that does not, a body over {@code max-content-length}) are the client's: typed
   * 4xx answers whose messages, like Pekko's would, never quote the request. Anything else is 500
   * {@code internal}, logged by class names only.
   */
  private ExceptionHandler exceptionHandler() {
    return ExceptionHandler.newBuilder()
        .match(
            org.apache.pekko.http.scaladsl.model.IllegalUriException.class,
            e -> error(ErrorCode.BAD_REQUEST, "the request URI or its query string is malformed"))
        .match(
            org.apache.pekko.http.scaladsl.model.IllegalHeaderException.class,
            e -> error(ErrorCode.BAD_REQUEST, "a request header is malformed"))
        .match(
            org.apache.pekko.http.scaladsl.model.IllegalRequestException.class,
            e -> {
              int status = HttpLayerErrors.answeredStatus(e.status().intValue());
              return complete(
                  HttpLayerErrors.response(status, HttpLayerErrors.body(e.status().intValue())));
            })
        .match(
            EntityStreamSizeException.class,
            e ->
                error(
                    ErrorCode.DOCUMENT_TOO_LARGE,
                    "the request body is larger than this node accepts"
                        + " (pekko.http.server.parsing.max-content-length)"))
        .matchAny(
            e -> {
              log.error("request failed: {}", SafeErrors.describe(e));
              return error(ErrorCode.INTERNAL, "internal error; see the node's log");
            })
        .build();
  }
}
