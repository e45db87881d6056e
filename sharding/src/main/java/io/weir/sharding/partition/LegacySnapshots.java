package io.weir.sharding.partition;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Upgrades a partition whose latest snapshot was written before ADR 0032 (Jackson CBOR of the old
 * state, every document's body inside): its documents move into the documents table and the
 * snapshot is replaced by an index-only one ({@link PartitionSnapshotSerializer}), before the
 * partition recovers. {@link SqlLegacySnapshots} does it on PostgreSQL; the move resumes where it
 * stopped after a crash.
 */
public interface LegacySnapshots {
  /** How far a partition's move got: documents written to the table, of how many (-1: unknown). */
  @FunctionalInterface
  interface Progress {
    void moved(long documents, long total);
  }

  /** Journals that never held such a snapshot (in-memory ones, tests). */
  LegacySnapshots NONE = (partition, progress) -> CompletableFuture.completedFuture(false);

  /**
   * Upgrades partition {@code partition} if its latest snapshot is of the old format.
   *
   * @return whether it was (false: nothing to do); fails when the snapshot is of a format this
   *     version cannot read, or the move failed (it resumes on the next start)
   */
  CompletionStage<Boolean> upgrade(int partition, Progress progress);
}
