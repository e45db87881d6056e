package io.weir.protocol.pgoutput;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.HexFormat;
import java.util.Random;
import java.util.UUID;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/** Conversions per type OID family, text and binary, with PostgreSQL's edge values. */
class PgValuesTest {

  private static final int DISTINCTIVE_LENGTH = 5;
  private static final long BOOL = 16;
  private static final long BYTEA = 17;
  private static final long NAME = 19;
  private static final long INT8 = 20;
  private static final long INT2 = 21;
  private static final long INT4 = 23;
  private static final long TEXT = 25;
  private static final long JSON = 114;
  private static final long INET = 869;
  private static final long FLOAT4 = 700;
  private static final long FLOAT8 = 701;
  private static final long BPCHAR = 1042;
  private static final long VARCHAR = 1043;
  private static final long DATE = 1082;
  private static final long TIMESTAMP = 1114;
  private static final long TIMESTAMPTZ = 1184;
  private static final long NUMERIC = 1700;
  private static final long UUID_OID = 2950;
  private static final long JSONB = 3802;

  private static Object textValue(long oid, String text) {
    return PgValues.fromText(oid, text).value();
  }

  private static Object binaryValue(long oid, String hex) {
    return PgValues.fromBinary(oid, HexFormat.of().parseHex(hex)).value();
  }

  private static void assertInvalidText(long oid, String text) {
    IllegalArgumentException error =
        catchThrowableOfType(IllegalArgumentException.class, () -> PgValues.fromText(oid, text));
    assertThat(error).as("text should not convert for type %d", oid).isNotNull();
    if (text.length() >= DISTINCTIVE_LENGTH) { // shorter texts occur in any sentence
      assertThat(error.getMessage())
          .as("the error should not quote the value")
          .doesNotContain(text);
    }
  }

  private static void assertInvalidBinary(long oid, String hex) {
    assertThatIllegalArgumentException()
        .as("bytes should not convert for type %d", oid)
        .isThrownBy(() -> PgValues.fromBinary(oid, HexFormat.of().parseHex(hex)));
  }

  @Nested
  class Integers {

    @Test
    void textWithinRange() {
      assertThat(textValue(INT2, "-32768")).isEqualTo(Short.MIN_VALUE);
      assertThat(textValue(INT2, "32767")).isEqualTo(Short.MAX_VALUE);
      assertThat(textValue(INT4, "-2147483648")).isEqualTo(Integer.MIN_VALUE);
      assertThat(textValue(INT4, "0")).isEqualTo(0);
      assertThat(textValue(INT8, "-9223372036854775808")).isEqualTo(Long.MIN_VALUE);
      assertThat(textValue(INT8, "9223372036854775807")).isEqualTo(Long.MAX_VALUE);
    }

    @Test
    void textOutOfRangeOrMalformed() {
      assertInvalidText(INT2, "32768");
      assertInvalidText(INT2, "-32769");
      assertInvalidText(INT4, "2147483648");
      assertInvalidText(INT8, "9223372036854775808");
      assertInvalidText(INT8, "-9223372036854775809");
      assertInvalidText(INT8, "99999999999999999999999");
      for (String bad : new String[] {"", "-", "+1", " 1", "1 ", "1.0", "1e3", "0x10", "١"}) {
        assertInvalidText(INT4, bad);
      }
    }

    @Test
    void binaryForm() {
      assertThat(PgValues.fromBinary(INT2, new byte[] {(byte) 0x80, 0}).value())
          .isEqualTo(Short.MIN_VALUE);
      assertThat(binaryValue(INT4, "ffffffff")).isEqualTo(-1);
      assertThat(binaryValue(INT8, "7fffffffffffffff")).isEqualTo(Long.MAX_VALUE);
      assertInvalidBinary(INT4, "000000");
      assertInvalidBinary(INT2, "00000000");
    }
  }

  @Nested
  class Numerics {

