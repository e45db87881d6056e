package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/** What a partition reports to its {@link PartitionObserver}: counts and sizes, never a value. */
class PartitionObserverTest {
  private static final ActorTestKit KIT =
      ActorTestKit.create(
          "partition-observer-test",
          EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load()));

  @AfterAll
  static void stop() {
    KIT.shutdownTestKit();
  }

  /** Every call as a line: the partition, what happened and the numbers. */
  static final class Recording implements PartitionObserver {
    final List<String> calls = new CopyOnWriteArrayList<>();
    volatile long lastRecoveryNanos = -1;

    @Override
    public void recovered(int partition, long nanos) {
      lastRecoveryNanos = nanos;
      calls.add(partition + " recovered");
    }

    @Override
    public void persisted(int partition, int frames) {
      calls.add(partition + " persisted " + frames);
    }

    @Override
    public void quotaRefused(int partition, int frames) {
      calls.add(partition + " refused " + frames);
    }

    @Override
    public void outbox(int partition, long entries, long bytes, double quotaUse) {
      calls.add(partition + " outbox " + entries + " " + bytes + " " + quotaUse);
    }

    @Override
    public void stopped(int partition) {
      calls.add(partition + " stopped");
    }
  }

  private static Upsert upsert(String id) {
    return new Upsert("orders", id, "{}", Optional.empty());
  }

  @Test
  void writesQuotaRefusalsPurgesAndRecoveryAreReported() {
    Recording observer = new Recording();
    // Quota: 4 entries; each entry of "{}" counts ENTRY_OVERHEAD + 2 bytes.
    var partition =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(),
            Partition.create(
                5,
                PartitionWiring.inMemory(new PartitionSettings(4, 1L << 20, 10, 10))
                    .withObserver(observer)));
    partition.clear();
    // Recovery is reported once the documents table holds the recovered journal: a message later.
    org.awaitility.Awaitility.await()
        .atMost(java.time.Duration.ofSeconds(10))
        .untilAsserted(
            () ->
                assertThat(observer.calls)
                    .as("a fresh partition reports its recovery and an empty outbox")
                    .contains("5 recovered", "5 outbox 0 0 0.0"));
    observer.calls.clear();

    var ok =
        partition.<FrameReply>runCommand(
            r -> new ApplyFrame("a", List.of(upsert("1"), upsert("2")), Optional.empty(), r));
    assertThat(ok.reply()).isInstanceOf(Applied.class);
    long bytes = 2 * (Partition.ENTRY_OVERHEAD + 2);
    assertThat(observer.calls)
        .as("an accepted frame is one persisted frame and the outbox's new size")
        .containsExactly("5 persisted 1", "5 outbox 2 " + bytes + " 0.5");
    observer.calls.clear();

    var over =
        partition.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "b", List.of(upsert("3"), upsert("4"), upsert("5")), Optional.empty(), r));
    assertThat(over.reply()).isInstanceOf(PartitionProtocol.QuotaExceeded.class);
    assertThat(observer.calls)
        .as("a refused frame is counted and persists nothing")
        .containsExactly("5 refused 1");
    observer.calls.clear();

    partition.<PartitionProtocol.PurgeReply>runCommand(
        r -> new PartitionProtocol.PurgeOutbox(2, 100, r));
    assertThat(observer.calls)
        .as("a purge reports the emptied outbox")
        .containsExactly("5 outbox 0 0 0.0");
    observer.calls.clear();

    partition.restart();
    org.awaitility.Awaitility.await()
        .atMost(java.time.Duration.ofSeconds(10))
        .untilAsserted(
            () ->
                assertThat(observer.calls)
                    .as("recovery is reported with the recovered outbox")
                    .containsExactlyInAnyOrder("5 recovered", "5 outbox 0 0 0.0"));
    assertThat(observer.lastRecoveryNanos).as("the recovery time is measured").isPositive();
    assertThat(String.join("\n", observer.calls))
        .as("no document id or collection reaches the observer")
        .doesNotContain("orders");
  }

  @Test
  void theEntityReportsGroupCommitsAndItsStop() {
    Recording observer = new Recording();
    var entity =
        KIT.spawn(
            PartitionEntity.create(
                77, PartitionWiring.inMemory(PartitionSettings.DEFAULTS).withObserver(observer)));
    var replies = KIT.<FrameReply>createTestProbe();
    int n = 50;
    for (int i = 0; i < n; i++) {
      entity.tell(
          new ApplyFrame(
              "k" + i, List.of(upsert(Integer.toString(i))), Optional.empty(), replies.ref()));
    }
    for (int i = 0; i < n; i++) {
      assertThat(replies.receiveMessage()).isInstanceOf(Applied.class);
    }
    int frames =
        observer.calls.stream()
            .filter(c -> c.startsWith("77 persisted "))
            .mapToInt(c -> Integer.parseInt(c.substring("77 persisted ".length())))
            .sum();
    assertThat(frames).as("every accepted frame is counted once as persisted").isEqualTo(n);
    KIT.stop(entity, Duration.ofSeconds(5));
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(5))
        .until(() -> observer.calls.contains("77 stopped"));
  }
}
