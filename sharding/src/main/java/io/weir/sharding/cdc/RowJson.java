package io.weir.sharding.cdc;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.PgSpecial;
import io.weir.protocol.pgoutput.PgValue;
import io.weir.protocol.pgoutput.TupleData;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.Base64;

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
  private static final JsonFactory JSON = new JsonFactory();

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
    StringWriter out = new StringWriter(64 + row.size() * 16);
    try (JsonGenerator g = JSON.createGenerator(out)) {
      g.writeStartObject();
      for (int i = 0; i < row.size(); i++) {
        TupleData from = row;
        if (row.isUnchangedToast(i)) {
          boolean usable =
              fill != null
                  && !fill.isUnchangedToast(i)
                  && (!keysOnly || table.columns().get(i).key());
          from = usable ? fill : null;
        }
        g.writeFieldName(table.columns().get(i).name());
        if (from == null || from.isNull(i)) {
          g.writeNull();
        } else {
          write(g, from.value(i, table.columns().get(i).typeOid()));
        }
      }
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toString();
  }

  private static void write(JsonGenerator g, PgValue v) throws IOException {
    if (v.special().isPresent()) {
      g.writeString(
          v.special().get() == PgSpecial.NAN
              ? "NaN"
              : v.special().get() == PgSpecial.INFINITY ? "Infinity" : "-Infinity");
      return;
    }
    Object value = v.value();
    switch (v.type()) {
      case BOOL -> g.writeBoolean((Boolean) value);
      case INT2 -> g.writeNumber((Short) value);
      case INT4 -> g.writeNumber((Integer) value);
      case INT8 -> g.writeNumber((Long) value);
      case NUMERIC -> g.writeNumber((BigDecimal) value);
      case FLOAT4, FLOAT8 -> {
        double d = ((Number) value).doubleValue();
        if (Double.isNaN(d)) {
          g.writeString("NaN");
        } else if (Double.isInfinite(d)) {
          g.writeString(d > 0 ? "Infinity" : "-Infinity");
        } else if (value instanceof Float f) {
          g.writeNumber(f);
        } else {
          g.writeNumber(d);
        }
      }
      case JSON, JSONB -> g.writeRawValue((String) value);
      case BYTEA -> g.writeString(Base64.getEncoder().encodeToString((byte[]) value));
      case TIMESTAMPTZ -> g.writeString(utc((OffsetDateTime) value));
      default ->
          g.writeString(
              value instanceof byte[] b ? Base64.getEncoder().encodeToString(b) : value.toString());
    }
  }

  /**
   * {@code t} in UTC as {@link OffsetDateTime#toString()} writes it ({@code uuuu-MM-ddTHH:mm}, then
   * {@code :ss} unless seconds and fraction are zero, the fraction in 3, 6 or 9 digits, {@code Z}),
   * without its intermediate objects: every timestamp of every CDC row goes through here.
   */
  static String utc(OffsetDateTime t) {
    long epochSecond = t.toEpochSecond();
    int nano = t.getNano();
    long day = Math.floorDiv(epochSecond, 86_400L);
    int secondOfDay = (int) Math.floorMod(epochSecond, 86_400L);
    LocalDate date = LocalDate.ofEpochDay(day);
    int year = date.getYear();
    if (year < 0 || year > 9_999) {
      return t.withOffsetSameInstant(ZoneOffset.UTC).toString();
    }
    char[] c = new char[30];
    int n = 0;
    n = digits(c, n, year, 4);
    c[n++] = '-';
    n = digits(c, n, date.getMonthValue(), 2);
    c[n++] = '-';
    n = digits(c, n, date.getDayOfMonth(), 2);
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
    return new String(c, 0, n);
  }

  private static int digits(char[] c, int at, int value, int width) {
    for (int i = at + width - 1; i >= at; i--) {
      c[i] = (char) ('0' + value % 10);
      value /= 10;
    }
    return at + width;
  }
}
