package io.weir.sharding.partition;

import static io.weir.sharding.partition.Quota.Admission.QUOTA;
import static io.weir.sharding.partition.Quota.Admission.REFUSED;
import static io.weir.sharding.partition.Quota.Admission.RESERVE;
import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class QuotaTest {
  /** 10 entries / 1,000 bytes of producer quota, 4 entries / 400 bytes of reserve. */
  private static final PartitionSettings S =
      new PartitionSettings(10, 1000, 256, 20_000).withProjections(64, 4, 400, 256);

  @Test
  void withinTheProducerQuota() {
    assertThat(Quota.admit(S, 5, 10, 1000, false)).isEqualTo(QUOTA);
    assertThat(Quota.admit(S, 10, 11, 500, false)).as("one entry too many").isEqualTo(REFUSED);
    assertThat(Quota.admit(S, 5, 6, 1001, false)).as("one byte too many").isEqualTo(REFUSED);
  }

  @Test
  void aFrameWithoutEntriesAlwaysGoes() {
    assertThat(Quota.admit(S, 50, 50, 99_999, false)).isEqualTo(QUOTA);
  }

  @Test
  void anOversizeFrameIsRefusedEvenByAnEmptyOutbox() {
    // No exception for an empty outbox (ADR 0033): no frame is larger than the quota, a CDC frame
    // goes in parts of at most the quota and any other that large is refused as malformed.
    assertThat(Quota.admit(S, 0, 500, 1 << 30, false)).isEqualTo(REFUSED);
    assertThat(Quota.admit(S, 0, 10, 1000, false)).isEqualTo(QUOTA);
  }

  @Test
  void theReserveTakesOnlyAllowedProjectionBatchesUpToItsCeilings() {
    assertThat(Quota.admit(S, 10, 14, 1400, true)).isEqualTo(RESERVE);
    assertThat(Quota.admit(S, 10, 14, 1400, false))
        .as("producers never use the reserve")
        .isEqualTo(REFUSED);
    assertThat(Quota.admit(S, 10, 15, 1000, true)).as("entry ceiling").isEqualTo(REFUSED);
    assertThat(Quota.admit(S, 10, 11, 1401, true)).as("byte ceiling").isEqualTo(REFUSED);
    assertThat(Quota.admit(S, 5, 8, 900, true))
        .as("within the quota the reserve is not spent")
        .isEqualTo(QUOTA);
  }

  @Test
  void theDefaultRecordReserveCoversOneMaximalBatchPerConsumer() {
    PartitionSettings d = PartitionSettings.DEFAULTS;
    assertThat(d.reserveEntries()).isEqualTo((long) d.maxConsumers() * d.maxEffects());
    long full = d.maxOutboxEntries();
    for (int consumer = 0; consumer < d.maxConsumers(); consumer++) {
      long after = full + (long) (consumer + 1) * d.maxEffects();
      assertThat(Quota.admit(d, after - d.maxEffects(), after, 1 << 20, true)).isEqualTo(RESERVE);
    }
    assertThat(
            Quota.admit(d, full + d.reserveEntries(), full + d.reserveEntries() + 1, 1 << 20, true))
        .isEqualTo(REFUSED);
  }
}
