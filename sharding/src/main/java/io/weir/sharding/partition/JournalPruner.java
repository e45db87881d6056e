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
   * Deletes the snapshots of {@code persistenceId} older than {@code sequenceNr} (none by default).
   */
  default CompletionStage<Integer> deleteSnapshotsBefore(String persistenceId, long sequenceNr) {
    return CompletableFuture.completedFuture(0);
  }
}
