package io.weir.protocol.pgoutput;

import java.time.DateTimeException;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;

/**
 * Parses the ISO text forms PostgreSQL prints for date, timestamp and timestamptz under {@code
 * DateStyle = ISO} (the style replication connections use):
 *
 * <pre>
 *   2024-01-02                       0044-03-15 BC           5874897-12-31
 *   2024-01-02 03:04:05.123456       0044-03-15 12:00:00 BC
 *   2024-01-02 03:04:05.123456+00    1890-01-01 05:53:28+05:53:28
 *   infinity                         -infinity
 * </pre>
 *
 * Years of 4 to 9 digits; a {@code BC} year {@code y} becomes the ISO year {@code 1 - y}. Works on
 * the bytes of the value without building a string.
 */
final class DateTimeText {

  private static final int MAX_YEAR_DIGITS = 9;
  private static final int MAX_FRACTION_DIGITS = 9;
  private static final int[] POWERS_OF_TEN = {
    1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000
  };

  private final byte[] bytes;
  private final int end;
  private int position;

  private DateTimeText(byte[] bytes, int offset, int length) {
    this.bytes = bytes;
    this.position = offset;
    this.end = offset + length;
  }

  static Object date(byte[] bytes, int offset, int length) throws ValueFormatException {
    PgSpecial special = infinity(bytes, offset, length);
    if (special != null) {
      return special;
    }
    DateTimeText text = new DateTimeText(bytes, offset, length);
    YearMonthDay ymd = text.yearMonthDay();
    boolean bc = text.bcSuffix();
    text.expectEnd();
    return localDate(ymd, bc);
  }

  static Object timestamp(byte[] bytes, int offset, int length) throws ValueFormatException {
    PgSpecial special = infinity(bytes, offset, length);
    if (special != null) {
      return special;
    }
    DateTimeText text = new DateTimeText(bytes, offset, length);
    YearMonthDay ymd = text.yearMonthDay();
    text.expect(' ');
    LocalTime time = text.time();
    boolean bc = text.bcSuffix();
    text.expectEnd();
    return LocalDateTime.of(localDate(ymd, bc), time);
  }

  static Object timestamptz(byte[] bytes, int offset, int length) throws ValueFormatException {
    PgSpecial special = infinity(bytes, offset, length);
    if (special != null) {
      return special;
    }
    DateTimeText text = new DateTimeText(bytes, offset, length);
    YearMonthDay ymd = text.yearMonthDay();
    text.expect(' ');
    LocalTime time = text.time();
    ZoneOffset zone = text.offset();
    boolean bc = text.bcSuffix();
    text.expectEnd();
    return OffsetDateTime.of(localDate(ymd, bc), time, zone);
  }

  private static PgSpecial infinity(byte[] bytes, int offset, int length) {
    if (matches(bytes, offset, length, "infinity")) {
      return PgSpecial.INFINITY;
    }
    if (matches(bytes, offset, length, "-infinity")) {
      return PgSpecial.NEGATIVE_INFINITY;
    }
    return null;
  }

  static boolean matches(byte[] bytes, int offset, int length, String ascii) {
    if (length != ascii.length()) {
      return false;
    }
    for (int i = 0; i < length; i++) {
      if (bytes[offset + i] != ascii.charAt(i)) {
        return false;
      }
    }
    return true;
  }

  /** The date fields as printed, before a {@code BC} suffix further on is applied. */
  private record YearMonthDay(int year, int month, int day) {}

  private YearMonthDay yearMonthDay() throws ValueFormatException {
    int year = digits(4, MAX_YEAR_DIGITS);
    expect('-');
    int month = digits(2, 2);
    expect('-');
    int day = digits(2, 2);
    return new YearMonthDay(year, month, day);
  }

  private static LocalDate localDate(YearMonthDay ymd, boolean bc) throws ValueFormatException {
    if (ymd.year() == 0) {
      throw ValueFormatException.INVALID_VALUE; // there is no year 0 AD or BC
    }
    try {
      return LocalDate.of(bc ? 1 - ymd.year() : ymd.year(), ymd.month(), ymd.day());
    } catch (DateTimeException e) {
      throw ValueFormatException.INVALID_VALUE;
    }
  }

  private LocalTime time() throws ValueFormatException {
    int hour = digits(2, 2);
    expect(':');
    int minute = digits(2, 2);
    expect(':');
    int second = digits(2, 2);
    int nanos = 0;
    if (peek() == '.') {
      position++;
      int start = position;
      int fraction = digits(1, MAX_FRACTION_DIGITS);
      nanos = fraction * POWERS_OF_TEN[MAX_FRACTION_DIGITS - (position - start)];
    }
    try {
      return LocalTime.of(hour, minute, second, nanos);
    } catch (DateTimeException e) {
      throw ValueFormatException.INVALID_VALUE;
    }
  }

  private ZoneOffset offset() throws ValueFormatException {
    int sign =
        switch (peek()) {
          case '+' -> 1;
          case '-' -> -1;
          default -> throw ValueFormatException.INVALID_VALUE;
        };
    position++;
    int hours = digits(2, 2);
    int minutes = 0;
    int seconds = 0;
    if (peek() == ':') {
      position++;
      minutes = digits(2, 2);
      if (peek() == ':') {
        position++;
        seconds = digits(2, 2);
      }
    }
    try {
      return ZoneOffset.ofHoursMinutesSeconds(sign * hours, sign * minutes, sign * seconds);
    } catch (DateTimeException e) {
      throw ValueFormatException.INVALID_VALUE;
    }
  }

  private boolean bcSuffix() {
    if (end - position == 3
        && bytes[position] == ' '
        && bytes[position + 1] == 'B'
        && bytes[position + 2] == 'C') {
      position = end;
      return true;
    }
    return false;
  }

  /** Between {@code min} and {@code max} ASCII digits, as many as there are. */
  private int digits(int min, int max) throws ValueFormatException {
    int start = position;
    int value = 0;
    while (position < end && position - start < max) {
      int digit = bytes[position] - '0';
      if (digit < 0 || digit > 9) {
        break;
      }
      value = value * 10 + digit;
      position++;
    }
    int count = position - start;
    if (count < min || position < end && count == max && isDigit(bytes[position])) {
      throw ValueFormatException.INVALID_VALUE;
    }
    return value;
  }

  private static boolean isDigit(byte b) {
    return b >= '0' && b <= '9';
  }

  private int peek() {
    return position < end ? bytes[position] : -1;
  }

  private void expect(char c) throws ValueFormatException {
    if (peek() != c) {
      throw ValueFormatException.INVALID_VALUE;
    }
    position++;
  }

  private void expectEnd() throws ValueFormatException {
    if (position != end) {
      throw ValueFormatException.INVALID_VALUE;
    }
  }
}
