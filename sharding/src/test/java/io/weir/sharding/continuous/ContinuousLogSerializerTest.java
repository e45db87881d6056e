package io.weir.sharding.continuous;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.NotSerializableException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The journal encoding of continuous session logs: JSON that reads back byte for byte, and refuses
 * anything else without values.
 */
class ContinuousLogSerializerTest {
  private final ContinuousLogSerializer serializer = new ContinuousLogSerializer();

  private Object roundTrip(Object o) throws NotSerializableException {
    return serializer.fromBinary(serializer.toBinary(o), serializer.manifest(o));
  }

  @Test
  void theStoredFormatIsPlainJson() {
    ContinuousSession.Entry e =
        new ContinuousSession.Entry(42, "RowAdded", "{\"key\":[1],\"row\":{\"t\":\"a\\\"b\"}}");
    assertThat(serializer.manifest(e)).isEqualTo("E");
    assertThat(new String(serializer.toBinary(e), StandardCharsets.UTF_8))
        .isEqualTo(
            "{\"sequence\":42,\"type\":\"RowAdded\",\"data\":\"{\\\"key\\\":[1],\\\"row\\\":{\\\"t\\\":\\\"a\\\\\\\"b\\\"}}\"}");
    assertThat(
            new String(
                serializer.toBinary(new ContinuousSession.Snapshot(9, null, null)),
                StandardCharsets.UTF_8))
        .isEqualTo("{\"last\":9}");
    assertThat(
            new String(
                serializer.toBinary(
                    new ContinuousSession.Snapshot(
                        9, "0/A", List.of(new ContinuousSession.Row("[1]", "{\"v\":\"x\"}")))),
                StandardCharsets.UTF_8))
        .isEqualTo("{\"last\":9,\"lsn\":\"0/A\",\"rows\":[[\"[1]\",\"{\\\"v\\\":\\\"x\\\"}\"]]}");
    assertThat(serializer.identifier()).isEqualTo(7302);
  }

  @Test
  void randomEntriesReadBackExactly() throws Exception {
    Random random = new Random(7);
    for (int i = 0; i < 2_000; i++) {
      StringBuilder data = new StringBuilder();
      int n = random.nextInt(60);
      for (int j = 0; j < n; j++) {
        int kind = random.nextInt(4);
        data.appendCodePoint(
            kind == 0
                ? random.nextInt(32)
                : kind == 1
                    ? 0x1F600 + random.nextInt(50)
                    : kind == 2
                        ? "\"\\/{}[]".charAt(random.nextInt(7))
                        : 32 + random.nextInt(0x2000));
      }
      ContinuousSession.Entry e =
          new ContinuousSession.Entry(random.nextLong() & Long.MAX_VALUE, "T" + i, data.toString());
      assertThat(roundTrip(e)).isEqualTo(e);
    }
    ContinuousSession.Snapshot snapshot =
        new ContinuousSession.Snapshot(
            Long.MAX_VALUE,
            "16/B374D848",
            List.of(
                new ContinuousSession.Row("[1,\"a\"]", "{\"t\":\"\\u0000\"}"),
                new ContinuousSession.Row("[2,\"b\"]", "{}")));
    assertThat(roundTrip(snapshot)).isEqualTo(snapshot);
    assertThat(roundTrip(new ContinuousSession.Snapshot(0, null, List.of())))
        .isEqualTo(new ContinuousSession.Snapshot(0, null, List.of()));
  }

  @Test
  void corruptOrForeignInputIsRefusedWithoutValues() {
    String[] bad = {
      "{\"sequence\":1,\"type\":\"RowAdded\"}",
      "{\"sequence\":\"1\",\"type\":\"RowAdded\",\"data\":\"s3cr3t\"}",
      "{\"sequence\":1,\"type\":\"RowAdded\",\"data\":\"s3cr3t\",\"extra\":1}",
      "{\"sequence\":1,\"type\":\"RowAdded\",\"data\":\"s3cr3t\"} x",
      "{\"sequence\":1,\"type\":\"RowAdded\",\"data\":\"s3cr3",
      "[1]",
      "",
    };
    for (String b : bad) {
      assertThatThrownBy(() -> serializer.fromBinary(b.getBytes(StandardCharsets.UTF_8), "E"))
          .as(b)
          .isInstanceOf(NotSerializableException.class)
          .satisfies(t -> assertThat(t.getMessage()).doesNotContain("s3cr3t"));
    }
    assertThatThrownBy(() -> serializer.fromBinary("{}".getBytes(StandardCharsets.UTF_8), "X"))
        .isInstanceOf(NotSerializableException.class);
    for (String b :
        new String[] {
          "{\"last\":1,\"sequence\":2}",
          "{\"last\":1,\"rows\":[[\"[1]\"]]}",
          "{\"last\":1,\"rows\":[[\"[1]\",\"s3cr3t\",\"x\"]]}",
          "{\"last\":1,\"rows\":{}}",
          "{\"rows\":[]}"
        }) {
      assertThatThrownBy(() -> serializer.fromBinary(b.getBytes(StandardCharsets.UTF_8), "S"))
          .as(b)
          .isInstanceOf(NotSerializableException.class)
          .satisfies(t -> assertThat(t.getMessage()).doesNotContain("s3cr3t"));
    }
  }
}
