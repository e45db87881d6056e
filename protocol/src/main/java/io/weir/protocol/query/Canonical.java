package io.weir.protocol.query;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.TreeMap;

/**
 * The canonical form of Q1 queries: normalisation of predicates and their compact JSON, written
 * here rather than by Jackson so that the bytes (and so the fingerprints) do not depend on a
 * serializer's version or settings.
 */
final class Canonical {
  private static final char[] HEX = "0123456789abcdef".toCharArray();

  /** Integers with up to this many trailing zeros are written out in full, larger ones as 1E+n. */
  private static final int MAX_PLAIN_ZEROS = 20;

  private Canonical() {}

  /**
   * Normalises bottom-up: nested and-in-and / or-in-or are flattened, duplicate children removed
   * and the rest sorted by canonical JSON, a single child replaces its and/or; {@code not(not x)}
   * is {@code x}, {@code not(eq)} is {@code ne} and {@code not(ne)} is {@code eq}; {@code in}
   * values are deduplicated and sorted, and an {@code in} with one value is an {@code eq}.
   */
  static Predicate normalise(Predicate p) {
    if (p instanceof Predicate.And and) {
      return junction(true, and.args());
    }
    if (p instanceof Predicate.Or or) {
      return junction(false, or.args());
    }
    if (p instanceof Predicate.Not not) {
      Predicate arg = normalise(not.arg());
      if (arg instanceof Predicate.Not inner) {
        return inner.arg();
      }
      if (arg instanceof Predicate.Compare c && c.op() == Predicate.CompareOp.EQ) {
        return new Predicate.Compare(Predicate.CompareOp.NE, c.field(), c.value());
      }
      if (arg instanceof Predicate.Compare c && c.op() == Predicate.CompareOp.NE) {
        return new Predicate.Compare(Predicate.CompareOp.EQ, c.field(), c.value());
      }
      return new Predicate.Not(arg);
    }
    if (p instanceof Predicate.In in) {
      TreeMap<String, Literal> values = new TreeMap<>();
      for (Literal l : in.values()) {
        values.putIfAbsent(l.canonicalJson(), l);
      }
      if (values.size() == 1) {
        return new Predicate.Compare(
            Predicate.CompareOp.EQ, in.field(), values.firstEntry().getValue());
      }
      return new Predicate.In(in.field(), new ArrayList<>(values.values()));
    }
    return p;
  }

  private static Predicate junction(boolean isAnd, List<Predicate> args) {
    TreeMap<String, Predicate> children = new TreeMap<>();
    for (Predicate arg : args) {
      Predicate n = normalise(arg);
      List<Predicate> flat =
          isAnd && n instanceof Predicate.And a
              ? a.args()
              : !isAnd && n instanceof Predicate.Or o ? o.args() : List.of(n);
      for (Predicate child : flat) {
        children.putIfAbsent(predicate(child), child);
      }
    }
    if (children.size() == 1) {
      return children.firstEntry().getValue();
    }
    List<Predicate> sorted = new ArrayList<>(children.values());
    return isAnd ? new Predicate.And(sorted) : new Predicate.Or(sorted);
  }

  /** The whole query; {@code where} and {@code select} are left out when they select everything. */
  static String query(String collection, Predicate where, List<String> select) {
    StringBuilder out = new StringBuilder(128);
    out.append("{\"collection\":");
    string(collection, out);
    if (!(where instanceof Predicate.All)) {
      out.append(",\"where\":");
      predicate(where, out);
    }
    if (!select.isEmpty()) {
      out.append(",\"select\":[");
      for (int i = 0; i < select.size(); i++) {
        if (i > 0) {
          out.append(',');
        }
        string(select.get(i), out);
      }
      out.append(']');
    }
    return out.append('}').toString();
  }

  static String predicate(Predicate p) {
    StringBuilder out = new StringBuilder(64);
    predicate(p, out);
    return out.toString();
  }

