package io.weir.protocol.query;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/** A strict mapper like the HTTP API's, and JSON in tests written with single quotes. */
final class Json {
  static final JsonMapper MAPPER =
      JsonMapper.builder()
          .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
          .build();

  private Json() {}

  /** Parses {@code json} after turning every {@code '} into {@code "}. */
  static JsonNode json(String json) {
    return parseExact(json.replace('\'', '"'));
  }

  static ObjectNode object(String json) {
    return (ObjectNode) json(json);
  }

  static JsonNode parseExact(String json) {
    try {
      return MAPPER.readTree(json);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(e);
    }
  }

  static Q1Query query(String json) throws QueryException {
    return Q1Query.parse(json(json));
  }

  /** A query on collection {@code c} with {@code where} given as JSON. */
  static Q1Query where(String where) throws QueryException {
    return query("{'collection':'c','where':" + where + "}");
  }
}