    @Test
    void textKeepsScale() {
      assertThat(textValue(NUMERIC, "12345.6789")).isEqualTo(new BigDecimal("12345.6789"));
      assertThat(textValue(NUMERIC, "1.50")).isEqualTo(new BigDecimal("1.50"));
      assertThat(textValue(NUMERIC, "-0.000000000000000000001"))
          .isEqualTo(new BigDecimal("-1E-21"));
      String hundredDigits = "9".repeat(100);
      assertThat(textValue(NUMERIC, hundredDigits)).isEqualTo(new BigDecimal(hundredDigits));
    }

    @Test
    void specialValuesAreRepresentable() {
      assertThat(textValue(NUMERIC, "NaN")).isEqualTo(PgSpecial.NAN);
      assertThat(textValue(NUMERIC, "Infinity")).isEqualTo(PgSpecial.INFINITY);
      assertThat(textValue(NUMERIC, "-Infinity")).isEqualTo(PgSpecial.NEGATIVE_INFINITY);
      PgValue nan = PgValues.fromText(NUMERIC, "NaN");
      assertThat(nan.isSpecial()).isTrue();
      assertThat(nan.special()).contains(PgSpecial.NAN);
      assertThatIllegalStateException()
          .isThrownBy(() -> nan.as(BigDecimal.class))
          .withMessageContaining("PgSpecial");
    }

    @Test
    void textMalformed() {
      for (String bad :
          new String[] {"", "nan", "inf", "1,5", "0x1F", "1.2.3", "1e99999999999", " 1"}) {
        assertInvalidText(NUMERIC, bad);
      }
    }

    @Test
    void binarySendFormat() {
      // 12345.6789: digits [1, 2345, 6789], weight 1, positive, dscale 4
      assertThat(binaryValue(NUMERIC, "0003" + "0001" + "0000" + "0004" + "0001" + "0929" + "1a85"))
          .isEqualTo(new BigDecimal("12345.6789"));
      // -1E-21: one digit 1000 at weight -6 (1000 * 10000^-6), negative, dscale 21
      assertThat(binaryValue(NUMERIC, "0001" + "fffa" + "4000" + "0015" + "03e8"))
          .isEqualTo(new BigDecimal("-0.000000000000000000001"));
      // 0 with dscale 2
      assertThat(binaryValue(NUMERIC, "0000" + "0000" + "0000" + "0002"))
          .isEqualTo(new BigDecimal("0.00"));
      // 1000000: one digit 100 at weight 1 (100 * 10000^1), dscale 0
      assertThat(binaryValue(NUMERIC, "0001" + "0001" + "0000" + "0000" + "0064"))
          .isEqualTo(new BigDecimal("1000000"));
    }

    @Test
    void binarySpecials() {
      assertThat(binaryValue(NUMERIC, "00000000c0000000")).isEqualTo(PgSpecial.NAN);
      assertThat(binaryValue(NUMERIC, "00000000d0000000")).isEqualTo(PgSpecial.INFINITY);
      assertThat(binaryValue(NUMERIC, "00000000f0000000")).isEqualTo(PgSpecial.NEGATIVE_INFINITY);
    }

    @Test
    void binaryMalformed() {
      assertInvalidBinary(NUMERIC, "000000");
      assertInvalidBinary(NUMERIC, "0001000000000000"); // one digit announced, none sent
      assertInvalidBinary(NUMERIC, "0001000000000000" + "2710"); // digit 10000
      assertInvalidBinary(NUMERIC, "0000000012340000"); // unknown sign
      assertInvalidBinary(NUMERIC, "ffff000000000000"); // negative digit count
      assertInvalidBinary(NUMERIC, "000000000000c000"); // display scale outside its mask
    }
  }

  @Nested
  class Floats {

    @Test
    void textIncludingSpecials() {
      assertThat(textValue(FLOAT4, "1.5")).isEqualTo(1.5f);
      assertThat(textValue(FLOAT4, "1e-45")).isEqualTo(Float.MIN_VALUE);
      assertThat(textValue(FLOAT4, "NaN")).isEqualTo(Float.NaN);
      assertThat(textValue(FLOAT4, "-Infinity")).isEqualTo(Float.NEGATIVE_INFINITY);
      assertThat(textValue(FLOAT8, "3.141592653589793")).isEqualTo(Math.PI);
      assertThat(textValue(FLOAT8, "Infinity")).isEqualTo(Double.POSITIVE_INFINITY);
      assertThat(textValue(FLOAT8, "NaN")).isEqualTo(Double.NaN);
      assertThat(textValue(FLOAT8, "-0")).isEqualTo(-0.0d);
      assertThat(textValue(FLOAT8, "2.2250738585072014e-308")).isEqualTo(Double.MIN_NORMAL);
    }

