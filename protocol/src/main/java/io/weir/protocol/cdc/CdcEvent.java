package io.weir.protocol.cdc;

/**
 * What a pipeline handles: a committed {@link Transaction}, a non-transactional {@link CdcMessage},
 * or a {@link SnapshotWatermark} of its own.
 */
public sealed interface CdcEvent permits Transaction, CdcMessage, SnapshotWatermark {}
