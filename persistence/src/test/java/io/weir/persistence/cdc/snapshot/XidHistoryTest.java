package io.weir.persistence.cdc.snapshot;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class XidHistoryTest {
  private static final long EPOCH = 3L << 32;

  @Test
  void visibilityFollowsXminXmaxAndTheInProgressList() {
    XidHistory.PgSnapshot s =
        XidHistory.PgSnapshot.parse((EPOCH + 100) + ":" + (EPOCH + 200) + ":" + (EPOCH + 150));
    assertThat(s.sees(99)).as("completed before xmin").isTrue();
    assertThat(s.sees(120)).as("between xmin and xmax, not running").isTrue();
    assertThat(s.sees(150)).as("in progress when the snapshot was taken").isFalse();
    assertThat(s.sees(200)).as("at xmax").isFalse();
    assertThat(s.sees(1001)).as("newer than the snapshot").isFalse();
    assertThat(s.completedForAll(99)).isTrue();
    assertThat(s.completedForAll(150)).isFalse();
    assertThat(s.completedForAll(1001)).isFalse();
  }

  @Test
  void xidsAcrossTheEpochBoundaryWidenToTheRightEpoch() {
    // xmax just past a wrap: 32-bit xids near 2^32 belong to the previous epoch.
    XidHistory.PgSnapshot s = XidHistory.PgSnapshot.parse((EPOCH - 10) + ":" + (EPOCH + 5) + ":");
    assertThat(s.widen(0xFFFF_FFFAL)).isEqualTo(EPOCH - 6);
    assertThat(s.widen(3)).isEqualTo(EPOCH + 3);
    assertThat(s.widen(7)).isEqualTo(EPOCH + 7);
    assertThat(s.sees(0xFFFF_FFF0L)).as("before xmin, previous epoch").isTrue();
    assertThat(s.sees(7)).as("after xmax, this epoch").isFalse();
  }

  @Test
  void aDeliveredTransactionTheSnapshotMissesFailsTheCheckAndVisibleOnesArePruned() {
    XidHistory h = new XidHistory(4);
    h.add(90);
    h.add(120);
    h.add(150);
    XidHistory.PgSnapshot missesOne =
        XidHistory.PgSnapshot.parse((EPOCH + 100) + ":" + (EPOCH + 200) + ":" + (EPOCH + 150));
    assertThat(h.allVisibleIn(missesOne)).isFalse();
    assertThat(h.size()).as("90 is below xmin: dropped").isEqualTo(2);
    h.add(210);
    XidHistory.PgSnapshot newer =
        XidHistory.PgSnapshot.parse((EPOCH + 100) + ":" + (EPOCH + 200) + ":");
    assertThat(h.allVisibleIn(newer)).as("210 is newer than xmax").isFalse();
    XidHistory.PgSnapshot later =
        XidHistory.PgSnapshot.parse((EPOCH + 300) + ":" + (EPOCH + 300) + ":");
    assertThat(h.allVisibleIn(later)).isTrue();
    assertThat(h.size()).isZero();
  }

  @Test
  void aForgottenXidThatMayBeInvisibleFailsTheCheck() {
    XidHistory h = new XidHistory(2);
    h.add(150);
    h.add(160);
    h.add(170); // 150 is evicted
    XidHistory.PgSnapshot s =
        XidHistory.PgSnapshot.parse((EPOCH + 100) + ":" + (EPOCH + 200) + ":");
    assertThat(h.allVisibleIn(s)).isTrue();
    XidHistory h2 = new XidHistory(2);
    h2.add(150);
    h2.add(160);
    h2.add(170);
    XidHistory.PgSnapshot running =
        XidHistory.PgSnapshot.parse((EPOCH + 100) + ":" + (EPOCH + 200) + ":" + (EPOCH + 150));
    assertThat(h2.allVisibleIn(running))
        .as("the evicted 150 is still running in this snapshot")
        .isFalse();
  }
}
