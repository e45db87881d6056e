package io.weir.sharding.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.sharding.continuous.ContinuousSession.AppendReply;
import io.weir.sharding.continuous.ContinuousSession.Appended;
import io.weir.sharding.continuous.ContinuousSession.Command;
import io.weir.sharding.continuous.ContinuousSession.Conflict;
import io.weir.sharding.continuous.ContinuousSession.Entry;
import io.weir.sharding.continuous.ContinuousSession.LogState;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The session's replay log on Pekko's in-memory journal, events and snapshots serialized as in
 * production (the test kit checks every one round-trips): sequence checks, retried appends,
 * continuing an earlier log, recovery.
 */
class ContinuousSessionTest {
  private static final ActorTestKit KIT =
      ActorTestKit.create(
          "continuous-session-test",
          EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load()));

  private EventSourcedBehaviorTestKit<Command, Entry, ContinuousSession.State> session;

  @BeforeEach
  void fresh() {
    // The state itself is never serialized (snapshots go through the adapter, checked here too).
    session =
        EventSourcedBehaviorTestKit.create(
            KIT.system(),
            ContinuousSession.create("cq_test"),
            EventSourcedBehaviorTestKit.enabledSerializationSettings().withVerifyState(false));
    session.clear();
  }

  @AfterAll
  static void stop() {
    KIT.shutdownTestKit();
  }

  /**
   * Entry 1 is an InitialResult of one row (key [1]); later ones update that row's value to the
   * sequence.
   */
  private static Entry entry(long sequence) {
    return sequence == 1
        ? new Entry(
            1,
            "InitialResult",
            "{\"type\":\"InitialResult\",\"rows\":[{\"key\":[1],\"row\":{\"v\":1}}],"
                + "\"sequence\":1,\"epoch\":\"e\",\"lsn\":\"0/1\"}")
        : new Entry(
            sequence,
            "RowUpdated",
            "{\"type\":\"RowUpdated\",\"key\":[1],\"row\":{\"v\":"
                + sequence
                + "},\"position\":0,\"sequence\":"
                + sequence
                + ",\"epoch\":\"e\",\"lsn\":\"0/"
                + sequence
                + "\"}");
  }

  private ContinuousSession.Result result() {
    return session.<ContinuousSession.Result>runCommand(ContinuousSession.GetResult::new).reply();
  }

  private static List<Entry> entries(long from, long to) {
    List<Entry> out = new ArrayList<>();
    for (long s = from; s <= to; s++) {
      out.add(entry(s));
    }
    return out;
  }

  private EventSourcedBehaviorTestKit.CommandResultWithReply<
          Command, Entry, ContinuousSession.State, AppendReply>
      append(List<Entry> entries) {
    return session.<AppendReply>runCommand(
        replyTo -> new ContinuousSession.Append(entries, replyTo));
  }

  private LogState log() {
    return session.<LogState>runCommand(ContinuousSession.GetLog::new).reply();
  }

  @Test
  void appendsContinueTheLogOneJournalEventPerEntry() {
    var first = append(entries(1, 3));
    assertThat(first.reply()).isEqualTo(new Appended(3));
    assertThat(first.events()).isEqualTo(entries(1, 3));
    assertThat(append(entries(4, 4)).reply()).isEqualTo(new Appended(4));
    assertThat(log()).isEqualTo(new LogState(4, 0));
    assertThat(result())
        .isEqualTo(
            new ContinuousSession.Result(
                4, "0/4", List.of(new ContinuousSession.Row("[1]", "{\"v\":4}")), false));
  }

  @Test
  void anIdenticalRetryIsAcceptedAndWritesNothing() {
    append(entries(1, 2));
    var retry = append(entries(1, 2));
    assertThat(retry.reply()).isEqualTo(new Appended(2));
    assertThat(retry.hasNoEvents()).isTrue();
    // A retry that overlaps and goes on writes only the new part.
    var overlapping = append(entries(2, 4));
    assertThat(overlapping.reply()).isEqualTo(new Appended(4));
    assertThat(overlapping.events()).isEqualTo(entries(3, 4));
  }

  @Test
  void anotherEventAtAStoredSequenceAGapOrABrokenBatchIsAConflict() {
    append(entries(1, 3));
    var different = append(List.of(new Entry(3, "RowRemoved", "{}")));
    assertThat(different.reply()).isEqualTo(new Conflict(3));
    assertThat(different.hasNoEvents()).isTrue();
    var gap = append(entries(5, 6));
    assertThat(gap.reply()).isEqualTo(new Conflict(3));
    assertThat(gap.hasNoEvents()).isTrue();
    var broken = append(List.of(entry(4), entry(6)));
    assertThat(broken.reply()).isEqualTo(new Conflict(3));
    assertThat(broken.hasNoEvents()).isTrue();
    var zero = append(List.of(new Entry(0, "RowRemoved", "{}")));
    assertThat(zero.reply()).isEqualTo(new Conflict(3));
    assertThat(log()).isEqualTo(new LogState(3, 0));
  }

  @Test
  void aNeverWrittenLogContinuesAnEarlierOneWithAnOffset() {
    assertThat(log()).isEqualTo(new LogState(0, 0));
    assertThat(append(entries(101, 102)).reply()).isEqualTo(new Appended(102));
    // Entry 101 is journal event 1.
    assertThat(log()).isEqualTo(new LogState(102, 100));
    assertThat(append(entries(110, 110)).reply())
        .as("once written, only the next sequence continues it")
        .isEqualTo(new Conflict(102));
  }

  @Test
  void recoveryRestoresTheLastSequenceAndTheRetryCheck() {
    append(entries(1, 5));
    session.restart();
    assertThat(log()).isEqualTo(new LogState(5, 0));
    assertThat(result().rows())
        .as("rebuilt from the events")
        .containsExactly(new ContinuousSession.Row("[1]", "{\"v\":5}"));
    assertThat(append(entries(4, 5)).reply())
        .as("a retry after a restart")
        .isEqualTo(new Appended(5));
    assertThat(append(List.of(new Entry(5, "RowAdded", "{}"))).reply()).isEqualTo(new Conflict(5));
    assertThat(append(entries(6, 6)).reply()).isEqualTo(new Appended(6));
  }

  @Test
  void recoveryFromASnapshot() {
    long last = ContinuousSession.SNAPSHOT_EVERY + 10;
    for (long from = 1; from <= last; from += 10) {
      append(entries(from, from + 9)); // one append ends exactly at the snapshot's sequence
    }
    assertThat(session.snapshotTestKit().isPresent()).isTrue();
    assertThat(
            session
                .snapshotTestKit()
                .get()
                .expectNextPersisted(
                    ContinuousSession.persistenceId("cq_test").id(),
                    new ContinuousSession.Snapshot(
                        ContinuousSession.SNAPSHOT_EVERY,
                        "0/" + ContinuousSession.SNAPSHOT_EVERY,
                        List.of(
                            new ContinuousSession.Row(
                                "[1]", "{\"v\":" + ContinuousSession.SNAPSHOT_EVERY + "}")))))
        .isNotNull();
    session.restart();
    assertThat(log()).isEqualTo(new LogState(last, 0));
    assertThat(result())
        .as("the snapshot's result and the events after it")
        .isEqualTo(
            new ContinuousSession.Result(
                last,
                "0/" + last,
                List.of(new ContinuousSession.Row("[1]", "{\"v\":" + last + "}")),
                false));
    assertThat(append(entries(last + 1, last + 1)).reply()).isEqualTo(new Appended(last + 1));
  }

  @Test
  void anEventThatDoesNotApplyLeavesTheResultUnknownUntilTheNextInitialResult() {
    append(entries(1, 2));
    append(
        List.of(
            new Entry(
                3,
                "RowUpdated",
                "{\"type\":\"RowUpdated\",\"key\":[9],\"row\":{\"v\":0},\"position\":0}")));
    assertThat(result().rows()).as("a key that is not there").isNull();
    assertThat(result().last()).isEqualTo(3);
    append(List.of(new Entry(4, "InitialResult", "{\"type\":\"InitialResult\",\"rows\":[]}")));
    assertThat(result().rows()).isEmpty();
    session.restart();
    assertThat(result().rows()).isEmpty();
  }

  @Test
  void recoveryAcrossDeletedRowsLeavesTheResultUnknown() {
    // Rows 3 and 4 are gone (pruned past the last snapshot): entry 5 cannot be applied to entry 2's
    // result.
    session
        .persistenceTestKit()
        .persistForRecovery(
            ContinuousSession.persistenceId("cq_test").id(),
            List.<Object>of(entry(1), entry(2), entry(5)));
    session.restart();
    assertThat(result()).isEqualTo(new ContinuousSession.Result(5, "0/5", null, false));
    assertThat(log().last()).isEqualTo(5);
  }

  @Test
  void aResultTooLargeForOneMessageIsNotSent() {
    String wide = "{\"v\":\"" + "x".repeat((int) (ContinuousSession.MAX_RESULT_BYTES / 2)) + "\"}";
    append(
        List.of(
            new Entry(
                1,
                "InitialResult",
                "{\"type\":\"InitialResult\",\"rows\":[{\"key\":[1],\"row\":"
                    + wide
                    + "},{\"key\":[2],\"row\":"
                    + wide
                    + "}]}")));
    assertThat(result()).isEqualTo(new ContinuousSession.Result(1, null, null, true));
  }

  @Test
  void aNeverWrittenLogHasNoResult() {
    assertThat(result()).isEqualTo(new ContinuousSession.Result(0, null, null, false));
  }

  @Test
  void anEntryNamesNoValue() {
    assertThat(new Entry(7, "RowAdded", "{\"row\":{\"secret\":\"s3cr3t\"}}").toString())
        .doesNotContain("s3cr3t")
        .contains("RowAdded");
    assertThat(new ContinuousSession.Row("[1]", "{\"secret\":\"s3cr3t\"}").toString())
        .doesNotContain("s3cr3t");
    assertThat(
            new ContinuousSession.Result(
                    1,
                    null,
                    List.of(new ContinuousSession.Row("[1]", "{\"secret\":\"s3cr3t\"}")),
                    false)
                .toString())
        .doesNotContain("s3cr3t");
  }
}
