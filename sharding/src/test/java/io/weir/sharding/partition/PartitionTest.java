package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.sharding.partition.PartitionProtocol.AlreadyApplied;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Conflict;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.DocumentReply;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.GetDocument;
import io.weir.sharding.partition.PartitionProtocol.GetStatus;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.PartitionStatus;
import io.weir.sharding.partition.PartitionProtocol.Rejected;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import java.util.List;
import java.util.Optional;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The partition entity on Pekko's in-memory journal, with events and snapshots serialized as in
 * production (the test kit checks every one round-trips).
 */
class PartitionTest {
  private static final ActorTestKit KIT =
      ActorTestKit.create("partition-test", EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load()));

  private EventSourcedBehaviorTestKit<Command, Partition.FrameApplied, Partition.State> partition;

  @BeforeEach
  void fresh() {
    partition = EventSourcedBehaviorTestKit.create(KIT.system(), Partition.create(7));
    partition.clear();
  }

  @AfterAll
  static void stop() {
    KIT.shutdownTestKit();
  }

  private FrameReply frame(String commandId, Optional<SourcePosition> source, Mutation... mutations) {
    return partition.<FrameReply>runCommand(r -> new ApplyFrame(commandId, List.of(mutations), source, r)).reply();
  }

  private static Upsert upsert(String id, String body, Long expected) {
    return new Upsert("orders", id, body, Optional.ofNullable(expected));
  }

  private Optional<PartitionProtocol.Document> document(String id) {
    return partition.<DocumentReply>runCommand(r -> new GetDocument("orders", id, r)).reply().document();
  }

  @Test
  void aFrameIsOneEventWithEveryEntryTheReceiptAndTheWatermark() {
    var result = partition.<FrameReply>runCommand(r -> new ApplyFrame("c1",
        List.of(upsert("1", "{\"a\":1}", null), upsert("2", "{\"a\":2}", null), upsert("1", "{\"a\":3}", null)),
        Optional.of(new SourcePosition("slot", 100)), r));
    assertThat(result.events()).hasSize(1);
    Partition.FrameApplied event = result.events().get(0);
    assertThat(event.entries()).extracting(Partition.OutboxEntry::sequence).containsExactly(1L, 2L, 3L);
    assertThat(event.entries()).extracting(Partition.OutboxEntry::revision).containsExactly(1L, 1L, 2L);
    assertThat(event.entries().get(2).before()).as("a later mutation sees the earlier one").isEqualTo("{\"a\":1}");
    assertThat(result.reply()).isEqualTo(new Applied("c1", 1, List.of(1L, 1L, 2L), false));
    assertThat(result.state().watermarks()).containsEntry("slot", 100L);
    assertThat(document("1").orElseThrow().body()).isEqualTo("{\"a\":3}");
    assertThat(event.toString()).as("no body in toString").doesNotContain("\"a\"");
  }

  @Test
  void aFailedRevisionCheckAppliesNothingOfTheFrame() {
    frame("c1", Optional.empty(), upsert("1", "{}", null));
    var result = partition.<FrameReply>runCommand(r -> new ApplyFrame("c2",
        List.of(upsert("2", "{}", 0L), upsert("1", "{\"x\":1}", 5L)), Optional.empty(), r));
    assertThat(result.reply()).isEqualTo(new Conflict(1, 1));
    assertThat(result.hasNoEvents()).isTrue();
    assertThat(document("2")).as("the first mutation was rolled back with the frame").isEmpty();
    assertThat(frame("c3", Optional.empty(), upsert("1", "{\"x\":1}", 1L))).isInstanceOf(Applied.class);
    assertThat(frame("c4", Optional.empty())).isInstanceOf(Rejected.class);
  }

  @Test
  void aRetriedCommandIdReturnsTheFirstReceiptAndWritesNothing() {
    Applied first = (Applied) frame("c1", Optional.empty(), upsert("1", "{}", null));
    var retry = partition.<FrameReply>runCommand(r -> new ApplyFrame("c1", List.of(upsert("1", "{\"other\":1}", null)), Optional.empty(), r));
    assertThat(retry.hasNoEvents()).isTrue();
    assertThat(retry.reply()).isEqualTo(new Applied("c1", first.firstSequence(), first.revisions(), true));
    assertThat(document("1").orElseThrow().body()).isEqualTo("{}");
  }

  @Test
  void framesAtOrBelowTheSlotsWatermarkAreSkipped() {
    frame("c1", Optional.of(new SourcePosition("s", 200)), upsert("1", "{}", null));
    var replay = partition.<FrameReply>runCommand(r -> new ApplyFrame("c-other",
        List.of(upsert("1", "{\"old\":1}", null)), Optional.of(new SourcePosition("s", 200)), r));
    assertThat(replay.reply()).isEqualTo(new AlreadyApplied(new SourcePosition("s", 200), 200));
    assertThat(replay.hasNoEvents()).isTrue();
    assertThat(frame("c2", Optional.of(new SourcePosition("other-slot", 50)), upsert("2", "{}", null)))
        .as("watermarks are per slot").isInstanceOf(Applied.class);
    assertThat(frame("c3", Optional.of(new SourcePosition("s", 201)), new Delete("orders", "1", Optional.of(1L))))
        .isInstanceOf(Applied.class);
    assertThat(document("1").orElseThrow().deleted()).isTrue();
    assertThat(document("1").orElseThrow().revision()).as("a tombstone is a revision").isEqualTo(2);
  }

  @Test
  void recoveryRebuildsDocumentsReceiptsWatermarksAndTheOutboxIndex() {
    for (int i = 0; i < 30; i++) {
      frame("c" + i, Optional.of(new SourcePosition("s", 1000 + i)), upsert(Integer.toString(i % 7), "{\"n\":" + i + "}", null));
    }
    Partition.State before = partition.<PartitionStatus>runCommand(GetStatus::new).state();
    partition.restart();
    Partition.State after = partition.<PartitionStatus>runCommand(GetStatus::new).state();
    assertThat(after).isEqualTo(before);
    assertThat(after.nextSequence()).isEqualTo(31);
    assertThat(after.frames()).hasSize(30).containsEntry(30L, 30L);
    PartitionStatus status = partition.<PartitionStatus>runCommand(GetStatus::new).reply();
    assertThat(status.outboxFirst()).isEqualTo(1);
    assertThat(status.outboxNext()).isEqualTo(31);
    assertThat(status.watermarks()).containsEntry("s", 1029L);
    assertThat(frame("c5", Optional.empty(), upsert("x", "{}", null))).as("receipts survive recovery")
        .isEqualTo(new Applied("c5", 6, List.of(1L), true));
  }

  @Test
  void snapshotsAreCopiesTheEventHandlerCannotChangeAfterwards() {
    frame("c1", Optional.empty(), upsert("1", "{}", null));
    Partition.State live = partition.<PartitionStatus>runCommand(GetStatus::new).state();
    Partition.State snapshot = (Partition.State) Partition.create(7).snapshotAdapter().toJournal(live);
    assertThat(snapshot).isEqualTo(live);
    frame("c2", Optional.empty(), upsert("2", "{}", null));
    assertThat(snapshot.documents()).as("later frames do not reach a snapshot already taken").hasSize(1);
    assertThat(snapshot.receipts()).containsOnlyKeys("c1");
  }
}
