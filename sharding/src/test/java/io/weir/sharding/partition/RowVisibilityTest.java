package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.RowRuleReply;
import io.weir.sharding.partition.PartitionProtocol.SetRowRule;
import io.weir.sharding.partition.PartitionProtocol.Truncate;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.Acls;
import io.weir.sharding.partition.ReadProtocol.ChangesSpan;
import io.weir.sharding.partition.ReadProtocol.CollectionScan;
import io.weir.sharding.partition.ReadProtocol.GetAcls;
import io.weir.sharding.partition.ReadProtocol.ReadChanges;
import io.weir.sharding.partition.ReadProtocol.ScanCollection;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Row-visibility rules in the partition: the ACL-change epoch moves in the same event as the
 * change, creation is not a change, tombstones keep the deleted row's ACL, and rule versions only
 * move forward. Events and state round-trip through the production serializer (test kit).
 */
class RowVisibilityTest {
  private static final ActorTestKit KIT =
      ActorTestKit.create(
          "row-visibility-test",
          EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load()));

  private EventSourcedBehaviorTestKit<Command, Partition.Event, PartitionState> partition;

  @BeforeEach
  void fresh() {
    partition = EventSourcedBehaviorTestKit.create(KIT.system(), Partition.create(3));
    partition.clear();
  }

  @AfterAll
  static void stop() {
    KIT.shutdownTestKit();
  }

  private FrameReply frame(Mutation... mutations) {
    return partition
        .<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    UUID.randomUUID().toString(), List.of(mutations), Optional.empty(), r))
        .reply();
  }

  private static Upsert put(String id, String body) {
    return new Upsert("notes", id, body, Optional.empty());
  }

  private RowRuleReply rule(String field, long version) {
    return partition
        .<RowRuleReply>runCommand(r -> new SetRowRule("notes", field, version, r))
        .reply();
  }

  private ChangesSpan span() {
    return partition.<ChangesSpan>runCommand(r -> new ReadChanges("notes", 0, 100, r)).reply();
  }

  private Acls acls(String... ids) {
    return partition.<Acls>runCommand(r -> new GetAcls("notes", List.of(ids), r)).reply();
  }

  @Test
  void anAclChangeOfAnExistingDocumentAdvancesTheEpochInTheSameEvent() {
    assertThat(rule("acl", 5)).isEqualTo(new RowRuleReply(5, 1, true));
    frame(put("1", "{\"acl\":[\"ann\"],\"text\":\"a\"}"));
    assertThat(span().rowEpoch())
        .as("creating a document with an ACL is not an ACL change")
        .isEqualTo(1);
    frame(put("1", "{\"acl\":[\"ann\"],\"text\":\"b\"}"));
    assertThat(span().rowEpoch()).as("a change that keeps the ACL").isEqualTo(1);
    var result =
        partition.<FrameReply>runCommand(
            r ->
                new ApplyFrame(
                    "x",
                    List.of(put("1", "{\"acl\":[\"bob\"],\"text\":\"b\"}")),
                    Optional.empty(),
                    r));
    assertThat(result.events()).hasSize(1);
    assertThat(((Partition.Written) result.events().get(0)).frames().get(0).fenced())
        .containsExactly("notes");
    assertThat(span().rowEpoch()).isEqualTo(2);
    frame(put("1", "{\"text\":\"c\"}"));
    assertThat(span().rowEpoch()).as("removing the ACL field is a change").isEqualTo(3);
  }

  @Test
  void tombstonesKeepTheAclOfTheDeletedDocument() {
    rule("owner", 1);
    frame(
        put("1", "{\"owner\":\"ann\",\"x\":1}"),
        put("2", "{\"owner\":\"bob\"}"),
        put("3", "{\"x\":1}"));
    frame(new Delete("notes", "1", Optional.empty()));
    frame(new Truncate("notes"));
    Acls acls = acls("1", "2", "3", "4");
    assertThat(acls.acls())
        .containsEntry("1", "\"ann\"")
        .containsEntry("2", "\"bob\"")
        .containsEntry("3", "null")
        .doesNotContainKey("4");
    assertThat(span().rowEpoch()).as("deletion is not an ACL change").isEqualTo(1);
    partition.restart();
    assertThat(acls("1").acls()).as("kept across recovery").containsEntry("1", "\"ann\"");
  }

  @Test
  void ruleVersionsOnlyMoveForwardAndAnotherFieldForgetsTombstoneAcls() {
    rule("owner", 3);
    assertThat(rule("acl", 2)).isEqualTo(new RowRuleReply(3, 1, false));
    assertThat(rule("owner", 3).changed()).isFalse();
    frame(put("1", "{\"owner\":\"ann\"}"));
    frame(new Delete("notes", "1", Optional.empty()));
    assertThat(rule("acl", 4)).isEqualTo(new RowRuleReply(4, 2, true));
    assertThat(acls("1").acls())
        .as("the tombstone's ACL was of another field: unknown")
        .containsEntry("1", "null");
    assertThat(span().ruleVersion()).isEqualTo(4);
    assertThat(rule(null, 9)).isEqualTo(new RowRuleReply(9, 3, true));
    frame(put("2", "{\"acl\":[\"a\"]}"));
    frame(put("2", "{\"acl\":[\"b\"]}"));
    assertThat(span().rowEpoch()).as("without a rule nothing is an ACL change").isEqualTo(3);
  }

  @Test
  void aScanIsTheLiveDocumentsAndTheTailAtOneMoment() {
    frame(put("1", "{\"a\":1}"), put("2", "{\"a\":2}"));
    frame(new Delete("notes", "2", Optional.empty()));
    CollectionScan scan =
        partition.<CollectionScan>runCommand(r -> new ScanCollection("notes", 1000, r)).reply();
    assertThat(scan.documents()).extracting(ReadProtocol.Document::id).containsExactly("1");
    assertThat(scan.tail()).isEqualTo(3);
    assertThat(scan.tooLarge()).isFalse();
    CollectionScan small =
        partition.<CollectionScan>runCommand(r -> new ScanCollection("notes", 3, r)).reply();
    assertThat(small.tooLarge()).isTrue();
    assertThat(small.documents()).isEmpty();
  }

  @Test
  void aScansByteBudgetCountsUtf8Bytes() {
    // 800 characters of three bytes: 2,400 bytes counted, not 800.
    String body = "{\"t\":\"" + "日".repeat(800) + "\"}";
    frame(put("1", body));
    long size =
        PartitionReads.DOCUMENT_OVERHEAD
            + "notes".length()
            + 1
            + body.getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
    assertThat(
            partition
                .<CollectionScan>runCommand(r -> new ScanCollection("notes", size - 1, r))
                .reply()
                .tooLarge())
        .isTrue();
    assertThat(
            partition
                .<CollectionScan>runCommand(r -> new ScanCollection("notes", size, r))
                .reply()
                .documents())
        .hasSize(1);
  }

  @Test
  void aScanForAReaderCountsAndReturnsOnlyTheDocumentsItMaySee() {
    rule("acl", 1);
    String big = "x".repeat(500);
    frame(
        put("mine", "{\"acl\":[\"ann\"]}"),
        put("team", "{\"acl\":[\"group:g\"]}"),
        put("other", "{\"acl\":[\"bob\"],\"pad\":\"" + big + "\"}"),
        put("shape", "{\"acl\":\"ann\",\"pad\":\"" + big + "\"}"),
        put("none", "{\"pad\":\"" + big + "\"}"));
    ReadProtocol.ScanReader ann = new ReadProtocol.ScanReader("ann", java.util.Set.of("g"), false);
    CollectionScan mine =
        partition.<CollectionScan>runCommand(r -> new ScanCollection("notes", 400, ann, r)).reply();
    assertThat(mine.tooLarge()).as("the hidden rows exceed 400 bytes; they do not count").isFalse();
    assertThat(mine.documents())
        .extracting(ReadProtocol.Document::id)
        .containsExactlyInAnyOrder("mine", "team");
    assertThat(
            partition
                .<CollectionScan>runCommand(r -> new ScanCollection("notes", 400, r))
                .reply()
                .tooLarge())
        .as("every document counts for a scan without a reader")
        .isTrue();
    ReadProtocol.ScanReader bob = new ReadProtocol.ScanReader("bob", java.util.Set.of(), false);
    CollectionScan bobs =
        partition.<CollectionScan>runCommand(r -> new ScanCollection("notes", 400, bob, r)).reply();
    assertThat(bobs.tooLarge()).as("bob's own row exceeds the budget").isTrue();
    assertThat(bobs.documents()).isEmpty();
    rule("owner", 2);
    frame(
        put("owned", "{\"owner\":\"ann\"}"),
        put("bobs", "{\"owner\":\"bob\"}"),
        put("ann-in-list", "{\"owner\":[\"ann\"]}"));
    ReadProtocol.ScanReader owner = new ReadProtocol.ScanReader("ann", java.util.Set.of("g"), true);
    assertThat(
            partition
                .<CollectionScan>runCommand(r -> new ScanCollection("notes", 400, owner, r))
                .reply()
                .documents())
        .extracting(ReadProtocol.Document::id)
        .containsExactly("owned");
  }

  @Test
  void aChangesSpanNamesTheJournalEventsOfRetainedPositions() {
    frame(put("1", "{}"));
    frame(put("2", "{}"), put("3", "{}"));
    ChangesSpan span =
        partition.<ChangesSpan>runCommand(r -> new ReadChanges("notes", 1, 1, r)).reply();
    assertThat(span.tail()).isEqualTo(3);
    assertThat(span.journalSequences()).containsExactly(2L);
    assertThat(span.incarnation()).isNotNull();
    partition.<PartitionProtocol.PurgeReply>runCommand(
        r -> new PartitionProtocol.PurgeOutbox(2, 10, r));
    ChangesSpan purged =
        partition.<ChangesSpan>runCommand(r -> new ReadChanges("notes", 0, 10, r)).reply();
    assertThat(purged.outboxFirst()).isEqualTo(3);
    assertThat(purged.journalSequences()).as("purged positions are named by no event").isEmpty();
  }

  @Test
  void reCreatingADeletedDocumentWithAnotherAclIsAnAclChange() {
    rule("acl", 1);
    frame(put("1", "{\"acl\":[\"bob\"]}"));
    frame(new Delete("notes", "1", Optional.empty()));
    frame(put("1", "{\"acl\":[\"bob\"]}"));
    assertThat(span().rowEpoch()).as("re-created with the same ACL").isEqualTo(1);
    frame(new Delete("notes", "1", Optional.empty()));
    frame(put("1", "{\"acl\":[\"alice\"]}"));
    assertThat(span().rowEpoch())
        .as("re-created with another ACL: bob would miss the deletion")
        .isEqualTo(2);
    frame(new Truncate("notes"), put("1", "{\"acl\":[\"bob\"]}"));
    assertThat(span().rowEpoch()).as("truncated and re-created in one frame").isEqualTo(3);
  }

  @Test
  void anInitialSnapshotFencesItsCollectionsWhateverTheRule() {
    partition.<FrameReply>runCommand(
        r -> new PartitionProtocol.LoadRows(List.of("notes"), List.of(put("1", "{}")), false, r));
    assertThat(span().rowEpoch()).as("a re-seed without a rule").isEqualTo(1);
    partition.<FrameReply>runCommand(
        r -> new PartitionProtocol.LoadRows(List.of(), List.of(put("2", "{}")), false, r));
    assertThat(span().rowEpoch()).as("a later chunk of rows without outbox entries").isEqualTo(2);
    partition.<FrameReply>runCommand(
        r -> new PartitionProtocol.LoadRows(List.of(), List.of(put("3", "{}")), true, r));
    assertThat(span().rowEpoch()).as("incremental snapshot rows have outbox entries").isEqualTo(2);
  }
}
