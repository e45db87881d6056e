package io.weir.sharding.cdc;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** RowJson's timestamp text is exactly what {@link OffsetDateTime#toString()} writes in UTC. */
class RowJsonTest {
  @Test
  void timestampsInUtcAreWrittenAsJavaTimeWritesThem() {
    long seed = Long.getLong("weir.rowjson.seed", System.nanoTime());
    Random r = new Random(seed);
    for (int i = 0; i < 200_000; i++) {
      // Years -300..12000, every offset, fractions of every precision and none, whole minutes.
      long second = -77_000_000_000L + (long) (r.nextDouble() * 380_000_000_000L);
      if (r.nextInt(8) == 0) {
        second -= Math.floorMod(second, 60);
      }
      int nano =
          switch (r.nextInt(5)) {
            case 0 -> 0;
            case 1 -> r.nextInt(1_000) * 1_000_000;
            case 2 -> r.nextInt(1_000_000) * 1_000;
            default -> r.nextInt(1_000_000_000);
          };
      ZoneOffset offset = ZoneOffset.ofTotalSeconds((r.nextInt(36 * 60 + 1) - 18 * 60) * 60);
      OffsetDateTime t = OffsetDateTime.ofInstant(Instant.ofEpochSecond(second, nano), offset);
      assertThat(RowJson.utc(t))
          .as("seed " + seed)
          .isEqualTo(t.withOffsetSameInstant(ZoneOffset.UTC).toString());
    }
    OffsetDateTime midnight = OffsetDateTime.of(2026, 12, 1, 0, 0, 0, 0, ZoneOffset.ofHours(2));
    assertThat(RowJson.utc(midnight)).isEqualTo("2026-11-30T22:00Z");
  }
}
