package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class FullReadTest {
  @Test
  void everyCauseHasAWireNameAndItsOwnTag() {
    assertThat(ContinuousMetrics.FULL_READ_CAUSES)
        .doesNotHaveDuplicates()
        .allMatch(n -> n.matches("[a-z]+(-[a-z]+)*"))
        .hasSize(FullRead.Cause.values().length);
  }

  @Test
  void statusKeysNameTheRuleOrFailureBehindTheRead() {
    assertThat(FullRead.fallback(FallbackReason.TRUNCATE))
        .isEqualTo(new FullRead(FullRead.Cause.FALLBACK, "fallback-truncate"));
    assertThat(FullRead.retryAfter("statement-timeout").key())
        .isEqualTo("retry-after-statement-timeout");
    assertThat(FullRead.fullReadsOnly("no-impact-plan"))
        .isEqualTo(new FullRead(FullRead.Cause.FULL_READS_ONLY, "no-impact-plan"));
    assertThat(FullRead.PERIODIC.key()).isEqualTo("periodic");
  }

  /** docs/metrics.md lists exactly the causes the counter is tagged with, in the same order. */
  @Test
  void theMetricsDocListsEveryCause() throws Exception {
    String doc = Files.readString(Path.of("..", "..", "docs", "metrics.md"));
    String row =
        doc.lines()
            .filter(l -> l.startsWith("| `weir_continuous_full_reads_total` |"))
            .findFirst()
            .orElseThrow();
    Matcher tag = Pattern.compile("`([a-z-]+)`").matcher(row.substring(row.indexOf("`cause`") + 8));
    List<String> documented = new ArrayList<>();
    while (tag.find()) {
      documented.add(tag.group(1));
    }
    assertThat(documented).containsExactlyElementsOf(ContinuousMetrics.FULL_READ_CAUSES);
  }
}
