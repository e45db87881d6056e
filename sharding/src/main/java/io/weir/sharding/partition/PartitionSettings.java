package io.weir.sharding.partition;

import java.util.Objects;

/**
 * Limits of one partition.
 *
 * @param maxOutboxEntries retained outbox entries at most (the producer quota): a frame that would
 *     go past it is answered {@link PartitionProtocol.QuotaExceeded} and writes nothing
 * @param maxOutboxBytes retained outbox bytes (before and after images, UTF-8) at most
 * @param maxBatchFrames frames written together by one group commit at most
 * @param maxBatchMutations mutations (and snapshot rows) handed to one group commit at most; a
 *     single larger frame is still handed over, alone
 * @param maxConsumers active (not released) projection consumers at most
 * @param reserveEntries the progress reserve: entries a projection batch may add beyond the
 *     producer quota (see {@link Quota})
 * @param reserveBytes bytes a projection batch may add beyond the producer quota
 * @param maxEffects effects one projection batch may carry at most
 * @param bodyCacheBytes heap the cache of recently written documents may take (see {@link
 *     BodyCache}); the rest of a document's heap is its index entry
 * @param maxFrameEntries outbox entries one journal row (a group commit) holds at most; a CDC frame
 *     with more is written in parts, each its own row (ADR 0033)
 * @param maxFrameBytes bytes of entries (as the quota counts them) and loaded documents one journal
 *     row holds at most; a single entry larger than it still goes, alone
 * @param receiptTtlMillis how long a keyed API write's receipt answers its retries (ADR 0034)
 * @param receiptHeap receipts kept in the heap at most; older ones are in the receipts table only
 * @param snapshots when a snapshot is taken
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
    long bodyCacheBytes,
    int maxFrameEntries,
    long maxFrameBytes,
    long receiptTtlMillis,
    int receiptHeap,
    SnapshotPolicy snapshots) {
  public static final int DEFAULT_MAX_CONSUMERS = 64;
  public static final int DEFAULT_MAX_EFFECTS = 256;

  /** One maximum batch per consumer: 64 x 256. */
  public static final long DEFAULT_RESERVE_ENTRIES = 16_384;

  public static final long DEFAULT_RESERVE_BYTES = 2L << 30;

  /** 1 MiB per partition: 64 MiB for 64 partitions on one node. */
  public static final long DEFAULT_BODY_CACHE_BYTES = 1L << 20;

  public static final int DEFAULT_MAX_FRAME_ENTRIES = 10_000;

  /** Eight times the 1 MiB a document may have, before and after image of each four times over. */
  public static final long DEFAULT_MAX_FRAME_BYTES = 8L << 20;

  public static final long DEFAULT_RECEIPT_TTL_MILLIS = 24L * 3_600_000;

  public static final int DEFAULT_RECEIPT_HEAP = 1_000;

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
        || bodyCacheBytes < 0
        || maxFrameEntries < 1
        || maxFrameBytes < 1
        || receiptTtlMillis < 1
        || receiptHeap < 0) {
      throw new IllegalArgumentException("partition limits must be positive");
    }
    Objects.requireNonNull(snapshots, "snapshots");
  }

  /** The given outbox and batch limits with the default projection, cache and frame limits. */
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
        DEFAULT_BODY_CACHE_BYTES,
        DEFAULT_MAX_FRAME_ENTRIES,
        DEFAULT_MAX_FRAME_BYTES,
        DEFAULT_RECEIPT_TTL_MILLIS,
        DEFAULT_RECEIPT_HEAP,
        SnapshotPolicy.DEFAULT);
  }

  /**
   * Entries one part of a frame holds at most: a journal row's bound, and never more than the whole
   * quota, so that every part fits an outbox purged down to empty.
   */
  long partEntries() {
    return Math.min(maxFrameEntries, maxOutboxEntries);
  }

  /** Bytes one part of a frame holds at most (see {@link #partEntries}). */
  long partBytes() {
    return Math.min(maxFrameBytes, maxOutboxBytes);
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
        bodyCacheBytes,
        maxFrameEntries,
        maxFrameBytes,
        receiptTtlMillis,
        receiptHeap,
        snapshots);
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
        bytes,
        maxFrameEntries,
        maxFrameBytes,
        receiptTtlMillis,
        receiptHeap,
        snapshots);
  }

  public PartitionSettings withFrames(int entries, long bytes) {
    return new PartitionSettings(
        maxOutboxEntries,
        maxOutboxBytes,
        maxBatchFrames,
        maxBatchMutations,
        maxConsumers,
        reserveEntries,
        reserveBytes,
        maxEffects,
        bodyCacheBytes,
        entries,
        bytes,
        receiptTtlMillis,
        receiptHeap,
        snapshots);
  }

  public PartitionSettings withReceipts(long ttlMillis, int heap) {
    return new PartitionSettings(
        maxOutboxEntries,
        maxOutboxBytes,
        maxBatchFrames,
        maxBatchMutations,
        maxConsumers,
        reserveEntries,
        reserveBytes,
        maxEffects,
        bodyCacheBytes,
        maxFrameEntries,
        maxFrameBytes,
        ttlMillis,
        heap,
        snapshots);
  }

  public PartitionSettings withSnapshots(SnapshotPolicy policy) {
    return new PartitionSettings(
        maxOutboxEntries,
        maxOutboxBytes,
        maxBatchFrames,
        maxBatchMutations,
        maxConsumers,
        reserveEntries,
        reserveBytes,
        maxEffects,
        bodyCacheBytes,
        maxFrameEntries,
        maxFrameBytes,
        receiptTtlMillis,
        receiptHeap,
        policy);
  }

  PartitionState.ReceiptPolicy receiptPolicy() {
    return new PartitionState.ReceiptPolicy(receiptTtlMillis, receiptHeap);
  }
}
