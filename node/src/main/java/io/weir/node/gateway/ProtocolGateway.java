package io.weir.node.gateway;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.client.ClientReply;
import io.weir.protocol.client.ClientRequest;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.AbstractActor;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.Props;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.japi.function.Function;
import org.apache.pekko.stream.Materializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The entry point of protocol clients on a server node, at {@value ClientRequest#GATEWAY_PATH}.
 * Each {@link ClientRequest} is served by the node's own HTTP routes, in process (no socket): the
 * same authentication, grants, collection policies, size limits, admission control and typed errors
 * as the HTTP API, by the same code, so the two surfaces cannot drift apart. The sender gets one
 * {@link ClientReply}.
 *
 * <p>At most {@code maxInFlight} requests are served at once; more are refused at once with {@code
 * busy} (retryable), so a client that floods one node cannot queue unbounded work on it. Nothing of
 * a request (token, id, body) is logged.
 */
public final class ProtocolGateway extends AbstractActor {
  private static final Logger log = LoggerFactory.getLogger(ProtocolGateway.class);

  /** The gateway actor's name below {@code /user} of the gateway's actor system. */
  public static final String NAME = "weir-gateway";

  private final GatewayTranslator translator;
  private final Function<HttpRequest, CompletionStage<HttpResponse>> handler;
  private final Materializer materializer;
  private final Duration entityTimeout;
  private final int maxInFlight;
  private final AtomicInteger inFlight = new AtomicInteger();

  private ProtocolGateway(
      Function<HttpRequest, CompletionStage<HttpResponse>> handler,
      Materializer materializer,
      Duration entityTimeout,
      int maxInFlight) {
    this.translator = new GatewayTranslator(new ObjectMapper());
    this.handler = handler;
    this.materializer = materializer;
    this.entityTimeout = entityTimeout;
    this.maxInFlight = maxInFlight;
  }

  /**
   * Starts the gateway in {@code edge} (the gateway's own actor system, {@link GatewayEndpoint})
   * over {@code routes}, the complete, sealed HTTP routes of {@code node}, which run them.
   */
  static ActorRef start(
      ActorSystem<?> node,
      org.apache.pekko.actor.ActorSystem edge,
      Route routes,
      Duration entityTimeout,
      int maxInFlight) {
    Function<HttpRequest, CompletionStage<HttpResponse>> handler = routes.seal().handler(node);
    Materializer materializer = Materializer.matFromSystem(node);
    return edge.actorOf(
        Props.create(
            ProtocolGateway.class,
            () -> new ProtocolGateway(handler, materializer, entityTimeout, maxInFlight)),
        NAME);
  }

  @Override
  public Receive createReceive() {
    return receiveBuilder()
        .match(ClientRequest.class, this::serve)
        // Anything else a client sent (its type is the client's choice too) is dropped unseen.
        .matchAny(other -> log.debug("protocol gateway: ignored a message that is no request"))
        .build();
  }

  private void serve(ClientRequest request) {
    ActorRef replyTo = getSender();
    if (inFlight.incrementAndGet() > maxInFlight) {
      inFlight.decrementAndGet();
      replyTo.tell(
          GatewayTranslator.failed(
              429,
              ErrorCode.BUSY,
              "this node's protocol gateway is serving its maximum of requests; retry shortly"),
          ActorRef.noSender());
      return;
    }
    CompletionStage<ClientReply> reply;
    try {
      HttpRequest http = translator.toHttp(request);
      reply =
          handler
              .apply(http)
              .thenCompose(
                  response ->
                      response
                          .entity()
                          .toStrict(entityTimeout.toMillis(), materializer)
                          .thenApply(strict -> translator.toReply(response, strict.getData())));
    } catch (Exception e) {
      reply = CompletableFuture.failedFuture(e);
    }
    reply.whenComplete(
        (answer, error) -> {
          inFlight.decrementAndGet();
          if (error != null) {
            log.warn(
                "protocol gateway: {} failed: {}", request.operation(), SafeErrors.describe(error));
            answer =
                GatewayTranslator.failed(
                    500, ErrorCode.INTERNAL, "the request failed on the node; see its log");
          }
          replyTo.tell(answer, ActorRef.noSender());
        });
  }
}
