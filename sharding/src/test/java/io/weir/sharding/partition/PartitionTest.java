package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.sharding.partition.PartitionProtocol.AlreadyApplied;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Conflict;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.Rejected;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Truncate;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.util.ArrayList;
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
      ActorTestKit.create(
          "partition-test",
          EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load()));

  private EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> partition;

  @BeforeEach
  void fresh() {
    partition = EventSourcedBehaviorTestKit.create(KIT.system(), Partition.create(7));
    partition.clear();
  }

  @AfterAll
  static void stop() {
    KIT.shutdownTestKit();
  }

  private FrameReply frame(
      String commandId, Optional<SourcePosition> source, Mutation... mutations) {
    return partition
        .<FrameReply>runCommand(r -> new ApplyFrame(commandId, List.of(mutations), source, r))
        .reply();
  }

  private static Upsert upsert(String id, String body, Long expected) {
    return new Upsert("orders", id, body, Optional.ofNullable(expected));
  }

  private Optional<ReadProtocol.Document> document(String id) {
    return partition
        .<DocumentReply>runCommand(r -> new GetDocument("orders", id, r))
        .reply()
        .document();
  }

  @Test
  void aFrameIsOneEventWithEveryEntryTheReceiptAndTheWatermark() {
    var result =
        partition.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "c1",
                    List.of(
                        upsert("1", "{\"a\":1}", null),
                        upsert("2", "{\"a\":2}", null),
                        upsert("1", "{\"a\":3}", null)),
                    Optional.of(new SourcePosition("slot", 100)),
                    r));
    assertThat(result.events()).hasSize(1);
    assertThat(((Partition.Written) result.events().get(0)).frames()).hasSize(1);
    Partition.FrameApplied event = ((Partition.Written) result.events().get(0)).frames().get(0);
    assertThat(event.entries())
        .extracting(Partition.OutboxEntry::sequence)
        .containsExactly(1L, 2L, 3L);
    assertThat(event.entries())
        .extracting(Partition.OutboxEntry::revision)
        .containsExactly(1L, 1L, 2L);
    assertThat(event.entries().get(2).before())
        .as("a later mutation sees the earlier one")
        .isEqualTo("{\"a\":1}");
    assertThat(result.reply()).isEqualTo(new Applied("c1", 1, List.of(1L, 1L, 2L), false));
    assertThat(result.state().watermarks()).containsEntry("slot", 100L);
    assertThat(document("1").orElseThrow().body()).isEqualTo("{\"a\":3}");
    assertThat(event.toString()).as("no body in toString").doesNotContain("\"a\"");
  }

  @Test
  void aFailedRevisionCheckAppliesNothingOfTheFrame() {
    frame("c1", Optional.empty(), upsert("1", "{}", null));
    var result =
        partition.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "c2",
                    List.of(upsert("2", "{}", 0L), upsert("1", "{\"x\":1}", 5L)),
                    Optional.empty(),
                    r));
    assertThat(result.reply()).isEqualTo(new Conflict(1, 1));
    assertThat(result.hasNoEvents()).isTrue();
    assertThat(document("2")).as("the first mutation was rolled back with the frame").isEmpty();
    assertThat(frame("c3", Optional.empty(), upsert("1", "{\"x\":1}", 1L)))
        .isInstanceOf(Applied.class);
    assertThat(frame("c4", Optional.empty())).isInstanceOf(Rejected.class);
  }

  @Test
  void aRetriedCommandIdReturnsTheFirstReceiptAndWritesNothing() {
    Applied first = (Applied) frame("c1", Optional.empty(), upsert("1", "{}", null));
    var retry =
        partition.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "c1", List.of(upsert("1", "{\"other\":1}", null)), Optional.empty(), r));
    assertThat(retry.hasNoEvents()).isTrue();
    assertThat(retry.reply())
        .isEqualTo(new Applied("c1", first.firstSequence(), first.revisions(), true));
    assertThat(document("1").orElseThrow().body()).isEqualTo("{}");
  }

  @Test
  void framesAtOrBelowTheSlotsWatermarkAreSkipped() {
    frame("c1", Optional.of(new SourcePosition("s", 200)), upsert("1", "{}", null));
    var replay =
        partition.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "c-other",
                    List.of(upsert("1", "{\"old\":1}", null)),
                    Optional.of(new SourcePosition("s", 200)),
                    r));
    assertThat(replay.reply()).isEqualTo(new AlreadyApplied(new SourcePosition("s", 200), 200));
    assertThat(replay.hasNoEvents()).isTrue();
    assertThat(
            frame("c2", Optional.of(new SourcePosition("other-slot", 50)), upsert("2", "{}", null)))
        .as("watermarks are per slot")
        .isInstanceOf(Applied.class);
    assertThat(
            frame(
                "c3",
                Optional.of(new SourcePosition("s", 201)),
                new Delete("orders", "1", Optional.of(1L))))
        .isInstanceOf(Applied.class);
    assertThat(document("1").orElseThrow().deleted()).isTrue();
    assertThat(document("1").orElseThrow().revision()).as("a tombstone is a revision").isEqualTo(2);
  }

  @Test
  void recoveryRebuildsDocumentsReceiptsWatermarksAndTheOutboxIndex() {
    for (int i = 0; i < 30; i++) {
      frame(
          "c" + i,
          Optional.of(new SourcePosition("s", 1000 + i)),
          upsert(Integer.toString(i % 7), "{\"n\":" + i + "}", null));
    }
    PartitionState before = partition.<PartitionStatus>runCommand(GetStatus::new).state();
    partition.restart();
    PartitionState after = partition.<PartitionStatus>runCommand(GetStatus::new).state();
    assertThat(after).isEqualTo(before);
    assertThat(after.nextSequence()).isEqualTo(31);
    assertThat(after.outbox())
        .hasSize(30)
        .containsEntry(30L, new Partition.Segment(30, 1, Partition.ENTRY_OVERHEAD + 16));
    PartitionStatus status = partition.<PartitionStatus>runCommand(GetStatus::new).reply();
    assertThat(status.outboxFirst()).isEqualTo(1);
    assertThat(status.outboxNext()).isEqualTo(31);
    assertThat(status.watermarks()).containsEntry("s", 1029L);
    assertThat(after.incarnation()).isNotNull();
    assertThat(frame("api-1", Optional.empty(), upsert("x", "{}", null)))
        .isInstanceOf(Applied.class);
    partition.restart();
    assertThat(frame("api-1", Optional.empty(), upsert("x", "{\"y\":1}", null)))
        .as("receipts survive recovery")
        .isEqualTo(new Applied("api-1", 31, List.of(1L), true));
  }

  @Test
  void snapshotsAreCopiesTheEventHandlerCannotChangeAfterwards() {
    frame("c1", Optional.empty(), upsert("1", "{}", null));
    PartitionState live = partition.<PartitionStatus>runCommand(GetStatus::new).state();
    PartitionState snapshot = live.copy();
    assertThat(snapshot).isEqualTo(live);
    frame("c2", Optional.empty(), upsert("2", "{}", null));
    assertThat(snapshot.documents())
        .as("later frames do not reach a snapshot already taken")
        .isEqualTo(1);
    assertThat(snapshot.receipts()).containsOnlyKeys("c1");
    assertThat(live.documents()).isEqualTo(2);
  }

  private static SourcePosition at(long lsn, long previous) {
    return new SourcePosition("p1", lsn, previous, 1, true);
  }

  private static SourcePosition part(long lsn, long previous, int part, int parts) {
    return new SourcePosition("p1", lsn, previous, part, part == parts);
  }

  @Test
  void aBatchIsOneEventAndEachFrameSeesTheOnesBeforeIt() {
    var a = KIT.<FrameReply>createTestProbe();
    var b = KIT.<FrameReply>createTestProbe();
    var c = KIT.<FrameReply>createTestProbe();
    List<PartitionProtocol.Write> writes =
        List.of(
            new ApplyFrame("c1", List.of(upsert("1", "{}", 0L)), Optional.empty(), a.ref()),
            new ApplyFrame("c2", List.of(upsert("1", "{\"v\":2}", 1L)), Optional.empty(), b.ref()),
            new ApplyFrame("c3", List.of(upsert("1", "{\"v\":3}", 1L)), Optional.empty(), c.ref()));
    var result =
        partition.<PartitionEntity.BatchWritten>runCommand(
            r -> new Partition.WriteBatch(writes, r));
    assertThat(result.events()).hasSize(1);
    assertThat(((Partition.Written) result.events().get(0)).frames()).hasSize(2);
    assertThat(a.receiveMessage()).isEqualTo(new Applied("c1", 1, List.of(1L), false));
    assertThat(b.receiveMessage()).isEqualTo(new Applied("c2", 2, List.of(2L), false));
    assertThat(c.receiveMessage())
        .as("the third saw revision 2 from the second")
        .isEqualTo(new Conflict(0, 2));
    assertThat(result.reply()).isEqualTo(PartitionEntity.BatchWritten.INSTANCE);
    assertThat(document("1").orElseThrow().body()).isEqualTo("{\"v\":2}");
  }

  @Test
  void aSliceWhosePredecessorNeverArrivedIsAGapAndChangesNothing() {
    assertThat(frame("x", Optional.of(at(100, 0)), upsert("1", "{}", null)))
        .isInstanceOf(Applied.class);
    // The slice at 200 was lost; the one at 300 names it as its predecessor.
    var gap =
        partition.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "x", List.of(upsert("2", "{}", null)), Optional.of(at(300, 200)), r));
    assertThat(gap.reply()).isEqualTo(new PartitionProtocol.Gap(at(300, 200), 100));
    assertThat(gap.hasNoEvents()).isTrue();
    assertThat(frame("x", Optional.of(at(200, 100)), upsert("3", "{}", null)))
        .isInstanceOf(Applied.class);
    assertThat(frame("x", Optional.of(at(300, 200)), upsert("2", "{}", null)))
        .isInstanceOf(Applied.class);
    assertThat(frame("x", Optional.of(at(250, 200)), upsert("9", "{}", null)))
        .as("at or below the watermark")
        .isEqualTo(new AlreadyApplied(at(250, 200), 300));
    assertThat(frame("x", Optional.of(at(400, 50)), upsert("4", "{}", null)))
        .as("a predecessor below the watermark is fine: replays after a restart")
        .isInstanceOf(Applied.class);
  }

  @Test
  void partsOfASplitSliceMoveTheWatermarkOnlyWithTheLastAndAreRecognisedOnRedelivery() {
    assertThat(frame("x", Optional.of(part(500, 0, 1, 3)), upsert("1", "{}", null)))
        .isInstanceOf(Applied.class);
    var status = partition.<PartitionStatus>runCommand(GetStatus::new).reply();
    assertThat(status.watermarks()).doesNotContainKey("p1");
    assertThat(frame("x", Optional.of(part(500, 0, 1, 3)), upsert("1", "{\"again\":1}", null)))
        .as("a part already applied")
        .isInstanceOf(AlreadyApplied.class);
    assertThat(frame("x", Optional.of(part(500, 0, 3, 3)), upsert("3", "{}", null)))
        .as("part 2 is missing")
        .isInstanceOf(PartitionProtocol.Gap.class);
    assertThat(frame("x", Optional.of(part(500, 0, 2, 3)), upsert("2", "{}", null)))
        .isInstanceOf(Applied.class);
    partition.restart();
    assertThat(frame("x", Optional.of(part(500, 0, 2, 3)), upsert("2", "{}", null)))
        .isInstanceOf(AlreadyApplied.class);
    assertThat(frame("x", Optional.of(part(500, 0, 3, 3)), upsert("3", "{}", null)))
        .isInstanceOf(Applied.class);
    status = partition.<PartitionStatus>runCommand(GetStatus::new).reply();
    assertThat(status.watermarks()).containsEntry("p1", 500L);
    assertThat(status.outboxEntries()).isEqualTo(3);
  }

  /**
   * The byte quota counts UTF-8 bytes: a body of 800 CJK characters is 2,400 bytes (+ its quotes
   * and key), which String.length() would count as about 810.
   */
  @Test
  void theByteQuotaCountsUtf8Bytes() {
    String cjk = "{\"t\":\"" + "日".repeat(800) + "\"}";
    long bytes =
        Partition.ENTRY_OVERHEAD + cjk.getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
    assertThat(bytes).isEqualTo(Partition.ENTRY_OVERHEAD + 2_408);
    // Room for one such entry in bytes, but for three if characters were counted.
    var quota =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(), Partition.create(8, new PartitionSettings(100, bytes + 100, 10, 10)));
    quota.clear();
    var first =
        quota.<FrameReply>runCommand(
            r -> new ApplyFrame("a", List.of(upsert("1", cjk, null)), Optional.empty(), r));
    assertThat(first.reply()).isInstanceOf(Applied.class);
    assertThat(first.state().outboxBytes()).isEqualTo(bytes);
    var second =
        quota.<FrameReply>runCommand(
            r -> new ApplyFrame("b", List.of(upsert("2", cjk, null)), Optional.empty(), r));
    assertThat(second.reply())
        .isEqualTo(new PartitionProtocol.QuotaExceeded(1, bytes, 100, bytes + 100));
    assertThat(second.hasNoEvents()).isTrue();
  }

  @Test
  void aFullOutboxRefusesFramesWithoutWritingAnything() {
    var small =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(), Partition.create(8, new PartitionSettings(3, 1L << 20, 10, 10)));
    small.clear();
    var first =
        small.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "a",
                    List.of(upsert("1", "{}", null), upsert("2", "{}", null)),
                    Optional.empty(),
                    r));
    assertThat(first.reply()).isInstanceOf(Applied.class);
    var over =
        small.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "b",
                    List.of(upsert("3", "{}", null), upsert("4", "{}", null)),
                    Optional.empty(),
                    r));
    assertThat(over.reply())
        .isEqualTo(
            new PartitionProtocol.QuotaExceeded(
                2, 2 * (Partition.ENTRY_OVERHEAD + 2), 3, 1L << 20));
    assertThat(over.hasNoEvents()).isTrue();
    var cdc =
        small.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "c",
                    List.of(upsert("3", "{}", null), upsert("4", "{}", null)),
                    Optional.of(at(10, 0)),
                    r));
    assertThat(cdc.reply()).isInstanceOf(PartitionProtocol.QuotaExceeded.class);
    assertThat(cdc.state().watermarks())
        .as("a refused CDC frame does not move the watermark")
        .isEmpty();
    assertThat(
            small
                .<FrameReply>runCommand(
                    r -> new ApplyFrame("d", List.of(upsert("3", "{}", null)), Optional.empty(), r))
                .reply())
        .isInstanceOf(Applied.class);
  }

  @Test
  void truncateDeletesEveryLiveDocumentOfTheCollectionWithAnEntryEach() {
    frame(
        "a",
        Optional.empty(),
        upsert("1", "{}", null),
        upsert("2", "{}", null),
        new Delete("orders", "2", Optional.empty()),
        upsert("3", "{}", null),
        new Upsert("other", "1", "{}", Optional.empty()));
    var result =
        partition.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "b",
                    List.of(upsert("4", "{}", null), new PartitionProtocol.Truncate("orders")),
                    Optional.empty(),
                    r));
    List<Partition.OutboxEntry> entries =
        ((Partition.Written) result.events().get(0)).frames().get(0).entries();
    assertThat(entries)
        .extracting(Partition.OutboxEntry::kind)
        .containsExactly("upsert", "delete", "delete", "delete");
    assertThat(entries.subList(1, 4))
        .extracting(Partition.OutboxEntry::id)
        .containsExactlyInAnyOrder("1", "3", "4");
    assertThat(document("1").orElseThrow().deleted()).isTrue();
    assertThat(
            partition
                .<DocumentReply>runCommand(r -> new GetDocument("other", "1", r))
                .reply()
                .document()
                .orElseThrow()
                .deleted())
        .isFalse();
  }

  @Test
  void unchangedFieldsAreKeptFromTheCurrentDocument() {
    frame("a", Optional.empty(), upsert("1", "{\"k\":1,\"big\":\"long text\"}", null));
    frame(
        "b",
        Optional.empty(),
        new Upsert("orders", "1", "{\"k\":2,\"big\":null}", Optional.empty(), List.of("big")));
    assertThat(document("1").orElseThrow().body()).isEqualTo("{\"k\":2,\"big\":\"long text\"}");
    assertThat(
            frame(
                "c",
                Optional.empty(),
                new Upsert("orders", "new", "{}", Optional.empty(), List.of("big"))))
        .as("nothing to keep from")
        .isInstanceOf(Rejected.class);
  }

  @Test
  void snapshotRowsLoadWithoutOutboxAndIncrementalRowsRecordOnlyChanges() {
    frame("a", Optional.empty(), upsert("stale", "{}", null));
    var initial =
        partition.<FrameReply>runCommand(
            r ->
                new PartitionProtocol.LoadRows(
                    List.of("orders"),
                    List.of(upsert("1", "{\"v\":1}", null), upsert("2", "{\"v\":2}", null)),
                    false,
                    r));
    assertThat(initial.reply()).isEqualTo(new PartitionProtocol.Loaded(2));
    assertThat(((Partition.Written) initial.events().get(0)).frames().get(0).entries()).isEmpty();
    assertThat(document("stale")).as("reset removes the collection's documents").isEmpty();
    long next = initial.state().nextSequence();
    var incremental =
        partition.<FrameReply>runCommand(
            r ->
                new PartitionProtocol.LoadRows(
                    List.of(),
                    List.of(
                        upsert("1", "{\"v\":1}", null),
                        upsert("2", "{\"v\":20}", null),
                        upsert("3", "{\"v\":3}", null)),
                    true,
                    r));
    assertThat(incremental.reply()).isEqualTo(new PartitionProtocol.Loaded(2));
    List<Partition.OutboxEntry> entries =
        ((Partition.Written) incremental.events().get(0)).frames().get(0).entries();
    assertThat(entries)
        .extracting(Partition.OutboxEntry::kind)
        .containsExactly("snapshot", "snapshot");
    assertThat(entries).extracting(Partition.OutboxEntry::id).containsExactly("2", "3");
    assertThat(entries.get(0).sequence()).isEqualTo(next);
    assertThat(entries.get(0).before()).isEqualTo("{\"v\":2}");
    var again =
        partition.<FrameReply>runCommand(
            r ->
                new PartitionProtocol.LoadRows(
                    List.of(), List.of(upsert("2", "{\"v\":20}", null)), true, r));
    assertThat(again.reply()).isEqualTo(new PartitionProtocol.Loaded(0));
    assertThat(again.hasNoEvents()).isTrue();
  }

  @Test
  void theEntityCoalescesFramesThatArriveWhileAWriteIsInFlight() {
    var entity = KIT.spawn(PartitionEntity.create(99, PartitionSettings.DEFAULTS));
    var replies = KIT.<FrameReply>createTestProbe();
    int n = 200;
    for (int i = 0; i < n; i++) {
      entity.tell(
          new ApplyFrame(
              "k" + i,
              List.of(upsert(Integer.toString(i % 10), "{\"n\":" + i + "}", null)),
              Optional.empty(),
              replies.ref()));
    }
    for (int i = 0; i < n; i++) {
      assertThat(replies.receiveMessage()).isInstanceOf(Applied.class);
    }
    var status = KIT.<PartitionStatus>createTestProbe();
    entity.tell(new GetStatus(status.ref()));
    PartitionStatus s = status.receiveMessage();
    assertThat(s.outboxEntries()).isEqualTo(n);
    assertThat(s.journalEvents()).as("fewer journal writes than frames").isLessThan(n);
    System.out.println("group commit: frames=" + n + " journal-events=" + s.journalEvents());
  }

  @Test
  void purgeReclaimsABoundedPrefixAndSurvivesRecovery() {
    for (int i = 0; i < 5; i++) {
      frame("p" + i, Optional.empty(), upsert(Integer.toString(i), "{\"n\":" + i + "}", null));
    }
    var refused =
        partition.<PartitionProtocol.PurgeReply>runCommand(
            r -> new PartitionProtocol.PurgeOutbox(6, 100, r));
    assertThat(refused.reply()).isInstanceOf(PartitionProtocol.PurgeRefused.class);
    assertThat(refused.hasNoEvents()).isTrue();
    var bounded =
        partition.<PartitionProtocol.PurgeReply>runCommand(
            r -> new PartitionProtocol.PurgeOutbox(4, 2, r));
    assertThat(bounded.reply()).isEqualTo(new PartitionProtocol.OutboxPurged(3, 6, 2, true));
    var rest =
        partition.<PartitionProtocol.PurgeReply>runCommand(
            r -> new PartitionProtocol.PurgeOutbox(4, 100, r));
    assertThat(rest.reply()).isEqualTo(new PartitionProtocol.OutboxPurged(5, 6, 2, false));
    var again =
        partition.<PartitionProtocol.PurgeReply>runCommand(
            r -> new PartitionProtocol.PurgeOutbox(3, 100, r));
    assertThat(again.reply())
        .as("already purged")
        .isEqualTo(new PartitionProtocol.OutboxPurged(5, 6, 0, false));
    assertThat(again.hasNoEvents()).isTrue();
    PartitionStatus status = partition.<PartitionStatus>runCommand(GetStatus::new).reply();
    assertThat(status.outboxFirst()).isEqualTo(5);
    assertThat(status.outboxEntries()).isEqualTo(1);
    assertThat(status.outboxBytes()).isEqualTo(Partition.ENTRY_OVERHEAD + 7);
    PartitionState before = partition.<PartitionStatus>runCommand(GetStatus::new).state();
    assertThat(before.outbox()).containsOnlyKeys(5L);
    partition.restart();
    assertThat(partition.<PartitionStatus>runCommand(GetStatus::new).state()).isEqualTo(before);
    assertThat(document("0").orElseThrow().revision()).as("documents stay").isEqualTo(1);
  }

  @Test
  void purgeFreesQuota() {
    var small =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(), Partition.create(9, new PartitionSettings(2, 1L << 20, 10, 10)));
    small.clear();
    small.<FrameReply>runCommand(
        r ->
            new ApplyFrame(
                "a",
                List.of(upsert("1", "{}", null), upsert("2", "{}", null)),
                Optional.empty(),
                r));
    assertThat(
            small
                .<FrameReply>runCommand(
                    r -> new ApplyFrame("b", List.of(upsert("3", "{}", null)), Optional.empty(), r))
                .reply())
        .isInstanceOf(PartitionProtocol.QuotaExceeded.class);
    small.<PartitionProtocol.PurgeReply>runCommand(
        r -> new PartitionProtocol.PurgeOutbox(2, 100, r));
    assertThat(
            small
                .<FrameReply>runCommand(
                    r -> new ApplyFrame("b", List.of(upsert("3", "{}", null)), Optional.empty(), r))
                .reply())
        .isInstanceOf(Applied.class);
  }

  /**
   * A state holding {@code documentBytes} of documents after {@code eventBytes} of events, snapshot
   * mark shared.
   */
  @Test
  void aFewLargeEventsSnapshotByTheirBytes() {
    // An initial snapshot's rows: 1 MiB events. Recovery must not replay a whole collection.
    Partition.SnapshotMark mark = new Partition.SnapshotMark(0, 0);
    int events = 0;
    while (!SnapshotPolicy.DEFAULT.due(mark, events + 1, (1L << 20) * (events + 1), 4_000_000)) {
      events++;
      assertThat(events).isLessThan(1_000);
    }
    assertThat(events + 1).as("16 MiB of 1 MiB events").isEqualTo(16);
  }

  @Test
  void aLargePartitionSnapshotsOnlyOnceEnoughWasWrittenSinceTheLastSnapshot() {
    Partition.SnapshotMark small = new Partition.SnapshotMark(0, 0);
    int taken = 0;
    for (int i = 1; i <= 2 * SnapshotPolicy.DEFAULT.events(); i++) {
      taken += SnapshotPolicy.DEFAULT.due(small, i, 100L * i, 1_000) ? 1 : 0;
    }
    assertThat(taken)
        .as("a small state: every " + SnapshotPolicy.DEFAULT.events() + " events")
        .isEqualTo(2);
    assertThat(small)
        .isEqualTo(
            new Partition.SnapshotMark(
                2 * SnapshotPolicy.DEFAULT.events(), 100L * 2 * SnapshotPolicy.DEFAULT.events()));
    // A 4 MB snapshot: another only after 1 MB of events (a quarter), here 100 bytes per event.
    Partition.SnapshotMark large = new Partition.SnapshotMark(0, 0);
    int events = 0;
    while (!SnapshotPolicy.DEFAULT.due(large, events + 1, 100L * (events + 1), 4_000_000)) {
      events++;
      assertThat(events).isLessThan(100_000);
    }
    assertThat(events + 1)
        .as("a large state waits for a quarter of its size in events")
        .isEqualTo(10_000);
    // The mark is part of the state: a partition recovered from that snapshot goes on from it.
    assertThat(
            SnapshotPolicy.DEFAULT.due(
                new Partition.SnapshotMark(10_000, 1_000_000), 10_500, 100L * 10_500, 4_000_000))
        .isFalse();
  }

  @Test
  void keptFieldsAreCopiedAsTextNumbersNestedJsonAndSpacingExactly() {
    String previous =
        "{\"k\":1,\"big\":12345678901234567.89,\"j\":{\"a\": [1.50, {\"b\": null}]},\"s\":\"x\\\"y\",\"t\":true}";
    String body = "{\"k\":2,\"big\":null,\"j\":null,\"s\":null,\"t\":null}";
    assertThat(JsonFields.merge(previous, body, List.of("big", "j", "s", "t")))
        .isEqualTo(
            "{\"k\":2,\"big\":12345678901234567.89,\"j\":{\"a\": [1.50, {\"b\": null}]},\"s\":\"x\\\"y\",\"t\":true}");
    assertThat(JsonFields.merge(previous, body, List.of("absent")))
        .as("nothing to keep")
        .isEqualTo(body);
    assertThat(JsonFields.merge("[1]", body, List.of("k"))).isNull();
    assertThat(JsonFields.merge(previous, "not json", List.of("k"))).isNull();
  }

  /** Writes document {@code id} under Idempotency-Key {@code key-<id>}, request 1. */
  private static FrameReply keyedWrite(
      EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> p, String id) {
    return p.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "api2:key-" + id + ":request-1",
                    List.of(upsert(id, "{}", null)),
                    Optional.empty(),
                    r))
        .reply();
  }

  @Test
  void receiptsPastTheHeapAreFoundInTheTableAcrossARestartAndExpireAfterTheirTime() {
    var p =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(), Partition.create(17, PartitionSettings.DEFAULTS.withReceipts(60_000, 2)));
    p.clear();
    java.util.function.Function<String, FrameReply> write = id -> keyedWrite(p, id);
    for (int i = 1; i <= 5; i++) {
      assertThat(write.apply(Integer.toString(i)))
          .isEqualTo(new Applied("api2:key-" + i + ":request-1", i, List.of(1L), false));
    }
    assertThat(p.getState().receipts()).as("the heap keeps the latest two").hasSize(2);
    assertThat(write.apply("1"))
        .as("the first receipt, from the receipts table")
        .isEqualTo(new Applied("api2:key-1:request-1", 1, List.of(1L), true));
    assertThat(
            p.<FrameReply>runCommand(
                    r ->
                        new ApplyFrame(
                            "api2:key-2:request-2",
                            List.of(upsert("2", "{\"other\":1}", null)),
                            Optional.empty(),
                            r))
                .reply())
        .as("the same key with another request, found in the table")
        .isInstanceOf(PartitionProtocol.KeyReused.class);
    p.restart();
    assertThat(write.apply("3"))
        .as("after a restart too")
        .isEqualTo(new Applied("api2:key-3:request-1", 3, List.of(1L), true));
    assertThat(p.<PartitionStatus>runCommand(GetStatus::new).reply().outboxNext())
        .as("no retry wrote anything")
        .isEqualTo(6);

    var shortLived =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(), Partition.create(18, PartitionSettings.DEFAULTS.withReceipts(300, 2)));
    shortLived.clear();
    java.util.function.Supplier<FrameReply> once =
        () ->
            shortLived
                .<FrameReply>runCommand(
                    r ->
                        new ApplyFrame(
                            "api2:late:request",
                            List.of(upsert("x", "{}", null)),
                            Optional.empty(),
                            r))
                .reply();
    assertThat(((Applied) once.get()).replayed()).isFalse();
    assertThat(((Applied) once.get()).replayed()).as("within its time").isTrue();
    org.awaitility.Awaitility.await()
        .pollDelay(java.time.Duration.ofMillis(400))
        .atMost(java.time.Duration.ofSeconds(5))
        .until(() -> true);
    assertThat(once.get())
        .as("a retry after the receipt's time is a new write")
        .isEqualTo(new Applied("api2:late:request", 2, List.of(2L), false));
  }

  @Test
  void receiptsInTheHeapAtAStartAreStillFoundOnceTheyLeaveIt() {
    // Nothing has left the heap when the partition starts again, so its receipt filter reads no
    // table: it must learn the heap's receipts, which leave the heap later.
    var p =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(), Partition.create(20, PartitionSettings.DEFAULTS.withReceipts(60_000, 2)));
    p.clear();
    java.util.function.Function<String, FrameReply> write = id -> keyedWrite(p, id);
    assertThat(((Applied) write.apply("1")).replayed()).isFalse();
    assertThat(((Applied) write.apply("2")).replayed()).isFalse();
    p.restart();
    assertThat(((Applied) write.apply("3")).replayed()).isFalse();
    assertThat(((Applied) write.apply("4")).replayed()).isFalse();
    assertThat(p.getState().receipts())
        .as("key-1 and key-2 left the heap")
        .doesNotContainKeys("api2:key-1", "api2:key-2")
        .hasSize(2);
    assertThat(write.apply("1"))
        .isEqualTo(new Applied("api2:key-1:request-1", 1, List.of(1L), true));
    assertThat(p.<PartitionStatus>runCommand(GetStatus::new).reply().outboxNext()).isEqualTo(5);
  }

  @Test
  void aRowsByteBoundCountsUtf8Bytes() {
    // Entries of 64 + 2,410 bytes (800 characters of three bytes in the after image): a row of
    // 5,000 bytes holds two of them, though their characters would fit six.
    var p =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(), Partition.create(19, PartitionSettings.DEFAULTS.withFrames(100, 5_000)));
    p.clear();
    String body = "{\"t\":\"" + "日".repeat(800) + "\"}";
    List<Mutation> rows = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      rows.add(new Upsert("t", "k" + i, body, Optional.empty()));
    }
    assertThat(
            p.<FrameReply>runCommand(
                    r -> new ApplyFrame(null, rows, Optional.of(new SourcePosition("s", 5)), r))
                .reply())
        .isInstanceOf(Applied.class);
    assertThat(journal(p, 19)).as("six entries in rows of two").hasSize(3);
    assertThat(journal(p, 19)).allMatch(e -> entries(e) == 2);
  }

  @Test
  void anApiFrameLargerThanTheWholeQuotaIsRefusedEvenByAnEmptyOutbox() {
    var tiny =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(), Partition.create(13, new PartitionSettings(2, 1L << 20, 10, 10)));
    tiny.clear();
    var big =
        tiny.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "a",
                    List.of(
                        upsert("1", "{}", null), upsert("2", "{}", null), upsert("3", "{}", null)),
                    Optional.empty(),
                    r));
    assertThat(big.reply())
        .as("three entries can never fit a quota of two: malformed, not retryable")
        .isInstanceOf(Rejected.class);
    assertThat(big.events()).isEmpty();
    assertThat(
            tiny.<FrameReply>runCommand(
                    r ->
                        new ApplyFrame(
                            "b",
                            List.of(upsert("4", "{}", null), upsert("5", "{}", null)),
                            Optional.empty(),
                            r))
                .reply())
        .isInstanceOf(Applied.class);
    assertThat(
            tiny.<FrameReply>runCommand(
                    r -> new ApplyFrame("c", List.of(upsert("6", "{}", null)), Optional.empty(), r))
                .reply())
        .as("the outbox is full now")
        .isInstanceOf(PartitionProtocol.QuotaExceeded.class);
  }

  /** The partition's journal events, as stored. */
  private static List<Partition.Event> journal(
      EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> kit, int partition) {
    return kit
        .persistenceTestKit()
        .persistedInStorage(Partition.persistenceId(partition).id())
        .stream()
        .map(e -> (Partition.Event) e)
        .toList();
  }

  private static long entries(Partition.Event e) {
    return e instanceof Partition.Written w
        ? w.frames().stream().mapToLong(f -> f.entries().size()).sum()
        : 0;
  }

  @Test
  void aTruncateOfMoreDocumentsThanARowHoldsGoesInPartsAndTheWatermarkMovesWithTheLast() {
    var p =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(),
            Partition.create(
                14, PartitionSettings.DEFAULTS.withFrames(10, 1L << 20).withBodyCache(0)));
    p.clear();
    for (int i = 0; i < 35; i++) {
      int n = i;
      assertThat(
              p.<FrameReply>runCommand(
                      r ->
                          new ApplyFrame(
                              null,
                              List.of(
                                  new Upsert(
                                      "t", "k" + (100 + n), "{\"i\":\"日本\"}", Optional.empty())),
                              Optional.of(new SourcePosition("s", 10 + n)),
                              r))
                  .reply())
          .isInstanceOf(Applied.class);
    }
    int before = journal(p, 14).size();
    FrameReply truncated =
        p.<FrameReply>runCommand(
                r ->
                    new ApplyFrame(
                        null,
                        List.of(new Truncate("t"), new Upsert("t", "k100", "{}", Optional.empty())),
                        Optional.of(new SourcePosition("s", 100)),
                        r))
            .reply();
    assertThat(truncated).isInstanceOf(Applied.class);
    assertThat(((Applied) truncated).revisions()).containsExactly(0L, 3L);
    List<Partition.Event> parts = journal(p, 14).subList(before, journal(p, 14).size());
    assertThat(parts).as("36 entries in rows of at most 10").hasSize(4);
    assertThat(parts).allMatch(e -> entries(e) <= 10);
    assertThat(parts.stream().mapToLong(PartitionTest::entries).sum()).isEqualTo(36);
    for (int i = 0; i < parts.size(); i++) {
      Partition.FrameApplied f = ((Partition.Written) parts.get(i)).frames().get(0);
      assertThat(f.cut() == null).as("only the last part moves the watermark").isEqualTo(i == 3);
    }
    PartitionStatus status = p.<PartitionStatus>runCommand(GetStatus::new).reply();
    assertThat(status.watermarks()).containsEntry("s", 100L);
    assertThat(p.<DocumentReply>runCommand(r -> new GetDocument("t", "k134", r)).reply().document())
        .hasValueSatisfying(d -> assertThat(d.deleted()).isTrue());
    assertThat(p.<DocumentReply>runCommand(r -> new GetDocument("t", "k100", r)).reply().document())
        .hasValueSatisfying(d -> assertThat(d.revision()).isEqualTo(3));
  }

  @Test
  void aPartTheQuotaRefusesWaitsAndARedeliveryResumesAfterThePartsWritten() {
    var p =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(),
            Partition.create(
                15, new PartitionSettings(50, 1L << 20, 10, 10).withFrames(10, 1L << 20)));
    p.clear();
    List<Mutation> rows = new ArrayList<>();
    for (int i = 0; i < 30; i++) {
      rows.add(new Upsert("t", "k" + (100 + i), "{}", Optional.empty()));
    }
    assertThat(
            p.<FrameReply>runCommand(
                    r -> new ApplyFrame(null, rows, Optional.of(new SourcePosition("s", 10)), r))
                .reply())
        .as("30 entries in three parts")
        .isInstanceOf(Applied.class);
    java.util.function.Function<org.apache.pekko.actor.typed.ActorRef<FrameReply>, Command> again =
        r ->
            new ApplyFrame(
                null,
                // An upsert before the truncate: applied once, in the first part, never again.
                List.of(new Upsert("other", "x", "{}", Optional.empty()), new Truncate("t")),
                Optional.of(new SourcePosition("s", 20)),
                r);
    assertThat(p.<FrameReply>runCommand(again).reply())
        .as("two parts fit the quota of 50, the third does not")
        .isInstanceOf(PartitionProtocol.QuotaExceeded.class);
    PartitionStatus full = p.<PartitionStatus>runCommand(GetStatus::new).reply();
    assertThat(full.outboxEntries()).isEqualTo(50);
    assertThat(full.watermarks()).containsEntry("s", 10L);
    // A restart forgets everything but the journal: the parts' progress is in it.
    p.restart();
    p.<PartitionProtocol.PurgeReply>runCommand(r -> new PartitionProtocol.PurgeOutbox(50, 100, r));
    assertThat(p.<FrameReply>runCommand(again).reply()).isInstanceOf(Applied.class);
    PartitionStatus done = p.<PartitionStatus>runCommand(GetStatus::new).reply();
    assertThat(done.outboxNext() - 1)
        .as("the upsert once and each document deleted once: 30 + 1 + 30 entries")
        .isEqualTo(61);
    assertThat(
            p.<DocumentReply>runCommand(r -> new GetDocument("other", "x", r)).reply().document())
        .hasValueSatisfying(d -> assertThat(d.revision()).isEqualTo(1));
    assertThat(done.watermarks()).containsEntry("s", 20L);
    assertThat(p.<FrameReply>runCommand(again).reply())
        .as("at the watermark now")
        .isInstanceOf(PartitionProtocol.AlreadyApplied.class);
  }

  @Test
  void framesTogetherLargerThanARowGoInSeveralEventsAndEveryOneIsAnswered() {
    var p =
        EventSourcedBehaviorTestKit.<Command, Partition.Event, PartitionState>create(
            KIT.system(), Partition.create(16, PartitionSettings.DEFAULTS.withFrames(4, 1L << 20)));
    p.clear();
    List<ApplyFrame> frames = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      frames.add(
          new ApplyFrame(
              null,
              List.of(
                  new Upsert("t", "a" + i, "{}", Optional.empty()),
                  new Upsert("t", "b" + i, "{}", Optional.empty()),
                  new Upsert("t", "c" + i, "{}", Optional.empty())),
              Optional.of(new SourcePosition("s", 10 + i)),
              null));
    }
    PartitionProtocol.FramesReply replies =
        p.<PartitionProtocol.FramesReply>runCommand(
                r -> new PartitionProtocol.ApplyFrames(frames, r))
            .reply();
    assertThat(replies.replies()).hasSize(5).allMatch(r -> r instanceof Applied);
    List<Partition.Event> events = journal(p, 16);
    assertThat(events).as("three entries a frame, four a row: a frame a row").hasSize(5);
    assertThat(events).allMatch(e -> entries(e) == 3);
  }
}