  private static void predicate(Predicate p, StringBuilder out) {
    if (p instanceof Predicate.And and) {
      junction("and", and.args(), out);
    } else if (p instanceof Predicate.Or or) {
      junction("or", or.args(), out);
    } else if (p instanceof Predicate.Not not) {
      out.append("{\"op\":\"not\",\"arg\":");
      predicate(not.arg(), out);
      out.append('}');
    } else if (p instanceof Predicate.Compare c) {
      opAndField(c.op().wireName(), c.field(), out);
      out.append(",\"value\":").append(c.value().canonicalJson()).append('}');
    } else if (p instanceof Predicate.In in) {
      opAndField("in", in.field(), out);
      out.append(",\"values\":[");
      for (int i = 0; i < in.values().size(); i++) {
        if (i > 0) {
          out.append(',');
        }
        out.append(in.values().get(i).canonicalJson());
      }
      out.append("]}");
    } else if (p instanceof Predicate.Exists e) {
      opAndField("exists", e.field(), out);
      out.append('}');
    } else if (p instanceof Predicate.Prefix prefix) {
      opAndField("prefix", prefix.field(), out);
      out.append(",\"value\":");
      string(prefix.value(), out);
      out.append('}');
    } else {
      throw new IllegalArgumentException("a match-all predicate has no wire form");
    }
  }

  private static void junction(String op, List<Predicate> args, StringBuilder out) {
    out.append("{\"op\":\"").append(op).append("\",\"args\":[");
    for (int i = 0; i < args.size(); i++) {
      if (i > 0) {
        out.append(',');
      }
      predicate(args.get(i), out);
    }
    out.append("]}");
  }

  private static void opAndField(String op, String field, StringBuilder out) {
    out.append("{\"op\":\"").append(op).append("\",\"field\":");
    string(field, out);
  }

  static String literal(Literal.Type type, Object value) {
    return switch (type) {
      case NULL -> "null";
      case BOOLEAN -> value.toString();
      case NUMBER -> number((BigDecimal) value);
      case STRING -> {
        StringBuilder out = new StringBuilder(((String) value).length() + 2);
        string((String) value, out);
        yield out.toString();
      }
    };
  }

  /**
   * A number without trailing zeros: integers in full up to {@value #MAX_PLAIN_ZEROS} trailing
   * zeros, everything else as {@link BigDecimal#toString()} (plain, or scientific for large
   * exponents, which keeps the text short whatever the exponent).
   */
  private static String number(BigDecimal n) {
    BigDecimal stripped = n.stripTrailingZeros();
    if (stripped.signum() == 0) {
      return "0";
    }
    if (stripped.scale() <= 0 && -stripped.scale() <= MAX_PLAIN_ZEROS) {
      return stripped.toPlainString();
    }
    return stripped.toString();
  }

  /**
   * A JSON string: {@code "} and {@code \} escaped, control characters as short escapes or {@code
   * \}{@code u00xx}, surrogates that are not part of a pair as {@code \}{@code uxxxx} (so that no
   * two strings share bytes), everything else as it is.
   */
  static void string(String s, StringBuilder out) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            unicodeEscape(c, out);
          } else if (Character.isHighSurrogate(c)
              && i + 1 < s.length()
              && Character.isLowSurrogate(s.charAt(i + 1))) {
            out.append(c).append(s.charAt(++i));
          } else if (Character.isSurrogate(c)) {
            unicodeEscape(c, out);
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }

  private static void unicodeEscape(char c, StringBuilder out) {
    out.append("\\u")
        .append(HEX[c >> 12 & 0xF])
        .append(HEX[c >> 8 & 0xF])
        .append(HEX[c >> 4 & 0xF])
        .append(HEX[c & 0xF]);
  }

  /** {@code values} without duplicates, each where it first occurs. */
  static List<String> distinct(List<String> values) {
    return List.copyOf(new LinkedHashSet<>(values));
  }
}
