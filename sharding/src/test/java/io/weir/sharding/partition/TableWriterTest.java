package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The apply delay's ticks (ADR 0056): every partition of a node applies at the same moments. */
class TableWriterTest {
  private static final Duration D = Duration.ofMillis(200);

  @Test
  void anApplyWaitsForTheNextTickAtLeastHalfADelayAway() {
    assertThat(TableWriter.alignedDelay(D, 10_000)).isEqualTo(Duration.ofMillis(200));
    assertThat(TableWriter.alignedDelay(D, 10_099)).isEqualTo(Duration.ofMillis(101));
    assertThat(TableWriter.alignedDelay(D, 10_100)).isEqualTo(Duration.ofMillis(100));
    assertThat(TableWriter.alignedDelay(D, 10_101)).isEqualTo(Duration.ofMillis(299));
    assertThat(TableWriter.alignedDelay(D, 10_199)).isEqualTo(Duration.ofMillis(201));
  }

  @Test
  void writersThatStartApartApplyTogether() {
    for (long now = 5_000; now < 5_400; now += 7) {
      long at = now + TableWriter.alignedDelay(D, now).toMillis();
      assertThat(at % 200).as("apply time of a writer at %d", now).isZero();
    }
  }

  @Test
  void noDelayStaysNone() {
    assertThat(TableWriter.alignedDelay(Duration.ZERO, 12_345)).isEqualTo(Duration.ZERO);
  }
}
