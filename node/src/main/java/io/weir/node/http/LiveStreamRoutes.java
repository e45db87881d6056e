package io.weir.node.http;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.auth.Access;
import io.weir.node.auth.Authenticator;
import io.weir.node.auth.Principal;
import io.weir.node.feed.Feeds;
import io.weir.node.feed.LiveStreams;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.http.ErrorBody;
import io.weir.protocol.query.Q1Query;
import java.io.IOException;
import java.io.StringWriter;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.NotUsed;
import org.apache.pekko.http.javadsl.marshalling.sse.EventStreamMarshalling;
import org.apache.pekko.http.javadsl.model.sse.ServerSentEvent;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.japi.Pair;
import org.apache.pekko.stream.BoundedSourceQueue;
import org.apache.pekko.stream.javadsl.Source;

/**
 * {@code GET /v1/query/live/stream?query=<Q1 JSON>&cursor=<cursor>&limit=&maxBytes=}: a live
 * query's deltas pushed as Server-Sent Events ({@link LiveStreams}), beside the polling {@code POST
 * /v1/query/live/read}. The cursor is the one {@code live/start} (or a read, or this stream's last
 * event id) returned; a {@code Last-Event-ID} header takes its place, so a client that reconnects
 * resumes where its last event left it and sees each change once.
 *
 * <p>The request is checked as the polling read is (grants, the query, limits, the cursor's
 * signature and fences): the first page is read before the stream is answered, so every refusal is
 * a typed HTTP error. Then events: {@code deltas} (data {@code {"deltas": [...], "cursor"}}, id the
 * cursor), {@code progress} (data {@code {"cursor"}}: changes that matched nothing were passed; the
 * first event is one when the first page has no deltas), heartbeat comments while idle, and {@code
 * end} (data the error body a read would get) when the stream ends for a reason the client must
 * see: revoked, forbidden, the cursor fenced, history purged, unavailable for too long.
 */
final class LiveStreamRoutes extends JsonRoutes {
  /** How long a response may take to start once answered (Pekko's request timeout is 20 s). */
  static final java.time.Duration UNSENT = java.time.Duration.ofSeconds(60);

  private final FeedRoutes reads;
  private final Feeds feeds;
  private final LiveStreams streams;
  private final Authenticator authenticator;

  /**
   * The latest deltas event's data with its page: the streams riding one lead send the same page,
   * serialised once.
   */
  private final AtomicReference<Object[]> lastPage = new AtomicReference<>();

  LiveStreamRoutes(
      ObjectMapper json,
      FeedRoutes reads,
      Feeds feeds,
      LiveStreams streams,
      Authenticator authenticator) {
    super(json);
    this.reads = reads;
    this.feeds = feeds;
    this.streams = streams;
    this.authenticator = authenticator;
  }

  Route route(Principal principal) {
    return parameterOptional(
        "query",
        query ->
            parameterOptional(
                "cursor",
                cursorParam ->
                    parameterOptional(
                        "limit",
                        limit ->
                            parameterOptional(
                                "maxBytes",
                                maxBytes ->
                                    optionalHeaderValueByName(
                                        "Last-Event-ID",
                                        lastEventId ->
                                            stream(
                                                principal,
                                                query,
                                                lastEventId.isPresent() ? lastEventId : cursorParam,
                                                limit,
                                                maxBytes))))));
  }

  private Route stream(
      Principal principal,
      Optional<String> queryText,
      Optional<String> cursor,
      Optional<String> limitText,
      Optional<String> maxBytesText) {
    if (queryText.isEmpty()) {
      return error(ErrorCode.BAD_REQUEST, "query must be a Q1 query object (URL-encoded JSON)");
    }
    JsonNode query;
    try {
      query = STRICT.readTree(queryText.get());
    } catch (JsonProcessingException e) {
      return error(ErrorCode.MALFORMED_JSON, "the query parameter is not valid JSON");
    }
    if (cursor.isEmpty() || cursor.get().isEmpty()) {
      return error(
          ErrorCode.BAD_REQUEST,
          "cursor (or Last-Event-ID) must be the cursor live/start, live/read or this stream"
              + " returned");
    }
    Feeds.Limits limits = feeds.limits();
    Long limit = number(limitText, limits.defaultLimit(), limits.maxLimit());
    Long maxBytes = number(maxBytesText, limits.defaultBytes(), limits.maxBytes());
    if (limit == null || maxBytes == null) {
      return error(
          ErrorCode.BAD_REQUEST,
          "limit is 1 to " + limits.maxLimit() + " positions, maxBytes 1 to " + limits.maxBytes());
    }
    ObjectNode body = JsonNodeFactory.instance.objectNode();
    body.set("query", query);
    return grantChecked(
        authenticator,
        principal,
        p -> {
          Object parsed = reads.parse(p, body, true);
          return parsed instanceof Q1Query q
              ? open(p, q, cursor.get(), limit.intValue(), maxBytes)
              : parsed;
        });
  }

  /** A positive whole number within {@code max} or the default; null when malformed. */
  private static Long number(Optional<String> text, long fallback, long max) {
    if (text.isEmpty()) {
      return fallback;
    }
    try {
      long v = Long.parseLong(text.get());
      return v < 1 || v > max ? null : v;
    } catch (NumberFormatException e) {
      return null;
    }
  }

