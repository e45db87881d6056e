package io.weir.sharding.storage;

import io.weir.persistence.StorageSystem;
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
 * <p>A mark also records the storage the acknowledged commit was written to (its system identifier
 * and timeline). The sequence alone decides whether a journal lost acknowledged writes: a promoted
 * standby on a new timeline that holds every acknowledged frame is whole. The storage tells the
 * operator where a lost tail was acknowledged, and where a partition last wrote.
 *
 * @param epoch how many times a storage loss was accepted for the partition
 * @param incarnation the partition incarnation the sequence belongs to (null: none yet)
 * @param sequence the highest acknowledged journal sequence of that incarnation (0: none)
 * @param storage the storage that sequence was committed to, null when unknown (a mark written
 *     before storages were recorded, or a node without a storage monitor)
 */
public record AckMark(long epoch, String incarnation, long sequence, StorageSystem storage)
    implements Comparable<AckMark> {
  /** No write acknowledged yet. */
  public static final AckMark NONE = new AckMark(0, null, 0, null);

  /** Storages ordered by timeline, then system identifier; unknown first. */
  private static final Comparator<StorageSystem> STORAGE_ORDER =
      Comparator.nullsFirst(
          Comparator.comparingInt(StorageSystem::timeline)
              .thenComparing(StorageSystem::systemIdentifier, Long::compareUnsigned));

  /** A total order: two replicas merging the same two marks in either order keep the same one. */
  private static final Comparator<AckMark> ORDER =
      Comparator.comparingLong(AckMark::epoch)
          .thenComparingLong(AckMark::sequence)
          .thenComparing(AckMark::incarnation, Comparator.nullsFirst(Comparator.naturalOrder()))
          .thenComparing(AckMark::storage, STORAGE_ORDER);

  /** A mark whose storage is not known. */
  public AckMark(long epoch, String incarnation, long sequence) {
    this(epoch, incarnation, sequence, null);
  }

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

  /** Value-free: sequences, the epoch and the storage; an incarnation is an opaque id. */
  @Override
  public String toString() {
    return "AckMark[epoch="
        + epoch
        + ", sequence="
        + sequence
        + (storage == null ? "" : ", " + storage.describe())
        + "]";
  }
}
