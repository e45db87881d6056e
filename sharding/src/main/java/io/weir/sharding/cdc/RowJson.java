package io.weir.sharding.cdc;

import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.ColumnKind;
import io.weir.protocol.pgoutput.PgSpecial;
import io.weir.protocol.pgoutput.PgType;
import io.weir.protocol.pgoutput.PgValue;
import io.weir.protocol.pgoutput.TupleData;
import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.OffsetDateTime;
import java.time.YearMonth;
import java.time.ZoneOffset;
import java.util.Base64;
import java.util.List;

/**
 * A source row as a document body: a JSON object with one field per column, in column order, with
 * typed values. Booleans and integers are JSON booleans and numbers; numeric and floating point
 * values are numbers (NaN and the infinities, which JSON lacks, are strings); json and jsonb are
 * embedded as JSON; bytea is base64; timestamps with time zone are ISO-8601 in UTC, dates and
 * timestamps ISO-8601; everything else is its PostgreSQL text form. The same row gives the same
 * text whether it came from the WAL or from a snapshot's COPY, so a snapshot row equal to its
 * document is recognised as unchanged.
 */
public final class RowJson {
  private RowJson() {}

  /**
   * The body of {@code row}. Unchanged TOAST columns are written as null unless {@code fill} (a
   * full old image of the same row) has their value.
   */
  public static String body(TableSchema table, TupleData row, TupleData fill) {
    return body(table, row, fill, false);
  }

  /**
   * As {@link #body(TableSchema, TupleData, TupleData)}; with {@code keysOnly}, {@code fill} is an
   * old key (REPLICA IDENTITY DEFAULT or INDEX) and only replica identity columns are taken from
   * it: an unchanged key stored out of line arrives there in full.
   */
  public static String body(TableSchema table, TupleData row, TupleData fill, boolean keysOnly) {
    List<TableSchema.Column> columns = table.columns();
    StringBuilder out = new StringBuilder(64 + row.size() * 24);
    out.append('{');
    for (int i = 0; i < row.size(); i++) {
      TupleData from = row;
      if (row.isUnchangedToast(i)) {
        boolean usable =
            fill != null && !fill.isUnchangedToast(i) && (!keysOnly || columns.get(i).key());
        from = usable ? fill : null;
      }
      if (i > 0) {
        out.append(',');
      }
      TableSchema.Column column = columns.get(i);
      string(out, column.name());
      out.append(':');
      if (from == null || from.isNull(i)) {
        out.append("null");
      } else if (from.kind(i) != ColumnKind.TEXT
          || !from.readText(i, (data, at, length) -> direct(out, column, data, at, length))) {
        write(out, from.value(i, column.typeOid()));
      }
    }
    return out.append('}').toString();
  }

  /**
   * Writes a value straight from its text when that text is in the one form PostgreSQL prints for
   * it, without converting it to a Java value and back (booleans, integers of fewer digits than
   * their type's limit, timestamps with time zone printed in UTC); false, writing nothing, for any
   * other text, which {@link #write} converts (and refuses when it is not a valid value). Either
   * way the same body.
   */
  private static boolean direct(
      StringBuilder out, TableSchema.Column column, byte[] b, int at, int length) {
    return switch (PgType.forOid(column.typeOid())) {
      case BOOL -> length == 1 && bool(out, b[at]);
      case INT2 -> integer(out, b, at, length, 4);
      case INT4 -> integer(out, b, at, length, 9);
      case INT8 -> integer(out, b, at, length, 18);
      case TIMESTAMPTZ -> utcText(out, b, at, length);
      default -> false;
    };
  }

  private static boolean bool(StringBuilder out, byte b) {
    if (b == 't' || b == 'f') {
      out.append(b == 't' ? "true" : "false");
      return true;
    }
    return false;
  }

  /**
   * An integer of 1 to {@code maxDigits} digits without leading zeros, perhaps negative (never
   * "-0"): its text is its JSON number.
   */
  private static boolean integer(StringBuilder out, byte[] b, int at, int length, int maxDigits) {
    int end = at + length;
    int first = length > 0 && b[at] == '-' ? at + 1 : at;
    int digits = end - first;
    if (digits < 1 || digits > maxDigits || b[first] == '0' && (digits > 1 || first > at)) {
      return false;
    }
    for (int i = first; i < end; i++) {
      if (b[i] < '0' || b[i] > '9') {
        return false;
      }
    }
    for (int i = at; i < end; i++) {
      out.append((char) b[i]);
    }
    return true;
  }

  /**
   * A timestamp with time zone printed in UTC, {@code yyyy-MM-dd HH:mm:ss[.f{1,6}]+00} (year 1 to
   * 9999), written as {@link #utc} writes it.
   */
  private static boolean utcText(StringBuilder out, byte[] b, int at, int length) {
    if (length < 22
        || length > 29
        || length == 23
        || b[at + 4] != '-'
        || b[at + 7] != '-'
        || b[at + 10] != ' '
        || b[at + 13] != ':'
        || b[at + 16] != ':'
        || b[at + length - 3] != '+'
        || b[at + length - 2] != '0'
        || b[at + length - 1] != '0'
        || length > 22 && b[at + 19] != '.') {
      return false;
    }
    int year = number(b, at, 4);
    int month = number(b, at + 5, 2);
    int day = number(b, at + 8, 2);
    int hour = number(b, at + 11, 2);
    int minute = number(b, at + 14, 2);
    int second = number(b, at + 17, 2);
    int micros = length > 22 ? number(b, at + 20, length - 23) : 0;
    if (year < 1
        || month < 1
        || month > 12
        || day < 1
        || day > YearMonth.of(year, month).lengthOfMonth()
        || hour < 0
        || hour > 23
        || minute < 0
        || minute > 59
        || second < 0
        || second > 59
        || micros < 0) {
      return false;
    }
    for (int i = length - 23; i < 6; i++) {
      micros *= 10;
    }
    char[] c = new char[30];
    out.append('"')
        .append(c, 0, utc(c, year, month, day, hour * 3_600 + minute * 60 + second, micros * 1_000))
        .append('"');
    return true;
  }

