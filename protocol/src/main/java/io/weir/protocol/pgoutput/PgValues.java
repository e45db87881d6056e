package io.weir.protocol.pgoutput;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.Arrays;
import java.util.UUID;

/**
 * Converts column values to Java objects by type OID; see {@link PgType} for the mapping.
 *
 * <p>Text columns are parsed from the type's output under the settings a replication connection
 * uses ({@code client_encoding = UTF8}, {@code DateStyle = ISO}, {@code bytea_output} hex or
 * escape). Binary columns are decoded from the type's send format. Values of other types are kept
 * as their text or bytes. Conversions work on the bytes in place and build a string only where the
 * result is one.
 *
 * <p>A value that does not convert fails without naming or quoting it: through {@link
 * TupleData#value} as a {@link PgOutputDecodeException}, through the methods here as an {@link
 * IllegalArgumentException}.
 */
public final class PgValues {

  /** Days from 1970-01-01 to PostgreSQL's epoch, 2000-01-01. */
  private static final long PG_EPOCH_DAYS = 10_957L;

  private static final int UUID_TEXT_LENGTH = 36;
  private static final int UUID_BYTES = 16;
  private static final int JSONB_VERSION = 1;
  private static final int NUMERIC_POSITIVE = 0x0000;
  private static final int NUMERIC_NEGATIVE = 0x4000;
  private static final int NUMERIC_NAN = 0xC000;
  private static final int NUMERIC_POSITIVE_INFINITY = 0xD000;
  private static final int NUMERIC_NEGATIVE_INFINITY = 0xF000;
  private static final int NUMERIC_DSCALE_MASK = 0x3FFF;
  private static final int NUMERIC_HEADER_BYTES = 8;
  private static final int NUMERIC_BASE = 10_000;
  private static final int NUMERIC_BASE_DIGITS = 4;

  private PgValues() {}

  /**
   * Converts the text form of a value of type {@code typeOid}.
   *
   * @throws IllegalArgumentException if the text is not a valid value of the type; the message
   *     names the type, never the text
   */
  public static PgValue fromText(long typeOid, String text) {
    byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
    try {
      return fromText(typeOid, bytes, 0, bytes.length);
    } catch (ValueFormatException e) {
      throw invalid(typeOid);
    }
  }

  /**
   * Converts the binary send format of a value of type {@code typeOid}.
   *
   * @throws IllegalArgumentException if the bytes are not a valid value of the type; the message
   *     names the type, never the bytes
   */
  public static PgValue fromBinary(long typeOid, byte[] bytes) {
    try {
      return fromBinary(typeOid, bytes, 0, bytes.length);
    } catch (ValueFormatException e) {
      throw invalid(typeOid);
    }
  }

  private static IllegalArgumentException invalid(long typeOid) {
    return new IllegalArgumentException(
        "not a valid " + PgType.forOid(typeOid) + " value (type OID " + typeOid + ")");
  }

  static PgValue fromText(long typeOid, byte[] bytes, int offset, int length)
      throws ValueFormatException {
    PgType type = PgType.forOid(typeOid);
    Object value =
        switch (type) {
          case BOOL -> textBool(bytes, offset, length);
          case INT2 -> (short) textInteger(bytes, offset, length, Short.MIN_VALUE, Short.MAX_VALUE);
          case INT4 ->
              (int) textInteger(bytes, offset, length, Integer.MIN_VALUE, Integer.MAX_VALUE);
          case INT8 -> textInteger(bytes, offset, length, Long.MIN_VALUE, Long.MAX_VALUE);
          case FLOAT4 -> (float) textFloat(bytes, offset, length, true);
          case FLOAT8 -> textFloat(bytes, offset, length, false);
          case NUMERIC -> textNumeric(bytes, offset, length);
          case BYTEA -> textBytea(bytes, offset, length);
          case UUID -> textUuid(bytes, offset, length);
          case DATE -> DateTimeText.date(bytes, offset, length);
          case TIMESTAMP -> DateTimeText.timestamp(bytes, offset, length);
          case TIMESTAMPTZ -> DateTimeText.timestamptz(bytes, offset, length);
          case TEXT, VARCHAR, BPCHAR, NAME, JSON, JSONB, OTHER -> utf8(bytes, offset, length);
        };
    return new PgValue(type, typeOid, value);
  }

