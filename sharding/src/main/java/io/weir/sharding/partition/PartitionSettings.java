package io.weir.sharding.partition;

/**
 * Limits of one partition.
 *
 * @param maxOutboxEntries retained outbox entries at most (the quota): a frame that would go past it
 *     is answered {@link PartitionProtocol.QuotaExceeded} and writes nothing
 * @param maxOutboxBytes retained outbox bytes (before and after images) at most
 * @param maxBatchFrames frames written together by one group commit at most
 * @param maxBatchMutations mutations (and snapshot rows) written together by one group commit at most;
 *     a single larger frame is still written, alone
 */
public record PartitionSettings(long maxOutboxEntries, long maxOutboxBytes, int maxBatchFrames, int maxBatchMutations) {
  public static final PartitionSettings DEFAULTS = new PartitionSettings(100_000, 1L << 30, 256, 20_000);

  public PartitionSettings {
    if (maxOutboxEntries < 1 || maxOutboxBytes < 1 || maxBatchFrames < 1 || maxBatchMutations < 1) {
      throw new IllegalArgumentException("partition limits must be positive");
    }
  }
}
