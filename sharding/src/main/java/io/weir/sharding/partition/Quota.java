package io.weir.sharding.partition;

/**
 * The outbox quota and the progress reserve of a partition, as pure arithmetic.
 *
 * <p>Every frame that adds outbox entries must keep the retained outbox within the producer quota
 * ({@link PartitionSettings#maxOutboxEntries()}, {@link PartitionSettings#maxOutboxBytes()}). No
 * frame is larger than the whole quota: a CDC frame larger than a part goes in parts of at most the
 * quota (ADR 0033), and any other frame that large is refused as malformed. A projection batch that
 * advances its consumer's checkpoint may go beyond the producer quota into the progress reserve
 * ({@link PartitionSettings#reserveEntries()}, {@link PartitionSettings#reserveBytes()} on top of
 * it), once per consumer per retained-prefix position: a consumer can always drain a full outbox
 * and let purges move on, and no producer can use that room.
 */
public final class Quota {
  private Quota() {}

  /** Where a frame's entries may go. */
  public enum Admission {
    /** Within the producer quota (or the frame adds no entry). */
    QUOTA,
    /** Beyond the producer quota, within the progress reserve. */
    RESERVE,
    /** Neither: nothing of the frame may be written. */
    REFUSED
  }

  /**
   * @param retainedBefore entries retained before the frame
   * @param entriesAfter entries retained if the frame is written
   * @param bytesAfter bytes retained if the frame is written
   * @param reserveAllowed the frame is an advancing projection batch whose consumer has not used
   *     the reserve since the last purge
   */
  public static Admission admit(
      PartitionSettings s,
      long retainedBefore,
      long entriesAfter,
      long bytesAfter,
      boolean reserveAllowed) {
    if (entriesAfter == retainedBefore) {
      return Admission.QUOTA;
    }
    if (entriesAfter <= s.maxOutboxEntries() && bytesAfter <= s.maxOutboxBytes()) {
      return Admission.QUOTA;
    }
    if (reserveAllowed
        && entriesAfter <= s.maxOutboxEntries() + s.reserveEntries()
        && bytesAfter <= s.maxOutboxBytes() + s.reserveBytes()) {
      return Admission.RESERVE;
    }
    return Admission.REFUSED;
  }
}
