package io.weir.sharding.storage;

import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.pekko.cluster.ddata.AbstractReplicatedData;
import org.apache.pekko.cluster.ddata.Key;

/**
 * The {@link AckMark}s of a group of partitions as Pekko Distributed Data: a map from partition to
 * mark that only grows, merged entry by entry by taking the greater mark. One map per group lets a
 * node raise the marks of many partitions in one update (ADR 0036). Serialized by {@link
 * MarkMapSerializer}.
 */
public final class MarkMap extends AbstractReplicatedData<MarkMap> {
  public static final MarkMap EMPTY = new MarkMap(Map.of());

  private final Map<Integer, AckMark> marks;

  /** {@code marks} without the entries that hold no mark (so equal maps are equal). */
  public MarkMap(Map<Integer, AckMark> marks) {
    TreeMap<Integer, AckMark> kept = new TreeMap<>(marks);
    kept.values().removeIf(AckMark.NONE::equals);
    this.marks = Collections.unmodifiableMap(kept);
  }

  /** The partition's mark, {@link AckMark#NONE} when it has none. */
  public AckMark mark(int partition) {
    return marks.getOrDefault(partition, AckMark.NONE);
  }

  public Map<Integer, AckMark> marks() {
    return marks;
  }

  /** This map with every mark of {@code raises} taken in (each entry the greater of the two). */
  public MarkMap raise(Map<Integer, AckMark> raises) {
    Map<Integer, AckMark> next = null;
    for (Map.Entry<Integer, AckMark> r : raises.entrySet()) {
      AckMark now = marks.getOrDefault(r.getKey(), AckMark.NONE);
      AckMark max = now.max(r.getValue());
      if (max != now) {
        if (next == null) {
          next = new HashMap<>(marks);
        }
        next.put(r.getKey(), max);
      }
    }
    return next == null ? this : new MarkMap(next);
  }

  @Override
  public MarkMap mergeData(MarkMap that) {
    return raise(that.marks);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof MarkMap m && m.marks.equals(marks);
  }

  @Override
  public int hashCode() {
    return marks.hashCode();
  }

  @Override
  public String toString() {
    return "MarkMap[" + marks.size() + " partitions]";
  }

  /** The key of one group's map. */
  public static final class MarkKey extends Key<MarkMap> {
    private static final long serialVersionUID = 1L;

    public MarkKey(String id) {
      super(id);
    }
  }
}
