package io.weir.protocol.http;

import java.util.List;
import java.util.Map;

/**
 * One partition in the reply of {@code GET /admin/outbox/status}.
 *
 * @param documents documents held, tombstones included
 * @param outboxFirst the first retained outbox sequence
 * @param outboxNext the sequence the next entry will get
 * @param outboxEntries retained entries ({@code outboxNext - outboxFirst})
 * @param outboxBytes bytes of the retained entries (before and after images plus a fixed overhead)
 * @param journalEvents journal events written so far
 * @param watermarks per CDC source (pipeline and slot incarnation): the highest fully applied
 *     commit LSN, as {@code file/offset}
 * @param consumers the partition's projection consumers, released ones included
 * @param storage whether the partition's journal holds everything it acknowledged, or null while
 *     the partition upgrades an old snapshot
 * @param documentsTable where the partition's documents table is, or null on a node without one
 */
public record OutboxStatus(
    int partition,
    long documents,
    long outboxFirst,
    long outboxNext,
    long outboxEntries,
    long outboxBytes,
    long journalEvents,
    Map<String, String> watermarks,
    List<Consumer> consumers,
    Storage storage,
    DocumentsTable documentsTable) {
  public OutboxStatus {
    watermarks = Map.copyOf(watermarks);
    consumers = List.copyOf(consumers);
  }

  /**
   * The partition's check of its journal against what it acknowledged (ADR 0036).
   *
   * @param state {@code unchecked} (no marks kept), {@code checking} (recovered, not serving yet),
   *     {@code serving}, or {@code storage-behind} (the journal lacks acknowledged writes: writes
   *     are refused until an operator accepts the loss)
   * @param acknowledged the highest journal sequence known acknowledged, 0 when none (or when the
   *     mark names a history the journal does not hold)
   * @param epoch how many storage losses were accepted for this partition
   * @param copies on how many copies a commit is durable before it is acknowledged, as the
   *     partition's node last read it (-1: unknown)
   * @param checkedOn the storage the partition checked its journal against when it recovered, or
   *     null when unknown
   * @param acknowledgedOn the storage its last acknowledged commit was written to, or null when
   *     unknown or nothing was acknowledged
   */
  public record Storage(
      String state,
      long acknowledged,
      long epoch,
      int copies,
      StorageIdentity checkedOn,
      StorageIdentity acknowledgedOn) {}

  /**
   * Which PostgreSQL a journal is on (ADR 0036).
   *
   * @param systemIdentifier the primary's system identifier, in decimal (an unsigned 64-bit number:
   *     a string, so that JSON readers keep every digit)
   * @param timeline the timeline its WAL is written on; a promotion starts the next one
   */
  public record StorageIdentity(String systemIdentifier, int timeline) {}

  /**
   * The partition's documents table (docs/partitions.md, "The documents table").
   *
   * @param state {@code upgrading} (an old snapshot's documents move into the table first), {@code
   *     starting} (catching the table up; nothing served yet), {@code running}, {@code
   *     table-apply-failed} (the last apply failed; at the lag bound writes are refused {@code
   *     table-apply-failed}) or {@code storage-behind}
   * @param appliedThrough the journal sequence through which the table holds the partition's events
   * @param lagEvents persisted events not yet in the table (writes wait past 1,000)
   * @param failures failed applies in a row (retried, never skipped)
   * @param lastError the last failure's exception classes and SQLState, or null
   * @param moved while upgrading: documents moved so far
   * @param toMove while upgrading: documents to move in all (-1: not known yet)
   * @param lagBytes the unapplied events' outbox images in UTF-8 bytes (writes wait past 64 MiB)
   */
  public record DocumentsTable(
      String state,
      long appliedThrough,
      long lagEvents,
      int failures,
      String lastError,
      long moved,
      long toMove,
      long lagBytes) {}

  /**
   * A projection consumer generation.
   *
   * @param checkpoint the last position it committed
   * @param lag positions after its checkpoint ({@code outboxNext - 1 - checkpoint})
   * @param released a released consumer pins nothing and its tokens are refused
   */
  public record Consumer(
      String consumer,
      long generation,
      List<String> collections,
      List<String> kinds,
      long startAfter,
      long checkpoint,
      long lag,
      boolean released) {
    public Consumer {
      collections = List.copyOf(collections);
      kinds = List.copyOf(kinds);
    }
  }
}