    @Test
    void textMalformed() {
      for (String bad : new String[] {"", "nan", "inf", "1.5f", "0x1p3", " 1", "1 ", "1..5", "e"}) {
        assertInvalidText(FLOAT8, bad);
      }
    }

    @Test
    void binaryForm() {
      assertThat(binaryValue(FLOAT4, "3fc00000")).isEqualTo(1.5f);
      assertThat(binaryValue(FLOAT8, "7ff8000000000000")).isEqualTo(Double.NaN);
      assertThat(binaryValue(FLOAT8, "fff0000000000000")).isEqualTo(Double.NEGATIVE_INFINITY);
      assertInvalidBinary(FLOAT8, "3fc00000");
    }
  }

  @Nested
  class BooleansAndStrings {

    @Test
    void bool() {
      assertThat(textValue(BOOL, "t")).isEqualTo(true);
      assertThat(textValue(BOOL, "f")).isEqualTo(false);
      assertThat(binaryValue(BOOL, "01")).isEqualTo(true);
      assertThat(binaryValue(BOOL, "00")).isEqualTo(false);
      for (String bad : new String[] {"", "true", "T", "1", "tt"}) {
        assertInvalidText(BOOL, bad);
      }
      assertInvalidBinary(BOOL, "02");
      assertInvalidBinary(BOOL, "0001");
    }

    @Test
    void textTypesKeepTheirText() {
      assertThat(textValue(TEXT, "üñí€😀")).isEqualTo("üñí€😀");
      assertThat(textValue(VARCHAR, "")).isEqualTo("");
      assertThat(textValue(BPCHAR, "ab    ")).isEqualTo("ab    ");
      assertThat(textValue(NAME, "weir_name")).isEqualTo("weir_name");
      assertThat(PgValues.fromText(VARCHAR, "x").type()).isEqualTo(PgType.VARCHAR);
      assertThat(
              binaryValue(TEXT, HexFormat.of().formatHex("üñí".getBytes(StandardCharsets.UTF_8))))
          .isEqualTo("üñí");
    }

    @Test
    void invalidUtf8InAStringTypeIsInvalid() {
      assertInvalidBinary(TEXT, "ff");
      assertInvalidBinary(VARCHAR, "c328");
    }

    @Test
    void jsonIsKeptAsItsText() {
      assertThat(textValue(JSON, "{\"k\": [1, 2]}")).isEqualTo("{\"k\": [1, 2]}");
      assertThat(textValue(JSONB, "null")).isEqualTo("null");
      assertThat(binaryValue(JSON, "5b5d")).isEqualTo("[]");
      assertThat(binaryValue(JSONB, "01" + "5b5d")).isEqualTo("[]");
      assertInvalidBinary(JSONB, "02" + "5b5d");
      assertInvalidBinary(JSONB, "");
    }
  }

  @Nested
  class Bytea {

    @Test
    void hexFormat() {
      assertThat((byte[]) textValue(BYTEA, "\\xdeadBEEF")).containsExactly(0xDE, 0xAD, 0xBE, 0xEF);
      assertThat((byte[]) textValue(BYTEA, "\\x")).isEmpty();
      assertInvalidText(BYTEA, "\\xabc");
      assertInvalidText(BYTEA, "\\xzz");
    }

    @Test
    void escapeFormat() {
      assertThat((byte[]) textValue(BYTEA, "ab\\\\c\\000\\377"))
          .containsExactly('a', 'b', '\\', 'c', 0, 0xFF);
      assertThat((byte[]) textValue(BYTEA, "")).isEmpty();
      assertInvalidText(BYTEA, "\\");
      assertInvalidText(BYTEA, "\\400");
      assertInvalidText(BYTEA, "\\09");
    }

