package io.weir.persistence.cdc.sink;

import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.SlotIncarnation;

/**
 * A sink's durable position: the last transaction it applied, by commit LSN, in one slot
 * incarnation.
 */
public record SinkCheckpoint(SlotIncarnation incarnation, Lsn commitLsn) {}
