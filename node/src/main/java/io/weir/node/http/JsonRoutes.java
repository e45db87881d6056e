package io.weir.node.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.MapperFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.cfg.CoercionAction;
import com.fasterxml.jackson.databind.cfg.CoercionInputShape;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.type.LogicalType;
import io.weir.node.auth.Authenticator;
import io.weir.node.auth.Principal;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.http.ErrorBody;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.function.Function;
import java.util.function.Supplier;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.RawHeader;
import org.apache.pekko.http.javadsl.server.AllDirectives;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.http.scaladsl.model.EntityStreamSizeException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** What the node's route classes share: JSON replies, typed errors, bounded request bodies. */
abstract class JsonRoutes extends AllDirectives {
  /**
   * Strict request reading: no unknown or duplicate fields, no coercion of strings or floats into
   * numbers, exact decimals in documents.
   */
  static final ObjectMapper STRICT =
      JsonMapper.builder()
          .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
          .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
          .disable(DeserializationFeature.ACCEPT_FLOAT_AS_INT)
          .disable(MapperFeature.ALLOW_COERCION_OF_SCALARS)
          // Text fields take text only: no number or boolean turned into a string.
          .withCoercionConfig(
              LogicalType.Textual,
              c ->
                  c.setCoercion(CoercionInputShape.Integer, CoercionAction.Fail)
                      .setCoercion(CoercionInputShape.Float, CoercionAction.Fail)
                      .setCoercion(CoercionInputShape.Boolean, CoercionAction.Fail))
          .nodeFactory(JsonNodeFactory.withExactBigDecimals(true))
          .build();

  private static final Logger log = LoggerFactory.getLogger(JsonRoutes.class);

  /** How long reading a request body may take once the request has arrived. */
  static final long BODY_READ_TIMEOUT_MILLIS = 30_000;

  protected final ObjectMapper json;

  JsonRoutes(ObjectMapper json) {
    this.json = json;
  }

  Route error(ErrorCode code, String message) {
    return json(code.httpStatus(), ErrorBody.of(code, message));
  }

  Route json(int status, Object body) {
    return complete(response(status, body));
  }

  HttpResponse response(int status, Object body) {
    try {
      return HttpResponse.create()
          .withStatus(StatusCodes.get(status))
          .withEntity(ContentTypes.APPLICATION_JSON, json.writeValueAsBytes(body));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(
          "cannot encode a reply of type " + body.getClass().getSimpleName(), e);
    }
  }

