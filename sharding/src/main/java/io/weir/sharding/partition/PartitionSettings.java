package io.weir.sharding.partition;

/**
 * Limits of one partition.
 *
 * @param maxOutboxEntries retained outbox entries at most (the producer quota): a frame that would
 *     go past it is answered {@link PartitionProtocol.QuotaExceeded} and writes nothing
 * @param maxOutboxBytes retained outbox bytes (before and after images) at most
 * @param maxBatchFrames frames written together by one group commit at most
 * @param maxBatchMutations mutations (and snapshot rows) written together by one group commit at
 *     most; a single larger frame is still written, alone
 * @param maxConsumers active (not released) projection consumers at most
 * @param reserveEntries the progress reserve: entries a projection batch may add beyond the
 *     producer quota (see {@link Partition})
 * @param reserveBytes bytes a projection batch may add beyond the producer quota
 * @param maxEffects effects one projection batch may carry at most
 * @param bodyCacheBytes heap the cache of recently written documents may take (see {@link
 *     BodyCache}); the rest of a document's heap is its index entry
 */
public record PartitionSettings(
    long maxOutboxEntries,
    long maxOutboxBytes,
    int maxBatchFrames,
    int maxBatchMutations,
    int maxConsumers,
    long reserveEntries,
    long reserveBytes,
    int maxEffects,
    long bodyCacheBytes) {
  public static final int DEFAULT_MAX_CONSUMERS = 64;
  public static final int DEFAULT_MAX_EFFECTS = 256;

  /** One maximum batch per consumer: 64 x 256. */
  public static final long DEFAULT_RESERVE_ENTRIES = 16_384;

  public static final long DEFAULT_RESERVE_BYTES = 2L << 30;

  /** 1 MiB per partition: 64 MiB for 64 partitions on one node. */
  public static final long DEFAULT_BODY_CACHE_BYTES = 1L << 20;

  public static final PartitionSettings DEFAULTS =
      new PartitionSettings(100_000, 1L << 30, 256, 20_000);

  public PartitionSettings {
    if (maxOutboxEntries < 1
        || maxOutboxBytes < 1
        || maxBatchFrames < 1
        || maxBatchMutations < 1
        || maxConsumers < 1
        || reserveEntries < 0
        || reserveBytes < 0
        || maxEffects < 1
        || bodyCacheBytes < 0) {
      throw new IllegalArgumentException("partition limits must be positive");
    }
  }

  /** The given outbox and batch limits with the default projection limits. */
  public PartitionSettings(
      long maxOutboxEntries, long maxOutboxBytes, int maxBatchFrames, int maxBatchMutations) {
    this(
        maxOutboxEntries,
        maxOutboxBytes,
        maxBatchFrames,
        maxBatchMutations,
        DEFAULT_MAX_CONSUMERS,
        DEFAULT_RESERVE_ENTRIES,
        DEFAULT_RESERVE_BYTES,
        DEFAULT_MAX_EFFECTS,
        DEFAULT_BODY_CACHE_BYTES);
  }

  public PartitionSettings withProjections(
      int maxConsumers, long reserveEntries, long reserveBytes, int maxEffects) {
    return new PartitionSettings(
        maxOutboxEntries,
        maxOutboxBytes,
        maxBatchFrames,
        maxBatchMutations,
        maxConsumers,
        reserveEntries,
        reserveBytes,
        maxEffects,
        bodyCacheBytes);
  }

  public PartitionSettings withBodyCache(long bytes) {
    return new PartitionSettings(
        maxOutboxEntries,
        maxOutboxBytes,
        maxBatchFrames,
        maxBatchMutations,
        maxConsumers,
        reserveEntries,
        reserveBytes,
        maxEffects,
        bytes);
  }
}
