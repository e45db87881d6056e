package io.weir.sharding.cdc;

import io.weir.sharding.partition.PartitionProtocol.Write;
import io.weir.sharding.partition.PartitionSharding;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;

/** How the partition sink reaches partitions: through Cluster Sharding, or (in tests) a wrapper. */
public interface PartitionChannel {

  /**
   * Sends the write {@code make} builds to partition {@code partition} and waits for its answer.
   */
  <R> CompletionStage<R> ask(int partition, Function<ActorRef<R>, Write> make, Duration timeout);

  /** Asks partition {@code partition} for its status (starting it if needed). */
  CompletionStage<PartitionStatus> status(int partition, Duration timeout);

  /** The partitions on this node's cluster. */
  static PartitionChannel sharded(ActorSystem<?> system) {
    return new PartitionChannel() {
      @Override
      public <R> CompletionStage<R> ask(
          int partition, Function<ActorRef<R>, Write> make, Duration timeout) {
        return direct(PartitionSharding.partition(system, partition).<R>ask(make::apply, timeout));
      }

      @Override
      public CompletionStage<PartitionStatus> status(int partition, Duration timeout) {
        return direct(PartitionSharding.partition(system, partition).ask(GetStatus::new, timeout));
      }
    };
  }

  /**
   * The stage of an ask, completing on the thread that completes the ask. Pekko's Java ask returns
   * Scala's CompletionStage adapter, which runs even non-async callbacks on the common fork-join
   * pool; with fewer than 3 cores that pool has no threads and Java starts a new thread per
   * callback (thousands per second under CDC load).
   */
  static <T> CompletableFuture<T> direct(CompletionStage<T> stage) {
    CompletableFuture<T> out = new CompletableFuture<>();
    stage.whenCompleteAsync(
        (v, e) -> {
          if (e != null) {
            out.completeExceptionally(e);
          } else {
            out.complete(v);
          }
        },
        Runnable::run);
    return out;
  }
}