  static PgValue fromBinary(long typeOid, byte[] bytes, int offset, int length)
      throws ValueFormatException {
    PgType type = PgType.forOid(typeOid);
    Object value =
        switch (type) {
          case BOOL -> binaryBool(bytes, offset, length);
          case INT2 -> (short) bigEndian(bytes, offset, length, Short.BYTES);
          case INT4 -> (int) bigEndian(bytes, offset, length, Integer.BYTES);
          case INT8 -> bigEndian(bytes, offset, length, Long.BYTES);
          case FLOAT4 -> Float.intBitsToFloat((int) bigEndian(bytes, offset, length, Float.BYTES));
          case FLOAT8 -> Double.longBitsToDouble(bigEndian(bytes, offset, length, Double.BYTES));
          case NUMERIC -> binaryNumeric(bytes, offset, length);
          case UUID -> binaryUuid(bytes, offset, length);
          case DATE -> binaryDate(bytes, offset, length);
          case TIMESTAMP -> binaryTimestamp(bytes, offset, length);
          case TIMESTAMPTZ -> binaryTimestamptz(bytes, offset, length);
          case TEXT, VARCHAR, BPCHAR, NAME, JSON -> utf8(bytes, offset, length);
          case JSONB -> binaryJsonb(bytes, offset, length);
          case BYTEA, OTHER -> Arrays.copyOfRange(bytes, offset, offset + length);
        };
    return new PgValue(type, typeOid, value);
  }

  // ---- text forms --------------------------------------------------------------------

  static String utf8(byte[] bytes, int offset, int length) throws ValueFormatException {
    String text = Utf8.decodeOrNull(bytes, offset, length);
    if (text == null) {
      throw ValueFormatException.INVALID_UTF8;
    }
    return text;
  }

  private static Boolean textBool(byte[] bytes, int offset, int length)
      throws ValueFormatException {
    if (length == 1 && bytes[offset] == 't') {
      return Boolean.TRUE;
    }
    if (length == 1 && bytes[offset] == 'f') {
      return Boolean.FALSE;
    }
    throw ValueFormatException.INVALID_VALUE;
  }

  /** An optionally negative run of ASCII digits within {@code [min, max]}. */
  private static long textInteger(byte[] bytes, int offset, int length, long min, long max)
      throws ValueFormatException {
    boolean negative = length > 0 && bytes[offset] == '-';
    int start = negative ? offset + 1 : offset;
    int end = offset + length;
    if (start == end) {
      throw ValueFormatException.INVALID_VALUE;
    }
    // Accumulate negatively: Long.MIN_VALUE has no positive counterpart.
    long limit = negative ? min : -max;
    long value = 0;
    for (int i = start; i < end; i++) {
      int digit = bytes[i] - '0';
      if (digit < 0 || digit > 9 || value < (limit + digit) / 10) {
        throw ValueFormatException.INVALID_VALUE;
      }
      value = value * 10 - digit;
    }
    return negative ? value : -value;
  }

  private static double textFloat(byte[] bytes, int offset, int length, boolean single)
      throws ValueFormatException {
    if (!isPlainNumber(bytes, offset, length)) {
      throw ValueFormatException.INVALID_VALUE;
    }
    String text = new String(bytes, offset, length, StandardCharsets.ISO_8859_1);
    try {
      return single ? Float.parseFloat(text) : Double.parseDouble(text);
    } catch (NumberFormatException e) {
      throw ValueFormatException.INVALID_VALUE;
    }
  }

  /**
   * Whether the bytes are NaN, an optionally signed Infinity, or a decimal number with an optional
   * exponent: what PostgreSQL prints. Keeps out the hexadecimal, suffixed and padded forms Java's
   * parsers would also accept.
   */
  private static boolean isPlainNumber(byte[] bytes, int offset, int length) {
    if (DateTimeText.matches(bytes, offset, length, "NaN")
        || DateTimeText.matches(bytes, offset, length, "Infinity")
        || DateTimeText.matches(bytes, offset, length, "-Infinity")) {
      return true;
    }
    if (length == 0) {
      return false;
    }
    for (int i = offset; i < offset + length; i++) {
      byte b = bytes[i];
      boolean allowed =
          b >= '0' && b <= '9' || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E';
      if (!allowed) {
        return false;
      }
    }
    return true;
  }

