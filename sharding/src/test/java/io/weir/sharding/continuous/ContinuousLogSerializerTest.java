package io.weir.sharding.continuous;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.NotSerializableException;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The journal encoding of continuous session logs: JSON that reads back byte for byte, and refuses anything else without values. */
class ContinuousLogSerializerTest {
  private final ContinuousLogSerializer serializer = new ContinuousLogSerializer();

  private Object roundTrip(Object o) throws NotSerializableException {
    return serializer.fromBinary(serializer.toBinary(o), serializer.manifest(o));
  }

  @Test
  void theStoredFormatIsPlainJson() {
    ContinuousSession.Entry e = new ContinuousSession.Entry(42, "RowAdded", "{\"key\":[1],\"row\":{\"t\":\"a\\\"b\"}}");
    assertThat(serializer.manifest(e)).isEqualTo("E");
    assertThat(new String(serializer.toBinary(e), StandardCharsets.UTF_8))
        .isEqualTo("{\"sequence\":42,\"type\":\"RowAdded\",\"data\":\"{\\\"key\\\":[1],\\\"row\\\":{\\\"t\\\":\\\"a\\\\\\\"b\\\"}}\"}");
    assertThat(new String(serializer.toBinary(new ContinuousSession.State(9)), StandardCharsets.UTF_8)).isEqualTo("{\"last\":9}");
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
        data.appendCodePoint(kind == 0 ? random.nextInt(32) : kind == 1 ? 0x1F600 + random.nextInt(50)
            : kind == 2 ? "\"\\/{}[]".charAt(random.nextInt(7)) : 32 + random.nextInt(0x2000));
      }
      ContinuousSession.Entry e = new ContinuousSession.Entry(random.nextLong() & Long.MAX_VALUE, "T" + i, data.toString());
      assertThat(roundTrip(e)).isEqualTo(e);
    }
    assertThat(((ContinuousSession.State) roundTrip(new ContinuousSession.State(Long.MAX_VALUE))).last()).isEqualTo(Long.MAX_VALUE);
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
          .as(b).isInstanceOf(NotSerializableException.class)
          .satisfies(t -> assertThat(t.getMessage()).doesNotContain("s3cr3t"));
    }
    assertThatThrownBy(() -> serializer.fromBinary("{}".getBytes(StandardCharsets.UTF_8), "X"))
        .isInstanceOf(NotSerializableException.class);
    assertThatThrownBy(() -> serializer.fromBinary("{\"last\":1,\"sequence\":2}".getBytes(StandardCharsets.UTF_8), "S"))
        .isInstanceOf(NotSerializableException.class);
  }
}
