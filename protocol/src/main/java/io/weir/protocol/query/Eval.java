package io.weir.protocol.query;

import com.fasterxml.jackson.databind.JsonNode;

/** Field lookup and value comparison for evaluating predicates against documents. */
final class Eval {
  /** {@link Literal#compareFrom} for values that are not ordered against each other. */
  static final int INCOMPARABLE = Integer.MIN_VALUE;

  private Eval() {}

  /**
   * The value at a dot-separated {@code path} (already validated), or {@code null} when a segment
   * is missing or a value on the way is not an object. A JSON null value is present.
   */
  static JsonNode lookup(JsonNode document, String path) {
    JsonNode node = document;
    int start = 0;
    while (true) {
      if (node == null || !node.isObject()) {
        return null;
      }
      int dot = path.indexOf('.', start);
      if (dot < 0) {
        return node.get(path.substring(start));
      }
      node = node.get(path.substring(start, dot));
      start = dot + 1;
    }
  }

  static boolean isFiniteNumber(JsonNode node) {
    if (!node.isNumber()) {
      return false;
    }
    return !(node.isDouble() || node.isFloat()) || Double.isFinite(node.doubleValue());
  }

  /**
   * Orders strings by Unicode code point (not by UTF-16 code unit as {@link String#compareTo}
   * does).
   */
  static int compareCodePoints(String a, String b) {
    int i = 0;
    int j = 0;
    while (i < a.length() && j < b.length()) {
      int ca = a.codePointAt(i);
      int cb = b.codePointAt(j);
      if (ca != cb) {
        return Integer.compare(ca, cb);
      }
      i += Character.charCount(ca);
      j += Character.charCount(cb);
    }
    return Boolean.compare(i < a.length(), j < b.length());
  }
}
