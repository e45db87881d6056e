package io.weir.node.http;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.io.EOFException;
import java.io.IOException;
import java.io.StringWriter;

/** Document bodies as the API stores them: one JSON object, compact, numbers exact. */
final class DocumentBodies {
  private DocumentBodies() {}

  /**
   * Reads documents strictly (no trailing content, no duplicate field names) and keeps numbers
   * exact, so the compact form written back is the same value.
   */
  private static final ObjectMapper DOCUMENT_JSON =
      JsonMapper.builder()
          .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
          .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
          .nodeFactory(JsonNodeFactory.withExactBigDecimals(true))
          .build();

  /**
   * The body as compact JSON; it must be one JSON object in valid UTF-8 ({@link JsonRoutes#utf8}).
   * The exception's message names what was wrong, never the content (Jackson's messages quote it,
   * so they are not passed on).
   *
   * <p>Copied token by token from the parser to the generator, numbers exact ({@link
   * JsonGenerator#copyCurrentEventExact}): the same text as reading the body into a tree and
   * writing that, without building the tree (every document write comes through here). Anything
   * else than a well-formed object goes the tree's way, which gives the refusal.
   */
  static String canonicalObject(byte[] body) throws MalformedDocument {
    String text;
    try {
      text = JsonRoutes.utf8(body);
    } catch (JsonRoutes.MalformedBody e) {
      throw new MalformedDocument(e.getMessage());
    }
    try (JsonParser p = DOCUMENT_JSON.createParser(text)) {
      if (p.nextToken() == JsonToken.START_OBJECT) {
        String copied = copyObject(p, text.length());
        if (p.nextToken() == null) {
          return copied;
        }
      }
    } catch (IOException | RuntimeException e) {
      // not JSON, or more than one value: the tree's way says which
    }
    return canonicalTree(text);
  }

  /**
   * The object whose {@code START_OBJECT} is {@code p}'s current token, copied token by token to
   * its compact form ({@link #canonicalObject}'s); {@code p} is left on its {@code END_OBJECT}.
   * {@code sizeHint}: about how many characters it has. Throws what the parser throws (not JSON, a
   * duplicate field) and when the input ends inside the object.
   */
  static String copyObject(JsonParser p, int sizeHint) throws IOException {
    StringWriter out = new StringWriter(sizeHint);
    try (JsonGenerator g = DOCUMENT_JSON.createGenerator(out)) {
      int depth = 0;
      do {
        JsonToken t = p.currentToken();
        if (t == null) {
          throw new EOFException("the input ends inside an object");
        }
        if (t == JsonToken.START_OBJECT || t == JsonToken.START_ARRAY) {
          depth++;
        } else if (t == JsonToken.END_OBJECT || t == JsonToken.END_ARRAY) {
          depth--;
        }
        g.copyCurrentEventExact(p);
      } while (depth > 0 && p.nextToken() != JsonToken.NOT_AVAILABLE);
    }
    return out.toString();
  }

  /** {@link #canonicalObject} by way of a tree: the refusals, and the reference it is tested on. */
  static String canonicalTree(String text) throws MalformedDocument {
    JsonNode node;
    try {
      node = DOCUMENT_JSON.readTree(text);
    } catch (IOException | RuntimeException e) {
      throw new MalformedDocument("the body is not valid JSON");
    }
    if (node == null || !node.isObject()) {
      throw new MalformedDocument("the body must be a JSON object");
    }
    try {
      return DOCUMENT_JSON.writeValueAsString(node);
    } catch (JsonProcessingException e) {
      throw new MalformedDocument("the body cannot be stored as JSON");
    }
  }

  /**
   * A JSON object already read (a batch item's body, read strictly with the request) in the compact
   * form {@link #canonicalObject} gives the same object sent alone.
   */
  static String canonical(JsonNode object) throws MalformedDocument {
    try {
      return DOCUMENT_JSON.writeValueAsString(object);
    } catch (JsonProcessingException e) {
      throw new MalformedDocument("the body cannot be stored as JSON");
    }
  }

  /** A document body that is not a JSON object; the message is value-free. */
  static final class MalformedDocument extends Exception {
    MalformedDocument(String message) {
      super(message, null, false, false);
    }
  }
}