  /** The value of {@code n} decimal digits at {@code at}, or -1 if any is not a digit. */
  private static int number(byte[] b, int at, int n) {
    int v = 0;
    for (int i = at; i < at + n; i++) {
      if (b[i] < '0' || b[i] > '9') {
        return -1;
      }
      v = v * 10 + (b[i] - '0');
    }
    return v;
  }

  private static void write(StringBuilder out, PgValue v) {
    if (v.special().isPresent()) {
      string(
          out,
          v.special().get() == PgSpecial.NAN
              ? "NaN"
              : v.special().get() == PgSpecial.INFINITY ? "Infinity" : "-Infinity");
      return;
    }
    Object value = v.value();
    switch (v.type()) {
      case BOOL -> out.append(((Boolean) value).booleanValue() ? "true" : "false");
      case INT2, INT4, INT8 -> out.append(((Number) value).longValue());
      case NUMERIC -> out.append(((BigDecimal) value).toString());
      case FLOAT4, FLOAT8 -> {
        double d = ((Number) value).doubleValue();
        if (Double.isNaN(d)) {
          string(out, "NaN");
        } else if (Double.isInfinite(d)) {
          string(out, d > 0 ? "Infinity" : "-Infinity");
        } else if (value instanceof Float f) {
          out.append(Float.toString(f));
        } else {
          out.append(Double.toString(d));
        }
      }
      case JSON, JSONB -> out.append((String) value);
      case BYTEA -> string(out, Base64.getEncoder().encodeToString((byte[]) value));
      case TIMESTAMPTZ -> string(out, utc((OffsetDateTime) value));
      default ->
          string(
              out,
              value instanceof byte[] b ? Base64.getEncoder().encodeToString(b) : value.toString());
    }
  }

  /**
   * {@code s} as a JSON string, escaped as Jackson's generator escapes it by default (the bodies
   * written before this writer replaced it must stay byte-identical): quotation mark and backslash
   * after a backslash, the control characters below U+0020 as the two-character escapes b, t, n, f,
   * r or else as six characters (backslash, u, four upper-case hex digits); everything else as it
   * is, lone surrogates included.
   */
  static void string(StringBuilder out, String s) {
    out.append('"');
    int n = s.length();
    int from = 0;
    for (int i = 0; i < n; i++) {
      char c = s.charAt(i);
      if (c >= 0x20 && c != '"' && c != '\\') {
        continue;
      }
      out.append(s, from, i).append('\\');
      switch (c) {
        case '"', '\\' -> out.append(c);
        case '\b' -> out.append('b');
        case '\t' -> out.append('t');
        case '\n' -> out.append('n');
        case '\f' -> out.append('f');
        case '\r' -> out.append('r');
        default -> out.append("u00").append(HEX[c >> 4]).append(HEX[c & 0xF]);
      }
      from = i + 1;
    }
    out.append(s, from, n).append('"');
  }

  private static final char[] HEX = "0123456789ABCDEF".toCharArray();

  /**
   * {@code t} in UTC as {@link OffsetDateTime#toString()} writes it ({@code uuuu-MM-ddTHH:mm}, then
   * {@code :ss} unless seconds and fraction are zero, the fraction in 3, 6 or 9 digits, {@code Z}),
   * without its intermediate objects: every timestamp of every CDC row goes through here.
   */
  static String utc(OffsetDateTime t) {
    long epochSecond = t.toEpochSecond();
    long day = Math.floorDiv(epochSecond, 86_400L);
    LocalDate date = LocalDate.ofEpochDay(day);
    int year = date.getYear();
    if (year < 0 || year > 9_999) {
      return t.withOffsetSameInstant(ZoneOffset.UTC).toString();
    }
    char[] c = new char[30];
    int n =
        utc(
            c,
            year,
            date.getMonthValue(),
            date.getDayOfMonth(),
            (int) Math.floorMod(epochSecond, 86_400L),
            t.getNano());
    return new String(c, 0, n);
  }

  /** Writes a UTC time of year 0 to 9999 into {@code c} as {@link #utc} does; its length. */
  private static int utc(char[] c, int year, int month, int day, int secondOfDay, int nano) {
    int n = 0;
    n = digits(c, n, year, 4);
    c[n++] = '-';
    n = digits(c, n, month, 2);
    c[n++] = '-';
    n = digits(c, n, day, 2);
    c[n++] = 'T';
    n = digits(c, n, secondOfDay / 3_600, 2);
    c[n++] = ':';
    n = digits(c, n, secondOfDay / 60 % 60, 2);
    int second = secondOfDay % 60;
    if (second > 0 || nano > 0) {
      c[n++] = ':';
      n = digits(c, n, second, 2);
      if (nano > 0) {
        c[n++] = '.';
        if (nano % 1_000_000 == 0) {
          n = digits(c, n, nano / 1_000_000, 3);
        } else if (nano % 1_000 == 0) {
          n = digits(c, n, nano / 1_000, 6);
        } else {
          n = digits(c, n, nano, 9);
        }
      }
    }
    c[n++] = 'Z';
    return n;
  }

  private static int digits(char[] c, int at, int value, int width) {
    for (int i = at + width - 1; i >= at; i--) {
      c[i] = (char) ('0' + value % 10);
      value /= 10;
    }
    return at + width;
  }
}
