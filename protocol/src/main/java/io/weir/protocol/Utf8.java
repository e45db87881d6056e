package io.weir.protocol;

/**
 * The length of text in UTF-8 bytes, counted without encoding it. Every limit Weir states in bytes
 * (outbox quota and reserve, read budgets, the feed's {@code maxBytes}, message and row bounds)
 * counts this, not {@link String#length()}, which counts UTF-16 units and undercounts non-Latin
 * text up to threefold.
 */
public final class Utf8 {
  private Utf8() {}

  /**
   * Bytes of {@code text} in UTF-8; 0 for null. A surrogate pair counts 4; a lone surrogate counts
   * 3, as the replacement character it would be written as (never less than its encoding).
   */
  public static long length(CharSequence text) {
    if (text == null) {
      return 0;
    }
    int n = text.length();
    long bytes = n;
    for (int i = 0; i < n; i++) {
      char c = text.charAt(i);
      if (c < 0x80) {
        continue;
      }
      if (c < 0x800) {
        bytes += 1;
      } else if (Character.isHighSurrogate(c)
          && i + 1 < n
          && Character.isLowSurrogate(text.charAt(i + 1))) {
        // Two UTF-16 units, four bytes.
        bytes += 2;
        i++;
      } else {
        bytes += 2;
      }
    }
    return bytes;
  }
}
