package io.weir.node.http;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.auth.Access;
import io.weir.node.auth.Authenticator;
import io.weir.node.auth.Principal;
import io.weir.node.documents.Documents;
import io.weir.node.feed.Feeds;
import io.weir.node.feed.LiveStreams;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.Lsn;
import io.weir.protocol.query.Q1Query;
import io.weir.protocol.query.QueryException;
import io.weir.protocol.query.QueryLimits;
import io.weir.sharding.partition.OutboxReader;
import java.io.IOException;
import java.io.StringWriter;
import java.sql.SQLException;
import java.util.Set;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.pattern.AskTimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The public read routes (any authenticated principal, by its grants):
 *
 * <ul>
 *   <li>{@code POST /v1/changes/read} {@code {"collection", "start": "beginning"|"now"} or
 *       {"collection", "cursor"}, "limit"?, "maxBytes"?}: needs {@code ChangesRead} or {@code
 *       DocumentsRead}.
 *   <li>{@code POST /v1/query} {@code {"query": <Q1>, "limit"?, "maxBytes"?}}: needs {@code
 *       QueryRead} and {@code DocumentsRead}, and {@code FieldUse} for every predicate field.
 *   <li>{@code POST /v1/query/live/start} (same body) and {@code /v1/query/live/read} {@code
 *       {"query", "cursor", "limit"?, "maxBytes"?}}: also {@code ChangesRead}.
 * </ul>
 */
final class FeedRoutes extends JsonRoutes {
  private static final Logger log = LoggerFactory.getLogger(FeedRoutes.class);

  /** Request bodies are small: a collection, a cursor, a query. */
  static final long MAX_REQUEST_BYTES = 64 * 1024;

  private static final Set<String> CHANGES_FIELDS =
      Set.of("collection", "start", "cursor", "limit", "maxBytes");
  private static final Set<String> QUERY_FIELDS = Set.of("query", "limit", "maxBytes");
  private static final Set<String> LIVE_READ_FIELDS =
      Set.of("query", "cursor", "limit", "maxBytes");
  private final Feeds feeds;
  private final LiveStreamRoutes live;
  private final Authenticator authenticator;

  /** {@code streams} null: no pushed live queries ({@code GET /v1/query/live/stream} is 404). */
  FeedRoutes(ObjectMapper json, Feeds feeds, LiveStreams streams, Authenticator authenticator) {
    super(json);
    this.feeds = feeds;
    this.live =
        streams == null ? null : new LiveStreamRoutes(json, this, feeds, streams, authenticator);
    this.authenticator = authenticator;
  }

  Route routes(Principal principal) {
    return concat(
        path(
            PathMatchers.segment("changes").slash("read"),
            () ->
                post(() -> object(MAX_REQUEST_BYTES, CHANGES_FIELDS, b -> changes(principal, b)))),
        path(
            "query",
            () ->
                post(
                    () ->
                        object(MAX_REQUEST_BYTES, QUERY_FIELDS, b -> query(principal, b, false)))),
        path(
            PathMatchers.segment("query").slash("live").slash("start"),
            () ->
                post(
                    () -> object(MAX_REQUEST_BYTES, QUERY_FIELDS, b -> query(principal, b, true)))),
        path(
            PathMatchers.segment("query").slash("live").slash("read"),
            () ->
                post(
                    () ->
                        object(MAX_REQUEST_BYTES, LIVE_READ_FIELDS, b -> liveRead(principal, b)))),
        path(
            PathMatchers.segment("query").slash("live").slash("stream"),
            () ->
                get(
                    () ->
                        live == null
                            ? error(ErrorCode.NOT_FOUND, "no such resource")
                            : live.route(principal))));
  }

  /**
   * A positive whole number within {@code max}, or the default when absent; null when malformed.
   */
  private static Long bounded(JsonNode node, long fallback, long max) {
    if (node == null) {
      return fallback;
    }
    if (!node.isIntegralNumber()
        || !node.canConvertToLong()
        || node.longValue() < 1
        || node.longValue() > max) {
      return null;
    }
    return node.longValue();
  }

