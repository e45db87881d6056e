package io.weir.sharding.cdc;

import io.weir.sharding.partition.PartitionProtocol.Write;
import io.weir.sharding.partition.PartitionSharding;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.StreamSupport;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.UniqueAddress;
import org.apache.pekko.cluster.typed.Cluster;

/** How the partition sink reaches partitions: through Cluster Sharding, or (in tests) a wrapper. */
public interface PartitionChannel {

  /**
   * Sends the write {@code make} builds to partition {@code partition} and waits for its answer.
   */
  <R> CompletionStage<R> ask(int partition, Function<ActorRef<R>, Write> make, Duration timeout);

  /** Asks partition {@code partition} for its status (starting it if needed). */
  CompletionStage<PartitionStatus> status(int partition, Duration timeout);

  /**
   * A probe, made now, that answers true once a cluster member of now has been removed: a message
   * sent to a partition it hosted is lost, and its ask would only time out, while the partition
   * already runs on another member. (Never true off a cluster.)
   */
  default BooleanSupplier membersLost() {
    return () -> false;
  }

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

      @Override
      public BooleanSupplier membersLost() {
        Cluster cluster = Cluster.get(system);
        Set<UniqueAddress> before = members(cluster);
        return () -> !members(cluster).containsAll(before);
      }
    };
  }

  private static Set<UniqueAddress> members(Cluster cluster) {
    return StreamSupport.stream(cluster.state().getMembers().spliterator(), false)
        .map(Member::uniqueAddress)
        .collect(Collectors.toSet());
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