  /** The cause of a failed stage, without the CompletionException/ExecutionException wrappers. */
  static Throwable unwrap(Throwable t) {
    while ((t instanceof CompletionException || t instanceof ExecutionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  Route partitionUnavailable(Throwable cause) {
    log.warn("a partition did not answer: {}", SafeErrors.describe(cause));
    return error(ErrorCode.UNAVAILABLE, "the partition did not answer in time; retry");
  }

  /**
   * The request body as bytes, at most {@code limit}: {@code tooLarge} for a longer one, refused by
   * its Content-Length before it is read when the client sends one.
   */
  Route body(long limit, Supplier<Route> tooLarge, Function<byte[], Route> inner) {
    return extractRequestEntity(
        entity -> {
          OptionalLong length = entity.getContentLengthOption();
          if (length.isPresent() && length.getAsLong() > limit) {
            return tooLarge.get();
          }
          return extractMaterializer(
              mat ->
                  onComplete(
                      entity.withSizeLimit(limit).toStrict(BODY_READ_TIMEOUT_MILLIS, mat),
                      result -> {
                        if (result.isSuccess()) {
                          return inner.apply(result.get().getData().toArray());
                        }
                        for (Throwable t = result.failed().get(); t != null; t = t.getCause()) {
                          if (t instanceof EntityStreamSizeException) {
                            return tooLarge.get();
                          }
                        }
                        return error(ErrorCode.BAD_REQUEST, "the request body could not be read");
                      }));
        });
  }

  /** The most bytes of a small administrative request body (purge, snapshot, keys, principals). */
  static final long ADMIN_BODY = 1024 * 1024;

  /**
   * The body as text: it must be valid UTF-8 (no overlong forms such as {@code C0 AF}, no encoded
   * surrogates, nothing past U+10FFFF), so one text has one spelling; a leading byte order mark is
   * dropped. Every request body the node parses goes through here before JSON parsing, which then
   * reads characters, never bytes (Jackson would otherwise guess UTF-16 or UTF-32 from the bytes,
   * and decodes an overlong sequence as the character it spells).
   */
  static String utf8(byte[] bytes) throws MalformedBody {
    // Most bodies are ASCII: the JDK's own decoding finds that at memory speed. As long as the
    // bytes, with no replacement character, it was: a byte beyond ASCII either joins others into
    // fewer characters or is replaced. ASCII is valid UTF-8 and has no byte order mark.
    String plain = new String(bytes, StandardCharsets.UTF_8);
    if (plain.length() == bytes.length && plain.indexOf('\uFFFD') < 0) {
      return plain;
    }
    CharsetDecoder decoder =
        StandardCharsets.UTF_8
            .newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT);
    String text;
    try {
      text = decoder.decode(ByteBuffer.wrap(bytes)).toString();
    } catch (CharacterCodingException e) {
      throw new MalformedBody("the body is not valid UTF-8");
    }
    return text.startsWith("\uFEFF") ? text.substring(1) : text;
  }

  /**
   * The body as one JSON value read strictly ({@link #STRICT}: valid UTF-8, no duplicate fields,
   * nothing after the value); null for an empty or blank body.
   */
  static JsonNode readJson(byte[] bytes) throws MalformedBody {
    String text = utf8(bytes);
    if (text.isBlank()) {
      return null;
    }
    try {
      return STRICT.readTree(text);
    } catch (IOException | RuntimeException e) {
      // Jackson's messages quote the input: none of it goes out.
      throw new MalformedBody("the body is not valid JSON");
    }
  }

  /** A body that is not valid UTF-8 or not JSON; the message is value-free. */
  static final class MalformedBody extends Exception {
    MalformedBody(String message) {
      super(message, null, false, false);
    }
  }

  /**
   * The request body, at most {@code limit} bytes ({@link #ADMIN_BODY} for administrative routes),
   * as a strictly read JSON value ({@link #readJson}); {@code inner} gets null for an empty body.
   * 400 {@code malformed-json} for a body that is not valid UTF-8 or not JSON or has anything after
   * the value, 400 {@code bad-request} for a longer body.
   */
  Route jsonBody(long limit, Function<JsonNode, Route> inner) {
    return body(
        limit,
        () -> error(ErrorCode.BAD_REQUEST, "the body is larger than " + limit + " bytes"),
        bytes -> {
          JsonNode root;
          try {
            root = readJson(bytes);
          } catch (MalformedBody e) {
            return error(ErrorCode.MALFORMED_JSON, e.getMessage());
          }
          return inner.apply(root);
        });
  }

  /**
   * The request body as one JSON object read strictly ({@link #readJson}: valid UTF-8, no duplicate
   * fields, nothing after it), at most {@code limit} bytes, with only the fields in {@code
   * allowed}. 400 {@code bad-request} for a longer body, a body that is not an object or has
   * another field (named when it is a plain name, never quoted otherwise), 400 {@code
   * malformed-json} for one that is not UTF-8 JSON.
   */
  Route object(long limit, Set<String> allowed, Function<JsonNode, Route> inner) {
    return body(
        limit,
        () -> error(ErrorCode.BAD_REQUEST, "the body is larger than " + limit + " bytes"),
        bytes -> {
          JsonNode root;
          try {
            root = readJson(bytes);
          } catch (MalformedBody e) {
            return error(ErrorCode.MALFORMED_JSON, e.getMessage());
          }
          if (root == null || !root.isObject()) {
            return error(ErrorCode.BAD_REQUEST, "the body must be a JSON object");
          }
          for (var it = root.fieldNames(); it.hasNext(); ) {
            String name = it.next();
            if (!allowed.contains(name)) {
              return error(
                  ErrorCode.BAD_REQUEST,
                  name.matches("[A-Za-z0-9_]{1,64}")
                      ? "unknown field " + name + "; the fields are " + new TreeSet<>(allowed)
                      : "the body has an unknown field");
            }
          }
          return inner.apply(root);
        });
  }

  /** A refusal for want of a grant, before the second look {@link #grantChecked} takes. */
  record MissingGrant(String message) {}

  /**
   * {@code attempt} for {@code principal}: a route, or a {@link MissingGrant}. A missing grant is
   * looked at once more with the principal as loaded after this request (coalesced with other
   * misses, at most one load per second per node), so a grant given through another node a moment
   * ago counts at once; only then is it 403. A principal revoked meanwhile gets 401; a load that
   * fails, 503.
   */
  Route grantChecked(
      Authenticator authenticator, Principal principal, Function<Principal, Object> attempt) {
    Object first = attempt.apply(principal);
    if (!(first instanceof MissingGrant)) {
      return (Route) first;
    }
    return onComplete(
        authenticator.refresh(principal),
        loaded -> {
          if (loaded.isFailure()) {
            log.warn(
                "principals could not be loaded: {}", SafeErrors.describe(loaded.failed().get()));
            return error(ErrorCode.UNAVAILABLE, "principals could not be loaded; retry");
          }
          if (loaded.get().isEmpty()) {
            return unauthenticated();
          }
          Object second = attempt.apply(loaded.get().get());
          return second instanceof MissingGrant missing
              ? error(ErrorCode.FORBIDDEN, missing.message())
              : (Route) second;
        });
  }

  Route unauthenticated() {
    return complete(
        response(401, ErrorBody.of(ErrorCode.UNAUTHENTICATED, "a valid bearer token is required"))
            .addHeader(RawHeader.create("WWW-Authenticate", "Bearer realm=\"weir\"")));
  }
}