  private static Object textNumeric(byte[] bytes, int offset, int length)
      throws ValueFormatException {
    if (DateTimeText.matches(bytes, offset, length, "NaN")) {
      return PgSpecial.NAN;
    }
    if (DateTimeText.matches(bytes, offset, length, "Infinity")) {
      return PgSpecial.INFINITY;
    }
    if (DateTimeText.matches(bytes, offset, length, "-Infinity")) {
      return PgSpecial.NEGATIVE_INFINITY;
    }
    if (!isPlainNumber(bytes, offset, length)) {
      throw ValueFormatException.INVALID_VALUE;
    }
    char[] chars = new char[length];
    for (int i = 0; i < length; i++) {
      chars[i] = (char) bytes[offset + i];
    }
    try {
      return new BigDecimal(chars);
    } catch (NumberFormatException e) {
      throw ValueFormatException.INVALID_VALUE;
    }
  }

  /** {@code \x} followed by hex pairs, or the escape format of {@code bytea_output = escape}. */
  private static byte[] textBytea(byte[] bytes, int offset, int length)
      throws ValueFormatException {
    if (length >= 2 && bytes[offset] == '\\' && bytes[offset + 1] == 'x') {
      int digits = length - 2;
      if (digits % 2 != 0) {
        throw ValueFormatException.INVALID_VALUE;
      }
      byte[] result = new byte[digits / 2];
      for (int i = 0; i < result.length; i++) {
        int at = offset + 2 + 2 * i;
        result[i] = (byte) (hexDigit(bytes[at]) << 4 | hexDigit(bytes[at + 1]));
      }
      return result;
    }
    return escapedBytea(bytes, offset, length);
  }

  private static byte[] escapedBytea(byte[] bytes, int offset, int length)
      throws ValueFormatException {
    byte[] result = new byte[length];
    int size = 0;
    int end = offset + length;
    for (int i = offset; i < end; i++) {
      byte b = bytes[i];
      if (b != '\\') {
        result[size++] = b;
      } else if (i + 1 < end && bytes[i + 1] == '\\') {
        result[size++] = '\\';
        i++;
      } else if (i + 3 < end
          && isOctal(bytes[i + 1], '3')
          && isOctal(bytes[i + 2], '7')
          && isOctal(bytes[i + 3], '7')) {
        result[size++] =
            (byte) ((bytes[i + 1] - '0') << 6 | (bytes[i + 2] - '0') << 3 | bytes[i + 3] - '0');
        i += 3;
      } else {
        throw ValueFormatException.INVALID_VALUE;
      }
    }
    return size == length ? result : Arrays.copyOf(result, size);
  }

  private static boolean isOctal(byte b, char highest) {
    return b >= '0' && b <= highest;
  }

  private static UUID textUuid(byte[] bytes, int offset, int length) throws ValueFormatException {
    if (length != UUID_TEXT_LENGTH) {
      throw ValueFormatException.INVALID_VALUE;
    }
    long high = 0;
    long low = 0;
    int nibbles = 0;
    for (int i = 0; i < UUID_TEXT_LENGTH; i++) {
      byte b = bytes[offset + i];
      if (i == 8 || i == 13 || i == 18 || i == 23) {
        if (b != '-') {
          throw ValueFormatException.INVALID_VALUE;
        }
        continue;
      }
      int digit = hexDigit(b);
      if (nibbles++ < UUID_BYTES) {
        high = high << 4 | digit;
      } else {
        low = low << 4 | digit;
      }
    }
    return new UUID(high, low);
  }

  private static int hexDigit(byte b) throws ValueFormatException {
    if (b >= '0' && b <= '9') {
      return b - '0';
    }
    if (b >= 'a' && b <= 'f') {
      return b - 'a' + 10;
    }
    if (b >= 'A' && b <= 'F') {
      return b - 'A' + 10;
    }
    throw ValueFormatException.INVALID_VALUE;
  }

  // ---- binary send formats -----------------------------------------------------------

  /** A big-endian signed integer of exactly {@code width} bytes. */
  private static long bigEndian(byte[] bytes, int offset, int length, int width)
      throws ValueFormatException {
    if (length != width) {
      throw ValueFormatException.INVALID_VALUE;
    }
    long value = bytes[offset]; // sign-extends the most significant byte
    for (int i = 1; i < width; i++) {
      value = value << 8 | bytes[offset + i] & 0xFF;
    }
    return value;
  }

  private static Boolean binaryBool(byte[] bytes, int offset, int length)
      throws ValueFormatException {
    long value = bigEndian(bytes, offset, length, 1);
    if (value != 0 && value != 1) {
      throw ValueFormatException.INVALID_VALUE;
    }
    return value == 1;
  }

  private static UUID binaryUuid(byte[] bytes, int offset, int length) throws ValueFormatException {
    if (length != UUID_BYTES) {
      throw ValueFormatException.INVALID_VALUE;
    }
    return new UUID(
        bigEndian(bytes, offset, Long.BYTES, Long.BYTES),
        bigEndian(bytes, offset + Long.BYTES, Long.BYTES, Long.BYTES));
  }

