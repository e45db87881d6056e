package io.weir.protocol.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.protocol.ErrorCode;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A batch reply as the node writes it reads back into {@link BatchWritten} (what protocol clients
 * are told to do with {@code WriteDocuments}' reply), every kind of result alike.
 */
class BatchWrittenTest {
  @Test
  void aReplyAsWrittenReadsBackTyped() throws Exception {
    BatchWritten written =
        new BatchWritten(
            List.of(
                BatchWritten.Item.applied(0, "c", "a", 3, 7, false, true),
                BatchWritten.Item.conflict(1, "c", "b", 3, 2, "the revision is another"),
                BatchWritten.Item.notFound(2, "c", "d", 5),
                BatchWritten.Item.failed(3, "c", "e", 6, ErrorCode.QUOTA_EXCEEDED, "no room"),
                BatchWritten.Item.aborted(4, "c", "f", 6, 3, true)),
            1,
            4);
    ObjectMapper json = new ObjectMapper();
    String text = json.writeValueAsString(written);

    BatchWritten read = json.readValue(text, BatchWritten.class);

    assertThat(read).isEqualTo(written);
    assertThat(json.readTree(text).get("results").get(0).has("error"))
        .as("absent fields are left out")
        .isFalse();
  }
}
