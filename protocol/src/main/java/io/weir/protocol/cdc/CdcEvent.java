package io.weir.protocol.cdc;

/** What a pipeline delivers: a committed {@link Transaction} or a non-transactional {@link CdcMessage}. */
public sealed interface CdcEvent permits Transaction, CdcMessage {}
