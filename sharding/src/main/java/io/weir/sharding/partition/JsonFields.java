package io.weir.sharding.partition;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Top-level fields of a document's JSON text, read with a streaming parser: the row-visibility
 * value of a document ({@link #aclOf}) and the merge of unchanged (TOAST) fields ({@link #merge}).
 * Values are copied as text, never re-serialized, so numbers and nesting stay as stored.
 */
final class JsonFields {
  private static final JsonFactory JSON = new JsonFactory();

  private JsonFields() {}

  /**
   * The value of {@code body}'s top-level {@code field} as compact JSON: {@code "null"} when the
   * field is absent or the body is not an object; null when there is no field (no row rule) or no
   * body.
   */
  static String aclOf(String body, String field) {
    if (field == null || body == null) {
      return null;
    }
    try (JsonParser p = JSON.createParser(body)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        return "null";
      }
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        p.nextToken();
        if (name.equals(field)) {
          StringWriter out = new StringWriter();
          try (JsonGenerator g = JSON.createGenerator(out)) {
            g.copyCurrentStructure(p);
          }
          return out.toString();
        }
        p.skipChildren();
      }
      return "null";
    } catch (IOException e) {
      return "null";
    }
  }

  /**
   * {@code body} with the values of its top-level {@code keep} fields replaced by those fields'
   * values in {@code previous}, copied as text (numbers, nested JSON and spacing exactly as
   * stored); null if either is not a JSON object.
   */
  static String merge(String previous, String body, List<String> keep) {
    try {
      Map<String, int[]> from = spans(previous, keep);
      Map<String, int[]> into = spans(body, keep);
      if (from == null || into == null) {
        return null;
      }
      List<Map.Entry<String, int[]>> targets = new ArrayList<>(into.entrySet());
      targets.sort((a, b) -> Integer.compare(b.getValue()[0], a.getValue()[0])); // from the end
      StringBuilder out = new StringBuilder(body);
      for (Map.Entry<String, int[]> t : targets) {
        int[] source = from.get(t.getKey());
        if (source != null) {
          out.replace(t.getValue()[0], t.getValue()[1], previous.substring(source[0], source[1]));
        }
      }
      return out.toString();
    } catch (IOException e) {
      return null;
    }
  }

  /**
   * Where the values of the given top-level fields of a JSON object sit in its text; null if not an
   * object.
   */
  private static Map<String, int[]> spans(String json, List<String> fields) throws IOException {
    try (JsonParser p = JSON.createParser(json)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        return null;
      }
      Map<String, int[]> out = new HashMap<>();
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken value = p.nextToken();
        int start = (int) p.currentTokenLocation().getCharOffset();
        if (value.isStructStart()) {
          p.skipChildren();
        } else {
          p.finishToken();
        }
        int end = (int) p.currentLocation().getCharOffset();
        if (fields.contains(name)) {
          out.put(name, new int[] {start, end});
        }
      }
      return out;
    }
  }
}
