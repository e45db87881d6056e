package io.weir.node.continuous;

import com.fasterxml.jackson.databind.JsonNode;
import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeFormatterBuilder;
import java.time.format.DateTimeParseException;
import java.time.temporal.ChronoField;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The result's total order (ORDER BY columns, then the key columns ascending) computed in Java, as
 * PostgreSQL computes it, for the scoped delta's rank rules. Only for column types whose order Java
 * can reproduce exactly: integers, numeric, floating point (NaN after every number, -0 equal to 0),
 * boolean, uuid, date, timestamp and timestamptz (as read through pgjdbc, ISO). Text is not among
 * them: its order depends on the column's collation. Nulls sort as PostgreSQL's default: last
 * ascending, first descending.
 *
 * <p>A value that does not have the expected shape (a BC date, say) throws {@link Incomparable}:
 * the caller falls back to a full read rather than guess.
 */
final class ResultOrder implements Comparator<ResultRow> {
  /** A value Java cannot order exactly as PostgreSQL would. */
  static final class Incomparable extends RuntimeException {
    Incomparable() {
      super("a value cannot be ordered outside PostgreSQL", null, false, false);
    }
  }

  /** OPAQUE: a key column of another type (text, say), compared only when the order columns tie. */
  private enum Kind {
    INTEGER,
    DECIMAL,
    FLOAT,
    BOOL,
    UUID,
    DATE,
    TIMESTAMP,
    TIMESTAMPTZ,
    OPAQUE
  }

  private static final Map<String, Kind> KINDS =
      Map.ofEntries(
          Map.entry("int2", Kind.INTEGER),
          Map.entry("int4", Kind.INTEGER),
          Map.entry("int8", Kind.INTEGER),
          Map.entry("serial", Kind.INTEGER),
          Map.entry("bigserial", Kind.INTEGER),
          Map.entry("oid", Kind.INTEGER),
          Map.entry("numeric", Kind.DECIMAL),
          Map.entry("float4", Kind.FLOAT),
          Map.entry("float8", Kind.FLOAT),
          Map.entry("bool", Kind.BOOL),
          Map.entry("uuid", Kind.UUID),
          Map.entry("date", Kind.DATE),
          Map.entry("timestamp", Kind.TIMESTAMP),
          Map.entry("timestamptz", Kind.TIMESTAMPTZ));

  private static final DateTimeFormatter LOCAL =
      new DateTimeFormatterBuilder()
          .appendPattern("uuuu-MM-dd HH:mm:ss")
          .optionalStart()
          .appendFraction(ChronoField.NANO_OF_SECOND, 1, 9, true)
          .optionalEnd()
          .toFormatter(Locale.ROOT);
  private static final DateTimeFormatter OFFSET =
      new DateTimeFormatterBuilder()
          .appendPattern("uuuu-MM-dd HH:mm:ss")
          .optionalStart()
          .appendFraction(ChronoField.NANO_OF_SECOND, 1, 9, true)
          .optionalEnd()
          .appendOffset("+HH:mm:ss", "+00")
          .toFormatter(Locale.ROOT);

  private final List<String> columns = new ArrayList<>();
  private final List<Kind> kinds = new ArrayList<>();
  private final List<Boolean> descending = new ArrayList<>();
  private int orderColumns; // the first ones: ORDER BY's; then the key columns breaking ties

  private ResultOrder() {}

  /**
   * The order of {@code d}'s result, or null when an ORDER BY column's type is not one Java orders
   * exactly. A key column of such a type (appended to break ties) is accepted: comparing two of its
   * values throws {@link Incomparable}, which happens only when two rows tie on every ORDER BY
   * column.
   */
  static ResultOrder of(Definition d) {
    if (d.columnTypes() == null) {
      return null;
    }
    ResultOrder order = new ResultOrder();
    Set<String> named = new HashSet<>();
    for (Definition.OrderColumn o : d.orderBy()) {
      if (!order.add(d, o.column(), o.descending())) {
        return null;
      }
      named.add(o.column());
    }
    order.orderColumns = order.columns.size();
    for (String k : d.keyColumns()) {
      if (!named.contains(k) && !order.add(d, k, false)) {
        order.columns.add(k);
        order.kinds.add(Kind.OPAQUE);
        order.descending.add(false);
      }
    }
    return order;
  }

  private boolean add(Definition d, String column, boolean desc) {
    int i = d.columns().indexOf(column);
    Kind kind = i < 0 ? null : KINDS.get(d.columnTypes().get(i));
    if (kind == null) {
      return false;
    }
    columns.add(column);
    kinds.add(kind);
    descending.add(desc);
    return true;
  }

