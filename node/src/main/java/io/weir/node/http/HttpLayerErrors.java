package io.weir.node.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.metrics.RouteTemplates;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.http.ErrorBody;
import org.apache.pekko.event.LoggingAdapter;
import org.apache.pekko.http.ParsingErrorHandler;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.scaladsl.model.ErrorInfo;
import org.apache.pekko.http.scaladsl.model.StatusCode;
import org.apache.pekko.http.scaladsl.settings.ServerSettings;

/**
 * The answers to requests Pekko HTTP refuses before any route sees them: a request line, URI or
 * header that is not valid HTTP (400), a body over {@code pekko.http.server.parsing
 * .max-content-length} (413), a URI over {@code max-uri-length} (414), a header name or value over
 * its limit (431), a method HTTP does not define (501), an HTTP version other than 1.0 and 1.1
 * (505). Each is the node's JSON error body with a typed code, like every other error, and one
 * {@link RequestLog} line ({@code method=- route=unmatched}: the request was not read far enough to
 * know more). Pekko's own answer is plain text that may quote the request, and its log line quotes
 * it in full; neither is used.
 *
 * <p>Pekko creates this class by name from {@code pekko.http.server.parsing.error-handler} (set in
 * the node's reference.conf, and by {@link NodeHttpServer} for the node's port).
 */
public final class HttpLayerErrors extends ParsingErrorHandler {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** Created by Pekko (by class name). */
  public HttpLayerErrors() {}

  @Override
  public HttpResponse handle(
      StatusCode status, ErrorInfo info, LoggingAdapter log, ServerSettings settings) {
    // info quotes the request (its URI, the offending header, the method): it goes nowhere.
    ErrorBody body = body(status.intValue());
    int answered = answeredStatus(status.intValue());
    RequestLog.refused(RequestLog.NO_METHOD, RouteTemplates.UNMATCHED, answered, body.error());
    return response(answered, body);
  }

  /** The status the node answers a parser refusal of {@code status} with. */
  static int answeredStatus(int status) {
    return switch (status) {
      case 413, 414, 431, 501, 505 -> status;
      default -> 400;
    };
  }

  /** The value-free error body for a parser refusal of {@code status}. */
  static ErrorBody body(int status) {
    return switch (status) {
      case 413 ->
          ErrorBody.of(
              ErrorCode.DOCUMENT_TOO_LARGE,
              "the request body is larger than this node accepts"
                  + " (pekko.http.server.parsing.max-content-length)");
      case 414 ->
          ErrorBody.of(
              ErrorCode.URI_TOO_LONG,
              "the request URI is longer than this node accepts"
                  + " (pekko.http.parsing.max-uri-length)");
      case 431 ->
          ErrorBody.of(
              ErrorCode.HEADERS_TOO_LARGE,
              "a request header's name or value is longer than this node accepts"
                  + " (pekko.http.parsing.max-header-name-length, max-header-value-length)");
      case 501 ->
          ErrorBody.of(ErrorCode.NOT_IMPLEMENTED, "the request method is not one HTTP defines");
      case 505 ->
          ErrorBody.of(
              ErrorCode.HTTP_VERSION_NOT_SUPPORTED,
              "the HTTP version is not supported; the node speaks HTTP/1.1 (and 1.0)");
      default ->
          ErrorBody.of(
              ErrorCode.BAD_REQUEST,
              "the request is not valid HTTP: its request line, URI, a header or its framing is"
                  + " malformed, or it has too many headers");
    };
  }

  static HttpResponse response(int status, ErrorBody body) {
    try {
      return HttpResponse.create()
          .withStatus(StatusCodes.get(status))
          .withEntity(ContentTypes.APPLICATION_JSON, JSON.writeValueAsBytes(body));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot encode an error body", e);
    }
  }
}
