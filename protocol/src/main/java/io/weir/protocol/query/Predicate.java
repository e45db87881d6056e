package io.weir.protocol.query;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.Objects;

/**
 * A Q1 predicate over one JSON document. Field paths are dot-separated identifiers that {@link
 * Q1Query#parse} validated; they are structural and may be printed. Literals are not: the {@code
 * toString()} of every predicate names operators and fields only.
 */
public sealed interface Predicate
    permits Predicate.All,
        Predicate.And,
        Predicate.Or,
        Predicate.Not,
        Predicate.Compare,
        Predicate.In,
        Predicate.Exists,
        Predicate.Prefix {

  /** Matches every document: a query without {@code where}. */
  All ALL = new All();

  /** Whether {@code document} satisfies this predicate. */
  boolean matches(JsonNode document);

  /** Matches every document. */
  record All() implements Predicate {
    @Override
    public boolean matches(JsonNode document) {
      return true;
    }
  }

  /** All of {@code args} hold. */
  record And(List<Predicate> args) implements Predicate {
    public And {
      args = List.copyOf(args);
      if (args.isEmpty()) {
        throw new IllegalArgumentException("and has at least one argument");
      }
    }

    @Override
    public boolean matches(JsonNode document) {
      for (Predicate p : args) {
        if (!p.matches(document)) {
          return false;
        }
      }
      return true;
    }
  }

  /** At least one of {@code args} holds. */
  record Or(List<Predicate> args) implements Predicate {
    public Or {
      args = List.copyOf(args);
      if (args.isEmpty()) {
        throw new IllegalArgumentException("or has at least one argument");
      }
    }

    @Override
    public boolean matches(JsonNode document) {
      for (Predicate p : args) {
        if (p.matches(document)) {
          return true;
        }
      }
      return false;
    }
  }

  /** {@code arg} does not hold. */
  record Not(Predicate arg) implements Predicate {
    public Not {
      Objects.requireNonNull(arg, "arg");
    }

    @Override
    public boolean matches(JsonNode document) {
      return !arg.matches(document);
    }
  }

  /** The comparison operators; {@link #wireName()} is the {@code op} in the wire form. */
  enum CompareOp {
    EQ("eq", "Eq"),
    NE("ne", "Ne"),
    LT("lt", "Lt"),
    LE("le", "Le"),
    GT("gt", "Gt"),
    GE("ge", "Ge");

    private final String wireName;
    private final String displayName;

    CompareOp(String wireName, String displayName) {
      this.wireName = wireName;
      this.displayName = displayName;
    }

    public String wireName() {
      return wireName;
    }

    /** The operator named {@code op} in the wire form, or {@code null}. */
    static CompareOp fromWire(String op) {
      for (CompareOp c : values()) {
        if (c.wireName.equals(op)) {
          return c;
        }
      }
      return null;
    }
  }

  /**
   * {@code field op value}. {@code eq}: the field is present and equal (numbers numerically, never
   * across types); {@code ne}: not {@code eq} (so a missing field is {@code ne} anything); {@code
   * lt le gt ge}: number against number or string against string by code point, false otherwise.
   */
  record Compare(CompareOp op, String field, Literal value) implements Predicate {
    public Compare {
      Objects.requireNonNull(op, "op");
      Objects.requireNonNull(field, "field");
      Objects.requireNonNull(value, "value");
    }

    @Override
    public boolean matches(JsonNode document) {
      JsonNode v = Eval.lookup(document, field);
      if (op == CompareOp.NE) {
        return v == null || !value.equalTo(v);
      }
      if (v == null) {
        return false;
      }
      if (op == CompareOp.EQ) {
        return value.equalTo(v);
      }
      int c = value.compareFrom(v);
      if (c == Eval.INCOMPARABLE) {
        return false;
      }
      return switch (op) {
        case LT -> c < 0;
        case LE -> c <= 0;
        case GT -> c > 0;
        case GE -> c >= 0;
        default -> throw new AssertionError(op);
      };
    }

    /** No literal. */
    @Override
    public String toString() {
      return op.displayName + "[field=" + field + "]";
    }
  }

  /** The field is present and {@code eq} one of {@code values}. */
  record In(String field, List<Literal> values) implements Predicate {
    public In {
      Objects.requireNonNull(field, "field");
      values = List.copyOf(values);
      if (values.isEmpty()) {
        throw new IllegalArgumentException("in has at least one value");
      }
    }

    @Override
    public boolean matches(JsonNode document) {
      JsonNode v = Eval.lookup(document, field);
      if (v == null) {
        return false;
      }
      for (Literal l : values) {
        if (l.equalTo(v)) {
          return true;
        }
      }
      return false;
    }

    /** No literals. */
    @Override
    public String toString() {
      return "In[field=" + field + ", values=" + values.size() + "]";
    }
  }

  /** The field is present (a JSON null value counts). */
  record Exists(String field) implements Predicate {
    public Exists {
      Objects.requireNonNull(field, "field");
    }

    @Override
    public boolean matches(JsonNode document) {
      return Eval.lookup(document, field) != null;
    }
  }

  /** The field is a string that starts with {@code value}. */
  record Prefix(String field, String value) implements Predicate {
    public Prefix {
      Objects.requireNonNull(field, "field");
      Objects.requireNonNull(value, "value");
    }

    @Override
    public boolean matches(JsonNode document) {
      JsonNode v = Eval.lookup(document, field);
      return v != null && v.isTextual() && v.textValue().startsWith(value);
    }

    /** No literal. */
    @Override
    public String toString() {
      return "Prefix[field=" + field + "]";
    }
  }
}
