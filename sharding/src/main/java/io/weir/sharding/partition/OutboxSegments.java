package io.weir.sharding.partition;

import io.weir.sharding.partition.Partition.Segment;
import java.util.Arrays;
import java.util.TreeMap;
import java.util.function.LongConsumer;

/**
 * The outbox's index: for each journal event that holds outbox entries, the first entry's position
 * and its {@link Segment}, in position order. Events append at the end and purges remove from the
 * start, so the index is four parallel arrays used as a queue, searched by binary search: no node
 * or boxed key per event (the tree map it replaces spent 6-7.5% of the execution samples of a keyed
 * write benchmark on its inserts). Not thread-safe: the partition's state owns it, a snapshot gets
 * a {@link #copy}.
 */
final class OutboxSegments {
  private long[] firsts;
  private long[] journalSequences;
  private int[] entries;
  private long[] bytes;

  /** The live segments are at indices [head, tail). */
  private int head;

  private int tail;

  private static final int MIN_CAPACITY = 16;

  OutboxSegments() {
    this(MIN_CAPACITY);
  }

  /**
   * An empty index with room for {@code capacity} segments before it grows (at least 16, at most
   * 2^20 up front: a count read from a snapshot is not trusted with more).
   */
  OutboxSegments(int capacity) {
    capacity = Math.max(MIN_CAPACITY, Math.min(capacity, 1 << 20));
    firsts = new long[capacity];
    journalSequences = new long[capacity];
    entries = new int[capacity];
    bytes = new long[capacity];
  }

  /** A copy holding the same segments. */
  OutboxSegments copy() {
    OutboxSegments c = new OutboxSegments(size());
    c.tail = size();
    System.arraycopy(firsts, head, c.firsts, 0, c.tail);
    System.arraycopy(journalSequences, head, c.journalSequences, 0, c.tail);
    System.arraycopy(entries, head, c.entries, 0, c.tail);
    System.arraycopy(bytes, head, c.bytes, 0, c.tail);
    return c;
  }

  /**
   * Adds the segment whose first entry is at {@code first}. Positions only grow, so it goes after
   * every segment held; were it not past the last one, it would be put in its place as a sorted map
   * does (one at the same position replaced), never refused: an event already persisted must apply.
   */
  void append(long first, Segment s) {
    if (tail > head && first <= firsts[tail - 1]) {
      insert(first, s);
      return;
    }
    if (tail == firsts.length) {
      makeRoom();
    }
    set(tail, first, s);
    tail++;
  }

  private void set(int i, long first, Segment s) {
    firsts[i] = first;
    journalSequences[i] = s.journalSequence();
    entries[i] = s.entries();
    bytes[i] = s.bytes();
  }

  /** The slow way of {@link #append}: at its place by position. */
  private void insert(long first, Segment s) {
    int i = Arrays.binarySearch(firsts, head, tail, first);
    if (i >= 0) {
      set(i, first, s);
      return;
    }
    if (tail == firsts.length) {
      makeRoom();
      i = Arrays.binarySearch(firsts, head, tail, first);
    }
    int at = -i - 1;
    int n = tail - at;
    System.arraycopy(firsts, at, firsts, at + 1, n);
    System.arraycopy(journalSequences, at, journalSequences, at + 1, n);
    System.arraycopy(entries, at, entries, at + 1, n);
    System.arraycopy(bytes, at, bytes, at + 1, n);
    set(at, first, s);
    tail++;
  }

  /**
   * Moves the live segments to the start, or into arrays twice as long when more than half full.
   */
  private void makeRoom() {
    resize(size() > firsts.length / 2 ? firsts.length * 2 : firsts.length);
  }

  /** Moves the live segments to the start of arrays of {@code capacity} (at least their number). */
  private void resize(int capacity) {
    int n = size();
    if (capacity != firsts.length) {
      firsts = Arrays.copyOfRange(firsts, head, head + capacity);
      journalSequences = Arrays.copyOfRange(journalSequences, head, head + capacity);
      entries = Arrays.copyOfRange(entries, head, head + capacity);
      bytes = Arrays.copyOfRange(bytes, head, head + capacity);
    } else if (head > 0) {
      System.arraycopy(firsts, head, firsts, 0, n);
      System.arraycopy(journalSequences, head, journalSequences, 0, n);
      System.arraycopy(entries, head, entries, 0, n);
      System.arraycopy(bytes, head, bytes, 0, n);
    }
    head = 0;
    tail = n;
  }

  /** Segments the arrays hold before they grow. */
  int capacity() {
    return firsts.length;
  }

  int size() {
    return tail - head;
  }

  boolean isEmpty() {
    return tail == head;
  }

  /** The first segment's first position (the index must not be empty). */
  long firstPosition() {
    return firsts[checkedHead()];
  }

  /** The first segment (the index must not be empty). */
  Segment first() {
    return segment(checkedHead());
  }

  private int checkedHead() {
    if (isEmpty()) {
      throw new IllegalStateException("the outbox index is empty");
    }
    return head;
  }

  /**
   * Removes the first segment (the index must not be empty). Arrays a quarter full or less are
   * halved, so a purged backlog gives its memory back.
   */
  void removeFirst() {
    checkedHead();
    head++;
    if (head == tail) {
      head = 0;
      tail = 0;
    }
    if (firsts.length > MIN_CAPACITY && size() <= firsts.length / 4) {
      resize(firsts.length / 2);
    }
  }

  private Segment segment(int i) {
    return new Segment(journalSequences[i], entries[i], bytes[i]);
  }

  /**
   * Hands {@code each} the journal sequence of every segment holding a position in {@code from} to
   * {@code to}, in order: the one holding {@code from} (the last starting at or before it) and
   * every one starting after it up to {@code to}.
   */
  void journalSequences(long from, long to, LongConsumer each) {
    if (from > to || isEmpty()) {
      return;
    }
    // The last segment starting at or before from, else the first one.
    int lo = head;
    int hi = tail - 1;
    int start = head;
    while (lo <= hi) {
      int mid = (lo + hi) >>> 1;
      if (firsts[mid] <= from) {
        start = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    for (int i = start; i < tail && firsts[i] <= to; i++) {
      each.accept(journalSequences[i]);
    }
  }

  /** Hands {@code each} every segment with its first position, in order. */
  void forEach(SegmentVisitor each) {
    for (int i = head; i < tail; i++) {
      each.segment(firsts[i], segment(i));
    }
  }

  /** What {@link #forEach} hands its segments to. */
  interface SegmentVisitor {
    void segment(long first, Segment segment);
  }

  /** The segments as a sorted map (tests, the old snapshot format). */
  TreeMap<Long, Segment> toMap() {
    TreeMap<Long, Segment> m = new TreeMap<>();
    forEach(m::put);
    return m;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof OutboxSegments other) || other.size() != size()) {
      return false;
    }
    for (int i = 0; i < size(); i++) {
      int a = head + i;
      int b = other.head + i;
      if (firsts[a] != other.firsts[b]
          || journalSequences[a] != other.journalSequences[b]
          || entries[a] != other.entries[b]
          || bytes[a] != other.bytes[b]) {
        return false;
      }
    }
    return true;
  }

  @Override
  public int hashCode() {
    int h = 1;
    for (int i = head; i < tail; i++) {
      h = 31 * h + Long.hashCode(firsts[i]);
      h = 31 * h + Long.hashCode(journalSequences[i]);
    }
    return h;
  }

  @Override
  public String toString() {
    return "OutboxSegments[" + size() + " segments]";
  }
}
