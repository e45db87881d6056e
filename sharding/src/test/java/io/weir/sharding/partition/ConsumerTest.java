package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.sharding.partition.ConsumerProtocol.BatchCommitted;
import io.weir.sharding.partition.ConsumerProtocol.CommitBatch;
import io.weir.sharding.partition.ConsumerProtocol.ConfigureConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerConfigured;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefusal;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefused;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReleased;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerSpan;
import io.weir.sharding.partition.ConsumerProtocol.ReadConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ReleaseConsumer;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.OutboxPurged;
import io.weir.sharding.partition.PartitionProtocol.PurgeOutbox;
import io.weir.sharding.partition.PartitionProtocol.PurgeReply;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.util.List;
import java.util.Optional;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Projection consumers in a partition, on the in-memory journal with serialization checks. */
class ConsumerTest {
  private static final ActorTestKit KIT =
      ActorTestKit.create(
          "consumer-test", EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load()));

  private EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> partition;

  @BeforeEach
  void fresh() {
    partition = kit(PartitionSettings.DEFAULTS);
  }

  private static EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> kit(
      PartitionSettings settings) {
    var p =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(), Partition.create(3, settings));
    p.clear();
    return p;
  }

  @AfterAll
  static void stop() {
    KIT.shutdownTestKit();
  }

  private FrameReply write(String collection, String id, String body) {
    return partition
        .<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    java.util.UUID.randomUUID().toString(),
                    List.of(new Upsert(collection, id, body, Optional.empty())),
                    Optional.empty(),
                    r))
        .reply();
  }

  private ConsumerReply configure(
      String name, long generation, List<String> collections, Long startAfter) {
    return partition
        .<ConsumerReply>runCommand(
            r ->
                new ConfigureConsumer(
                    name, generation, collections, List.of(), Optional.ofNullable(startAfter), r))
        .reply();
  }

  private ConsumerReply span(String name, long generation, long max) {
    return partition
        .<ConsumerReply>runCommand(r -> new ReadConsumer(name, generation, max, r))
        .reply();
  }

  private ConsumerReply commit(String name, long start, long end, Mutation... effects) {
    String incarnation = partition.getState().incarnation();
    return partition
        .<ConsumerReply>runCommand(
            r ->
                new CommitBatch(
                    java.util.UUID.randomUUID().toString(),
                    name,
                    1,
                    incarnation,
                    start,
                    end,
                    List.of(effects),
                    r))
        .reply();
  }

  private static Upsert derived(String id, String body, long expected) {
    return new Upsert("derived", id, body, Optional.of(expected));
  }

  private static ConsumerRefusal refusal(ConsumerReply reply) {
    assertThat(reply).isInstanceOf(ConsumerRefused.class);
    return ((ConsumerRefused) reply).refusal();
  }

  @Test
  void aConsumerIsAnImmutableIdentity() {
    write("orders", "1", "{}");
    ConsumerReply created = configure("idx", 1, List.of("orders"), null);
    assertThat(created).isInstanceOf(ConsumerConfigured.class);
    assertThat(((ConsumerConfigured) created).created()).isTrue();
    assertThat(((ConsumerConfigured) created).consumer().checkpoint())
        .as("the retained beginning")
        .isZero();
    ConsumerReply again = configure("idx", 1, List.of("orders"), null);
    assertThat(((ConsumerConfigured) again).created())
        .as("same definition: the existing consumer")
        .isFalse();
    assertThat(refusal(configure("idx", 1, List.of("other"), null)))
        .isEqualTo(ConsumerRefusal.IMMUTABLE);
    assertThat(refusal(configure("idx", 1, List.of("orders"), 1L)))
        .isEqualTo(ConsumerRefusal.IMMUTABLE);
    assertThat(configure("idx", 2, List.of("other"), 1L))
        .as("a new generation may differ")
        .isInstanceOf(ConsumerConfigured.class);
    assertThat(refusal(configure("bad name", 1, List.of(), null)))
        .isEqualTo(ConsumerRefusal.INVALID);
    assertThat(
            refusal(
                partition
                    .<ConsumerReply>runCommand(
                        r ->
                            new ConfigureConsumer(
                                "k", 1, List.of(), List.of("merge"), Optional.empty(), r))
                    .reply()))
        .isEqualTo(ConsumerRefusal.INVALID);
    assertThat(refusal(configure("late", 1, List.of(), 5L)))
        .as("past the tail")
        .isEqualTo(ConsumerRefusal.INVALID);
  }

  @Test
  void startAfterMustBeARetainedCut() {
    for (int i = 0; i < 4; i++) {
      write("orders", "o" + i, "{}");
    }
    partition.<PurgeReply>runCommand(r -> new PurgeOutbox(2, 100, r));
    assertThat(refusal(configure("old", 1, List.of(), 1L)))
        .isEqualTo(ConsumerRefusal.HISTORY_UNAVAILABLE);
    assertThat(configure("cut", 1, List.of(), 2L)).isInstanceOf(ConsumerConfigured.class);
    assertThat(configure("tail", 1, List.of(), 4L)).isInstanceOf(ConsumerConfigured.class);
    ConsumerConfigured fromStart = (ConsumerConfigured) configure("start", 1, List.of(), null);
    assertThat(fromStart.consumer().checkpoint()).isEqualTo(2);
  }

  @Test
  void activeConsumersAreBoundedAndReleasedOnesDoNotCount() {
    partition = kit(PartitionSettings.DEFAULTS.withProjections(2, 10, 1 << 20, 4));
    configure("a", 1, List.of(), null);
    configure("b", 1, List.of(), null);
    assertThat(refusal(configure("c", 1, List.of(), null))).isEqualTo(ConsumerRefusal.TOO_MANY);
    partition.<ConsumerReply>runCommand(r -> new ReleaseConsumer("a", 1, r));
    assertThat(configure("c", 1, List.of(), null)).isInstanceOf(ConsumerConfigured.class);
    assertThat(refusal(configure("a", 1, List.of(), null)))
        .as("a released identity is spent")
        .isEqualTo(ConsumerRefusal.RELEASED);
  }

  @Test
  void aBatchCommitsEffectsCheckpointAndReceiptInOneFrame() {
    write("orders", "1", "{\"n\":1}");
    write("orders", "2", "{\"n\":2}");
    configure("idx", 1, List.of(), null);
    ConsumerSpan s = (ConsumerSpan) span("idx", 1, 100);
    assertThat(s.tail()).isEqualTo(2);
    assertThat(s.journalSequences()).hasSize(2);
    var result =
        partition.<ConsumerReply>runCommand(
            r ->
                new CommitBatch(
                    "c1",
                    "idx",
                    1,
                    s.incarnation(),
                    0,
                    2,
                    List.of(derived("sum", "{\"n\":3}", 0)),
                    r));
    assertThat(result.events()).as("one journal event").hasSize(1);
    BatchCommitted done = (BatchCommitted) result.reply();
    assertThat(done.alreadyProcessed()).isFalse();
    assertThat(done.checkpoint()).isEqualTo(2);
    assertThat(done.receipt().firstSequence()).isEqualTo(3);
    assertThat(done.receipt().revisions()).containsExactly(1L);
    Partition.FrameApplied frame = ((Partition.Written) result.events().get(0)).frames().get(0);
    assertThat(frame.entries()).hasSize(1);
    assertThat(frame.consumer().checkpoint()).isEqualTo(2);
    assertThat(frame.consumer().receipts()).hasSize(1);

    // The same batch again, under another command id: the original receipt, nothing written.
    var retry =
        partition.<ConsumerReply>runCommand(
            r ->
                new CommitBatch(
                    "c2",
                    "idx",
                    1,
                    s.incarnation(),
                    0,
                    2,
                    List.of(derived("sum", "{\"n\":3}", 0)),
                    r));
    assertThat(retry.events()).isEmpty();
    assertThat(retry.reply()).isEqualTo(new BatchCommitted(done.receipt(), 2, true));
    // Changed effects for a committed batch conflict; a batch from an old checkpoint is stale.
    assertThat(refusal(commit("idx", 0, 2, derived("sum", "{\"n\":4}", 0))))
        .isEqualTo(ConsumerRefusal.CONFLICT);
    assertThat(refusal(commit("idx", 0, 1))).isEqualTo(ConsumerRefusal.STALE);
    // After a restart, the receipt and checkpoint are recovered.
    partition.restart();
    assertThat(commit("idx", 0, 2, derived("sum", "{\"n\":3}", 0)))
        .isEqualTo(new BatchCommitted(done.receipt(), 2, true));
    ConsumerSpan tail = (ConsumerSpan) span("idx", 1, 100);
    assertThat(tail.consumer().checkpoint()).isEqualTo(2);
    assertThat(tail.tail()).as("the effect is an outbox entry too").isEqualTo(3);
  }

  @Test
  void eventsCarryOnlyTheNewReceiptAndRecoveryKeepsTheLatestSixteen() {
    int batches = Partition.CONSUMER_RECEIPTS + 4;
    for (int i = 0; i < batches; i++) {
      write("orders", "o" + i, "{}");
    }
    configure("idx", 1, List.of("orders"), null);
    for (int i = 0; i < batches; i++) {
      long start = i;
      var result =
          partition.<ConsumerReply>runCommand(
              r ->
                  new CommitBatch(
                      "c" + start,
                      "idx",
                      1,
                      partition.getState().incarnation(),
                      start,
                      start + 1,
                      List.of(),
                      r));
      Partition.FrameApplied frame = ((Partition.Written) result.events().get(0)).frames().get(0);
      assertThat(frame.consumer().receipts()).as("the event holds the new receipt only").hasSize(1);
    }
    partition.restart();
    assertThat(partition.getState().consumers().values())
        .singleElement()
        .satisfies(c -> assertThat(c.receipts()).hasSize(Partition.CONSUMER_RECEIPTS));
    long oldestKept = batches - Partition.CONSUMER_RECEIPTS;
    assertThat(((BatchCommitted) commit("idx", oldestKept, oldestKept + 1)).alreadyProcessed())
        .isTrue();
    assertThat(refusal(commit("idx", oldestKept - 1, oldestKept)))
        .as("forgotten: behind the checkpoint")
        .isEqualTo(ConsumerRefusal.STALE);
  }

  @Test
  void consumersAndTheirReceiptsComeBackFromASnapshotPlusLaterEvents() {
    configure("idx", 1, List.of("orders"), null);
    for (int i = 0; i < 30; i++) {
      write("orders", "o" + i, "{}");
    }
    for (int i = 0; i < 20; i++) {
      commit("idx", i, i + 1);
    }
    // Enough events for a snapshot, which then holds the consumer with its 16 receipts.
    for (int i = 0; i < SnapshotPolicy.DEFAULT.events(); i++) {
      write("other", "x" + (i % 50), "{\"i\":" + i + "}");
    }
    assertThat(partition.getState().mark().events).as("a snapshot was taken").isGreaterThan(0);
    commit("idx", 20, 21);
    commit("idx", 21, 22);
    Partition.Consumer before = partition.getState().consumers().values().iterator().next();
    partition.restart();
    Partition.Consumer after = partition.getState().consumers().values().iterator().next();
    assertThat(after).isEqualTo(before);
    assertThat(after.receipts()).hasSize(Partition.CONSUMER_RECEIPTS);
    assertThat(((BatchCommitted) commit("idx", 21, 22)).alreadyProcessed()).isTrue();
    assertThat(((BatchCommitted) commit("idx", 6, 7)).alreadyProcessed())
        .as("kept in the snapshot")
        .isTrue();
    assertThat(refusal(commit("idx", 5, 6))).isEqualTo(ConsumerRefusal.STALE);
  }

  @Test
  void aFailingEffectRollsBackEffectsAndCheckpoint() {
    write("orders", "1", "{}");
    write("derived", "x", "{}");
    configure("idx", 1, List.of("orders"), null);
    ConsumerReply refused = commit("idx", 0, 2, derived("y", "{}", 0), derived("x", "{}", 0));
    assertThat(refusal(refused)).isEqualTo(ConsumerRefusal.REVISION_CONFLICT);
    assertThat(((ConsumerRefused) refused).index()).isEqualTo(1);
    assertThat(((ConsumerRefused) refused).actualRevision()).isEqualTo(1);
    assertThat(document("derived", "y")).as("the first effect is rolled back").isEmpty();
    assertThat(((ConsumerSpan) span("idx", 1, 10)).consumer().checkpoint()).isZero();
    assertThat(refusal(commit("idx", 0, 2, new Upsert("derived", "z", "{}", Optional.empty()))))
        .as("effects name the revision they expect")
        .isEqualTo(ConsumerRefusal.INVALID);
    assertThat(refusal(commit("idx", 0, 2, new PartitionProtocol.Truncate("derived"))))
        .isEqualTo(ConsumerRefusal.INVALID);
    assertThat(commit("idx", 0, 2, new Delete("derived", "x", Optional.of(1L))))
        .isInstanceOf(BatchCommitted.class);
    assertThat(document("derived", "x").orElseThrow().deleted()).isTrue();
  }

  @Test
  void anEmptyTailBatchCannotCarryEffectsAndWritesNothing() {
    configure("idx", 1, List.of(), null);
    assertThat(refusal(commit("idx", 0, 0, derived("a", "{}", 0))))
        .isEqualTo(ConsumerRefusal.INVALID);
    var empty =
        partition.<ConsumerReply>runCommand(
            r ->
                new CommitBatch(
                    "e", "idx", 1, partition.getState().incarnation(), 0, 0, List.of(), r));
    assertThat(empty.events()).isEmpty();
    assertThat(((BatchCommitted) empty.reply()).checkpoint()).isZero();
  }

  @Test
  void releaseFencesTokensAndUnpinsPurges() {
    for (int i = 0; i < 5; i++) {
      write("orders", "o" + i, "{}");
    }
    configure("idx", 1, List.of(), 1L);
    OutboxPurged pinned =
        (OutboxPurged) partition.<PurgeReply>runCommand(r -> new PurgeOutbox(5, 100, r)).reply();
    assertThat(pinned).isEqualTo(new OutboxPurged(2, 6, 1, false, true));
    commit("idx", 1, 3);
    OutboxPurged next =
        (OutboxPurged) partition.<PurgeReply>runCommand(r -> new PurgeOutbox(5, 100, r)).reply();
    assertThat(next).isEqualTo(new OutboxPurged(4, 6, 2, false, true));
    ConsumerReleased released =
        (ConsumerReleased)
            partition.<ConsumerReply>runCommand(r -> new ReleaseConsumer("idx", 1, r)).reply();
    assertThat(released.consumer().released()).isTrue();
    assertThat(refusal(commit("idx", 3, 5))).isEqualTo(ConsumerRefusal.TOKEN_INVALIDATED);
    assertThat(refusal(span("idx", 1, 10))).isEqualTo(ConsumerRefusal.TOKEN_INVALIDATED);
    assertThat(partition.<PurgeReply>runCommand(r -> new PurgeOutbox(5, 100, r)).reply())
        .isEqualTo(new OutboxPurged(6, 6, 2, false, false));
    PartitionStatus status = partition.<PartitionStatus>runCommand(GetStatus::new).reply();
    assertThat(status.consumers())
        .singleElement()
        .satisfies(
            c -> {
              assertThat(c.released()).isTrue();
              assertThat(c.checkpoint()).isEqualTo(3);
            });
  }

  @Test
  void automaticRetentionPurgesThroughTheLowestActiveCheckpointOnly() {
    for (int i = 0; i < 6; i++) {
      write("orders", "o" + i, "{}");
    }
    assertThat(
            partition
                .<PurgeReply>runCommand(r -> new PartitionProtocol.PurgeConsumed(100, r))
                .reply())
        .as("no consumer: nothing says what was processed")
        .isEqualTo(new OutboxPurged(1, 7, 0, false, false));
    configure("a", 1, List.of(), null);
    configure("b", 1, List.of(), null);
    commit("a", 0, 5);
    commit("b", 0, 2);
    assertThat(
            partition
                .<PurgeReply>runCommand(r -> new PartitionProtocol.PurgeConsumed(100, r))
                .reply())
        .isEqualTo(new OutboxPurged(3, 7, 2, false, false));
    partition.<ConsumerReply>runCommand(r -> new ReleaseConsumer("b", 1, r));
    assertThat(
            partition
                .<PurgeReply>runCommand(r -> new PartitionProtocol.PurgeConsumed(1, r))
                .reply())
        .as("bounded per request")
        .isEqualTo(new OutboxPurged(4, 7, 1, true, false));
    assertThat(
            partition
                .<PurgeReply>runCommand(r -> new PartitionProtocol.PurgeConsumed(100, r))
                .reply())
        .isEqualTo(new OutboxPurged(6, 7, 2, false, false));
  }

  @Test
  void aPurgeWithoutAPracticalLimitStillPurges() {
    for (int i = 0; i < 3; i++) {
      write("orders", "o" + i, "{}");
    }
    assertThat(partition.<PurgeReply>runCommand(r -> new PurgeOutbox(2, Long.MAX_VALUE, r)).reply())
        .isEqualTo(new OutboxPurged(3, 4, 2, false, false));
    assertThat(
            partition
                .<PurgeReply>runCommand(r -> new PartitionProtocol.PurgeConsumed(Long.MAX_VALUE, r))
                .reply())
        .isEqualTo(new OutboxPurged(3, 4, 0, false, false));
  }

  @Test
  void aTokenFromAnotherIncarnationIsFenced() {
    write("orders", "1", "{}");
    configure("idx", 1, List.of(), null);
    var reply =
        partition
            .<ConsumerReply>runCommand(
                r -> new CommitBatch("c", "idx", 1, "another-incarnation", 0, 1, List.of(), r))
            .reply();
    assertThat(refusal(reply)).isEqualTo(ConsumerRefusal.TOKEN_INVALIDATED);
    assertThat(refusal(commit("other", 0, 1))).isEqualTo(ConsumerRefusal.NOT_FOUND);
  }

  @Test
  void theProgressReserveLetsEachConsumerAdvanceOncePerRetainedPrefix() {
    partition = kit(new PartitionSettings(3, 1 << 20, 10, 100).withProjections(4, 2, 1 << 20, 4));
    for (int i = 0; i < 3; i++) {
      write("orders", "o" + i, "{}");
    }
    assertThat(write("orders", "full", "{}"))
        .as("the producer quota is full")
        .isInstanceOf(PartitionProtocol.QuotaExceeded.class);
    configure("a", 1, List.of(), null);
    configure("b", 1, List.of(), null);
    assertThat(commit("a", 0, 1, derived("a1", "{}", 0)))
        .as("into the reserve")
        .isInstanceOf(BatchCommitted.class);
    assertThat(refusal(commit("a", 1, 2, derived("a2", "{}", 0))))
        .as("once per retained-prefix position")
        .isEqualTo(ConsumerRefusal.QUOTA_EXCEEDED);
    assertThat(commit("a", 1, 2))
        .as("a batch without effects always advances")
        .isInstanceOf(BatchCommitted.class);
    assertThat(commit("b", 0, 1, derived("b1", "{}", 0))).isInstanceOf(BatchCommitted.class);
    configure("c", 1, List.of(), null);
    assertThat(refusal(commit("c", 0, 1, derived("c1", "{}", 0))))
        .as("the reserve's 2 entries are spent")
        .isEqualTo(ConsumerRefusal.QUOTA_EXCEEDED);
    partition.<ConsumerReply>runCommand(r -> new ReleaseConsumer("c", 1, r));
    assertThat(partition.<PurgeReply>runCommand(r -> new PurgeOutbox(1, 100, r)).reply())
        .isEqualTo(new OutboxPurged(2, 6, 1, false, false));
    assertThat(commit("a", 2, 3, derived("a2", "{}", 0)))
        .as("a purge makes a new reservation available")
        .isInstanceOf(BatchCommitted.class);
  }

  private Optional<ReadProtocol.Document> document(String collection, String id) {
    return partition
        .<DocumentReply>runCommand(r -> new GetDocument(collection, id, r))
        .reply()
        .document();
  }

  @Test
  void appliedApiWritesStillWork() {
    assertThat(write("orders", "1", "{}")).isInstanceOf(Applied.class);
  }
}
