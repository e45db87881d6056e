package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

class FallbackReasonTest {
  @Test
  void theMetricsTagsAreTheReasonsAndOther() {
    List<String> names =
        Arrays.stream(FallbackReason.values()).map(FallbackReason::wireName).toList();
    assertThat(names).doesNotHaveDuplicates().allMatch(n -> n.matches("[a-z]+(-[a-z]+)*"));
    assertThat(ContinuousMetrics.FALLBACK_REASONS)
        .containsExactlyElementsOf(Stream.concat(names.stream(), Stream.of("other")).toList());
  }

  @Test
  void onlyTheProjectorsOwnGapsHandOverToTheScopedDelta() {
    for (FallbackReason r : FallbackReason.values()) {
      assertThat(r.next())
          .as(r.wireName())
          .isEqualTo(
              r.wireName().startsWith("projector-")
                  ? FallbackReason.Next.SCOPED_DELTA
                  : FallbackReason.Next.FULL_READ);
    }
  }

  /** docs/continuous.md's table lists exactly the reasons, with the tier that runs instead. */
  @Test
  void theDocsTableListsEveryReason() throws Exception {
    String doc = Files.readString(Path.of("..", "..", "docs", "continuous.md"));
    String section = doc.substring(doc.indexOf("### Fallback reasons"));
    section = section.substring(0, section.indexOf("\n### ", 1));
    Matcher row =
        Pattern.compile("(?m)^\\| `([a-z-]+)` \\| [^|]+ \\| ([^|]+) \\|$").matcher(section);
    Map<String, String> documented = new LinkedHashMap<>();
    while (row.find()) {
      documented.put(row.group(1), row.group(2).trim());
    }
    assertThat(documented.keySet())
        .containsExactlyInAnyOrderElementsOf(
            Arrays.stream(FallbackReason.values()).map(FallbackReason::wireName).toList());
    for (FallbackReason r : FallbackReason.values()) {
      assertThat(documented.get(r.wireName()))
          .as(r.wireName())
          .startsWith(
              r.next() == FallbackReason.Next.SCOPED_DELTA ? "the scoped delta" : "full read");
    }
  }
}
