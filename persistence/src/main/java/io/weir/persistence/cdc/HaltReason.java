package io.weir.persistence.cdc;

import java.util.Locale;

/**
 * Why a pipeline stopped itself fail-closed. Each reason means Weir cannot prove that continuing
 * would be correct; an operator acts, then starts the pipeline again.
 */
public enum HaltReason {
  /** A slot, publication or pipeline name is not a valid identifier. */
  INVALID_IDENTIFIER,
  /** A requested publication does not exist. */
  PUBLICATION_MISSING,
  /** A publication would stream Weir's own tables or a sink's targets back into Weir. */
  PUBLICATION_FEEDS_BACK,
  /** Resume mode, and the slot does not exist. */
  SLOT_MISSING,
  /** The slot disappeared or was invalidated after a checkpoint was taken: changes may be lost. */
  SLOT_LOST,
  /** The sink's checkpoint belongs to another slot incarnation (recreated slot, other server). */
  INCARNATION_MISMATCH,
  /** The slot exists but uses another output plugin or database. */
  SLOT_INCOMPATIBLE,
  /** {@code failover = true} on a server older than PostgreSQL 17. */
  FAILOVER_UNSUPPORTED,
  /**
   * The slot is synchronised from a primary onto a standby that has not been promoted (PostgreSQL
   * 17): it cannot be read there.
   */
  SLOT_SYNCED_UNPROMOTED,
  /** A column was dropped, its type changed, or the replica identity changed. */
  SCHEMA_INCOMPATIBLE,
  /** The sink refused the data permanently. */
  SINK_REJECTED,
  /**
   * The sink failed on the same transaction more than {@code max-sink-retries} times in a row with
   * an error that is not transient (a trigger's RAISE, an index row too large, an internal error):
   * retrying would restart from the same position for ever while the slot holds WAL back. The
   * detail names the SQLState; fix the target (or the data), then start the pipeline again.
   */
  SINK_FAILING,
  /** Persistent errors before the stream was established exceeded max-command-retries. */
  RETRIES_EXHAUSTED,
  /**
   * A transaction held in memory (not streamed, or streamed without spilling) exceeded
   * max-transaction-changes.
   */
  TRANSACTION_TOO_LARGE,
  /** The library checkpoint store refused a write, or kept failing past max-retries. */
  CHECKPOINT_STORE_FAILED,
  /** Options that cannot work together, e.g. batch delivery with the library checkpoint store. */
  CONFLICTING_OPTIONS,
  /** The server sent bytes that do not decode, or messages out of protocol order. */
  PROTOCOL_VIOLATION,
  /**
   * Streamed transactions needed more disk than {@code streaming.spill.max-bytes} allows; nothing
   * of them was delivered. Raise the limit (or free the disk), then start the pipeline again.
   */
  SPILL_LIMIT_EXCEEDED,
  /**
   * An incremental snapshot cannot go on: a table left the publication, an unkeyed table is too
   * large to read whole, or concurrent changes invalidated one chunk too many times in a row.
   */
  SNAPSHOT_FAILED,
  /**
   * Weir's schema was restored from a backup while the pipeline's slot went on: the slot's
   * confirmed position may be past transactions the restored state never received. Drop the
   * pipeline ({@code DELETE /admin/pipelines/{name}?confirm={name}}) and start it again.
   */
  RESTORED_FROM_BACKUP;

  /** Wire form: lower case, hyphenated, e.g. {@code slot-lost}. */
  public String wire() {
    return name().toLowerCase(Locale.ROOT).replace('_', '-');
  }
}
