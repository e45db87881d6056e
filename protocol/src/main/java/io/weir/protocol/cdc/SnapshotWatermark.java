package io.weir.protocol.cdc;

import io.weir.protocol.Lsn;

/**
 * A marker Weir itself wrote into the WAL to bracket an incremental snapshot chunk: a transaction
 * holding only a transactional logical message with prefix {@link #PREFIX}. It reaches the pipeline
 * in commit order like any transaction, but is not delivered to sinks.
 *
 * @param content Weir's own marker text (chunk identity and low/high), never user data
 */
public record SnapshotWatermark(Lsn commitLsn, Lsn endLsn, String content) implements CdcEvent {
  /** The logical message prefix of watermark messages. */
  public static final String PREFIX = "weir.snapshot.watermark";
}
