package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class ReceiptFilterTest {
  private static final long TTL = 1_000;

  private static long maybes(ReceiptFilter f, String prefix, long now) {
    return IntStream.range(0, 1_000).filter(i -> f.mayHold(prefix + i, now)).count();
  }

  @Test
  void anIncompleteFilterRulesNothingOut() {
    ReceiptFilter f = new ReceiptFilter(TTL, 4, 2);
    assertThat(maybes(f, "k", 0)).isEqualTo(1_000);
    f.completeWith(null);
    assertThat(maybes(f, "k", 0)).as("complete and empty").isZero();
  }

  @Test
  void aCompleteFilterAnswersMaybeForItsKeysUntilTheyExpire() {
    ReceiptFilter f = new ReceiptFilter(TTL, 100, 4);
    f.completeWith(null);
    IntStream.range(0, 100).forEach(i -> f.add("added-" + i, 10));
    assertThat(IntStream.range(0, 100).allMatch(i -> f.mayHold("added-" + i, 500))).isTrue();
    assertThat(maybes(f, "never-", 500)).as("false positives at about 1%").isLessThan(50);
    assertThat(f.mayHold("added-0", 10 + TTL)).as("the last moment of its time").isTrue();
    assertThat(maybes(f, "added-", 11 + TTL)).as("expired: the bucket is gone").isZero();
    assertThat(f.keys()).isZero();
  }

  @Test
  void pastItsCapacityTheOldestBucketGoesAndEveryKeyMayBeHeldUntilItExpires() {
    ReceiptFilter f = new ReceiptFilter(TTL, 2, 2);
    f.completeWith(null);
    for (int i = 1; i <= 5; i++) {
      f.add("k" + i, i);
    }
    assertThat(f.keys()).as("two buckets, the third begun after the first went").isEqualTo(3);
    assertThat(maybes(f, "never-", 2 + TTL)).as("k1 and k2 are forgotten").isEqualTo(1_000);
    assertThat(maybes(f, "never-", 3 + TTL))
        .as("once they expired, keys are ruled out again")
        .isLessThan(50);
    assertThat(f.mayHold("k5", 3 + TTL)).isTrue();
  }

  @Test
  void aLoadedPartJoinsTheAddedKeysAndTheOldestGoPastTheCapacity() {
    ReceiptFilter f = new ReceiptFilter(TTL, 2, 3);
    f.add("live-1", 100);
    f.add("live-2", 100);
    f.add("live-3", 100);
    ReceiptFilter.Loading loading = f.loading(100);
    assertThat(loading.limit()).as("one bucket fewer than the filter, and one more").isEqualTo(5);
    // Newest first, as the table hands them over.
    for (int i = 4; i >= 1; i--) {
      assertThat(loading.receipt("old-" + i, i)).isTrue();
    }
    assertThat(loading.added()).isEqualTo(4);
    f.completeWith(loading.part());
    assertThat(f.complete()).isTrue();
    assertThat(f.mayHold("live-1", 101)).isTrue();
    // Four buckets for three places: the oldest loaded one (old-1, old-2) went.
    assertThat(maybes(f, "never-", 2 + TTL)).as("old-1 and old-2 forgotten").isEqualTo(1_000);
    assertThat(maybes(f, "never-", 3 + TTL)).isLessThan(50);
    assertThat(f.mayHold("old-3", 3 + TTL)).isTrue();
    assertThat(f.mayHold("live-3", 3 + TTL)).isTrue();
  }

  @Test
  void receiptsALoadLeavesOutMakeEveryKeyMaybeUntilTheyExpire() {
    ReceiptFilter f = new ReceiptFilter(TTL, 2, 2);
    ReceiptFilter.Loading loading = f.loading(10);
    assertThat(loading.receipt("old-9", 9)).isTrue();
    assertThat(loading.receipt("old-8", 8)).isTrue();
    assertThat(loading.receipt("old-7", 7)).as("past the part's one bucket").isFalse();
    f.completeWith(loading.part());
    assertThat(maybes(f, "never-", 7 + TTL)).as("old-7 may be in the table").isEqualTo(1_000);
    assertThat(maybes(f, "never-", 8 + TTL)).isLessThan(50);
    assertThat(f.mayHold("old-8", 8 + TTL)).isTrue();
  }

  @Test
  void aCancelledLoadReadsNothingMore() {
    ReceiptFilter f = new ReceiptFilter(TTL, 4, 2);
    ReceiptFilter.Loading loading = f.loading(10);
    assertThat(loading.wanted()).isTrue();
    assertThat(loading.receipt("a", 9)).isTrue();
    loading.cancel();
    assertThat(loading.wanted()).isFalse();
    assertThat(loading.receipt("b", 8)).isFalse();
    assertThat(loading.added()).isEqualTo(1);
  }

  @Test
  void aClockThatWentBackRulesNothingOut() {
    ReceiptFilter f = new ReceiptFilter(TTL, 4, 2);
    f.completeWith(null);
    f.add("k", 0);
    assertThat(maybes(f, "never-", 5_000)).as("k expired, its bucket gone").isZero();
    assertThat(maybes(f, "never-", 4_999)).as("the clock went back").isEqualTo(1_000);
    assertThat(maybes(f, "never-", 5_001)).isZero();
    ReceiptFilter loaded = new ReceiptFilter(TTL, 4, 2);
    loaded.completeWith(loaded.loading(9_000).part());
    assertThat(maybes(loaded, "never-", 8_999)).as("behind the load's clock").isEqualTo(1_000);
  }
}
