package io.weir.node.http;

import org.apache.pekko.actor.ClassicActorSystemProvider;
import org.apache.pekko.http.javadsl.Http;
import org.apache.pekko.http.javadsl.ServerBuilder;

/**
 * The node's HTTP server, as Weir binds it: whatever the configuration says, the parser logs no
 * illegal header (its warning quotes the value, e.g. a bearer token), refusals before the routes
 * are answered by {@link HttpLayerErrors} (JSON, one value-free {@link RequestLog} line), the
 * request's raw URI is kept for the routes' encoding check ({@code Raw-Request-URI}, see {@link
 * HttpApi}), and the server layer logs through {@link ServerLog}, which writes none of a request.
 */
public final class NodeHttpServer {
  private NodeHttpServer() {}

  /** {@code Http.get(system).newServerAt(host, port)} with the set-up above. */
  public static ServerBuilder at(ClassicActorSystemProvider system, String host, int port) {
    return Http.get(system)
        .newServerAt(host, port)
        .adaptSettings(
            s ->
                s.withRawRequestUriHeader(true)
                    .withParsingErrorHandler(HttpLayerErrors.class.getName())
                    .withParserSettings(s.getParserSettings().withIllegalHeaderWarnings(false)))
        .logTo(new ServerLog());
  }
}
