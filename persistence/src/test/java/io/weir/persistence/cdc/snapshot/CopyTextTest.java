package io.weir.persistence.cdc.snapshot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.protocol.pgoutput.TupleData;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class CopyTextTest {
  private static TupleData parse(String line, int columns) {
    return CopyText.row(line.getBytes(StandardCharsets.UTF_8), columns);
  }

  @Test
  void splitsOnTabsAndDecodesEveryEscape() {
    TupleData row = parse("1\t\\N\ta\\tb\\nc\\\\d\\r\\b\\f\\v\t\\101\\x42z\tünï\t\n", 6);
    assertThat(row.text(0)).isEqualTo("1");
    assertThat(row.isNull(1)).isTrue();
    assertThat(row.text(2)).isEqualTo("a\tb\nc\\d\r\b\f\u000B");
    assertThat(row.text(3)).isEqualTo("ABz");
    assertThat(row.text(4)).isEqualTo("ünï");
    assertThat(row.isNull(5)).as("an empty string is not NULL").isFalse();
    assertThat(row.text(5)).isEmpty();
  }

  @Test
  void rowsWithAndWithoutEscapesEqualTheSameValuesBuiltFromText() {
    assertThat(parse("7\t\\N\tplain\n", 3)).isEqualTo(TupleData.ofText("7", null, "plain"));
    assertThat(parse("7\t\\N\ttab\\there\n", 3))
        .isEqualTo(TupleData.ofText("7", null, "tab\there"));
  }

  @Test
  void aWrongColumnCountIsAValueFreeProtocolFault() {
    assertThatThrownBy(() -> parse("secret\tvalue\n", 3))
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(HaltReason.PROTOCOL_VIOLATION);
              assertThat(e.getMessage()).doesNotContain("secret");
            });
    assertThatThrownBy(() -> parse("a\tb\tc\n", 2)).isInstanceOf(PipelineHaltException.class);
  }
}
