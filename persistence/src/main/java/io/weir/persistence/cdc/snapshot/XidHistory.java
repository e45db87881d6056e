package io.weir.persistence.cdc.snapshot;

import java.util.Arrays;

/**
 * Transaction ids the pipeline delivered recently, to check that a snapshot taken for an
 * incremental chunk already sees all of them. A commit is decoded as soon as its WAL is written, a
 * moment before other sessions see it (PostgreSQL makes it visible after the flush and after
 * synchronous standbys answer), so a snapshot can miss a transaction the stream already delivered.
 * Not thread-safe.
 */
final class XidHistory {
  private final int[] ring;
  private int next;
  private int size;
  private boolean evicted;
  private long maxEvicted; // 32-bit xid as unsigned, valid when evicted

  XidHistory(int capacity) {
    ring = new int[capacity];
  }

  void add(long xid) {
    if (size == ring.length) {
      long old = Integer.toUnsignedLong(ring[next]);
      maxEvicted = evicted ? newer(maxEvicted, old) : old;
      evicted = true;
    } else {
      size++;
    }
    ring[next] = (int) xid;
    next = (next + 1) % ring.length;
  }

  /**
   * Whether {@code snapshot} sees every transaction recorded so far (and every one forgotten to
   * make room). Entries the snapshot shows as completed for everyone ({@code xid < xmin}) are
   * dropped: no later snapshot can miss them either.
   */
  boolean allVisibleIn(PgSnapshot snapshot) {
    if (evicted && !snapshot.sees(maxEvicted)) {
      return false;
    }
    boolean all = true;
    int[] keep = new int[size];
    int kept = 0;
    for (int i = 0; i < size; i++) {
      int at = (next - size + i + ring.length) % ring.length;
      long xid = Integer.toUnsignedLong(ring[at]);
      if (!snapshot.sees(xid)) {
        all = false;
      }
      if (!snapshot.completedForAll(xid)) {
        keep[kept++] = ring[at];
      }
    }
    size = 0;
    next = 0;
    for (int i = 0; i < kept; i++) {
      ring[next] = keep[i];
      next = (next + 1) % ring.length;
      size++;
    }
    if (evicted && snapshot.completedForAll(maxEvicted)) {
      evicted = false;
    }
    return all;
  }

  int size() {
    return size;
  }

  /** The later of two 32-bit xids in modulo-2^32 order. */
  private static long newer(long a, long b) {
    return (int) (b - a) > 0 ? b : a;
  }

  /**
   * A snapshot as {@code pg_current_snapshot()} prints it: {@code xmin:xmax:xip,...}, 64-bit
   * transaction ids (epoch and xid).
   */
  record PgSnapshot(long xmin, long xmax, long[] inProgress) {
    static PgSnapshot parse(String text) {
      String[] parts = text.split(":", -1);
      if (parts.length != 3) {
        throw new IllegalArgumentException("not a pg_snapshot");
      }
      long[] xip =
          parts[2].isEmpty()
              ? new long[0]
              : Arrays.stream(parts[2].split(",")).mapToLong(Long::parseLong).toArray();
      return new PgSnapshot(Long.parseLong(parts[0]), Long.parseLong(parts[1]), xip);
    }

    /**
     * The 64-bit id of a 32-bit xid within 2^31 of this snapshot's xmax, on either side (a
     * transaction the stream delivered may be newer than the snapshot).
     */
    long widen(long xid32) {
      int distance = (int) xid32 - (int) xmax; // signed, modulo 2^32
      return xmax + distance;
    }

    /** pg_visible_in_snapshot: completed before the snapshot was taken. */
    boolean sees(long xid32) {
      long x = widen(xid32);
      if (x < xmin) {
        return true;
      }
      if (x >= xmax) {
        return false;
      }
      for (long p : inProgress) {
        if (p == x) {
          return false;
        }
      }
      return true;
    }

    /** Completed before any transaction this snapshot saw running: every later snapshot sees it. */
    boolean completedForAll(long xid32) {
      return widen(xid32) < xmin;
    }
  }
}
