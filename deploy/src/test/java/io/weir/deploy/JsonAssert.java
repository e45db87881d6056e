package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;

/** Checks that no row value (a seeded canary) reached a node's log or its admin API replies. */
final class JsonAssert {
  private JsonAssert() {}

  static void noCanary(NodeProcess live, String canary, List<NodeProcess> all) {
    for (NodeProcess n : all) {
      assertThat(n.log())
          .as("the log of %s must not contain a row value", n.name())
          .doesNotContain(canary);
    }
    // Asked again until the node answers: a reply the test never saw would check nothing.
    assertThat(live.getUntil("/admin/pipelines", true).body())
        .as("pipeline status must not contain a row value")
        .doesNotContain(canary);
    assertThat(live.getUntil("/admin/metrics", true).body())
        .as("metrics must not contain a row value")
        .doesNotContain(canary);
  }
}
