package io.weir.persistence;

import java.util.regex.Pattern;

/**
 * Allow-list validation for identifiers that reach SQL (schema, slot, publication, table names). A
 * rejected identifier is reported by its shape, never by its text.
 */
public final class Identifiers {
  /** What a valid identifier looks like, for error messages. */
  public static final String SHAPE =
      "must be a lower-case identifier: a letter or underscore, then letters, digits or underscores, at most 63 characters";

  private static final Pattern VALID = Pattern.compile("[a-z_][a-z0-9_]{0,62}");

  private Identifiers() {}

  public static boolean isValid(String identifier) {
    return identifier != null && VALID.matcher(identifier).matches();
  }

  /**
   * Returns the identifier if valid.
   *
   * @param what what the identifier names, e.g. "slot name"; goes into the error message
   * @throws IllegalArgumentException naming {@code what} and the expected shape, not the identifier
   */
  public static String require(String what, String identifier) {
    if (!isValid(identifier)) {
      throw new IllegalArgumentException(what + " " + SHAPE);
    }
    return identifier;
  }

  /**
   * A catalog name (table, column) as a quoted SQL identifier: in double quotes, embedded double
   * quotes doubled. For names read from the catalog, which need not pass {@link #isValid}.
   */
  public static String quote(String name) {
    if (name == null || name.isEmpty() || name.indexOf('\0') >= 0) {
      throw new IllegalArgumentException(
          "an identifier must be non-empty and contain no NUL character");
    }
    return '"' + name.replace("\"", "\"\"") + '"';
  }
}
