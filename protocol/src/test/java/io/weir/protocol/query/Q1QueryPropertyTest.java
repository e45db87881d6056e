package io.weir.protocol.query;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * Random predicates against random documents, checked against a naive evaluator of the query as
 * written, so normalisation provably keeps each query's meaning; plus order-insensitive
 * fingerprints, idempotent canonical JSON, and mutated queries whose errors must not quote the
 * canary values planted in them.
 *
 * <p>Repeatable by default; more with {@code -Dweir.test.argLine="-Dweir.query.iterations=200000
 * -Dweir.query.seed=42"}. A failure names the seed, the iteration and the query.
 */
class Q1QueryPropertyTest {
  private static final int ITERATIONS = Integer.getInteger("weir.query.iterations", 3000);
  private static final long SEED = Long.getLong("weir.query.seed", 0x51_0E_57L);
  private static final int DOCUMENTS = 24;
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  private static final String[] FIELDS = {"a", "b", "c", "c.d", "c.e", "x.y.z"};
  private static final String[] OPS = {
    "eq", "ne", "lt", "le", "gt", "ge", "in", "exists", "prefix"
  };
  private static final String[] PREFIXES = {"", "x", "xy", "y", "1", "\ud83d", "\ud83d\ude00"};
  private static final List<JsonNode> LITERALS =
      List.of(
          NODES.nullNode(),
          NODES.booleanNode(true),
          NODES.booleanNode(false),
          NODES.numberNode(0),
          NODES.numberNode(1),
          NODES.numberNode(new BigDecimal("1.0")),
          NODES.numberNode(new BigDecimal("-2.5")),
          NODES.numberNode(100L),
          NODES.numberNode(1.5d),
          NODES.textNode(""),
          NODES.textNode("x"),
          NODES.textNode("xy"),
          NODES.textNode("y"),
          NODES.textNode("1"),
          NODES.textNode("\uffff"),
          NODES.textNode("\ud83d\ude00"));

  // ---- generators ----

  private static JsonNode predicate(Random r, int depth) {
    if (depth >= 5 || r.nextInt(10) < 4) {
      return leaf(r);
    }
    switch (r.nextInt(3)) {
      case 0, 1 -> {
        ObjectNode p = NODES.objectNode().put("op", r.nextBoolean() ? "and" : "or");
        ArrayNode args = p.putArray("args");
        int n = 1 + r.nextInt(4);
        for (int i = 0; i < n; i++) {
          args.add(
              i > 0 && r.nextInt(5) == 0
                  ? args.get(r.nextInt(i)).deepCopy()
                  : predicate(r, depth + 1));
        }
        return p;
      }
      default -> {
        ObjectNode p = NODES.objectNode().put("op", "not");
        p.set("arg", predicate(r, depth + 1));
        return p;
      }
    }
  }

  private static JsonNode leaf(Random r) {
    String op = OPS[r.nextInt(OPS.length)];
    ObjectNode p = NODES.objectNode().put("op", op).put("field", FIELDS[r.nextInt(FIELDS.length)]);
    switch (op) {
      case "exists" -> {}
      case "prefix" -> p.put("value", PREFIXES[r.nextInt(PREFIXES.length)]);
      case "in" -> {
        ArrayNode values = p.putArray("values");
        int n = 1 + r.nextInt(4);
        for (int i = 0; i < n; i++) {
          values.add(LITERALS.get(r.nextInt(LITERALS.size())));
        }
      }
      default -> p.set("value", LITERALS.get(r.nextInt(LITERALS.size())));
    }
    return p;
  }

  private static JsonNode document(Random r) {
    ObjectNode d = NODES.objectNode();
    for (String f : new String[] {"a", "b"}) {
      if (r.nextInt(4) > 0) {
        d.set(f, value(r));
      }
    }
    switch (r.nextInt(3)) {
      case 0 -> {}
      case 1 -> d.set("c", value(r));
      default -> {
        ObjectNode c = d.putObject("c");
        if (r.nextBoolean()) {
          c.set("d", value(r));
        }
        if (r.nextBoolean()) {
          c.set("e", value(r));
        }
      }
    }
    switch (r.nextInt(3)) {
      case 0 -> {}
      case 1 -> d.putObject("x").set("y", value(r));
      default -> d.putObject("x").putObject("y").set("z", value(r));
    }
    return d;
  }

  private static JsonNode value(Random r) {
    return switch (r.nextInt(10)) {
      case 0 -> NODES.arrayNode().add(1).add("x");
      case 1 -> NODES.objectNode().put("d", 1);
      case 2 -> NODES.numberNode(1.0d);
      case 3 -> NODES.numberNode(new BigDecimal("100.000"));
      default -> LITERALS.get(r.nextInt(LITERALS.size()));
    };
  }

  /** The same predicate written differently: children and values reordered, duplicated, wrapped. */
  private static JsonNode rewrite(JsonNode p, Random r) {
    ObjectNode copy = p.deepCopy();
    String op = copy.get("op").textValue();
    if (op.equals("and") || op.equals("or")) {
      List<JsonNode> args = new ArrayList<>();
      copy.get("args").forEach(a -> args.add(rewrite(a, r)));
      if (r.nextInt(4) == 0) {
        args.add(args.get(r.nextInt(args.size())).deepCopy());
      }
      if (args.size() > 1 && r.nextInt(4) == 0) {
        // split into a nested junction of the same kind
        ObjectNode inner = NODES.objectNode().put("op", op);
        ArrayNode innerArgs = inner.putArray("args");
        innerArgs.add(args.remove(args.size() - 1));
        innerArgs.add(args.remove(args.size() - 1));
        args.add(inner);
      }
      Collections.shuffle(args, r);
      copy.putArray("args").addAll(args);
    } else if (op.equals("not")) {
      copy.set("arg", rewrite(copy.get("arg"), r));
    } else if (op.equals("in")) {
      List<JsonNode> values = new ArrayList<>();
      copy.get("values").forEach(values::add);
      if (r.nextBoolean()) {
        values.add(values.get(r.nextInt(values.size())));
      }
      Collections.shuffle(values, r);
      copy.putArray("values").addAll(values);
    }
    JsonNode result = copy;
    switch (r.nextInt(8)) {
      case 0 -> {
        ObjectNode wrap = NODES.objectNode().put("op", r.nextBoolean() ? "and" : "or");
        wrap.putArray("args").add(result);
        result = wrap;
      }
      case 1 -> {
        ObjectNode inner = NODES.objectNode().put("op", "not");
        inner.set("arg", result);
        ObjectNode outer = NODES.objectNode().put("op", "not");
        outer.set("arg", inner);
        result = outer;
      }
      default -> {}
    }
    return result;
  }

  // ---- the naive evaluator of the query as written ----

  static boolean naive(JsonNode p, JsonNode doc) {
    String op = p.get("op").textValue();
    switch (op) {
      case "and" -> {
        for (JsonNode a : p.get("args")) {
          if (!naive(a, doc)) {
            return false;
          }
        }
        return true;
      }
      case "or" -> {
        for (JsonNode a : p.get("args")) {
          if (naive(a, doc)) {
            return true;
          }
        }
        return false;
      }
      case "not" -> {
        return !naive(p.get("arg"), doc);
      }
      default -> {}
    }
    JsonNode v = get(doc, p.get("field").textValue());
    switch (op) {
      case "exists":
        return v != null;
      case "prefix":
        return v != null && v.isTextual() && v.textValue().startsWith(p.get("value").textValue());
      case "in":
        for (JsonNode l : p.get("values")) {
          if (v != null && same(v, l)) {
            return true;
          }
        }
        return false;
      case "eq":
        return v != null && same(v, p.get("value"));
      case "ne":
        return v == null || !same(v, p.get("value"));
      default:
        Integer c = v == null ? null : order(v, p.get("value"));
        if (c == null) {
          return false;
        }
        return switch (op) {
          case "lt" -> c < 0;
          case "le" -> c <= 0;
          case "gt" -> c > 0;
          case "ge" -> c >= 0;
          default -> throw new AssertionError(op);
        };
    }
  }

  private static JsonNode get(JsonNode doc, String path) {
    JsonNode node = doc;
    for (String segment : path.split("\\.")) {
      if (!node.isObject()) {
        return null;
      }
      node = node.get(segment);
      if (node == null) {
        return null;
      }
    }
    return node;
  }

  private static boolean same(JsonNode v, JsonNode l) {
    if (v.isNumber() && l.isNumber()) {
      return v.decimalValue().compareTo(l.decimalValue()) == 0;
    }
    if (v.isTextual() && l.isTextual() || v.isBoolean() && l.isBoolean()) {
      return v.equals(l);
    }
    return v.isNull() && l.isNull();
  }

  private static Integer order(JsonNode v, JsonNode l) {
    if (v.isNumber() && l.isNumber()) {
      return v.decimalValue().compareTo(l.decimalValue());
    }
    if (v.isTextual() && l.isTextual()) {
      return Arrays.compare(
          v.textValue().codePoints().toArray(), l.textValue().codePoints().toArray());
    }
    return null;
  }

  private static void fields(JsonNode p, Set<String> into) {
    if (p.has("field")) {
      into.add(p.get("field").textValue());
    }
    if (p.has("arg")) {
      fields(p.get("arg"), into);
    }
    if (p.has("args")) {
      p.get("args").forEach(a -> fields(a, into));
    }
  }

  private static ObjectNode query(JsonNode where) {
    ObjectNode q = NODES.objectNode().put("collection", "c");
    q.set("where", where);
    return q;
  }

  // ---- properties ----

  @Test
  void normalisationKeepsMeaningFingerprintsIgnoreOrderAndCanonicalJsonIsAFixedPoint() {
    Random seeds = new Random(SEED);
    int changed = 0;
    for (int i = 0; i < ITERATIONS; i++) {
      long seed = seeds.nextLong();
      Random r = new Random(seed);
      JsonNode where = predicate(r, 1);
      try {
        Q1Query q = Q1Query.parse(query(where));
        Q1Query again = Q1Query.parse(Json.parseExact(q.canonicalJson()));
        assertThat(again.canonicalJson()).isEqualTo(q.canonicalJson());
        Set<String> expectedFields = new TreeSet<>();
        fields(where, expectedFields);
        assertThat(q.predicateFields()).containsExactlyElementsOf(expectedFields);

        JsonNode rewritten = rewrite(where, r);
        Q1Query other = Q1Query.parse(query(rewritten));
        assertThat(other.fingerprintHex()).isEqualTo(q.fingerprintHex());

        for (int d = 0; d < DOCUMENTS; d++) {
          JsonNode doc = document(r);
          boolean expected = naive(where, doc);
          assertThat(q.matches(doc)).as("document %s", doc).isEqualTo(expected);
          assertThat(again.matches(doc)).isEqualTo(expected);
          assertThat(naive(rewritten, doc)).isEqualTo(expected);
          assertThat(other.matches(doc)).isEqualTo(expected);
        }
        if (!q.where()
            .equals(
                Canonical.normalise(
                    new Parser(QueryLimits.DEFAULTS).predicate(where, "where", 1)))) {
          throw new AssertionError("where() is not the normalised predicate");
        }
        if (!Q1Query.parse(query(where)).canonicalJson().equals(q.canonicalJson())) {
          throw new AssertionError("parsing is not deterministic");
        }
        if (!Canonical.predicate(new Parser(QueryLimits.DEFAULTS).predicate(where, "where", 1))
            .equals(Canonical.predicate(q.where()))) {
          changed++;
        }
      } catch (QueryException | AssertionError e) {
        fail("seed " + seed + " iteration " + i + " query " + where, e);
      }
    }
    System.out.printf(
        "q1 properties: queries=%d rewritten-by-normalisation=%d documents-per-query=%d seed=%d%n",
        ITERATIONS, changed, DOCUMENTS, SEED);
    // most generated queries are ones that normalisation rewrites
    assertThat(changed).isGreaterThan(ITERATIONS / 4);
  }

  private static final String CANARY = "CANARY-7f3a9c";
  private static final long CANARY_NUMBER = 7_357_913L;

  @Test
  void errorsFromMutatedQueriesNeverQuoteWhatWasPlantedInThem() {
    Random seeds = new Random(SEED + 1);
    int refused = 0;
    for (int i = 0; i < ITERATIONS * 3; i++) {
      long seed = seeds.nextLong();
      Random r = new Random(seed);
      ObjectNode q = query(predicate(r, 1));
      if (r.nextBoolean()) {
        q.putArray("select").add("a").add("c.d");
      }
      int mutations = 1 + r.nextInt(3);
      for (int m = 0; m < mutations; m++) {
        mutate(randomObject(q, r), r);
      }
      try {
        Q1Query.parse(q);
      } catch (QueryException e) {
        refused++;
        if (e.getMessage().contains("CANARY")
            || e.getMessage().contains("7357913")
            || e.construct().contains("CANARY")
            || e.construct().contains("7357913")) {
          fail(
              "seed "
                  + seed
                  + " iteration "
                  + i
                  + " leaked into: "
                  + e.getMessage()
                  + " / "
                  + e.construct());
        }
      }
    }
    System.out.printf(
        "q1 mutations: queries=%d refused=%d leaks=0 seed=%d%n", ITERATIONS * 3, refused, SEED + 1);
    assertThat(refused).isGreaterThan(ITERATIONS);
  }

  private static ObjectNode randomObject(ObjectNode root, Random r) {
    List<ObjectNode> objects = new ArrayList<>();
    collectObjects(root, objects);
    return objects.get(r.nextInt(objects.size()));
  }

  private static void collectObjects(JsonNode node, List<ObjectNode> into) {
    if (node instanceof ObjectNode o) {
      into.add(o);
    }
    node.forEach(child -> collectObjects(child, into));
  }

  private static void mutate(ObjectNode node, Random r) {
    List<String> keys = new ArrayList<>();
    for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
      keys.add(it.next());
    }
    String[] extraKeys = {
      CANARY, "orderBy", "limit", "value", "values", "arg", "args", "field", "op", "where"
    };
    if (keys.isEmpty()) {
      node.set(extraKeys[r.nextInt(extraKeys.length)], junk(r));
      return;
    }
    switch (r.nextInt(6)) {
      case 0 -> node.set(keys.get(r.nextInt(keys.size())), junk(r));
      case 1 -> node.set(extraKeys[r.nextInt(extraKeys.length)], junk(r));
      case 2 -> node.put("op", r.nextBoolean() ? CANARY : "eq");
      case 3 -> node.put("field", r.nextBoolean() ? CANARY : "a." + CANARY);
      case 4 -> node.remove(keys.get(r.nextInt(keys.size())));
      default -> node.put(keys.get(r.nextInt(keys.size())), CANARY.repeat(1 + r.nextInt(400)));
    }
  }

  private static JsonNode junk(Random r) {
    return switch (r.nextInt(7)) {
      case 0 -> NODES.textNode(CANARY);
      case 1 -> NODES.numberNode(CANARY_NUMBER);
      case 2 -> NODES.arrayNode().add(CANARY).add(CANARY_NUMBER);
      case 3 -> NODES.objectNode().put(CANARY, CANARY);
      case 4 ->
          NODES.objectNode().put("op", CANARY).put("field", CANARY).put("value", CANARY_NUMBER);
      case 5 -> NODES.arrayNode();
      default -> NODES.nullNode();
    };
  }
}
