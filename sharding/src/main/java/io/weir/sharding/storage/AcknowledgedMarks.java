package io.weir.sharding.storage;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Where partitions keep their {@link AckMark}s: outside the journal's database, so that a storage
 * failover to a copy that lacks acknowledged frames is detected instead of written past (ADR 0036).
 * A partition raises its mark after each group commit and before answering it, and reads it after
 * recovery, before serving.
 */
public interface AcknowledgedMarks {
  /** The partition's mark ({@link AckMark#NONE} when it has none); fails when it cannot be read. */
  CompletionStage<AckMark> read(int partition);

  /** Raises the partition's mark to at least {@code mark}; completes once it is kept. */
  CompletionStage<Void> raise(int partition, AckMark mark);

  /** Whether marks are kept at all ({@link #NONE} keeps none: every check passes). */
  default boolean enabled() {
    return true;
  }

  /** Keeps nothing: tests and tools without a cluster to keep marks in. */
  AcknowledgedMarks NONE =
      new AcknowledgedMarks() {
        @Override
        public CompletionStage<AckMark> read(int partition) {
          return CompletableFuture.completedFuture(AckMark.NONE);
        }

        @Override
        public CompletionStage<Void> raise(int partition, AckMark mark) {
          return CompletableFuture.completedFuture(null);
        }

        @Override
        public boolean enabled() {
          return false;
        }
      };

  /** Marks in this JVM's memory (tests): they outlive partitions, not the JVM. */
  static AcknowledgedMarks inMemory() {
    ConcurrentHashMap<Integer, AckMark> marks = new ConcurrentHashMap<>();
    return new AcknowledgedMarks() {
      @Override
      public CompletionStage<AckMark> read(int partition) {
        return CompletableFuture.completedFuture(marks.getOrDefault(partition, AckMark.NONE));
      }

      @Override
      public CompletionStage<Void> raise(int partition, AckMark mark) {
        marks.merge(partition, mark, AckMark::max);
        return CompletableFuture.completedFuture(null);
      }
    };
  }
}
