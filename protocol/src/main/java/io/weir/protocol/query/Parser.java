package io.weir.protocol.query;

import com.fasterxml.jackson.databind.JsonNode;
import io.weir.protocol.query.QueryException.Reason;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Validates a query's wire form into an un-normalised {@link Predicate} tree. One instance per
 * parse (it counts nodes). Every error names positions and limits only; an operator or key is
 * quoted only when it looks like a structural token ({@link #TOKEN}).
 */
final class Parser {
  static final Pattern COLLECTION = Pattern.compile("[A-Za-z_][A-Za-z0-9_.-]{0,62}");
  static final Pattern FIELD_PATH =
      Pattern.compile("[A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)*");

  /** Operator names and keys matching this are structural and may be echoed in messages. */
  static final Pattern TOKEN = Pattern.compile("[A-Za-z_]{1,32}");

  private static final Set<String> TOP_LEVEL = Set.of("collection", "where", "select");
  private static final Map<String, String> UNSUPPORTED =
      Map.ofEntries(
          Map.entry("orderBy", "ORDER BY"),
          Map.entry("order_by", "ORDER BY"),
          Map.entry("sort", "ORDER BY"),
          Map.entry("limitBy", "top-k"),
          Map.entry("top", "top-k"),
          Map.entry("topK", "top-k"),
          Map.entry("aggregate", "aggregates"),
          Map.entry("aggregates", "aggregates"),
          Map.entry("groupBy", "aggregates"),
          Map.entry("group_by", "aggregates"),
          Map.entry("count", "aggregates"),
          Map.entry("join", "joins"),
          Map.entry("joins", "joins"),
          Map.entry("continuation", "continuations"),
          Map.entry("after", "continuations"),
          Map.entry("cursor", "continuations"),
          Map.entry("explain", "EXPLAIN"));

  private final QueryLimits limits;
  private int nodes;

  Parser(QueryLimits limits) {
    this.limits = limits;
  }

  /** The top-level keys: the first unsupported or unknown one is refused. */
  void checkTopLevelKeys(JsonNode query) throws QueryException {
    for (Iterator<String> it = query.fieldNames(); it.hasNext(); ) {
      String key = it.next();
      if (TOP_LEVEL.contains(key)) {
        continue;
      }
      String construct = UNSUPPORTED.get(key);
      if (construct != null) {
        throw new QueryException(
            Reason.UNSUPPORTED,
            construct,
            construct
                + " is not supported: a Q1 query reads one collection, unordered, scalar, read-only");
      }
      throw invalid(
          TOKEN.matcher(key).matches() ? key : "query",
          TOKEN.matcher(key).matches()
              ? "unknown top-level key '" + key + "'"
              : "an unknown top-level key");
    }
  }

  String collection(JsonNode node) throws QueryException {
    if (node == null) {
      throw invalid("collection", "collection: missing");
    }
    if (!node.isTextual() || !COLLECTION.matcher(node.textValue()).matches()) {
      throw invalid(
          "collection",
          "collection: a collection name is a string of 1 to 63 of A-Z a-z 0-9 _ . -,"
              + " starting with a letter or _");
    }
    return node.textValue();
  }

  List<String> select(JsonNode node) throws QueryException {
    if (!node.isArray()) {
      throw invalid("select", "select: a projection is an array of field paths");
    }
    if (node.isEmpty()) {
      throw invalid(
          "select",
          "select: a projection names at least one field (leave select out for whole documents)");
    }
    if (node.size() > limits.maxSelectFields()) {
      throw limit("select", "select: more than " + limits.maxSelectFields() + " fields");
    }
    List<String> fields = new ArrayList<>(node.size());
    for (int i = 0; i < node.size(); i++) {
      fields.add(fieldPath(node.get(i), "select[" + i + "]"));
    }
    return fields;
  }

  /**
   * The predicate at {@code path}, at nesting {@code depth} (the {@code where} predicate is at 1).
   */
  Predicate predicate(JsonNode node, String path, int depth) throws QueryException {
    if (depth > limits.maxDepth()) {
      throw limit("depth", path + ": predicates nest deeper than " + limits.maxDepth());
    }
    if (++nodes > limits.maxNodes()) {
      throw limit("nodes", path + ": more than " + limits.maxNodes() + " predicates");
    }
    if (node == null || !node.isObject()) {
      throw invalid(path, path + ": a predicate is a JSON object");
    }
    JsonNode opNode = node.get("op");
    if (opNode == null) {
      throw invalid(path + ".op", path + ".op: missing");
    }
    if (!opNode.isTextual()) {
      throw invalid(path + ".op", path + ".op: an operator is a string");
    }
    String op = opNode.textValue();
    switch (op) {
      case "and", "or" -> {
        onlyKeys(node, path, "args");
        JsonNode args = required(node, path, "args");
        if (!args.isArray() || args.isEmpty()) {
          throw invalid(
              path + ".args", path + ".args: " + op + " takes a non-empty array of predicates");
        }
        List<Predicate> children = new ArrayList<>(args.size());
        for (int i = 0; i < args.size(); i++) {
          children.add(predicate(args.get(i), path + ".args[" + i + "]", depth + 1));
        }
        return op.equals("and") ? new Predicate.And(children) : new Predicate.Or(children);
      }
      case "not" -> {
        onlyKeys(node, path, "arg");
        return new Predicate.Not(predicate(required(node, path, "arg"), path + ".arg", depth + 1));
      }
      case "eq", "ne", "lt", "le", "gt", "ge" -> {
        onlyKeys(node, path, "field", "value");
        String field = fieldPath(required(node, path, "field"), path + ".field");
        Literal value = literal(required(node, path, "value"), path + ".value");
        return new Predicate.Compare(Predicate.CompareOp.fromWire(op), field, value);
      }
      case "in" -> {
        onlyKeys(node, path, "field", "values");
        String field = fieldPath(required(node, path, "field"), path + ".field");
        JsonNode values = required(node, path, "values");
        if (!values.isArray() || values.isEmpty()) {
          throw invalid(path + ".values", path + ".values: in takes a non-empty array of literals");
        }
        if (values.size() > limits.maxInValues()) {
          throw limit("in values", path + ".values: more than " + limits.maxInValues() + " values");
        }
        List<Literal> literals = new ArrayList<>(values.size());
        for (int i = 0; i < values.size(); i++) {
          literals.add(literal(values.get(i), path + ".values[" + i + "]"));
        }
        return new Predicate.In(field, literals);
      }
      case "exists" -> {
        onlyKeys(node, path, "field");
        return new Predicate.Exists(fieldPath(required(node, path, "field"), path + ".field"));
      }
      case "prefix" -> {
        onlyKeys(node, path, "field", "value");
        String field = fieldPath(required(node, path, "field"), path + ".field");
        JsonNode value = required(node, path, "value");
        if (!value.isTextual()) {
          throw invalid(path + ".value", path + ".value: prefix takes a string");
        }
        return new Predicate.Prefix(field, string(value.textValue(), path + ".value"));
      }
      default ->
          throw invalid(
              path + ".op",
              TOKEN.matcher(op).matches()
                  ? path + ".op: unknown operator '" + op + "'"
                  : path + ".op: unknown operator");
    }
  }

  private static void onlyKeys(JsonNode node, String path, String... allowed)
      throws QueryException {
    for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
      String key = it.next();
      if (key.equals("op")) {
        continue;
      }
      boolean known = false;
      for (String a : allowed) {
        known |= a.equals(key);
      }
      if (!known) {
        throw invalid(
            TOKEN.matcher(key).matches() ? path + "." + key : path, unknownKey(path, key));
      }
    }
  }

  private static String unknownKey(String path, String key) {
    return TOKEN.matcher(key).matches()
        ? path + ": unknown key '" + key + "'"
        : path + ": an unknown key";
  }

  private static JsonNode required(JsonNode node, String path, String key) throws QueryException {
    JsonNode value = node.get(key);
    if (value == null) {
      throw invalid(path + "." + key, path + "." + key + ": missing");
    }
    return value;
  }

  /** A field path: dot-separated identifiers, within the segment and length limits. */
  String fieldPath(JsonNode node, String path) throws QueryException {
    if (!node.isTextual()) {
      throw invalid(path, path + ": a field path is a string");
    }
    String field = node.textValue();
    if (field.length() > limits.maxPathLength()) {
      throw limit(
          "path length",
          path + ": a field path is longer than " + limits.maxPathLength() + " characters");
    }
    int segments = 1;
    for (int i = 0; i < field.length(); i++) {
      if (field.charAt(i) == '.') {
        segments++;
      }
    }
    if (segments > limits.maxPathSegments()) {
      throw limit(
          "path segments",
          path + ": a field path has more than " + limits.maxPathSegments() + " segments");
    }
    if (!FIELD_PATH.matcher(field).matches()) {
      throw invalid(
          path,
          path
              + ": a field path is dot-separated identifiers of A-Z a-z 0-9 _ (not starting with a digit)");
    }
    return field;
  }

  private Literal literal(JsonNode node, String path) throws QueryException {
    if (node.isNull()) {
      return Literal.NULL;
    }
    if (node.isBoolean()) {
      return Literal.of(node.booleanValue());
    }
    if (node.isNumber()) {
      if (!Eval.isFiniteNumber(node)) {
        throw invalid(path, path + ": a number literal is finite");
      }
      BigDecimal value = node.decimalValue();
      return Literal.of(value);
    }
    if (node.isTextual()) {
      return Literal.of(string(node.textValue(), path));
    }
    throw invalid(path, path + ": a literal is null, a boolean, a number or a string");
  }

  private String string(String value, String path) throws QueryException {
    if (value.length() > limits.maxStringLength()) {
      throw limit(
          "string length",
          path + ": a string literal is longer than " + limits.maxStringLength() + " characters");
    }
    return value;
  }

  private static QueryException invalid(String construct, String message) {
    return new QueryException(Reason.INVALID, construct, message);
  }

  private static QueryException limit(String construct, String message) {
    return new QueryException(Reason.LIMIT, construct, message);
  }
}
