package io.weir.protocol.query;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.protocol.query.QueryException.Reason;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;

/**
 * A validated, normalised Q1 query: one collection, unordered, scalar, read-only. Immutable and
 * safe to share between threads.
 *
 * <p>Wire form (a JSON object; {@code where} and {@code select} are optional):
 *
 * <pre>
 * {"collection": "orders",
 *  "where": {"op":"and","args":[{"op":"eq","field":"status","value":"open"},
 *                               {"op":"not","arg":{"op":"exists","field":"archived"}},
 *                               {"op":"in","field":"region","values":["eu","us"]},
 *                               {"op":"prefix","field":"customer.name","value":"Ac"},
 *                               {"op":"ge","field":"total","value":100}]},
 *  "select": ["status","total","customer.name"]}
 * </pre>
 *
 * Operators: {@code and}/{@code or} ({@code args}: a non-empty array), {@code not} ({@code arg}),
 * {@code eq ne lt le gt ge} ({@code field}, {@code value}), {@code in} ({@code field}, {@code
 * values}: a non-empty array), {@code exists} ({@code field}), {@code prefix} ({@code field},
 * {@code value}: a string). Literals are JSON null, booleans, numbers and strings. Field paths are
 * dot-separated identifiers {@code [A-Za-z_][A-Za-z0-9_]*}. Nothing else is accepted and no type is
 * coerced; ORDER BY, top-k, aggregates, joins, continuations and EXPLAIN are refused as {@link
 * Reason#UNSUPPORTED}.
 *
 * <p>The caller parses the JSON with a strict mapper that rejects duplicate keys (a {@link
 * JsonNode} can no longer show them) and, for exact decimal literals, reads floats as {@link
 * java.math.BigDecimal}.
 */
public final class Q1Query {
  private final String collection;
  private final Predicate where;
  private final List<String> select;
  private final Set<String> predicateFields;
  private final String canonicalJson;
  private final byte[] fingerprint;

  private Q1Query(String collection, Predicate where, List<String> select) {
    this.collection = collection;
    this.where = where;
    this.select = Canonical.distinct(select);
    TreeSet<String> fields = new TreeSet<>();
    collectFields(where, fields);
    this.predicateFields = Collections.unmodifiableSortedSet(fields);
    this.canonicalJson = Canonical.query(collection, where, this.select);
    this.fingerprint = sha256(canonicalJson);
  }

  /** {@link #parse(JsonNode, QueryLimits)} under {@link QueryLimits#DEFAULTS}. */
  public static Q1Query parse(JsonNode query) throws QueryException {
    return parse(query, QueryLimits.DEFAULTS);
  }

  /**
   * Validates {@code query} and normalises it.
   *
   * @throws QueryException when it is not a Q1 query ({@link Reason#INVALID}), uses a construct Q1
   *     lacks ({@link Reason#UNSUPPORTED}) or exceeds {@code limits} ({@link Reason#LIMIT})
   */
  public static Q1Query parse(JsonNode query, QueryLimits limits) throws QueryException {
    Objects.requireNonNull(limits, "limits");
    if (query == null || !query.isObject()) {
      throw new QueryException(Reason.INVALID, "query", "a query is a JSON object");
    }
    Parser parser = new Parser(limits);
    parser.checkTopLevelKeys(query);
    String collection = parser.collection(query.get("collection"));
    JsonNode whereNode = query.get("where");
    Predicate where =
        whereNode == null
            ? Predicate.ALL
            : Canonical.normalise(parser.predicate(whereNode, "where", 1));
    JsonNode selectNode = query.get("select");
    List<String> select = selectNode == null ? List.of() : parser.select(selectNode);
    return new Q1Query(collection, where, select);
  }

