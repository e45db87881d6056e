package io.weir.persistence.cdc.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.persistence.cdc.source.SlotJudgement.Resume;
import io.weir.persistence.cdc.source.SlotJudgement.SlotFlags;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.SlotIncarnation;
import java.util.Optional;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * Whether an existing slot may be streamed, from the server's answers. PostgreSQL 17 (failover
 * slots) cannot be installed on this machine, so its answers are the ones its documentation and
 * source give: {@code pg_replication_slots.failover} and {@code synced}, {@code
 * pg_is_in_recovery()}, and IDENTIFY_SYSTEM's system identifier and timeline. A promoted standby
 * keeps the system identifier, moves to the next timeline and keeps the synchronised slot with
 * {@code failover = true} (and {@code synced = true}, left over); an unpromoted standby answers
 * {@code pg_is_in_recovery() = true} with {@code synced = true}.
 */
class SlotJudgementTest {
  private static final long SYSTEM = 7_312_845_001_234_567_890L;
  private static final SlotIncarnation CREATED_ON_1 =
      new SlotIncarnation(UUID.randomUUID(), SYSTEM, 1);

  private static ReplicationConnection.SystemIdentity server(long system, int timeline) {
    return new ReplicationConnection.SystemIdentity(system, timeline, Lsn.parse("0/3000000"));
  }

  @Test
  void aFailoverSlotResumesOnAPromotedStandby() {
    // The standby was promoted: timeline 2, the synced slot carried over.
    SlotFlags promoted = new SlotFlags(true, true, false);
    assertThat(
            SlotJudgement.judge("s", Optional.of(CREATED_ON_1), server(SYSTEM, 2), promoted, true))
        .isEqualTo(Resume.PROMOTED);
    assertThat(
            SlotJudgement.judge(
                "s",
                Optional.of(CREATED_ON_1),
                server(SYSTEM, 1),
                new SlotFlags(true, false, false),
                true))
        .as("the primary itself, same timeline")
        .isEqualTo(Resume.SAME);
  }

  @Test
  void afterAPromotionTheSinkMustHoldNothingPastWhereTheOldTimelineEnded() {
    // 00000003.history after two promotions: timeline 1 ended at 0/3000158, timeline 2 at
    // 0/5000060.
    String history =
        "1\t0/3000158\tno recovery target specified\n\n2\t0/5000060\tno recovery target specified\n";
    assertThat(SlotJudgement.branchPoint(history, 1)).contains(Lsn.parse("0/3000158"));
    assertThat(SlotJudgement.branchPoint(history, 2)).contains(Lsn.parse("0/5000060"));
    assertThat(SlotJudgement.branchPoint(history, 3)).isEmpty();
    assertThat(SlotJudgement.branchPoint(null, 1)).isEmpty();
    assertThat(SlotJudgement.branchPoint("1\tnot-an-lsn\treason\n", 1)).isEmpty();

    SlotJudgement.requireOnTheNewHistory(
        1, Optional.of(Lsn.parse("0/3000158")), Optional.of(Lsn.parse("0/3000100")));
    SlotJudgement.requireOnTheNewHistory(1, Optional.of(Lsn.parse("0/3000158")), Optional.empty());
    assertThatThrownBy(
            () ->
                SlotJudgement.requireOnTheNewHistory(
                    1, Optional.of(Lsn.parse("0/3000158")), Optional.of(Lsn.parse("0/3000200"))))
        .as("the sink holds a transaction the old primary sent past the branch point")
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.INCARNATION_MISMATCH))
        .hasMessageContaining("synchronized_standby_slots");
    assertThatThrownBy(
            () ->
                SlotJudgement.requireOnTheNewHistory(
                    1, Optional.empty(), Optional.of(Lsn.parse("0/3000100"))))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.INCARNATION_MISMATCH))
        .hasMessageContaining("cannot be proven");
  }

  @Test
  void aNewTimelineWithoutAFailoverSlotOrWithoutTheSettingIsAMismatch() {
    assertThatThrownBy(
            () ->
                SlotJudgement.judge(
                    "s", Optional.of(CREATED_ON_1), server(SYSTEM, 2), SlotFlags.PRIMARY, true))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.INCARNATION_MISMATCH))
        .hasMessageContaining("timeline changed from 1 to 2");
    assertThatThrownBy(
            () ->
                SlotJudgement.judge(
                    "s",
                    Optional.of(CREATED_ON_1),
                    server(SYSTEM, 2),
                    new SlotFlags(true, true, false),
                    false))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.INCARNATION_MISMATCH))
        .hasMessageContaining("the pipeline has failover = false");
  }

  @Test
  void anotherSystemIsALostSlotEvenForAFailoverSlot() {
    assertThatThrownBy(
            () ->
                SlotJudgement.judge(
                    "s",
                    Optional.of(CREATED_ON_1),
                    server(SYSTEM + 1, 2),
                    new SlotFlags(true, true, false),
                    true))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.SLOT_LOST));
  }

  @Test
  void aSyncedSlotOnAnUnpromotedStandbyHalts() {
    SlotFlags standby = new SlotFlags(true, true, true);
    for (Optional<SlotIncarnation> recorded :
        java.util.List.of(Optional.of(CREATED_ON_1), Optional.<SlotIncarnation>empty())) {
      assertThatThrownBy(
              () -> SlotJudgement.judge("orders_slot", recorded, server(SYSTEM, 1), standby, true))
          .isInstanceOfSatisfying(
              PipelineHaltException.class,
              e -> assertThat(e.reason()).isEqualTo(HaltReason.SLOT_SYNCED_UNPROMOTED))
          .hasMessageContaining("orders_slot")
          .hasMessageContaining("promote");
    }
    assertThat(
            SlotJudgement.judge(
                "s", Optional.empty(), server(SYSTEM, 1), new SlotFlags(false, false, true), false))
        .as("a slot created on the standby itself (logical decoding on a standby) is read there")
        .isEqualTo(Resume.SAME);
  }

  @Test
  void adoptingASlotWithoutFailoverIsRefusedWhenThePipelineAsksForFailover() {
    assertThatThrownBy(
            () ->
                SlotJudgement.judge(
                    "s", Optional.empty(), server(SYSTEM, 1), SlotFlags.PRIMARY, true))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.SLOT_INCOMPATIBLE))
        .hasMessageContaining("FAILOVER true");
    assertThat(
            SlotJudgement.judge(
                "s", Optional.empty(), server(SYSTEM, 1), new SlotFlags(true, false, false), true))
        .isEqualTo(Resume.SAME);
    assertThat(
            SlotJudgement.judge("s", Optional.empty(), server(SYSTEM, 1), SlotFlags.PRIMARY, false))
        .isEqualTo(Resume.SAME);
  }
}
