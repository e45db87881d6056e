package io.weir.sharding.partition;

import java.util.Comparator;

/**
 * Document ids (and collection names) in code-point order: the order of their UTF-8 bytes, which is
 * how the documents table compares them ({@code COLLATE "C"}) and how every page and split of a
 * partition walks them. {@link String#compareTo} compares UTF-16 units instead and differs for
 * characters beyond U+FFFF.
 */
final class Ids {
  private Ids() {}

  static final Comparator<String> ORDER = Ids::compare;

  static int compare(String a, String b) {
    int n = Math.min(a.length(), b.length());
    for (int i = 0; i < n; i++) {
      char x = a.charAt(i);
      char y = b.charAt(i);
      if (x != y) {
        // Surrogates (U+D800..DFFF) encode code points above every other BMP character.
        boolean sx = Character.isSurrogate(x);
        boolean sy = Character.isSurrogate(y);
        if (sx != sy) {
          return sx ? 1 : -1;
        }
        return Character.compare(x, y);
      }
    }
    return Integer.compare(a.length(), b.length());
  }
}
