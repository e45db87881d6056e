package io.weir.sharding.partition;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Deletes a partition's journal rows that nothing needs any more: rows whose outbox entries are
 * purged and that a retained snapshot covers. The partition decides what may go; this only runs the
 * deletion (SQL on the journal table, see the node's implementation).
 */
@FunctionalInterface
public interface JournalPruner {
  /** Keeps every row: tests and the in-memory journal. */
  JournalPruner NONE = (persistenceId, through) -> CompletableFuture.completedFuture(0);

  /**
   * Deletes the rows of {@code persistenceId} with sequence numbers up to {@code through}.
   *
   * @return how many rows were deleted
   */
  CompletionStage<Integer> deleteThrough(String persistenceId, long through);

  /**
   * Deletes the rows of partition {@code partition}'s journal ({@code persistenceId}) up to {@code
   * through}, but never past the journal sequence its documents table durably holds: the bound is
   * read in the deleting statement itself, so a table that lost applies in a crash of PostgreSQL
   * (they commit without waiting for the flush, ADR 0035) after the partition counted them keeps
   * the events it needs to replay them. By default as {@link #deleteThrough}, for journals without
   * a documents table (the in-memory ones).
   *
   * @return the sequence number it pruned through: {@code through}, or the table's lower position
   */
  default CompletionStage<Long> deleteThroughApplied(
      String persistenceId, int partition, long through) {
    return deleteThrough(persistenceId, through).thenApply(rows -> through);
  }

  /**
   * Deletes the snapshots of {@code persistenceId} older than {@code sequenceNr} (none by default).
   */
  default CompletionStage<Integer> deleteSnapshotsBefore(String persistenceId, long sequenceNr) {
    return CompletableFuture.completedFuture(0);
  }
}
