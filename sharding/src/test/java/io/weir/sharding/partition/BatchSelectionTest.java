package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.sharding.partition.ConsumerProtocol.ConsumerView;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A projection batch's byte budget counts the images' UTF-8 bytes, not their characters: text of
 * two- to four-byte characters fills it as many times faster.
 */
class BatchSelectionTest {
  private static final ConsumerView ALL =
      new ConsumerView("c", 1, List.of(), List.of(), 0, 0, false);

  private static Partition.OutboxEntry entry(long sequence, String after) {
    return new Partition.OutboxEntry(
        sequence, 0, "notes", "n" + sequence, "upsert", 1, null, after, 0, 0);
  }

  @Test
  void theBudgetCountsUtf8Bytes() {
    String body = "{\"t\":\"" + "日本語".repeat(100) + "\"}"; // 300 characters of 3 bytes each
    int chars = body.length();
    int bytes = body.getBytes(StandardCharsets.UTF_8).length;
    assertThat(bytes).isGreaterThan(2 * chars);
    List<Partition.OutboxEntry> examined = List.of(entry(1, body), entry(2, body), entry(3, body));

    // Room for all three by characters, for two by bytes.
    BatchSelection.Result cut = BatchSelection.select(ALL, 0, examined, 3, 2L * bytes + bytes / 2);

    assertThat(cut).isInstanceOf(BatchSelection.Batch.class);
    BatchSelection.Batch batch = (BatchSelection.Batch) cut;
    assertThat(batch.entries()).hasSize(2);
    assertThat(batch.bytes()).isEqualTo(2L * bytes);
    assertThat(batch.through()).isEqualTo(2);
    assertThat(batch.hasMore()).isTrue();
    assertThat(BatchSelection.payloadBytes(entry(4, body))).isEqualTo(bytes);

    // A budget that the characters would fit but the bytes do not: the first entry is too large.
    assertThat(BatchSelection.select(ALL, 0, examined, 3, chars + 10))
        .isEqualTo(new BatchSelection.BudgetExceeded(1, bytes, chars + 10));
  }
}
