package io.weir.node.documents;

/**
 * Bounds of {@code POST /v1/documents/batch} ({@code weir.documents.batch}).
 *
 * @param maxItems the most items one request may hold
 * @param maxBytes the largest request body, in bytes
 */
public record BatchLimits(int maxItems, long maxBytes) {
  public static final BatchLimits DEFAULTS = new BatchLimits(1000, 4L << 20);

  public BatchLimits {
    if (maxItems < 1 || maxBytes < 1) {
      throw new IllegalArgumentException("batch limits must be positive");
    }
  }
}