  private Route open(Principal principal, Q1Query query, String cursor, int limit, long maxBytes) {
    LiveStreams.Refusal full = streams.admit(principal);
    if (full != null) {
      return error(full.code(), full.message());
    }
    CompletionStage<Feeds.LivePage> first = firstPage(principal, query, cursor, limit, maxBytes);
    return extractMaterializer(
        mat ->
            onComplete(
                first,
                result -> {
                  if (result.isFailure()) {
                    streams.release(principal);
                    return reads.failure(result.failed().get());
                  }
                  try {
                    return respond(principal, query, limit, maxBytes, result.get(), mat);
                  } catch (RuntimeException e) {
                    streams.release(principal);
                    throw e;
                  }
                }));
  }

  /**
   * The event stream. The stream is registered (and its slot kept) only when the response's source
   * runs: a response the HTTP layer never sends (the client left, the request timed out) gives the
   * slot back after {@link #UNSENT} instead of following the query for nobody.
   */
  private Route respond(
      Principal principal,
      Q1Query query,
      int limit,
      long maxBytes,
      Feeds.LivePage page,
      org.apache.pekko.stream.Materializer mat) {
    Pair<BoundedSourceQueue<ServerSentEvent>, Source<ServerSentEvent, NotUsed>> pair =
        Source.<ServerSentEvent>queue(streams.settings().buffer()).preMaterialize(mat);
    QueueSink sink = new QueueSink(pair.first());
    boolean sent = page.deltas().isEmpty() ? sink.progress(page.cursor()) : sink.page(page);
    AtomicBoolean claimed = new AtomicBoolean();
    AtomicReference<LiveStreams.Stream> started = new AtomicReference<>();
    streams.unlessRunWithin(
        UNSENT,
        () -> {
          if (claimed.compareAndSet(false, true)) {
            streams.release(principal);
            sink.close();
          }
        });
    Source<ServerSentEvent, NotUsed> events =
        pair.second()
            .mapMaterializedValue(
                m -> {
                  if (claimed.compareAndSet(false, true)) {
                    LiveStreams.Stream stream =
                        streams.start(principal, query, page.cursor(), limit, maxBytes, sink);
                    started.set(stream);
                    if (sent) {
                      stream.wake(); // a write between the first page and now reaches it
                    } else {
                      stream.close();
                    }
                  }
                  return m;
                })
            .keepAlive(streams.settings().heartbeat(), ServerSentEvent::heartbeat)
            .watchTermination(
                (m, done) -> {
                  done.whenComplete(
                      (d, t) -> {
                        LiveStreams.Stream stream = started.get();
                        if (stream != null) {
                          stream.close();
                        }
                      });
                  return m;
                });
    return completeOK(events, EventStreamMarshalling.toEventStream());
  }

  private CompletionStage<Feeds.LivePage> firstPage(
      Principal principal, Q1Query query, String cursor, int limit, long maxBytes) {
    try {
      return feeds.readLive(principal, query, cursor, limit, maxBytes);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  /** Events into the response's bounded queue; a full queue ends the stream (client behind). */
  private final class QueueSink implements LiveStreams.Sink {
    private final SseQueue queue;

    QueueSink(BoundedSourceQueue<ServerSentEvent> queue) {
      this.queue = new SseQueue(queue);
    }

    @Override
    public boolean page(Feeds.LivePage page) {
      Object[] last = lastPage.get();
      String data;
      if (last != null && last[0] == page) {
        data = (String) last[1];
      } else {
        data = json(g -> FeedRoutes.deltas(g, page));
        if (data == null) {
          return false;
        }
        lastPage.set(new Object[] {page, data});
      }
      return offer("deltas", page.cursor(), data);
    }

    @Override
    public boolean progress(String cursor) {
      String data = json(g -> g.writeStringField("cursor", cursor));
      return data != null && offer("progress", cursor, data);
    }

    /** Synchronized with the offers: nothing follows the end event. */
    @Override
    public synchronized void end(ErrorCode code, String message) {
      try {
        queue.offer(
            ServerSentEvent.create(json.writeValueAsString(ErrorBody.of(code, message)), "end"));
      } catch (JsonProcessingException e) {
        // the stream ends without its last event: the client resumes and is refused then
      }
      queue.end();
    }

    @Override
    public void close() {
      queue.end();
    }

    private synchronized boolean offer(String type, String id, String data) {
      return !queue.ended() && queue.offer(ServerSentEvent.create(data, type, id));
    }
  }

  /** An event's data: one JSON object of {@code fields}; null when it cannot be written. */
  private static String json(Fields fields) {
    StringWriter out = new StringWriter();
    try (JsonGenerator g = Access.JSON.getFactory().createGenerator(out)) {
      g.writeStartObject();
      fields.write(g);
      g.writeEndObject();
    } catch (IOException e) {
      return null;
    }
    return out.toString();
  }

  @FunctionalInterface
  private interface Fields {
    void write(JsonGenerator g) throws IOException;
  }
}
