package io.weir.sharding.partition;

/**
 * What a partition reports about itself for metrics. Every argument is a count, a size or a
 * duration: never a document, an id or a collection name. Calls come from the partition's actor
 * (one at a time per partition, many partitions at once), so an implementation must be thread-safe
 * and must not block. Every method does nothing by default: an implementation overrides what it
 * reports.
 */
public interface PartitionObserver {
  /**
   * Partition {@code partition} finished recovering from its snapshot and journal in {@code nanos}.
   */
  default void recovered(int partition, long nanos) {}

  /**
   * {@code frames} accepted frames of partition {@code partition} were persisted in one journal
   * write.
   */
  default void persisted(int partition, int frames) {}

  /**
   * {@code frames} frames (or projection batches) were refused because the outbox quota was used
   * up.
   */
  default void quotaRefused(int partition, int frames) {}

  /**
   * {@code writes} writes (frames, row loads, consumer commands) were refused because the storage
   * keeps fewer copies of a commit than required ({@link StorageGate}).
   */
  default void storageRefused(int partition, int writes) {}

  /**
   * The retained outbox of partition {@code partition} now: entries, bytes and its use of the
   * producer quota (the larger of entries and bytes as a share of their limits; may pass 1 by the
   * projections' progress reserve).
   */
  default void outbox(int partition, long entries, long bytes, double quotaUse) {}

  /**
   * The documents table of partition {@code partition} now: {@code lagEvents} persisted events not
   * yet applied, {@code lagBytes} their outbox images' UTF-8 bytes, and whether it is {@code
   * halted} (applying fails, retried; or storage-behind).
   */
  default void table(int partition, long lagEvents, long lagBytes, boolean halted) {}

  /**
   * A group commit's event of partition {@code partition} needed the current version of {@code
   * inMemory + read} existing documents (before images): {@code inMemory} were in its unapplied
   * changes or cache, {@code read} were read from the documents table (ADR 0032).
   */
  default void beforeImages(int partition, int inMemory, int read) {}

  /**
   * Keyed writes of partition {@code partition} whose receipt was not in its heap or unapplied
   * events: {@code ruledOut} needed no read (the receipt filter of ADR 0057 knew the key was never
   * written), {@code read} were looked up in the receipts table (one query per group commit).
   */
  default void receiptLookups(int partition, int ruledOut, int read) {}

  /** Partition {@code partition} stopped on this node (moved, passivated, failed or shut down). */
  default void stopped(int partition) {}

  /**
   * Partition {@code partition} found its journal behind the mark of what it acknowledged ({@code
   * behind}), or serves again (ADR 0036).
   */
  default void storageBehind(int partition, boolean behind) {}

  /** A group commit's acknowledged mark was kept in {@code nanos} (ADR 0036). */
  default void markRaised(int partition, long nanos) {}

  /** Reports nothing (every method does nothing unless overridden). */
  PartitionObserver NONE = new PartitionObserver() {};

  /** Reports everything to {@code first}, then to {@code second}. */
  static PartitionObserver both(PartitionObserver first, PartitionObserver second) {
    return new PartitionObserver() {
      @Override
      public void recovered(int partition, long nanos) {
        first.recovered(partition, nanos);
        second.recovered(partition, nanos);
      }

      @Override
      public void persisted(int partition, int frames) {
        first.persisted(partition, frames);
        second.persisted(partition, frames);
      }

      @Override
      public void quotaRefused(int partition, int frames) {
        first.quotaRefused(partition, frames);
        second.quotaRefused(partition, frames);
      }

      @Override
      public void storageRefused(int partition, int writes) {
        first.storageRefused(partition, writes);
        second.storageRefused(partition, writes);
      }

      @Override
      public void outbox(int partition, long entries, long bytes, double quotaUse) {
        first.outbox(partition, entries, bytes, quotaUse);
        second.outbox(partition, entries, bytes, quotaUse);
      }

      @Override
      public void table(int partition, long lagEvents, long lagBytes, boolean halted) {
        first.table(partition, lagEvents, lagBytes, halted);
        second.table(partition, lagEvents, lagBytes, halted);
      }

      @Override
      public void beforeImages(int partition, int inMemory, int read) {
        first.beforeImages(partition, inMemory, read);
        second.beforeImages(partition, inMemory, read);
      }

      @Override
      public void receiptLookups(int partition, int ruledOut, int read) {
        first.receiptLookups(partition, ruledOut, read);
        second.receiptLookups(partition, ruledOut, read);
      }

      @Override
      public void stopped(int partition) {
        first.stopped(partition);
        second.stopped(partition);
      }

      @Override
      public void storageBehind(int partition, boolean behind) {
        first.storageBehind(partition, behind);
        second.storageBehind(partition, behind);
      }

      @Override
      public void markRaised(int partition, long nanos) {
        first.markRaised(partition, nanos);
        second.markRaised(partition, nanos);
      }
    };
  }
}
