package io.weir.node.feed;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.MissingNode;
import io.weir.node.auth.Access;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Images of outbox entries parsed once per node, not once per reader: readers following the same
 * tail (live queries of different predicates) get the entries from one cache ({@code
 * OutboxReader}), so the same image text reaches each of them, and each would otherwise parse it
 * again. Bounded by the text it holds ({@code maxChars}), evicted in insertion order. The trees are
 * shared: callers only read them ({@code Q1Query.matches} and {@code project} copy what they keep).
 */
final class ParsedImages {
  /** Image text held at most, in characters, by default (trees take a few times that in heap). */
  static final long DEFAULT_MAX_CHARS = 4L << 20;

  private final long maxChars;
  private final Map<String, JsonNode> trees = new ConcurrentHashMap<>();
  private final Queue<String> order = new ConcurrentLinkedQueue<>();
  private final AtomicLong chars = new AtomicLong();

  ParsedImages(long maxChars) {
    this.maxChars = maxChars;
  }

  /** The image's tree; null for no image or one that is not JSON. */
  JsonNode tree(String image) {
    if (image == null) {
      return null;
    }
    JsonNode cached = trees.get(image);
    if (cached == null) {
      JsonNode parsed = Access.tree(image);
      cached = parsed == null ? MissingNode.getInstance() : parsed;
      if (image.length() <= maxChars / 4 && trees.putIfAbsent(image, cached) == null) {
        order.add(image);
        chars.addAndGet(image.length());
        while (chars.get() > maxChars) {
          String oldest = order.poll();
          if (oldest == null) {
            break;
          }
          trees.remove(oldest);
          chars.addAndGet(-oldest.length());
        }
      }
    }
    return cached.isMissingNode() ? null : cached;
  }

  /** Images held now (for tests). */
  int size() {
    return trees.size();
  }
}
