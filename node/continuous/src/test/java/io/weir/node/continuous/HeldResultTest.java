package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.protocol.Lsn;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A held result's label (ADR 0042): which delivered transactions the read's snapshot holds, and
 * when no label can name what it read.
 */
class HeldResultTest {
  /** A snapshot that saw 1000..1004 committed but 1002 still running; 1005 and later not begun. */
  private static final ReadPoint AT =
      new ReadPoint(1000, 1005, new long[] {1002}, Lsn.parse("0/5000"));

  private static HeldResult held(boolean delta) {
    return new HeldResult(List.of(), AT, delta, "0/1000", () -> {});
  }

  @Test
  void theSnapshotHoldsWhatCommittedBeforeItAndNothingThatRanOrBeganAfter() {
    assertThat(AT.holds(999)).isTrue(); // below xmin
    assertThat(AT.holds(1001)).isTrue();
    assertThat(AT.holds(1002)).as("in progress when the snapshot was taken").isFalse();
    assertThat(AT.holds(1005)).as("at xmax").isFalse();
    assertThat(AT.holds(1006)).isFalse();
  }

  @Test
  void thirtyTwoBitXidsAreWidenedAroundTheSnapshotsEpoch() {
    long epoch = 7L << 32;
    ReadPoint wrapped =
        new ReadPoint(epoch - 10, epoch + 5, new long[] {epoch + 1}, Lsn.parse("0/5000"));
    assertThat(wrapped.holds(0xfffffffeL)).as("the previous epoch's last xids").isTrue();
    assertThat(wrapped.holds(0)).isTrue();
    assertThat(wrapped.holds(1)).isFalse();
    assertThat(wrapped.holds(5)).isFalse();
    assertThat(wrapped.holds(0xfffffff0L)).as("below xmin, long committed").isTrue();
  }

  @Test
  void aFullReadIsLabelledWithTheLastTransactionItsSnapshotHolds() {
    HeldResult h = held(false);
    assertThat(h.releasedBy(Lsn.parse("0/4FFF"))).isFalse();
    assertThat(h.releasedBy(Lsn.parse("0/5000"))).isTrue();
    h.relevant(1001, "0/2000");
    h.relevant(1003, "0/3000");
    assertThat(h.exact()).isTrue();
    assertThat(h.behind()).isFalse();
    assertThat(h.label()).isEqualTo("0/3000");
  }

  @Test
  void aTransactionTheSnapshotLacksEndsTheLabelAndOneHeldAfterItLeavesNone() {
    HeldResult h = held(false);
    h.relevant(1001, "0/2000");
    h.relevant(1002, "0/3000"); // committed before the limit, after the snapshot
    assertThat(h.exact()).as("the state after 0/2000").isTrue();
    assertThat(h.label()).isEqualTo("0/2000");
    assertThat(h.behind()).as("0/3000 must be read again").isTrue();
    HeldResult later = held(false);
    later.relevant(1002, "0/2000");
    later.relevant(1003, "0/3000"); // held after one it lacks: the state after no transaction
    assertThat(later.exact()).isFalse();
  }

  @Test
  void aScopedDeltaIsExactOnlyIfItsSnapshotHoldsNothingDeliveredLater() {
    HeldResult quiet = held(true);
    quiet.relevant(1006, "0/4000"); // not in the snapshot: exact at its label, then read again
    assertThat(quiet.exact()).isTrue();
    assertThat(quiet.behind()).isTrue();
    HeldResult alone = held(true);
    assertThat(alone.exact()).isTrue();
    assertThat(alone.label()).isEqualTo("0/1000");
    HeldResult ahead = held(true);
    ahead.relevant(1003, "0/3000"); // its keys were not read
    assertThat(ahead.exact()).isFalse();
  }
}
