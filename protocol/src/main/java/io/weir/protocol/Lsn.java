package io.weir.protocol;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonValue;
import java.util.Locale;

/**
 * A PostgreSQL log sequence number: an unsigned 64-bit position in the write-ahead log.
 *
 * <p>The text form is the one {@code pg_lsn} prints: the upper and lower 32 bits as upper-case
 * hexadecimal without leading zeros, separated by a slash ({@code 0/0}, {@code 16/B374D848}, {@code
 * FFFFFFFF/FFFFFFFF}). Ordering is unsigned, so positions at or above 2<sup>63</sup> sort after
 * every smaller position. Jackson reads and writes the text form.
 */
public final class Lsn implements Comparable<Lsn> {

  /** {@code 0/0}, PostgreSQL's {@code InvalidXLogRecPtr}: no position. */
  public static final Lsn INVALID = new Lsn(0L);

  private static final int MAX_HALF_DIGITS = 8;

  private final long value;

  private Lsn(long value) {
    this.value = value;
  }

  /** The LSN whose 64 bits are {@code value}, read as unsigned. */
  public static Lsn of(long value) {
    return value == 0L ? INVALID : new Lsn(value);
  }

  /**
   * Parses the {@code pg_lsn} text form: one to eight hex digits, a slash, one to eight hex digits;
   * either letter case.
   *
   * @throws IllegalArgumentException if the text does not have that shape; the message states the
   *     expected shape and never repeats the input
   */
  @JsonCreator
  public static Lsn parse(CharSequence text) {
    if (text == null) {
      throw new IllegalArgumentException("LSN text must not be null");
    }
    int slash = -1;
    for (int i = 0; i < text.length(); i++) {
      if (text.charAt(i) == '/') {
        slash = i;
        break;
      }
    }
    if (slash < 0) {
      throw malformed();
    }
    long upper = parseHalf(text, 0, slash);
    long lower = parseHalf(text, slash + 1, text.length());
    return of(upper << 32 | lower);
  }

  private static long parseHalf(CharSequence text, int from, int to) {
    int digits = to - from;
    if (digits < 1 || digits > MAX_HALF_DIGITS) {
      throw malformed();
    }
    long half = 0;
    for (int i = from; i < to; i++) {
      half = half << 4 | hexDigit(text.charAt(i));
    }
    return half;
  }

  private static int hexDigit(char c) {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'A' && c <= 'F') {
      return c - 'A' + 10;
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    throw malformed();
  }

  private static IllegalArgumentException malformed() {
    return new IllegalArgumentException(
        "LSN must be two groups of 1 to 8 hexadecimal digits separated by '/', like 16/B374D848");
  }

  /** The 64 bits of this position; compare them with {@link Long#compareUnsigned}. */
  public long asLong() {
    return value;
  }

  /** Whether this is a real position, i.e. not {@link #INVALID}. */
  public boolean isValid() {
    return value != 0L;
  }

  /** Whether this position lies strictly after {@code other}. */
  public boolean isAfter(Lsn other) {
    return compareTo(other) > 0;
  }

  /** Whether this position lies strictly before {@code other}. */
  public boolean isBefore(Lsn other) {
    return compareTo(other) < 0;
  }

  @Override
  public int compareTo(Lsn other) {
    return Long.compareUnsigned(value, other.value);
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof Lsn lsn && lsn.value == value;
  }

  @Override
  public int hashCode() {
    return Long.hashCode(value);
  }

  /** The {@code pg_lsn} text form, e.g. {@code 16/B374D848}. */
  @JsonValue
  @Override
  public String toString() {
    return Integer.toHexString((int) (value >>> 32)).toUpperCase(Locale.ROOT)
        + '/'
        + Integer.toHexString((int) value).toUpperCase(Locale.ROOT);
  }
}
