package io.weir.sharding.storage;

import java.util.Comparator;
import java.util.Objects;

/**
 * The highest journal sequence of a partition whose writes were acknowledged to a caller, kept
 * outside the journal's database (ADR 0036). A storage that comes back with a journal shorter than
 * the mark lost frames a caller was told were durable.
 *
 * <p>Marks are ordered by {@code epoch}, then {@code sequence}: an operator's acceptance of a
 * storage loss ({@code accept-storage-loss}) starts a new epoch with a new incarnation, so its
 * lower sequence wins over the old epoch's. Marks only grow; merging two takes the greater.
 *
 * @param epoch how many times a storage loss was accepted for the partition
 * @param incarnation the partition incarnation the sequence belongs to (null: none yet)
 * @param sequence the highest acknowledged journal sequence of that incarnation (0: none)
 */
public record AckMark(long epoch, String incarnation, long sequence)
    implements Comparable<AckMark> {
  /** No write acknowledged yet. */
  public static final AckMark NONE = new AckMark(0, null, 0);

  private static final Comparator<AckMark> ORDER =
      Comparator.comparingLong(AckMark::epoch)
          .thenComparingLong(AckMark::sequence)
          .thenComparing(AckMark::incarnation, Comparator.nullsFirst(Comparator.naturalOrder()));

  public AckMark {
    if (epoch < 0 || sequence < 0) {
      throw new IllegalArgumentException("a mark's epoch and sequence are never negative");
    }
  }

  public boolean isNone() {
    return sequence == 0 && incarnation == null;
  }

  /** The greater of the two (commutative, associative, idempotent). */
  public AckMark max(AckMark other) {
    return compareTo(other) >= 0 ? this : other;
  }

  @Override
  public int compareTo(AckMark o) {
    return ORDER.compare(this, o);
  }

  /**
   * Whether a journal recovered with {@code incarnation} through {@code journalTail} lost frames
   * this mark acknowledged: it names another incarnation (the journal lost the one the mark names,
   * or the acceptance that started it), or the same one at a higher sequence.
   */
  public boolean aheadOf(String incarnation, long journalTail) {
    if (isNone()) {
      return false;
    }
    if (!Objects.equals(this.incarnation, incarnation)) {
      return true;
    }
    return sequence > journalTail;
  }

  /** Value-free: sequences and the epoch; an incarnation is an opaque id, not a client value. */
  @Override
  public String toString() {
    return "AckMark[epoch=" + epoch + ", sequence=" + sequence + "]";
  }
}