  private Route changes(Principal principal, JsonNode body) {
    JsonNode collection = body.get("collection");
    JsonNode start = body.get("start");
    JsonNode cursor = body.get("cursor");
    Feeds.Limits limits = feeds.limits();
    Long limit = bounded(body.get("limit"), limits.defaultLimit(), limits.maxLimit());
    Long maxBytes = bounded(body.get("maxBytes"), limits.defaultBytes(), limits.maxBytes());
    if (collection == null
        || !collection.isTextual()
        || !Documents.readableCollection(collection.textValue())) {
      return error(ErrorCode.BAD_REQUEST, "collection must be 1 to 128 of A-Z a-z 0-9 _ . -");
    }
    if ((start == null) == (cursor == null)
        || (start != null
            && !(start.isTextual()
                && (start.textValue().equals("beginning") || start.textValue().equals("now"))))
        || (cursor != null && !cursor.isTextual())) {
      return error(
          ErrorCode.BAD_REQUEST,
          "give either start (\"beginning\" or \"now\") or cursor (a cursor this API returned)");
    }
    if (limit == null || maxBytes == null) {
      return error(
          ErrorCode.BAD_REQUEST,
          "limit is 1 to " + limits.maxLimit() + " positions, maxBytes 1 to " + limits.maxBytes());
    }
    String c = collection.textValue();
    Feeds.Start from =
        cursor != null
            ? new Feeds.FromCursor(cursor.textValue())
            : start.textValue().equals("beginning") ? new Feeds.Beginning() : new Feeds.Now();
    return grantChecked(
        authenticator,
        principal,
        p ->
            !p.may("ChangesRead", c) && !p.may("DocumentsRead", c)
                ? new MissingGrant(
                    "reading changes requires ChangesRead or DocumentsRead on this collection")
                : changes(p, c, from, limit, maxBytes));
  }

  private Route changes(
      Principal principal, String c, Feeds.Start from, long limit, long maxBytes) {
    return answer(
        feeds.read(principal, c, from, (int) limit, maxBytes),
        page ->
            write(
                g -> {
                  g.writeArrayFieldStart("changes");
                  for (Feeds.Change ch : page.changes()) {
                    g.writeStartObject();
                    g.writeNumberField("partition", ch.partition());
                    g.writeNumberField("sequence", ch.sequence());
                    if (ch.commitLsn() != 0) {
                      g.writeStringField("commitLsn", Lsn.of(ch.commitLsn()).toString());
                    }
                    g.writeStringField("collection", c);
                    g.writeStringField("id", ch.id());
                    g.writeStringField("kind", ch.kind());
                    g.writeNumberField("revision", ch.revision());
                    g.writeBooleanField("deleted", ch.deleted());
                    raw(g, "before", ch.before());
                    raw(g, "after", ch.after());
                    g.writeEndObject();
                  }
                  g.writeEndArray();
                  g.writeStringField("cursor", page.cursor());
                  g.writeBooleanField("hasMore", page.hasMore());
                }));
  }

  private static void raw(JsonGenerator g, String name, String json) throws IOException {
    g.writeFieldName(name);
    if (json == null) {
      g.writeNull();
    } else {
      g.writeRawValue(json);
    }
  }

  /** The query, parsed and authorised; or the refusal: a route, or a {@link MissingGrant}. */
  Object parse(Principal principal, JsonNode body, boolean live) {
    JsonNode q = body.get("query");
    if (q == null || !q.isObject()) {
      return error(ErrorCode.BAD_REQUEST, "query must be a Q1 query object");
    }
    Q1Query query;
    try {
      query = Q1Query.parse(q, QueryLimits.DEFAULTS);
    } catch (QueryException e) {
      return error(
          e.reason() == QueryException.Reason.UNSUPPORTED
              ? ErrorCode.UNSUPPORTED_QUERY
              : ErrorCode.INVALID_QUERY,
          e.getMessage());
    }
    String c = query.collection();
    if (!Documents.readableCollection(c)) {
      return error(ErrorCode.INVALID_QUERY, "collection must be 1 to 128 of A-Z a-z 0-9 _ . -");
    }
    LiveStreams.Refusal refused = feeds.refusal(principal, query, live);
    if (refused != null) {
      return refused.code() == ErrorCode.FORBIDDEN
          ? new MissingGrant(refused.message())
          : error(refused.code(), refused.message());
    }
    return query;
  }

  private Route query(Principal principal, JsonNode body, boolean live) {
    return grantChecked(
        authenticator,
        principal,
        p -> {
          Object parsed = parse(p, body, live);
          return parsed instanceof Q1Query q ? query(p, q, body, live) : parsed;
        });
  }

