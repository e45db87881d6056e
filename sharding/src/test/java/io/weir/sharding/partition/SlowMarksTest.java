package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import io.weir.sharding.storage.AckMark;
import io.weir.sharding.storage.AcknowledgedMarks;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/**
 * A group commit waits for its acknowledged mark (ADR 0036) while the rest of the partition goes
 * on: the documents table applies the event meanwhile, which must not plan the same writes again.
 * Each write is applied and answered once, however slow the marks are.
 */
class SlowMarksTest {
  private static final ActorTestKit KIT =
      ActorTestKit.create(
          "slow-marks", EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load()));
  private static final Duration WAIT = Duration.ofSeconds(20);

  @AfterAll
  static void stop() {
    KIT.shutdownTestKit();
  }

  @Test
  void aWriteWaitingForItsMarkIsAppliedOnce() {
    AtomicInteger raises = new AtomicInteger();
    AcknowledgedMarks slow =
        new AcknowledgedMarks() {
          private final AcknowledgedMarks kept = AcknowledgedMarks.inMemory();

          @Override
          public CompletionStage<AckMark> read(int partition) {
            return kept.read(partition);
          }

          @Override
          public CompletionStage<Void> raise(int partition, AckMark mark) {
            raises.incrementAndGet();
            // Far longer than the in-memory table takes to apply the event.
            return CompletableFuture.runAsync(
                    () -> {}, CompletableFuture.delayedExecutor(300, TimeUnit.MILLISECONDS))
                .thenCompose(done -> kept.raise(partition, mark));
          }
        };
    ActorRef<Command> p =
        KIT.spawn(
            Partition.create(
                4, PartitionWiring.inMemory(PartitionSettings.DEFAULTS).withMarks(slow)));
    TestProbe<FrameReply> replies = KIT.createTestProbe();
    for (int i = 1; i <= 3; i++) {
      p.tell(
          new ApplyFrame(
              PartitionProtocol.UNKEYED_COMMAND_PREFIX + i,
              List.of(new Upsert("notes", "n-1", "{\"i\":" + i + "}", Optional.empty())),
              Optional.empty(),
              replies.ref()));
      FrameReply reply = replies.receiveMessage(WAIT);
      assertThat(reply).isInstanceOf(Applied.class);
      assertThat(((Applied) reply).revisions()).as("write %d", i).containsExactly((long) i);
    }
    replies.expectNoMessage(Duration.ofMillis(500));
    TestProbe<DocumentReply> documents = KIT.createTestProbe();
    p.tell(new GetDocument("notes", "n-1", documents.ref()));
    assertThat(documents.receiveMessage(WAIT).document().orElseThrow().revision()).isEqualTo(3);
    TestProbe<PartitionStatus> status = KIT.createTestProbe();
    p.tell(new GetStatus(status.ref()));
    PartitionStatus s = status.receiveMessage(WAIT);
    assertThat(s.journalEvents()).as("one journal event per write").isEqualTo(3);
    assertThat(s.outboxNext() - s.outboxFirst()).as("one outbox entry per write").isEqualTo(3);
    assertThat(s.storage().acknowledged()).isEqualTo(3);
    assertThat(raises.get()).isEqualTo(3);
  }

  /**
   * A group commit whose mark cannot be raised is not answered: the partition stops. Recovered, it
   * raises its mark over the journal before it answers anything, so the retry answered from the
   * write's receipt is covered by the mark (a storage that loses the write later is then caught).
   */
  @Test
  void aWriteWhoseMarkFailedIsMarkedBeforeItsRetryIsAnswered() {
    AtomicInteger failures = new AtomicInteger(1);
    AcknowledgedMarks kept = AcknowledgedMarks.inMemory();
    AcknowledgedMarks failingOnce =
        new AcknowledgedMarks() {
          @Override
          public CompletionStage<AckMark> read(int partition) {
            return kept.read(partition);
          }

          @Override
          public CompletionStage<Void> raise(int partition, AckMark mark) {
            if (failures.getAndDecrement() > 0) {
              return CompletableFuture.failedFuture(
                  new IllegalStateException("no majority of the nodes answered"));
            }
            return kept.raise(partition, mark);
          }
        };
    PartitionWiring wiring =
        PartitionWiring.inMemory(PartitionSettings.DEFAULTS).withMarks(failingOnce);
    ActorRef<Command> first = KIT.spawn(Partition.create(6, wiring));
    TestProbe<FrameReply> replies = KIT.createTestProbe();
    ApplyFrame write =
        new ApplyFrame(
            "retried-1",
            List.of(new Upsert("notes", "n-6", "{\"i\":1}", Optional.empty())),
            Optional.empty(),
            replies.ref());
    first.tell(write);
    replies.expectTerminated(first, WAIT);
    replies.expectNoMessage(Duration.ofMillis(200));
    assertThat(kept.read(6).toCompletableFuture().join().isNone())
        .as("the failed raise kept nothing")
        .isTrue();

    ActorRef<Command> second = KIT.spawn(Partition.create(6, wiring));
    second.tell(write);
    FrameReply reply = replies.receiveMessage(WAIT);
    assertThat(reply).isInstanceOf(Applied.class);
    assertThat(((Applied) reply).revisions()).as("answered from its receipt").containsExactly(1L);
    AckMark mark = kept.read(6).toCompletableFuture().join();
    assertThat(mark.sequence())
        .as("the recovered write is marked before its retry is answered")
        .isEqualTo(1);
    TestProbe<PartitionStatus> status = KIT.createTestProbe();
    second.tell(new GetStatus(status.ref()));
    PartitionStatus s = status.receiveMessage(WAIT);
    assertThat(s.journalEvents()).as("written once").isEqualTo(1);
    assertThat(s.storage().acknowledged()).isEqualTo(1);
    assertThat(s.storage().state()).isEqualTo("serving");
  }
}
