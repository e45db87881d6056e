package io.weir.sharding.partition;

import io.weir.sharding.partition.ReadProtocol.Document;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Recently written documents of a partition whose changes the documents table has applied, so that
 * the next write of the same document finds its before image without a read (ADR 0032). Least
 * recently used first out, bounded by an estimate of the heap its documents take. Each keeps the
 * journal sequence of its change: it is served only while the index names that same change.
 *
 * <p>Owned by the partition's actor; not thread-safe.
 */
final class BodyCache {
  /** Heap counted per cached document besides its strings. */
  static final int OVERHEAD = 120;

  record Cached(long lastSeq, Document document, long heap) {}

  private final long maxHeap;
  private final LinkedHashMap<String, Cached> entries = new LinkedHashMap<>(64, 0.75f, true);
  private long heap;
  private long hits;
  private long misses;

  BodyCache(long maxHeap) {
    this.maxHeap = maxHeap;
  }

  /**
   * The document as of journal sequence {@code lastSeq}, or null when not cached at that change.
   */
  Document get(String key, long lastSeq) {
    Cached c = entries.get(key);
    if (c == null || c.lastSeq() != lastSeq) {
      misses++;
      return null;
    }
    hits++;
    return c.document();
  }

  void put(String key, long lastSeq, Document d) {
    long size = heapOf(d) + 2L * key.length();
    if (size > maxHeap / 4) {
      remove(key);
      return;
    }
    Cached previous = entries.put(key, new Cached(lastSeq, d, size));
    if (previous != null) {
      heap -= previous.heap();
    }
    heap += size;
    Iterator<Cached> oldest = entries.values().iterator();
    while (heap > maxHeap && oldest.hasNext()) {
      heap -= oldest.next().heap();
      oldest.remove();
    }
  }

  void remove(String key) {
    Cached c = entries.remove(key);
    if (c != null) {
      heap -= c.heap();
    }
  }

  /** Drops every document of {@code collection} (reset, or its tombstones' values changed). */
  void dropCollection(String collection) {
    Iterator<Map.Entry<String, Cached>> it = entries.entrySet().iterator();
    while (it.hasNext()) {
      Map.Entry<String, Cached> e = it.next();
      if (e.getValue().document().collection().equals(collection)) {
        heap -= e.getValue().heap();
        it.remove();
      }
    }
  }

  long heap() {
    return heap;
  }

  long hits() {
    return hits;
  }

  long misses() {
    return misses;
  }

  /** Heap of a document's strings (Latin-1 text one byte a character, other text two). */
  static long heapOf(Document d) {
    return OVERHEAD + chars(d.body()) + chars(d.acl()) + chars(d.id());
  }

  private static long chars(String s) {
    if (s == null) {
      return 0;
    }
    long n = s.length();
    for (int i = 0; i < s.length(); i++) {
      if (s.charAt(i) > 0xFF) {
        return 2 * n;
      }
    }
    return n;
  }
}
