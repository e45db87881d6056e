package io.weir.protocol.query;

/**
 * The bounds a Q1 query must stay within; {@link #DEFAULTS} unless configured otherwise.
 *
 * @param maxDepth how deeply predicates nest (the {@code where} predicate is at depth 1)
 * @param maxNodes how many predicate objects a query has in all
 * @param maxSelectFields how many entries {@code select} has (before duplicates are removed)
 * @param maxStringLength the length of a string literal, in UTF-16 code units
 * @param maxInValues how many values one {@code in} has
 * @param maxPathSegments how many dot-separated segments a field path has
 * @param maxPathLength the length of a field path, in characters
 */
public record QueryLimits(
    int maxDepth,
    int maxNodes,
    int maxSelectFields,
    int maxStringLength,
    int maxInValues,
    int maxPathSegments,
    int maxPathLength) {
  public static final QueryLimits DEFAULTS = new QueryLimits(16, 256, 64, 4096, 1000, 8, 256);

  public QueryLimits {
    if (maxDepth < 1
        || maxNodes < 1
        || maxSelectFields < 1
        || maxStringLength < 0
        || maxInValues < 1
        || maxPathSegments < 1
        || maxPathLength < 1) {
      throw new IllegalArgumentException("query limits are positive (string length at least 0)");
    }
  }
}
