package io.weir.node.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.http.ErrorBody;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.pekko.http.javadsl.model.ContentType;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpHeader;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.RawHeader;
import org.apache.pekko.http.javadsl.server.AllDirectives;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * {@code GET /console}: the operator console, three static files from the node's jar (an HTML page,
 * its script and its style sheet; no build step). The files hold no data and need no token: the
 * page asks the operator for an administrator's token and calls the admin JSON API with it from the
 * browser, so every piece of data it shows passes the same checks as any other admin request.
 *
 * <p>Every reply carries a strict Content-Security-Policy (scripts, styles and requests from the
 * node's own origin only, no inline script or style, no framing, no form posts, no plugins), {@code
 * X-Content-Type-Options: nosniff} and {@code Referrer-Policy: no-referrer}, and is not cached, so
 * a node upgrade serves the matching page at once. Any other path under {@code /console/} is a JSON
 * 404.
 */
final class ConsoleRoutes extends AllDirectives {
  /** Where the files live in the jar. */
  static final String RESOURCE_DIR = "/io/weir/node/console/";

  /** The policy every console reply carries. */
  static final String CONTENT_SECURITY_POLICY =
      String.join(
          "; ",
          "default-src 'none'",
          "script-src 'self'",
          "style-src 'self'",
          "connect-src 'self'",
          "img-src 'self'",
          "base-uri 'none'",
          "form-action 'none'",
          "frame-ancestors 'none'");

  private static final ContentType.NonBinary HTML = ContentTypes.TEXT_HTML_UTF8;
  private static final ContentType.NonBinary JAVASCRIPT =
      (ContentType.NonBinary) ContentTypes.parse("text/javascript; charset=UTF-8");
  private static final ContentType.NonBinary CSS =
      (ContentType.NonBinary) ContentTypes.parse("text/css; charset=UTF-8");

  static final List<HttpHeader> HEADERS =
      List.of(
          RawHeader.create("Content-Security-Policy", CONTENT_SECURITY_POLICY),
          RawHeader.create("X-Content-Type-Options", "nosniff"),
          RawHeader.create("Referrer-Policy", "no-referrer"),
          RawHeader.create("X-Frame-Options", "DENY"),
          RawHeader.create("Cross-Origin-Opener-Policy", "same-origin"),
          RawHeader.create("Cross-Origin-Resource-Policy", "same-origin"),
          RawHeader.create("Cache-Control", "no-store"));

  private final HttpResponse page;
  private final Map<String, HttpResponse> files = new LinkedHashMap<>();
  private final HttpResponse notFound;

  /** Reads the files from the jar; a jar without them is a build error, so this throws. */
  ConsoleRoutes(ObjectMapper json) {
    page = file("index.html", HTML);
    files.put("console.js", file("console.js", JAVASCRIPT));
    files.put("console.css", file("console.css", CSS));
    try {
      notFound =
          HttpResponse.create()
              .withStatus(StatusCodes.NOT_FOUND)
              .withEntity(
                  ContentTypes.APPLICATION_JSON,
                  json.writeValueAsBytes(ErrorBody.of(ErrorCode.NOT_FOUND, "no such resource")))
              .addHeaders(HEADERS);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot encode an error body", e);
    }
  }

  /** The routes under {@code /console}; the caller matched the prefix. */
  Route routes() {
    return get(
        () ->
            concat(
                pathEndOrSingleSlash(() -> complete(page)),
                path(PathMatchers.segment(), name -> complete(files.getOrDefault(name, notFound))),
                complete(notFound)));
  }

  private static HttpResponse file(String name, ContentType.NonBinary type) {
    try (InputStream in = ConsoleRoutes.class.getResourceAsStream(RESOURCE_DIR + name)) {
      if (in == null) {
        throw new IllegalStateException(
            "the node's jar lacks the console file " + RESOURCE_DIR + name);
      }
      return HttpResponse.create().withEntity(type, in.readAllBytes()).addHeaders(HEADERS);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read the console file " + name, e);
    }
  }
}