  private Route query(Principal principal, Q1Query query, JsonNode body, boolean live) {
    Feeds.Limits limits = feeds.limits();
    Long limit = bounded(body.get("limit"), limits.maxRows(), limits.maxRows());
    Long maxBytes = bounded(body.get("maxBytes"), limits.defaultBytes(), limits.maxBytes());
    if (limit == null || maxBytes == null) {
      return error(
          ErrorCode.BAD_REQUEST,
          "limit is 1 to " + limits.maxRows() + " rows, maxBytes 1 to " + limits.maxBytes());
    }
    CompletionStage<Feeds.Result> result =
        live
            ? feeds.startLive(principal, query, limit.intValue(), maxBytes)
            : feeds.query(principal, query, limit.intValue(), maxBytes);
    return answer(
        result,
        r ->
            write(
                g -> {
                  g.writeArrayFieldStart("rows");
                  for (Feeds.Row row : r.rows()) {
                    g.writeStartObject();
                    g.writeStringField("id", row.id());
                    g.writeNumberField("revision", row.revision());
                    raw(g, "row", row.row());
                    g.writeEndObject();
                  }
                  g.writeEndArray();
                  if (r.cursor() != null) {
                    g.writeStringField("cursor", r.cursor());
                  }
                }));
  }

  private Route liveRead(Principal principal, JsonNode body) {
    return grantChecked(
        authenticator,
        principal,
        p -> {
          Object parsed = parse(p, body, true);
          return parsed instanceof Q1Query q ? liveRead(p, q, body) : parsed;
        });
  }

  private Route liveRead(Principal principal, Q1Query parsed, JsonNode body) {
    JsonNode cursor = body.get("cursor");
    Feeds.Limits limits = feeds.limits();
    Long limit = bounded(body.get("limit"), limits.defaultLimit(), limits.maxLimit());
    Long maxBytes = bounded(body.get("maxBytes"), limits.defaultBytes(), limits.maxBytes());
    if (cursor == null || !cursor.isTextual()) {
      return error(
          ErrorCode.BAD_REQUEST, "cursor must be the cursor live/start or live/read returned");
    }
    if (limit == null || maxBytes == null) {
      return error(
          ErrorCode.BAD_REQUEST,
          "limit is 1 to " + limits.maxLimit() + " positions, maxBytes 1 to " + limits.maxBytes());
    }
    return answer(
        feeds.readLive(principal, parsed, cursor.textValue(), limit.intValue(), maxBytes),
        page ->
            write(
                g -> {
                  deltas(g, page);
                  g.writeBooleanField("hasMore", page.hasMore());
                }));
  }

  /** A live page's {@code deltas} and {@code cursor} fields, as the read and the stream send. */
  static void deltas(JsonGenerator g, Feeds.LivePage page) throws IOException {
    g.writeArrayFieldStart("deltas");
    for (Feeds.Delta d : page.deltas()) {
      g.writeStartObject();
      g.writeStringField("op", d.upsert() ? "upsert" : "remove");
      g.writeNumberField("partition", d.partition());
      g.writeNumberField("sequence", d.sequence());
      g.writeStringField("id", d.id());
      g.writeNumberField("revision", d.revision());
      if (d.upsert()) {
        raw(g, "row", d.row());
      }
      g.writeEndObject();
    }
    g.writeEndArray();
    g.writeStringField("cursor", page.cursor());
  }

  @FunctionalInterface
  private interface Body {
    void write(JsonGenerator g) throws IOException;
  }

  private Route write(Body body) {
    StringWriter out = new StringWriter();
    try (JsonGenerator g = Access.JSON.getFactory().createGenerator(out)) {
      g.writeStartObject();
      body.write(g);
      g.writeEndObject();
    } catch (IOException e) {
      return error(ErrorCode.INTERNAL, "internal error; see the node's log");
    }
    return complete(
        HttpResponse.create().withEntity(ContentTypes.APPLICATION_JSON, out.toString()));
  }

  private <T> Route answer(CompletionStage<T> stage, Function<T, Route> ok) {
    return onComplete(
        stage,
        result -> result.isSuccess() ? ok.apply(result.get()) : failure(result.failed().get()));
  }

  /** The typed error answer for a read that failed with {@code failed}. */
  Route failure(Throwable failed) {
    Throwable t = unwrap(failed);
    if (t instanceof Feeds.Refused r) {
      return error(r.code(), r.getMessage());
    }
    if (t instanceof OutboxReader.MissingEntries) {
      return error(
          ErrorCode.HISTORY_UNAVAILABLE,
          "changes after the cursor were purged; resynchronise from a new snapshot");
    }
    if (t instanceof TimeoutException
        || t instanceof AskTimeoutException
        || t instanceof SQLException) {
      return partitionUnavailable(t);
    }
    log.error("a read failed unexpectedly: {}", SafeErrors.describe(t));
    return error(ErrorCode.INTERNAL, "internal error; see the node's log");
  }
}
