package io.weir.protocol.http;

/**
 * Reply of {@code GET /admin/outbox/settings}: the limits every partition's outbox runs under (the
 * node's configuration, the same on every node of a well-configured cluster), so a reader of {@code
 * GET /admin/outbox/status} can tell how close each partition is to its quota.
 *
 * @param partitions the cluster's partition count P
 * @param maxEntries the producer quota in retained entries ({@code
 *     weir.partitions.outbox.max-entries})
 * @param maxBytes the producer quota in retained bytes ({@code weir.partitions.outbox.max-bytes})
 * @param reserveEntries entries projection batches may add beyond the quota ({@code
 *     weir.projections.reserve.entries})
 * @param reserveBytes bytes projection batches may add beyond the quota ({@code
 *     weir.projections.reserve.bytes})
 * @param autoPurgeIntervalMillis how often each partition purges through its active consumers'
 *     lowest checkpoint ({@code weir.partitions.outbox.auto-purge-interval}), null when off
 */
public record OutboxSettings(
    int partitions,
    long maxEntries,
    long maxBytes,
    long reserveEntries,
    long reserveBytes,
    Long autoPurgeIntervalMillis) {}
