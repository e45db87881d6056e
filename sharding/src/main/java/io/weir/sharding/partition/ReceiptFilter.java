package io.weir.sharding.partition;

import com.google.common.hash.BloomFilter;
import com.google.common.hash.Funnels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Which receipt keys the receipts table may hold, so that a keyed write whose key is in neither the
 * heap nor the filter is planned without reading the table (ADR 0057). Answers "maybe" or "no": a
 * false "maybe" costs the read the partition made before, a "no" is only given while the filter
 * knows every receipt of the partition that has not expired.
 *
 * <p>The keys are held in Bloom filters of {@link #BUCKET_KEYS} keys each, a bucket dropped once
 * its newest receipt has expired. When more keys than the filter's capacity arrive, the oldest
 * bucket goes and the filter answers "maybe" to every key until the receipts of that bucket have
 * expired ({@code blindUntil}).
 *
 * <p>A partition's filter knows nothing until it is complete: every receipt written since it exists
 * is added as its event persists, and the ones written before are added from the heap and from the
 * table ({@link #completeWith}). Actor thread only, except a part being loaded, which is only the
 * loader's until it is handed over.
 */
final class ReceiptFilter {
  /** Keys per bucket. */
  static final int BUCKET_KEYS = 1 << 16;

  /** Keys a partition's filter holds at most: about 1.2 MB of heap when full. */
  static final int MAX_KEYS = 1 << 20;

  /** The false-positive rate of each bucket when full. */
  private static final double FPP = 0.01;

  private final long ttlMillis;
  private final int bucketKeys;
  private final int maxBuckets;
  private final ArrayDeque<Bucket> buckets = new ArrayDeque<>();
  private boolean complete;
  private long blindUntil = Long.MIN_VALUE;

  /**
   * The latest time the filter was asked at or read the table at: a clock that went back behind it
   * may count receipts as unexpired that the filter has let go, so it says "maybe" until then.
   */
  private long latestNow = Long.MIN_VALUE;

  private static final class Bucket {
    final BloomFilter<CharSequence> keys;
    int count;
    long newestAt = Long.MIN_VALUE;

    Bucket(int capacity) {
      keys = BloomFilter.create(Funnels.stringFunnel(StandardCharsets.UTF_8), capacity, FPP);
    }
  }

  /** A filter for receipts kept {@code ttlMillis}, with the default capacity. */
  ReceiptFilter(long ttlMillis) {
    this(ttlMillis, BUCKET_KEYS, MAX_KEYS / BUCKET_KEYS);
  }

  /** A filter of at most {@code maxBuckets} buckets of {@code bucketKeys} keys (for tests). */
  ReceiptFilter(long ttlMillis, int bucketKeys, int maxBuckets) {
    if (ttlMillis < 1 || bucketKeys < 1 || maxBuckets < 1) {
      throw new IllegalArgumentException("a receipt filter's bounds must be positive");
    }
    this.ttlMillis = ttlMillis;
    this.bucketKeys = bucketKeys;
    this.maxBuckets = maxBuckets;
  }

  /** Keys the filter holds at most. */
  int capacity() {
    return bucketKeys * maxBuckets;
  }

  /** Records a receipt written at {@code atMillis} under {@code key}. */
  void add(String key, long atMillis) {
    Bucket b = buckets.peekLast();
    if (b == null || b.count >= bucketKeys) {
      if (buckets.size() >= maxBuckets) {
        drop(buckets.pollFirst());
      }
      b = new Bucket(bucketKeys);
      buckets.addLast(b);
    }
    b.keys.put(key);
    b.count++;
    b.newestAt = Math.max(b.newestAt, atMillis);
  }

  /** Forgets a bucket's keys: until they have expired, every key may be in the table. */
  private void drop(Bucket b) {
    blindUntil = Math.max(blindUntil, b.newestAt + ttlMillis);
  }

  /**
   * Whether the table may hold an unexpired receipt under {@code key} at {@code nowMillis}: true
   * unless the filter is complete, has dropped no unexpired key, and none of its buckets may hold
   * it.
   */
  boolean mayHold(String key, long nowMillis) {
    if (!complete || nowMillis <= blindUntil || nowMillis < latestNow) {
      return true;
    }
    latestNow = nowMillis;
    long horizon = nowMillis - ttlMillis;
    buckets.removeIf(b -> b.newestAt < horizon);
    for (Bucket b : buckets) {
      if (b.keys.mightContain(key)) {
        return true;
      }
    }
    return false;
  }

  /** Whether the filter knows every receipt of its partition (see {@link #completeWith}). */
  boolean complete() {
    return complete;
  }

  /** Keys recorded in the buckets it holds. */
  long keys() {
    long n = 0;
    for (Bucket b : buckets) {
      n += b.count;
    }
    return n;
  }

  /**
   * The filter knows every receipt: those added since it exists, and {@code loaded}, the ones of
   * the table and the heap when the filter was made ({@code null}: none can have been kept). When
   * the loaded and the added together are more than it holds, the oldest buckets go.
   */
  void completeWith(ReceiptFilter loaded) {
    if (loaded != null) {
      List<Bucket> all = new ArrayList<>(loaded.buckets);
      all.addAll(buckets);
      all.sort(Comparator.comparingLong(b -> b.newestAt));
      buckets.clear();
      for (int i = 0; i < all.size(); i++) {
        if (all.size() - i > maxBuckets) {
          drop(all.get(i));
        } else {
          buckets.addLast(all.get(i));
        }
      }
      blindUntil = Math.max(blindUntil, loaded.blindUntil);
    }
    complete = true;
  }

  /**
   * A part to load the table's receipts into (see {@link Loading}), read at {@code nowMillis}: one
   * bucket fewer than the filter, for the keys added while it loads.
   */
  Loading loading(long nowMillis) {
    latestNow = Math.max(latestNow, nowMillis);
    return new Loading(new ReceiptFilter(ttlMillis, bucketKeys, Math.max(1, maxBuckets - 1)));
  }

  /**
   * A part being loaded (the loader's alone until {@link #part} is handed over): the table's
   * receipts, newest first, up to the filter's capacity; when there are more, the older ones are
   * left out and the part answers "maybe" to every key until they have expired.
   */
  static final class Loading implements DocumentTable.ReceiptKeyVisitor {
    private final ReceiptFilter part;
    private int added;
    private volatile boolean cancelled;

    private Loading(ReceiptFilter part) {
      this.part = part;
    }

    /** Records one receipt; false once the part is full: this one and all older are left out. */
    @Override
    public boolean receipt(String key, long atMillis) {
      if (cancelled) {
        return false;
      }
      if (added >= part.capacity()) {
        part.blindUntil = Math.max(part.blindUntil, atMillis + part.ttlMillis);
        return false;
      }
      part.add(key, atMillis);
      added++;
      return true;
    }

    /** The partition stopped: the read ends at its next receipt, or does not begin. */
    void cancel() {
      cancelled = true;
    }

    @Override
    public boolean wanted() {
      return !cancelled;
    }

    /** Receipts to read at most: one more than the part holds shows whether any were left out. */
    int limit() {
      return part.capacity() + 1;
    }

    /** How many receipts were added. */
    int added() {
      return added;
    }

    ReceiptFilter part() {
      return part;
    }
  }
}
