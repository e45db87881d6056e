package io.weir.node.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.auth.Principal;
import io.weir.node.continuous.ContinuousQueries;
import io.weir.node.continuous.ContinuousQueryException;
import io.weir.node.continuous.ContinuousRequest;
import io.weir.node.continuous.Session;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import org.apache.pekko.NotUsed;
import org.apache.pekko.http.javadsl.marshalling.sse.EventStreamMarshalling;
import org.apache.pekko.http.javadsl.model.sse.ServerSentEvent;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.japi.Pair;
import org.apache.pekko.stream.BoundedSourceQueue;
import org.apache.pekko.stream.javadsl.Source;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Continuous top-N queries ({@code docs/continuous.md}); every route needs the {@code
 * ContinuousQuery} grant on the query's security scope (administrators hold every grant):
 *
 * <ul>
 *   <li>{@code POST /v1/continuous} {@code {"scope", "sql", "keyColumns", "orderBy"?, "limit",
 *       "parameters"?}}: 201 {@code {"id", "created": true}} for a new subscription, 200 with
 *       {@code created: false} for one registered before with the same identity; typed 400s.
 *   <li>{@code GET /v1/continuous/{id}/events}: Server-Sent Events ({@code InitialResult}, {@code
 *       RowAdded}, {@code RowUpdated}, {@code RowRemoved}, {@code ResultReordered}, {@code
 *       ResultReset}), event id a signed replay token; {@code Last-Event-ID} (or {@code ?token=})
 *       resumes.
 *   <li>{@code GET /v1/continuous/{id}/status}: the session's counters.
 *   <li>{@code GET /v1/continuous/{id}/result}: the durable materialised result (any node).
 *   <li>{@code DELETE /v1/continuous/{id}}: unregisters.
 * </ul>
 *
 * Status is served by the node whose pipeline manager runs the continuous pipeline (other nodes
 * answer 503 {@code unavailable}); events and the result by any node (events elsewhere follow the
 * session entity's journal).
 */
final class ContinuousRoutes extends JsonRoutes {
  private static final Logger log = LoggerFactory.getLogger(ContinuousRoutes.class);
  static final long MAX_REQUEST_BYTES = 64 * 1024;
  static final String GRANT = "ContinuousQuery";
  private final ContinuousQueries queries;

  ContinuousRoutes(ObjectMapper json, ContinuousQueries queries) {
    super(json);
    this.queries = queries;
  }

  Route routes(Principal principal) {
    return concat(
        pathEnd(() -> post(() -> register(principal))),
        path(
            PathMatchers.segment().slash("events"),
            id -> get(() -> withScope(principal, id, scope -> events(principal, id, scope)))),
        path(
            PathMatchers.segment().slash("status"),
            id -> get(() -> withScope(principal, id, scope -> status(id)))),
        path(
            PathMatchers.segment().slash("result"),
            id -> get(() -> withScope(principal, id, scope -> result(id)))),
        path(
            PathMatchers.segment(),
            id -> delete(() -> withScope(principal, id, scope -> unregister(id)))));
  }

  private Route register(Principal principal) {
    return object(
        MAX_REQUEST_BYTES,
        ContinuousRequest.FIELDS,
        root -> {
          ContinuousRequest request;
          try {
            request = ContinuousRequest.parse(root, queries.settings().maxLimit());
          } catch (ContinuousQueryException e) {
            return error(e.code(), e.getMessage());
          }
          if (!principal.may(GRANT, request.scope())) {
            return error(
                ErrorCode.FORBIDDEN,
                "registering a continuous query requires the grant " + GRANT + " on its scope");
          }
          return onComplete(
              queries.register(request, principal.id()),
              result -> {
                if (result.isFailure()) {
                  return failure(result.failed().get());
                }
                ContinuousQueries.Registered r = result.get();
                return json(
                    r.created() ? 201 : 200,
                    Map.of("id", r.id(), "created", r.created(), "scope", r.scope()));
              });
        });
  }

  /**
   * {@code inner} (given the query's scope) when the registration exists and the principal holds
   * the grant on its scope.
   */
  private Route withScope(Principal principal, String id, Function<String, Route> inner) {
    if (!id.matches("cq_[0-9a-f]{32}")) {
      return error(ErrorCode.NOT_FOUND, "no such continuous query");
    }
    return onComplete(
        queries.find(id),
        result -> {
          if (result.isFailure()) {
            return failure(result.failed().get());
          }
          if (result.get().isEmpty()) {
            return error(ErrorCode.NOT_FOUND, "no such continuous query");
          }
          if (!principal.may(GRANT, result.get().get().scope())) {
            return error(
                ErrorCode.FORBIDDEN, "this continuous query's scope requires the grant " + GRANT);
          }
          return inner.apply(result.get().get().scope());
        });
  }

  private Route status(String id) {
    return onComplete(
        queries.status(id),
        result -> {
          if (result.isFailure()) {
            return failure(result.failed().get());
          }
          Optional<ObjectNode> s = result.get();
          return s.isPresent() ? json(200, s.get()) : notServed();
        });
  }

  private Route result(String id) {
    return onComplete(
        queries.result(id),
        result -> result.isFailure() ? failure(result.failed().get()) : json(200, result.get()));
  }

  private Route unregister(String id) {
    return onComplete(
        queries.unregister(id),
        result ->
            result.isFailure()
                ? failure(result.failed().get())
                : json(200, Map.of("id", id, "deleted", result.get())));
  }

  private Route events(Principal principal, String id, String scope) {
    return optionalHeaderValueByName(
        "Last-Event-ID",
        header ->
            parameterOptional(
                "token",
                param ->
                    extractMaterializer(
                        mat -> {
                          Optional<String> lastEventId = header.isPresent() ? header : param;
                          Pair<
                                  BoundedSourceQueue<ServerSentEvent>,
                                  Source<ServerSentEvent, NotUsed>>
                              pair =
                                  Source.<ServerSentEvent>queue(
                                          queries.settings().subscriberBuffer())
                                      .preMaterialize(mat);
                          SseQueue queue = new SseQueue(pair.first());
                          Session.Subscriber subscriber =
                              new Session.Subscriber() {
                                @Override
                                public boolean offer(Session.Event e) {
                                  return queue.offer(
                                      ServerSentEvent.create(e.data(), e.type(), e.id()));
                                }

                                @Override
                                public void close() {
                                  queue.end();
                                }

                                @Override
                                public String principal() {
                                  return principal.id();
                                }
                              };
                          return onComplete(
                              queries.subscribe(id, scope, subscriber, lastEventId.orElse(null)),
                              result -> {
                                if (result.isFailure()) {
                                  subscriber.close();
                                  return failure(result.failed().get());
                                }
                                Source<ServerSentEvent, NotUsed> stream =
                                    pair.second()
                                        .keepAlive(
                                            Duration.ofSeconds(15), ServerSentEvent::heartbeat)
                                        .watchTermination(
                                            (m, done) -> {
                                              done.whenComplete(
                                                  (d, t) -> queries.unsubscribe(id, subscriber));
                                              return m;
                                            });
                                return completeOK(stream, EventStreamMarshalling.toEventStream());
                              });
                        })));
  }

  private Route notServed() {
    return error(
        ErrorCode.UNAVAILABLE,
        "this node does not maintain the continuous query now: it is served by the node running the continuous pipeline, "
            + "or its first read has not finished; retry");
  }

  private Route failure(Throwable t) {
    Throwable cause = unwrap(t);
    if (cause instanceof ContinuousQueryException e) {
      return error(e.code(), e.getMessage());
    }
    log.warn("continuous query request failed: {}", SafeErrors.describe(cause));
    return error(ErrorCode.INTERNAL, "the request failed; details are in the node's log");
  }
}