  /**
   * Compares two rows as {@code ORDER BY} does; throws {@link Incomparable} on a value of an
   * unexpected shape.
   */
  @Override
  public int compare(ResultRow a, ResultRow b) {
    return compare(a, b, columns.size());
  }

  /** Compares two rows by the ORDER BY columns alone (0: they tie there). */
  int compareOrder(ResultRow a, ResultRow b) {
    return compare(a, b, orderColumns);
  }

  private int compare(ResultRow a, ResultRow b, int width) {
    for (int i = 0; i < width; i++) {
      JsonNode x = a.row().get(columns.get(i));
      JsonNode y = b.row().get(columns.get(i));
      boolean xNull = x == null || x.isNull();
      boolean yNull = y == null || y.isNull();
      int c;
      if (xNull || yNull) {
        // NULLS LAST ascending, NULLS FIRST descending: null is the largest value either way.
        c = xNull && yNull ? 0 : xNull ? 1 : -1;
      } else {
        c = compare(kinds.get(i), x, y);
      }
      if (c != 0) {
        return descending.get(i) ? -c : c;
      }
    }
    return 0;
  }

  private static int compare(Kind kind, JsonNode x, JsonNode y) {
    return switch (kind) {
      case INTEGER -> {
        if (!x.canConvertToLong()
            || !y.canConvertToLong()
            || !x.isIntegralNumber()
            || !y.isIntegralNumber()) {
          throw new Incomparable();
        }
        yield Long.compare(x.longValue(), y.longValue());
      }
      case DECIMAL -> compareNumeric(decimal(x), decimal(y));
      case FLOAT -> compareNumeric(floating(x), floating(y));
      case BOOL -> {
        if (!x.isBoolean() || !y.isBoolean()) {
          throw new Incomparable();
        }
        yield Boolean.compare(x.booleanValue(), y.booleanValue());
      }
      case UUID -> {
        String a = text(x).toLowerCase(Locale.ROOT);
        String b = text(y).toLowerCase(Locale.ROOT);
        if (!a.matches("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
            || !b.matches("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")) {
          throw new Incomparable();
        }
        yield a.compareTo(b); // uuid order is byte order, which hex digits preserve
      }
      case DATE ->
          compareTime(text(x), text(y), s -> LocalDate.parse(s, DateTimeFormatter.ISO_LOCAL_DATE));
      case TIMESTAMP -> compareTime(text(x), text(y), s -> LocalDateTime.parse(s, LOCAL));
      case TIMESTAMPTZ ->
          compareTime(text(x), text(y), s -> OffsetDateTime.parse(s, OFFSET).toInstant());
      case OPAQUE -> {
        if (x.equals(y)) {
          yield 0;
        }
        throw new Incomparable();
      }
    };
  }

  /**
   * Numbers as {@code [rank, value]}: rank 0 -infinity, 1 finite, 2 +infinity, 3 NaN (PostgreSQL
   * puts NaN last).
   */
  private record Num(int rank, BigDecimal value) {}

  private static int compareNumeric(Num a, Num b) {
    if (a.rank() != b.rank()) {
      return Integer.compare(a.rank(), b.rank());
    }
    return a.rank() == 1 ? a.value().compareTo(b.value()) : 0;
  }

  private static Num decimal(JsonNode v) {
    if (v.isNumber()) {
      return new Num(1, v.decimalValue());
    }
    return special(text(v));
  }

  private static Num floating(JsonNode v) {
    if (v.isNumber()) {
      double d = v.doubleValue();
      if (Double.isNaN(d)) {
        return new Num(3, null);
      }
      if (Double.isInfinite(d)) {
        return new Num(d > 0 ? 2 : 0, null);
      }
      return new Num(1, new BigDecimal(d == 0 ? 0 : d)); // -0 equals 0
    }
    return special(text(v));
  }

  private static Num special(String s) {
    return switch (s) {
      case "NaN" -> new Num(3, null);
      case "Infinity" -> new Num(2, null);
      case "-Infinity" -> new Num(0, null);
      default -> throw new Incomparable();
    };
  }

  private static String text(JsonNode v) {
    if (!v.isTextual()) {
      throw new Incomparable();
    }
    return v.textValue();
  }

  private interface Parse {
    Comparable<?> parse(String s);
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private static int compareTime(String a, String b, Parse parse) {
    int ra = timeRank(a);
    int rb = timeRank(b);
    if (ra != 1 || rb != 1) {
      return Integer.compare(ra, rb);
    }
    try {
      Comparable x = parse.parse(a);
      Comparable y = parse.parse(b);
      return x.compareTo(y);
    } catch (DateTimeParseException e) {
      throw new Incomparable(); // BC dates, years past 9999, another DateStyle
    }
  }

  private static int timeRank(String s) {
    return s.equals("-infinity") ? 0 : s.equals("infinity") ? 2 : 1;
  }
}