  /** Days since 2000-01-01; the extreme int32 values stand for the infinities. */
  private static Object binaryDate(byte[] bytes, int offset, int length)
      throws ValueFormatException {
    int days = (int) bigEndian(bytes, offset, length, Integer.BYTES);
    return switch (days) {
      case Integer.MAX_VALUE -> PgSpecial.INFINITY;
      case Integer.MIN_VALUE -> PgSpecial.NEGATIVE_INFINITY;
      default -> LocalDate.ofEpochDay(PG_EPOCH_DAYS + days);
    };
  }

  /** Microseconds since 2000-01-01 00:00; the extreme int64 values stand for the infinities. */
  private static Object binaryTimestamp(byte[] bytes, int offset, int length)
      throws ValueFormatException {
    long micros = bigEndian(bytes, offset, length, Long.BYTES);
    if (micros == Long.MAX_VALUE) {
      return PgSpecial.INFINITY;
    }
    if (micros == Long.MIN_VALUE) {
      return PgSpecial.NEGATIVE_INFINITY;
    }
    return LocalDateTime.ofInstant(WireReader.toInstant(micros), ZoneOffset.UTC);
  }

  private static Object binaryTimestamptz(byte[] bytes, int offset, int length)
      throws ValueFormatException {
    Object local = binaryTimestamp(bytes, offset, length);
    return local instanceof LocalDateTime dateTime
        ? OffsetDateTime.of(dateTime, ZoneOffset.UTC)
        : local;
  }

  private static String binaryJsonb(byte[] bytes, int offset, int length)
      throws ValueFormatException {
    if (length < 1 || bytes[offset] != JSONB_VERSION) {
      throw ValueFormatException.INVALID_VALUE;
    }
    return utf8(bytes, offset + 1, length - 1);
  }

  /**
   * The numeric send format: int16 digit count, int16 weight (power of 10000 of the first digit),
   * uint16 sign, int16 display scale, then the base-10000 digits as int16.
   */
  private static Object binaryNumeric(byte[] bytes, int offset, int length)
      throws ValueFormatException {
    if (length < NUMERIC_HEADER_BYTES) {
      throw ValueFormatException.INVALID_VALUE;
    }
    int count = (int) bigEndian(bytes, offset, 2, 2);
    int weight = (int) bigEndian(bytes, offset + 2, 2, 2);
    int sign = (int) bigEndian(bytes, offset + 4, 2, 2) & 0xFFFF;
    int displayScale = (int) bigEndian(bytes, offset + 6, 2, 2);
    if (count < 0
        || length != NUMERIC_HEADER_BYTES + 2 * count
        || (displayScale & ~NUMERIC_DSCALE_MASK) != 0) {
      throw ValueFormatException.INVALID_VALUE;
    }
    PgSpecial special =
        switch (sign) {
          case NUMERIC_NAN -> PgSpecial.NAN;
          case NUMERIC_POSITIVE_INFINITY -> PgSpecial.INFINITY;
          case NUMERIC_NEGATIVE_INFINITY -> PgSpecial.NEGATIVE_INFINITY;
          case NUMERIC_POSITIVE, NUMERIC_NEGATIVE -> null;
          default -> throw ValueFormatException.INVALID_VALUE;
        };
    if (special != null) {
      return special;
    }
    StringBuilder digits = new StringBuilder(count * NUMERIC_BASE_DIGITS + 1).append('0');
    for (int i = 0; i < count; i++) {
      int digit = (int) bigEndian(bytes, offset + NUMERIC_HEADER_BYTES + 2 * i, 2, 2);
      if (digit < 0 || digit >= NUMERIC_BASE) {
        throw ValueFormatException.INVALID_VALUE;
      }
      String group = Integer.toString(digit);
      digits.append("0000", group.length(), NUMERIC_BASE_DIGITS).append(group);
    }
    BigInteger unscaled = new BigInteger(digits.toString());
    BigDecimal value =
        new BigDecimal(
            sign == NUMERIC_NEGATIVE ? unscaled.negate() : unscaled,
            NUMERIC_BASE_DIGITS * (count - 1 - weight));
    if (value.scale() < displayScale) {
      return value.setScale(displayScale);
    }
    try {
      return value.setScale(displayScale, RoundingMode.UNNECESSARY);
    } catch (ArithmeticException e) {
      return value; // digits beyond the display scale: keep them rather than round
    }
  }
}
