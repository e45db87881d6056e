package io.weir.node.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.NodeView;
import io.weir.node.auth.Authenticator;
import io.weir.node.auth.Principal;
import io.weir.node.cdc.SlotLag;
import io.weir.node.metrics.HttpMetrics;
import io.weir.node.metrics.MetricsSettings;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.http.ErrorBody;
import io.weir.protocol.http.OutboxStatus;
import io.weir.protocol.http.Readiness;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import java.util.function.Supplier;
import org.apache.pekko.http.javadsl.model.ContentType;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.headers.RawRequestURI;
import org.apache.pekko.http.javadsl.model.headers.TimeoutAccess;
import org.apache.pekko.http.javadsl.server.ExceptionHandler;
import org.apache.pekko.http.javadsl.server.MethodRejection;
import org.apache.pekko.http.javadsl.server.Rejection;
import org.apache.pekko.http.javadsl.server.RejectionHandler;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.http.scaladsl.model.EntityStreamSizeException;
import org.apache.pekko.http.scaladsl.model.IllegalHeaderException;
import org.apache.pekko.http.scaladsl.model.IllegalRequestException;
import org.apache.pekko.http.scaladsl.model.IllegalUriException;
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
 *       DocumentRoutes}).
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
  private final Supplier<String> metrics;
  private final HttpMetrics httpMetrics;
  private final MetricsSettings metricsAccess;
  private final SlotLag slotLag;
  private final ConsoleRoutes console;
  private final DocumentRoutes documentRoutes;
  private final OutboxRoutes outboxRoutes;
  private final PipelineRoutes pipelineRoutes;
  private final ProjectionRoutes projections;
  private final TokenRoutes tokens;
  private final PrincipalRoutes principals;
  private final PolicyRoutes policyRoutes;
  private final ContinuousRoutes continuousRoutes;

  /** The API over {@code services}; the routes of a service left out answer 404. */
  public HttpApi(ObjectMapper json, ApiServices services) {
    super(json);
    this.authenticator = services.authenticator();
    this.node = services.node();
    this.metrics = services.metrics();
    this.httpMetrics = services.httpMetrics();
    this.metricsAccess = services.metricsAccess();
    this.slotLag = services.slotLag();
    this.console = new ConsoleRoutes(json);
    FeedRoutes feeds =
        services.feeds() == null
            ? null
            : new FeedRoutes(
                json, services.feeds(), services.liveStreams(), services.authenticator());
    this.documentRoutes =
        services.documents() == null
            ? null
            : new DocumentRoutes(
                json,
                services.authenticator(),
                services.documents(),
                services.maxDocumentBytes(),
                services.policies(),
                new DocumentBatchRoutes(
                    json,
                    services.authenticator(),
                    services.documents(),
                    services.maxDocumentBytes(),
                    services.batchLimits(),
                    services.policies()),
                feeds);
    this.outboxRoutes = new OutboxRoutes(json, services.documents(), services.outboxSettings());
    this.pipelineRoutes =
        services.pipelines() == null ? null : new PipelineRoutes(json, services.pipelines());
    this.projections =
        services.projections() == null
            ? null
            : new ProjectionRoutes(
                json, services.projections(), services.documents(), services.maxDocumentBytes());
    this.tokens = services.tokenKeys() == null ? null : new TokenRoutes(json, services.tokenKeys());
    this.principals =
        services.principals() == null ? null : new PrincipalRoutes(json, services.principals());
    this.policyRoutes =
        services.policies() == null ? null : new PolicyRoutes(json, services.policies());
    this.continuousRoutes =
        services.continuous() == null ? null : new ContinuousRoutes(json, services.continuous());
  }

  /**
   * Every route, in the order a request meets them: the request timeout's answer (503 {@code
   * unavailable} as JSON), the one {@link RequestLog} line of an error answer, the exception and
   * rejection handlers (typed JSON errors), the encoding check of the raw path and query ({@link
   * #badEncoding}), then the routes.
   */
  public Route routes() {
    // Built once: both are the same for every request (the not-found answer's JSON included).
    ExceptionHandler exceptions = exceptionHandler();
    RejectionHandler rejections = rejectionHandler();
    // The route tree too: nothing in it depends on the request until a directive extracts it.
    Route served = served();
    Route all =
        extractRequest(
            request -> {
              // The server's request timeout answers with timedOut (JSON) instead of its plain
              // text. A request without the header (the protocol gateway's) has no server timeout.
              // Whichever answer comes first, the timeout's or the route's, is the one logged.
              AtomicBoolean answered = new AtomicBoolean();
              request
                  .getHeader(TimeoutAccess.class)
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
                          exceptions,
                          () -> handleRejections(rejections, () -> strictlyEncoded(() -> served))));
            });
    return httpMetrics == null ? all : httpMetrics.measured(() -> all);
  }

  /**
   * The answer to a request that outlived {@code pekko.http.server.request-timeout}; its {@link
   * RequestLog} line when {@code log}.
   */
  private static HttpResponse timedOut(HttpRequest request, boolean log) {
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
          Optional<RawRequestURI> raw = request.getHeader(RawRequestURI.class);
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
    if (raw.indexOf('%') < 0 && printableAscii(raw)) {
      return null; // most targets: every segment and the query are valid as they stand
    }
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
    if (s.indexOf('%') < 0) {
      return printableAscii(s); // no escapes (most paths): valid UTF-8 as it stands
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(s.length());
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

  private static boolean printableAscii(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c > 0x7E || c < 0x20) {
        return false;
      }
    }
    return true;
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
                            documentRoutes == null
                                ? error(ErrorCode.NOT_FOUND, "no such resource")
                                : documentRoutes.routes(principal)))));
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
              && MessageDigest.isEqual(
                  token.get().getBytes(StandardCharsets.UTF_8),
                  metricsAccess.scrapeToken().get().getBytes(StandardCharsets.UTF_8))) {
            return exposition();
          }
          return administrator(principal -> exposition());
        });
  }

  /** The Prometheus text exposition format, version 0.0.4. */
  private static final ContentType.NonBinary PROMETHEUS_TEXT =
      (ContentType.NonBinary) ContentTypes.parse("text/plain; version=0.0.4; charset=utf-8");

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
        outboxRoutes.routes(),
        pathPrefix(
            "pipelines",
            () ->
                pipelineRoutes == null
                    ? error(ErrorCode.NOT_FOUND, "no such resource")
                    : pipelineRoutes.routes()),
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
            IllegalUriException.class,
            e -> error(ErrorCode.BAD_REQUEST, "the request URI or its query string is malformed"))
        .match(
            IllegalHeaderException.class,
            e -> error(ErrorCode.BAD_REQUEST, "a request header is malformed"))
        .match(
            IllegalRequestException.class,
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
