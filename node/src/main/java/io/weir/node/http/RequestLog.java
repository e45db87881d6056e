package io.weir.node.http;

import com.fasterxml.jackson.databind.JsonNode;
import io.weir.node.metrics.RouteTemplates;
import io.weir.protocol.ErrorCode;
import java.io.IOException;
import java.util.Set;
import java.util.TreeSet;
import org.apache.pekko.http.javadsl.model.HttpEntity;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.MediaTypes;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one log line the node writes about a request it refused (any answer of 400 or more), on the
 * logger {@code io.weir.node.http.RequestLog} at INFO:
 *
 * <pre>
 * refused method=PUT route=/v1/documents/{collection}/{id} status=400 reason=malformed-json
 * </pre>
 *
 * <p>Nothing a client sends reaches it but what is checked against a closed set: the method is one
 * of the HTTP methods (else {@code OTHER}; {@code -} when the request was refused before its method
 * was read), the route is a template of {@link RouteTemplates} or {@code unmatched}, the status is
 * the node's answer and the reason is the answer's typed error code ({@link ErrorCode}; {@code
 * unspecified} for an error answer without one, such as a 503 from {@code /health/ready}). No path,
 * query, header, token or body appears.
 */
public final class RequestLog {
  private static final Logger log = LoggerFactory.getLogger(RequestLog.class);

  /** The method of a request refused before its method was read (by the HTTP parser). */
  static final String NO_METHOD = "-";

  /** The reason of an error answer that carries no typed code. */
  static final String UNSPECIFIED = "unspecified";

  private static final Set<String> METHODS =
      Set.of("GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT");

  /** Every reason {@link #refused} may write. */
  static final Set<String> REASONS = reasons();

  private static final RouteTemplates TEMPLATES = RouteTemplates.node();

  private RequestLog() {}

  private static Set<String> reasons() {
    Set<String> all = new TreeSet<>();
    for (ErrorCode c : ErrorCode.values()) {
      all.add(c.wire());
    }
    all.add(UNSPECIFIED);
    return Set.copyOf(all);
  }

  /** The request's method if it is one of HTTP's, else {@code OTHER}. */
  static String method(HttpRequest request) {
    String m = request.method().value();
    return METHODS.contains(m) ? m : "OTHER";
  }

  /** The route template of the request's path, or {@code unmatched} (never the path itself). */
  static String route(HttpRequest request) {
    return TEMPLATES.label(request.getUri().path());
  }

  /** Logs {@code response} to {@code request} when it is an error answer (status 400 or more). */
  static void answered(HttpRequest request, HttpResponse response) {
    int status = response.status().intValue();
    if (status >= 400) {
      refused(method(request), route(request), status, reason(response));
    }
  }

  /**
   * The one refusal line; every argument must come from a closed set (see the class comment). A
   * reason outside {@link #REASONS} is written as {@code unspecified}.
   */
  static void refused(String method, String route, int status, String reason) {
    if (log.isInfoEnabled()) {
      log.info(
          "refused method={} route={} status={} reason={}",
          method,
          route,
          status,
          REASONS.contains(reason) ? reason : UNSPECIFIED);
    }
  }

  /**
   * The typed code of an error answer: the {@code error} field of its JSON body (every error body
   * of the node has one, {@link io.weir.protocol.http.ErrorBody}), when it is one of {@link
   * #REASONS}; else {@code unspecified}. Only strict (in-memory) bodies are looked at.
   */
  static String reason(HttpResponse response) {
    HttpEntity entity = response.entity();
    if (!(entity instanceof HttpEntity.Strict strict)
        || !entity.getContentType().mediaType().equals(MediaTypes.APPLICATION_JSON)
        || strict.getData().size() > 64 * 1024) {
      return UNSPECIFIED;
    }
    try {
      JsonNode error = JsonRoutes.STRICT.readTree(strict.getData().toArray()).path("error");
      return error.isTextual() && REASONS.contains(error.textValue())
          ? error.textValue()
          : UNSPECIFIED;
    } catch (IOException | RuntimeException e) {
      return UNSPECIFIED;
    }
  }
}
