package io.weir.sharding.cdc;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.PgSpecial;
import io.weir.protocol.pgoutput.PgValue;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import io.weir.protocol.pgoutput.TupleData;
import java.io.IOException;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * RowJson writes rows exactly as Jackson's generator wrote them before it (stored bodies are
 * compared with snapshot rows byte for byte), and its timestamp text is exactly what {@link
 * OffsetDateTime#toString()} writes in UTC.
 */
class RowJsonTest {
  /** Text forms per type OID, some of each kind PostgreSQL sends. */
  private static final Object[][] VALUES = {
    {16L, "t", "f"},
    {21L, "0", "-32768", "32767", "7"},
    {23L, "0", "-2147483648", "2147483647", "-12"},
    {20L, "0", "-9223372036854775808", "9223372036854775807", "1234567890123"},
    {700L, "0", "-0", "1.5", "3.4028235e+38", "1e-07", "NaN", "Infinity", "-Infinity", "0.1"},
    {701L, "0", "1.7976931348623157e+308", "4.9e-324", "1e-07", "123456789.125", "NaN", "-0.5"},
    {1700L, "0", "0.0000001", "123.4500", "-1000000", "1e+5", "NaN", "Infinity", "-Infinity"},
    {17L, "\\x", "\\x00ff10", "\\xdeadbeef"},
    {2950L, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
    {1082L, "2026-12-07", "infinity", "-infinity", "0044-03-15 BC"},
    {1114L, "2026-12-07 03:09:19.123456", "2026-12-07 00:00:00", "infinity"},
    {1184L, "2026-12-07 03:09:19.123456+00", "2026-12-07 03:09:19+05:30", "-infinity"},
    {114L, "{\"a\": [1, 2.50, \"x\"]}", "null", "\"s\""},
    {3802L, "{\"a\": 1}", "[]"},
  };

  /** Text-like types: any text at all. */
  private static final long[] TEXT_TYPES = {25L, 1043L, 1042L, 19L, 0L, 869L};

  @Test
  void rowsAreWrittenAsJacksonsGeneratorWroteThem() throws IOException {
    long seed = Long.getLong("weir.rowjson.seed", System.nanoTime());
    Random r = new Random(seed);
    for (int round = 0; round < 20_000; round++) {
      int n = r.nextInt(8);
      List<TableSchema.Column> columns = new ArrayList<>();
      String[] values = new String[n];
      for (int i = 0; i < n; i++) {
        long oid;
        int pick = r.nextInt(6);
        if (pick < 2) {
          Object[] kind = VALUES[r.nextInt(VALUES.length)];
          oid = (Long) kind[0];
          values[i] = (String) kind[1 + r.nextInt(kind.length - 1)];
        } else if (pick == 2) {
          oid = 1184L;
          values[i] = timestamptz(r);
        } else if (pick == 3) {
          oid = new long[] {16L, 21L, 23L, 20L}[r.nextInt(4)];
          values[i] = integer(r);
        } else {
          oid = TEXT_TYPES[r.nextInt(TEXT_TYPES.length)];
          values[i] = text(r);
        }
        if (r.nextInt(10) == 0) {
          values[i] = null;
        }
        columns.add(new TableSchema.Column(text(r), oid, -1, r.nextBoolean()));
      }
      TableSchema table = new TableSchema(1, "public", "t", ReplicaIdentity.DEFAULT, columns);
      TupleData row = TupleData.ofText(values);
      assertThat(outcome(() -> RowJson.body(table, row, null)))
          .as("seed " + seed)
          .isEqualTo(outcome(() -> jackson(table, row)));
    }
  }

  @Test
  void everyCharacterIsEscapedAsJacksonEscapesIt() throws IOException {
    StringBuilder all = new StringBuilder();
    for (char c = 0; c < 0xFFFF; c++) {
      all.append(c);
    }
    String s = all.append('\uFFFF').toString();
    StringBuilder ours = new StringBuilder();
    RowJson.string(ours, s);
    StringWriter theirs = new StringWriter();
    try (JsonGenerator g = new JsonFactory().createGenerator(theirs)) {
      g.writeString(s);
    }
    assertThat(ours.toString()).isEqualTo(theirs.toString());
  }

  private interface Body {
    String get() throws IOException;
  }

  /** The body, or the kind of exception that refused the row. */
  private static String outcome(Body body) throws IOException {
    try {
      return body.get();
    } catch (RuntimeException e) {
      return "refused: " + e.getClass().getName();
    }
  }

  /**
   * A timestamp with time zone's text: mostly as PostgreSQL prints it (UTC or another offset, 0 to
   * 6 fraction digits), sometimes not a valid one (days past the month's end, hour 24, a missing
   * digit, a fraction of 7 digits, year 0).
   */
  private static String timestamptz(Random r) {
    int year = r.nextInt(20) == 0 ? r.nextInt(3) : 1 + r.nextInt(9_999);
    int month = r.nextInt(20) == 0 ? r.nextInt(14) : 1 + r.nextInt(12);
    int day = 1 + r.nextInt(r.nextInt(10) == 0 ? 31 : 28);
    String text =
        String.format(
            "%04d-%02d-%02d %02d:%02d:%02d",
            year,
            month,
            day,
            r.nextInt(50) == 0 ? 24 : r.nextInt(24),
            r.nextInt(4) == 0 ? 0 : r.nextInt(60),
            r.nextInt(4) == 0 ? 0 : r.nextInt(r.nextInt(50) == 0 ? 61 : 60));
    int fraction = r.nextInt(9);
    if (fraction > 0 && fraction <= 7) {
      StringBuilder f = new StringBuilder(".");
      for (int i = 0; i < fraction; i++) {
        f.append((char) ('0' + r.nextInt(10)));
      }
      text += f;
    }
    String[] zones = {"+00", "+00", "+00", "+05:30", "-08", "+00:00:01", "+0", "Z"};
    text += zones[r.nextInt(zones.length)];
    if (r.nextInt(10) == 0) {
      // One character anywhere dropped or replaced by a letter.
      int at = r.nextInt(text.length());
      text = text.substring(0, at) + (r.nextBoolean() ? "" : "x") + text.substring(at + 1);
    }
    if (r.nextInt(40) == 0) {
      text += " BC";
    }
    return text;
  }

  /**
   * An integer's text: canonical, or with a leading zero, a plus, "-0", out of range or not one.
   */
  private static String integer(Random r) {
    String[] odd = {
      "-0",
      "007",
      "+5",
      "",
      "-",
      "1.0",
      " 1",
      "99999",
      "-32769",
      "2147483648",
      "9223372036854775808",
      "-9223372036854775809",
      "12a",
      "t",
      "f",
      "true",
      "0"
    };
    if (r.nextInt(4) == 0) {
      return odd[r.nextInt(odd.length)];
    }
    long v = r.nextLong() >> r.nextInt(64);
    return Long.toString(v);
  }

  /** Short text of ASCII, control characters, quotes, backslashes, non-Latin text, surrogates. */
  private static String text(Random r) {
    String[] parts = {
      "a",
      "Zz9",
      " ",
      "\"",
      "\\",
      "\n",
      "\t",
      "\u0000",
      "\u001f",
      "\u007f",
      "é",
      "日本",
      "\ud83d\ude00",
      "\ud800",
      "/",
      "<>&'"
    };
    StringBuilder b = new StringBuilder();
    int n = r.nextInt(6);
    for (int i = 0; i < n; i++) {
      b.append(parts[r.nextInt(parts.length)]);
    }
    return b.toString();
  }

  /** The writer RowJson had before its own (Jackson's generator), as the reference. */
  private static String jackson(TableSchema table, TupleData row) throws IOException {
    StringWriter out = new StringWriter();
    try (JsonGenerator g = new JsonFactory().createGenerator(out)) {
      g.writeStartObject();
      for (int i = 0; i < row.size(); i++) {
        g.writeFieldName(table.columns().get(i).name());
        if (row.isNull(i)) {
          g.writeNull();
        } else {
          write(g, row.value(i, table.columns().get(i).typeOid()));
        }
      }
      g.writeEndObject();
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
      case TIMESTAMPTZ -> g.writeString(RowJson.utc((OffsetDateTime) value));
      default ->
          g.writeString(
              value instanceof byte[] b ? Base64.getEncoder().encodeToString(b) : value.toString());
    }
  }

  @Test
  void timestampsInUtcAreWrittenAsJavaTimeWritesThem() {
    long seed = Long.getLong("weir.rowjson.seed", System.nanoTime());
    Random r = new Random(seed);
    for (int i = 0; i < 200_000; i++) {
      // Years -300..12000, every offset, fractions of every precision and none, whole minutes.
      long second = -77_000_000_000L + (long) (r.nextDouble() * 380_000_000_000L);
      if (r.nextInt(8) == 0) {
        second -= Math.floorMod(second, 60);
      }
      int nano =
          switch (r.nextInt(5)) {
            case 0 -> 0;
            case 1 -> r.nextInt(1_000) * 1_000_000;
            case 2 -> r.nextInt(1_000_000) * 1_000;
            default -> r.nextInt(1_000_000_000);
          };
      ZoneOffset offset = ZoneOffset.ofTotalSeconds((r.nextInt(36 * 60 + 1) - 18 * 60) * 60);
      OffsetDateTime t = OffsetDateTime.ofInstant(Instant.ofEpochSecond(second, nano), offset);
      assertThat(RowJson.utc(t))
          .as("seed " + seed)
          .isEqualTo(t.withOffsetSameInstant(ZoneOffset.UTC).toString());
    }
    OffsetDateTime midnight = OffsetDateTime.of(2026, 12, 1, 0, 0, 0, 0, ZoneOffset.ofHours(2));
    assertThat(RowJson.utc(midnight)).isEqualTo("2026-11-30T22:00Z");
  }
}
