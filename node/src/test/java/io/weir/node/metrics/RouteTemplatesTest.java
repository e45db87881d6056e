package io.weir.node.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Request paths map to route templates: ids and names in paths never become label values. */
class RouteTemplatesTest {
  private final RouteTemplates templates = RouteTemplates.node();

  @Test
  void pathsWithUserDataMapToTheirTemplate() {
    assertThat(templates.label("/v1/documents/orders-7f3a/customer%20secret"))
        .isEqualTo("/v1/documents/{collection}/{id}");
    assertThat(templates.label("/admin/pipelines/orders")).isEqualTo("/admin/pipelines/{name}");
    assertThat(templates.label("/admin/pipelines/orders/"))
        .as("one trailing slash is the same route")
        .isEqualTo("/admin/pipelines/{name}");
    assertThat(templates.label("/admin/pipelines/orders/start"))
        .isEqualTo("/admin/pipelines/{name}/start");
    assertThat(templates.label("/admin/principals/alice/grants/revoke"))
        .isEqualTo("/admin/principals/{id}/grants/revoke");
    assertThat(templates.label("/admin/policies/orders")).isEqualTo("/admin/policies/{collection}");
    assertThat(templates.label("/admin/pipelines")).isEqualTo("/admin/pipelines");
    assertThat(templates.label("/v1/query/live/read"))
        .as("literal routes win over placeholders")
        .isEqualTo("/v1/query/live/read");
    assertThat(templates.label("/metrics")).isEqualTo("/metrics");
  }

  @Test
  void unknownPathsFallBackToAFixedSetOfLabels() {
    assertThat(templates.label("/v1/documents/only-a-collection")).isEqualTo("/v1/**");
    assertThat(templates.label("/admin/whatever/secret-name")).isEqualTo("/admin/**");
    assertThat(templates.label("/v1/documents//id"))
        .as("an empty segment fills no placeholder")
        .isEqualTo("/v1/**");
    assertThat(templates.label("/secret-path-9d2e/x")).isEqualTo(RouteTemplates.UNMATCHED);
    assertThat(templates.label("/")).isEqualTo(RouteTemplates.UNMATCHED);
    assertThat(templates.label("")).isEqualTo(RouteTemplates.UNMATCHED);
  }

  @Test
  void everyTemplateMatchesItselfFilledIn() {
    for (String t : RouteTemplates.NODE) {
      String filled = t.replaceAll("\\{[a-z]+}", "value-1");
      assertThat(templates.label(filled)).as("a path of %s is labelled with it", t).isEqualTo(t);
      assertThat(templates.labels()).contains(t);
    }
    assertThat(templates.labels())
        .as("the label set is small and fixed")
        .hasSize(RouteTemplates.NODE.size() + 4);
  }

  /**
   * {@link RouteTemplates#label} finds segments in place; this is the straightforward form it
   * replaced (split the path), and both must label every path alike.
   */
  private static String splitLabel(List<String> templates, String path) {
    String trimmed = path.startsWith("/") ? path.substring(1) : path;
    if (trimmed.endsWith("/") && trimmed.length() > 0) {
      trimmed = trimmed.substring(0, trimmed.length() - 1);
    }
    String[] segments = trimmed.split("/", -1);
    String best = null;
    int bestLiterals = -1;
    for (String label : templates) {
      String[] t = label.substring(1).split("/", -1);
      if (t.length != segments.length) {
        continue;
      }
      int literals = 0;
      boolean match = true;
      for (int s = 0; s < t.length && match; s++) {
        if (t[s].startsWith("{")) {
          match = !segments[s].isEmpty();
        } else {
          match = t[s].equals(segments[s]);
          literals++;
        }
      }
      if (match && literals > bestLiterals) {
        best = label;
        bestLiterals = literals;
      }
    }
    if (best != null) {
      return best;
    }
    return segments.length > 0 && List.of("admin", "v1", "health").contains(segments[0])
        ? "/" + segments[0] + "/**"
        : RouteTemplates.UNMATCHED;
  }

  @Test
  void randomPathsAreLabelledAsBySplittingThem() {
    List<String> words = new ArrayList<>(List.of("", "x", "value-1", "v1x", "adm", "**", "{id}"));
    for (String t : RouteTemplates.NODE) {
      for (String segment : t.substring(1).split("/")) {
        if (!words.contains(segment)) {
          words.add(segment);
        }
      }
    }
    SplittableRandom random = new SplittableRandom(42);
    for (int i = 0; i < 50_000; i++) {
      StringBuilder path = new StringBuilder(random.nextInt(4) == 0 ? "" : "/");
      int n = random.nextInt(7);
      for (int k = 0; k < n; k++) {
        path.append(k == 0 ? "" : "/").append(words.get(random.nextInt(words.size())));
      }
      if (random.nextInt(4) == 0) {
        path.append('/');
      }
      String p = path.toString();
      assertThat(templates.label(p)).as(p).isEqualTo(splitLabel(RouteTemplates.NODE, p));
    }
  }
}