    @Test
    void binaryIsTheBytes() {
      assertThat((byte[]) binaryValue(BYTEA, "00ff")).containsExactly(0, 0xFF);
    }

    @Test
    void byteArraysAreCopiedOut() {
      PgValue value = PgValues.fromText(BYTEA, "\\x0102");
      ((byte[]) value.value())[0] = 9;
      assertThat(value.as(byte[].class)).containsExactly(1, 2);
      assertThat(value)
          .isEqualTo(PgValues.fromText(BYTEA, "\\x0102"))
          .hasSameHashCodeAs(PgValues.fromText(BYTEA, "\\x0102"));
    }
  }

  @Nested
  class Uuids {

    @Test
    void textForm() {
      String uuid = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
      assertThat(textValue(UUID_OID, uuid)).isEqualTo(UUID.fromString(uuid));
      assertThat(textValue(UUID_OID, uuid.toUpperCase())).isEqualTo(UUID.fromString(uuid));
      for (String bad :
          new String[] {
            "",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
            "a0eebc99-9c0b-4ef8-bb6d_6bb9bd380a11",
            "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "1-1-1-1-1"
          }) {
        assertInvalidText(UUID_OID, bad);
      }
    }

    @Test
    void binaryForm() {
      assertThat(binaryValue(UUID_OID, "a0eebc999c0b4ef8bb6d6bb9bd380a11"))
          .isEqualTo(UUID.fromString("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
      assertInvalidBinary(UUID_OID, "a0eebc999c0b4ef8bb6d6bb9bd380a");
    }
  }

  @Nested
  class DatesAndTimes {

    @Test
    void dates() {
      assertThat(textValue(DATE, "2024-01-02")).isEqualTo(LocalDate.of(2024, 1, 2));
      assertThat(textValue(DATE, "0044-03-15 BC"))
          .as("44 BC is ISO year -43")
          .isEqualTo(LocalDate.of(-43, 3, 15));
      assertThat(textValue(DATE, "0001-01-01 BC")).isEqualTo(LocalDate.of(0, 1, 1));
      assertThat(textValue(DATE, "4714-11-24 BC")).isEqualTo(LocalDate.of(-4713, 11, 24));
      assertThat(textValue(DATE, "5874897-12-31")).isEqualTo(LocalDate.of(5_874_897, 12, 31));
      assertThat(textValue(DATE, "infinity")).isEqualTo(PgSpecial.INFINITY);
      assertThat(textValue(DATE, "-infinity")).isEqualTo(PgSpecial.NEGATIVE_INFINITY);
    }

    @ParameterizedTest
    @ValueSource(
        strings = {
          "",
          "2024-1-02",
          "24-01-02",
          "2024-02-30",
          "2024-13-01",
          "0000-01-01",
          "2024-01-02 AD",
          "2024-01-02 BC ",
          "2024-01-02 bc",
          "Infinity",
          "+infinity",
          "2024/01/02",
          "1234567890-01-01",
          "2024-01-02T"
        })
    void malformedDates(String text) {
      assertInvalidText(DATE, text);
    }

    @Test
    void timestamps() {
      assertThat(textValue(TIMESTAMP, "2024-01-02 03:04:05.123456"))
          .isEqualTo(LocalDateTime.of(2024, 1, 2, 3, 4, 5, 123_456_000));
      assertThat(textValue(TIMESTAMP, "2024-01-02 03:04:05"))
          .isEqualTo(LocalDateTime.of(2024, 1, 2, 3, 4, 5));
      assertThat(textValue(TIMESTAMP, "2024-01-02 03:04:05.5"))
          .isEqualTo(LocalDateTime.of(2024, 1, 2, 3, 4, 5, 500_000_000));
      assertThat(textValue(TIMESTAMP, "0044-03-15 12:00:00 BC"))
          .isEqualTo(LocalDateTime.of(-43, 3, 15, 12, 0));
      assertThat(textValue(TIMESTAMP, "294276-12-31 23:59:59.999999"))
          .isEqualTo(LocalDateTime.of(294_276, 12, 31, 23, 59, 59, 999_999_000));
      assertThat(textValue(TIMESTAMP, "infinity")).isEqualTo(PgSpecial.INFINITY);
      assertThat(textValue(TIMESTAMP, "-infinity")).isEqualTo(PgSpecial.NEGATIVE_INFINITY);
    }

    @ParameterizedTest
    @ValueSource(
        strings = {
          "2024-01-02",
          "2024-01-02 24:00:00",
          "2024-01-02 03:04",
          "2024-01-02 03:04:05.",
          "2024-01-02 03:04:05.1234567890",
          "2024-01-02 03:04:60",
          "2024-01-02T03:04:05",
          "2024-01-02 03:04:05+00"
        })
    void malformedTimestamps(String text) {
      assertInvalidText(TIMESTAMP, text);
    }

    @Test
    void timestampsWithTimeZone() {
      assertThat(textValue(TIMESTAMPTZ, "2024-01-02 03:04:05.123456+00"))
          .isEqualTo(OffsetDateTime.of(2024, 1, 2, 3, 4, 5, 123_456_000, ZoneOffset.UTC));
      assertThat(textValue(TIMESTAMPTZ, "2024-01-02 08:34:05+05:30"))
          .isEqualTo(OffsetDateTime.of(2024, 1, 2, 8, 34, 5, 0, ZoneOffset.ofHoursMinutes(5, 30)));
      assertThat(textValue(TIMESTAMPTZ, "2024-01-01 22:04:05-05"))
          .isEqualTo(OffsetDateTime.of(2024, 1, 1, 22, 4, 5, 0, ZoneOffset.ofHours(-5)));
      assertThat(textValue(TIMESTAMPTZ, "1890-01-01 05:21:10+05:21:10"))
          .isEqualTo(
              OffsetDateTime.of(
                  1890, 1, 1, 5, 21, 10, 0, ZoneOffset.ofHoursMinutesSeconds(5, 21, 10)));
      assertThat(textValue(TIMESTAMPTZ, "0044-03-15 12:00:00+00 BC"))
          .isEqualTo(OffsetDateTime.of(-43, 3, 15, 12, 0, 0, 0, ZoneOffset.UTC));
      assertThat(textValue(TIMESTAMPTZ, "infinity")).isEqualTo(PgSpecial.INFINITY);
      assertThat(textValue(TIMESTAMPTZ, "-infinity")).isEqualTo(PgSpecial.NEGATIVE_INFINITY);
    }

    @ParameterizedTest
    @ValueSource(
        strings = {
          "2024-01-02 03:04:05",
          "2024-01-02 03:04:05+",
          "2024-01-02 03:04:05+5",
          "2024-01-02 03:04:05+19",
          "2024-01-02 03:04:05 +00",
          "2024-01-02 03:04:05+00:",
          "2024-01-02 03:04:05Z",
          "2024-01-02 03:04:05+00:00:00:00",
          "2024-01-02 03:04:05+00 UTC"
        })
    void malformedTimestampsWithTimeZone(String text) {
      assertInvalidText(TIMESTAMPTZ, text);
    }

    @Test
    void binaryDates() {
      assertThat(binaryValue(DATE, "00000000")).isEqualTo(LocalDate.of(2000, 1, 1));
      assertThat(binaryValue(DATE, "ffffffff")).isEqualTo(LocalDate.of(1999, 12, 31));
      assertThat(binaryValue(DATE, "7fffffff")).isEqualTo(PgSpecial.INFINITY);
      assertThat(binaryValue(DATE, "80000000")).isEqualTo(PgSpecial.NEGATIVE_INFINITY);
      assertInvalidBinary(DATE, "0000");
    }

    @Test
    void binaryTimestamps() {
      assertThat(binaryValue(TIMESTAMP, "0000000000000001"))
          .isEqualTo(LocalDateTime.of(2000, 1, 1, 0, 0, 0, 1_000));
      assertThat(binaryValue(TIMESTAMP, "ffffffffffffffff"))
          .isEqualTo(LocalDateTime.of(1999, 12, 31, 23, 59, 59, 999_999_000));
      assertThat(binaryValue(TIMESTAMP, "7fffffffffffffff")).isEqualTo(PgSpecial.INFINITY);
      assertThat(binaryValue(TIMESTAMPTZ, "8000000000000000"))
          .isEqualTo(PgSpecial.NEGATIVE_INFINITY);
      assertThat(binaryValue(TIMESTAMPTZ, "0000000000000000"))
          .isEqualTo(OffsetDateTime.of(2000, 1, 1, 0, 0, 0, 0, ZoneOffset.UTC));
      assertThat(binaryValue(TIMESTAMPTZ, "8000000000000001"))
          .as("the earliest finite int64 still converts")
          .isInstanceOf(OffsetDateTime.class);
      assertInvalidBinary(TIMESTAMP, "00000000");
    }
  }

  @Nested
  class OtherTypes {

    @Test
    void keepTheirTextOrBytesAndOid() {
      PgValue inetText = PgValues.fromText(INET, "192.0.2.1");
      assertThat(inetText.type()).isEqualTo(PgType.OTHER);
      assertThat(inetText.typeOid()).isEqualTo(INET);
      assertThat(inetText.value()).isEqualTo("192.0.2.1");
      PgValue inetBinary = PgValues.fromBinary(INET, HexFormat.of().parseHex("02200004c0000201"));
      assertThat(inetBinary.type()).isEqualTo(PgType.OTHER);
      assertThat((byte[]) inetBinary.value())
          .containsExactly(HexFormat.of().parseHex("02200004c0000201"));
    }

    @Test
    void oidsOutsideTheUnsignedRangeAreOther() {
      assertThat(PgType.forOid(-4_294_967_280L))
          .as("a negative OID must not alias int4 after a cast")
          .isEqualTo(PgType.OTHER);
      assertThat(PgType.forOid(0x1_0000_0017L)).isEqualTo(PgType.OTHER);
      assertThat(PgType.forOid(23)).isEqualTo(PgType.INT4);
    }

    @Test
    void everyConvertedTypeMapsBackFromItsOid() {
      for (PgType type : PgType.values()) {
        if (type != PgType.OTHER) {
          assertThat(PgType.forOid(type.oid())).isEqualTo(type);
        }
      }
    }
  }

  @Nested
  class Redaction {

    @Test
    void toStringNamesTheTypeButNotTheValue() {
      PgValue value = PgValues.fromText(TEXT, "CANARY-secret");
      assertThat(value.toString()).doesNotContain("CANARY").contains("TEXT").contains("25");
      assertThat(PgValues.fromText(NUMERIC, "123456.789").toString()).doesNotContain("123456");
    }

    @Test
    void conversionErrorsNameTheTypeButNotTheValue() {
      assertThatIllegalArgumentException()
          .isThrownBy(() -> PgValues.fromText(INT4, "CANARY-secret"))
          .withMessageNotContaining("CANARY")
          .withMessageContaining("INT4");
    }
  }

  /** Characters PostgreSQL's text forms are made of, to reach deeper into the parsers. */
  private static final String ALPHABET = "0123456789-+.:eE xBCNaInfity\\";

  @ParameterizedTest
  @CsvSource({
    "16", "17", "19", "20", "21", "23", "25", "114", "700", "701", "1042", "1043", "1082", "1114",
    "1184", "1700", "2950", "3802", "869"
  })
  void randomBytesOnlyEverConvertOrFailWithIllegalArgument(long oid) {
    Random random = new Random(oid);
    for (int i = 0; i < 2_000; i++) {
      byte[] bytes = new byte[random.nextInt(24)];
      random.nextBytes(bytes);
      if (random.nextBoolean() && bytes.length > 0) { // bias toward ASCII digits and punctuation
        for (int j = 0; j < bytes.length; j++) {
          bytes[j] = (byte) ALPHABET.charAt(random.nextInt(ALPHABET.length()));
        }
      }
      for (boolean asText : new boolean[] {true, false}) {
        try {
          PgValue value =
              asText
                  ? PgValues.fromText(oid, new String(bytes, StandardCharsets.ISO_8859_1))
                  : PgValues.fromBinary(oid, bytes);
          assertThat(value.typeOid()).isEqualTo(oid);
        } catch (IllegalArgumentException expected) {
          // the only failure allowed
        }
      }
    }
  }
}
