package io.weir.sharding.storage;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.testing.TestPorts;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.ddata.DistributedData;
import org.apache.pekko.cluster.ddata.Replicator;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.pattern.Patterns;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * {@link DistributedMarks} on a real one-node cluster with the durable store the node configures
 * (LMDB): marks only grow, are scoped, and outlive the actor system; prints what a mark write
 * costs.
 */
class DistributedMarksIT {
  private static final Duration TIMEOUT = Duration.ofSeconds(20);

  @Test
  void marksGrowAreScopedAndSurviveARestart() throws Exception {
    Path dir = Files.createTempDirectory("weir-marks-it");
    ActorTestKit first = joined("marks-it", dir);
    try {
      DistributedMarks marks = new DistributedMarks(first.system(), () -> "cluster-a-0", TIMEOUT);
      DistributedMarks other = new DistributedMarks(first.system(), () -> "cluster-a-1", TIMEOUT);
      assertThat(marks.read(3).toCompletableFuture().get()).isEqualTo(AckMark.NONE);
      marks.raise(3, new AckMark(0, "inc", 5)).toCompletableFuture().get();
      marks.raise(3, new AckMark(0, "inc", 2)).toCompletableFuture().get();
      assertThat(marks.read(3).toCompletableFuture().get())
          .as("a mark never goes down")
          .isEqualTo(new AckMark(0, "inc", 5));
      assertThat(other.read(3).toCompletableFuture().get())
          .as("another restore epoch has marks of its own")
          .isEqualTo(AckMark.NONE);
      assertThat(marks.read(4).toCompletableFuture().get()).isEqualTo(AckMark.NONE);

      // What a mark costs: sequential durable majority writes (one node: its own disk).
      int n = 300;
      long[] nanos = new long[n];
      for (int i = 0; i < n; i++) {
        long t = System.nanoTime();
        marks.raise(5, new AckMark(0, "inc", i + 1)).toCompletableFuture().get();
        nanos[i] = System.nanoTime() - t;
      }
      Arrays.sort(nanos);
      System.out.printf(
          "acknowledged marks (1 node, durable): writes=%d p50=%.2f ms p90=%.2f ms p99=%.2f ms%n",
          n, nanos[n / 2] / 1e6, nanos[n * 9 / 10] / 1e6, nanos[n * 99 / 100] / 1e6);
    } finally {
      first.shutdownTestKit();
    }

    ActorTestKit second = joined("marks-it", dir);
    try {
      DistributedMarks marks = new DistributedMarks(second.system(), () -> "cluster-a-0", TIMEOUT);
      assertThat(marks.read(3).toCompletableFuture().get(30, TimeUnit.SECONDS))
          .as("read back from the durable store after a restart")
          .isEqualTo(new AckMark(0, "inc", 5));
      assertThat(marks.read(5).toCompletableFuture().get(30, TimeUnit.SECONDS).sequence())
          .isEqualTo(300);
    } finally {
      second.shutdownTestKit();
    }
  }

  @Test
  void blocksOfPartitionsShareAMapAndMarksOfTheOldLayoutStillCount() throws Exception {
    ActorTestKit kit = joined("marks-layout", Files.createTempDirectory("weir-marks-it"));
    try {
      DistributedMarks marks = new DistributedMarks(kit.system(), () -> "cluster-b-0", TIMEOUT);
      marks.raise(6, new AckMark(0, "six", 3)).toCompletableFuture().get();
      marks.raise(63, new AckMark(0, "sixty-three", 5)).toCompletableFuture().get();
      marks.raise(70, new AckMark(0, "seventy", 4)).toCompletableFuture().get();
      assertThat(marks.read(6).toCompletableFuture().get()).isEqualTo(new AckMark(0, "six", 3));
      assertThat(marks.read(63).toCompletableFuture().get())
          .isEqualTo(new AckMark(0, "sixty-three", 5));
      assertThat(marks.read(70).toCompletableFuture().get())
          .isEqualTo(new AckMark(0, "seventy", 4));
      assertThat(mapKeys(kit.system()))
          .as(
              "partitions 6 and 63 share block 0's map, 70 is in block 1's; nothing else is written")
          .filteredOn(k -> k.startsWith("weir-ack-cluster-b-0-"))
          .containsExactlyInAnyOrder("weir-ack-cluster-b-0-b0", "weir-ack-cluster-b-0-b1");

      // A mark raised by a release before blocks, in its map of partition mod 16.
      writeLegacy(kit.system(), "weir-ack-cluster-b-0-7", 7, new AckMark(0, "old", 40));
      assertThat(marks.read(7).toCompletableFuture().get())
          .as("a mark of the old layout is read")
          .isEqualTo(new AckMark(0, "old", 40));
      marks.raise(7, new AckMark(0, "old", 41)).toCompletableFuture().get();
      assertThat(marks.read(7).toCompletableFuture().get()).isEqualTo(new AckMark(0, "old", 41));
      writeLegacy(kit.system(), "weir-ack-cluster-b-0-7", 7, new AckMark(0, "old", 90));
      assertThat(marks.read(7).toCompletableFuture().get())
          .as("the greater of the two layouts' marks")
          .isEqualTo(new AckMark(0, "old", 90));
      assertThat(marks.read(23).toCompletableFuture().get())
          .as("the old map of 7 holds nothing for 23 (also 7 mod 16)")
          .isEqualTo(AckMark.NONE);
    } finally {
      kit.shutdownTestKit();
    }
  }