  private static void collectFields(Predicate p, Set<String> into) {
    if (p instanceof Predicate.And and) {
      and.args().forEach(a -> collectFields(a, into));
    } else if (p instanceof Predicate.Or or) {
      or.args().forEach(a -> collectFields(a, into));
    } else if (p instanceof Predicate.Not not) {
      collectFields(not.arg(), into);
    } else if (p instanceof Predicate.Compare c) {
      into.add(c.field());
    } else if (p instanceof Predicate.In in) {
      into.add(in.field());
    } else if (p instanceof Predicate.Exists e) {
      into.add(e.field());
    } else if (p instanceof Predicate.Prefix prefix) {
      into.add(prefix.field());
    }
  }

  private static byte[] sha256(String text) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every JVM", e);
    }
  }

  public String collection() {
    return collection;
  }

  /** The normalised predicate; {@link Predicate#ALL} when the query has no {@code where}. */
  public Predicate where() {
    return where;
  }

  /** The selected field paths in the given order without duplicates; empty for whole documents. */
  public List<String> select() {
    return select;
  }

  /** Every field path the predicate reads, sorted. */
  public Set<String> predicateFields() {
    return predicateFields;
  }

  /**
   * The normalised query as compact JSON in the wire form: keys in a fixed order, {@code
   * and}/{@code or} children and {@code in} values deduplicated and sorted by their canonical JSON,
   * numbers without trailing zeros; {@code where} and {@code select} left out when they select
   * everything. Parsing it again gives the same canonical JSON.
   */
  public String canonicalJson() {
    return canonicalJson;
  }

  /** SHA-256 of the UTF-8 bytes of {@link #canonicalJson()} (a copy). */
  public byte[] fingerprint() {
    return fingerprint.clone();
  }

  /** {@link #fingerprint()} as 64 lower-case hex digits. */
  public String fingerprintHex() {
    return HexFormat.of().formatHex(fingerprint);
  }

  /** Whether {@code document} (a JSON object) satisfies the predicate. */
  public boolean matches(JsonNode document) {
    return where.matches(Objects.requireNonNull(document, "document"));
  }

  /**
   * A new object with the selected parts of {@code document}: without {@code select} all top-level
   * fields, otherwise each selected path that exists in it (a nested path within the objects on its
   * way, holding only that path), in both cases without the top-level fields {@code omitted} leaves
   * out. Values are copied; {@code document} is not changed.
   */
  public ObjectNode project(ObjectNode document, FieldFilter omitted) {
    Objects.requireNonNull(document, "document");
    Objects.requireNonNull(omitted, "omitted");
    ObjectNode out = document.objectNode();
    if (select.isEmpty()) {
      for (Map.Entry<String, JsonNode> field : document.properties()) {
        if (!omitted.omits(field.getKey())) {
          out.set(field.getKey(), field.getValue().deepCopy());
        }
      }
      return out;
    }
    for (String path : select) {
      String[] segments = path.split("\\.");
      if (omitted.omits(segments[0])) {
        continue;
      }
      JsonNode value = Eval.lookup(document, path);
      if (value == null) {
        continue;
      }
      ObjectNode target = out;
      for (int i = 0; i < segments.length - 1; i++) {
        JsonNode child = target.get(segments[i]);
        if (child instanceof ObjectNode object) {
          target = object;
        } else {
          target = target.putObject(segments[i]);
        }
      }
      target.set(segments[segments.length - 1], value.deepCopy());
    }
    return out;
  }

  /**
   * Which top-level fields a projection leaves out (e.g. sensitive fields a reader may not see).
   */
  @FunctionalInterface
  public interface FieldFilter {
    boolean omits(String topLevelField);
  }

  /** The same as {@link #project(ObjectNode, FieldFilter)} omitting nothing. */
  public ObjectNode project(ObjectNode document) {
    return project(document, field -> false);
  }

  /** Equal when the canonical JSON is. */
  @Override
  public boolean equals(Object o) {
    return o instanceof Q1Query other && canonicalJson.equals(other.canonicalJson);
  }

  @Override
  public int hashCode() {
    return canonicalJson.hashCode();
  }

  /** The collection and fingerprint only: no literals. */
  @Override
  public String toString() {
    return "Q1Query[collection="
        + collection
        + ", fingerprint="
        + fingerprintHex().substring(0, 16)
        + "]";
  }
}
