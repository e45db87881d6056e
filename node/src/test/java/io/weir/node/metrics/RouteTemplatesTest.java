package io.weir.node.metrics;

import static org.assertj.core.api.Assertions.assertThat;

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
}