  private static Set<String> mapKeys(ActorSystem<?> system) throws Exception {
    Object reply =
        Patterns.ask(replicator(system), Replicator.GetKeyIds$.MODULE$, Duration.ofSeconds(10))
            .toCompletableFuture()
            .get();
    return ((Replicator.GetKeyIdsResult) reply).getKeyIds();
  }

  private static void writeLegacy(ActorSystem<?> system, String key, int partition, AckMark mark)
      throws Exception {
    Object reply =
        Patterns.ask(
                replicator(system),
                new Replicator.Update<>(
                    new MarkMap.MarkKey(key),
                    MarkMap.EMPTY,
                    Replicator.writeLocal(),
                    Optional.empty(),
                    (MarkMap m) -> m.raise(Map.of(partition, mark))),
                Duration.ofSeconds(10))
            .toCompletableFuture()
            .get();
    assertThat(reply).isInstanceOf(Replicator.UpdateSuccess.class);
  }

  private static ActorRef replicator(ActorSystem<?> system) {
    return DistributedData.get(Adapter.toClassic(system)).replicator();
  }

  @Test
  void withoutAScopeNothingIsReadOrWritten() {
    ActorTestKit kit =
        TestPorts.kit(
            "marks-unscoped",
            ConfigFactory.parseString("pekko.actor.provider = cluster")
                .withFallback(ConfigFactory.load()));
    try {
      DistributedMarks marks = new DistributedMarks(kit.system(), () -> null, TIMEOUT);
      assertThat(marks.read(1).toCompletableFuture()).isCompletedExceptionally();
      assertThat(marks.raise(1, new AckMark(0, "i", 1)).toCompletableFuture()).failsWithin(TIMEOUT);
    } finally {
      kit.shutdownTestKit();
    }
  }

  private static Config config(Path dir) {
    return ConfigFactory.parseMap(
            Map.of(
                "pekko.actor.provider",
                "cluster",
                "pekko.cluster.distributed-data.durable.keys",
                List.of(DistributedMarks.KEY_PREFIX + "*"),
                "pekko.cluster.distributed-data.durable.lmdb.dir",
                dir.resolve("marks").toString(),
                "pekko.cluster.distributed-data.durable.lmdb.write-behind-interval",
                "off"))
        .withFallback(ConfigFactory.load());
  }

  /** A one-node cluster with the durable store in {@code dir}, up (shut down if it never is). */
  private static ActorTestKit joined(String name, Path dir) {
    ActorTestKit kit = TestPorts.kit(name, config(dir));
    try {
      join(kit.system());
      return kit;
    } catch (RuntimeException | Error e) {
      kit.shutdownTestKit();
      throw e;
    }
  }

  private static void join(ActorSystem<?> system) {
    Cluster cluster = Cluster.get(system);
    cluster.manager().tell(Join.create(cluster.selfMember().address()));
    Awaitility.await()
        .atMost(Duration.ofSeconds(60))
        .until(() -> cluster.selfMember().status() == MemberStatus.up());
  }
}
