package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.weir.persistence.testing.TestPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Row values never reach logs, errors or status: canary values are streamed into sinks that refuse
 * them (a CHECK constraint whose error DETAIL quotes the row, and a malformed integer whose error
 * quotes the text). Both pipelines halt with typed reasons; the node's log and admin replies are
 * searched for the canaries.
 */
class CdcCanaryIT extends EndToEndTest {
  private static final String CHECK_CANARY = "CANARY-check-5e1f";
  private static final String CAST_CANARY = "CANARY-cast-77ab";

  @Test
  void refusedRowsHaltPipelinesWithoutLeakingTheirValues() throws Exception {
    db = TestPostgres.server().freshDatabase("canary");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.checked (id int PRIMARY KEY, note text)");
      s.execute("CREATE TABLE public.casted (id int PRIMARY KEY, amount text)");
      s.execute("CREATE PUBLICATION checked_pub FOR TABLE public.checked");
      s.execute("CREATE PUBLICATION casted_pub FOR TABLE public.casted");
      s.execute("CREATE SCHEMA m1");
      s.execute(
          "CREATE TABLE m1.checked (id int PRIMARY KEY, note text CHECK (note NOT LIKE 'CANARY%'))");
      s.execute("CREATE SCHEMA m2");
      s.execute("CREATE TABLE m2.casted (id int PRIMARY KEY, amount int)");
    }
    Path config = Files.createTempFile("weir-canary", ".conf");
    String suffix = db.name().substring(db.name().length() - 8);
    Files.writeString(
        config,
        String.join(
            "\n",
            "weir.pipelines.checked { slot = checked_"
                + suffix
                + ", publications = [checked_pub], sink.target-schema = m1 }",
            "weir.pipelines.casted { slot = casted_"
                + suffix
                + ", publications = [casted_pub], sink.target-schema = m2 }"));
    NodeProcess node =
        NodeProcess.start(
            new NodeProcess.Spec("canary").database(db).args("--config", config.toString()));
    nodes.add(node);
    for (String p : List.of("checked", "casted")) {
      await("pipeline " + p + " runs")
          .atMost(START_UP)
          .until(
              () ->
                  node.pipeline(p)
                      .map(s -> s.get("state").asText().equals("running"))
                      .orElse(false));
    }
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("INSERT INTO public.checked VALUES (1, 'fine')");
      s.execute("INSERT INTO public.checked VALUES (2, '" + CHECK_CANARY + "')");
      s.execute("INSERT INTO public.casted VALUES (1, '" + CAST_CANARY + "')");
    }
    for (String p : List.of("checked", "casted")) {
      await("pipeline " + p + " halts")
          .atMost(Duration.ofSeconds(120))
          .until(
              () ->
                  node.pipeline(p)
                      .map(s -> s.get("state").asText().equals("halted"))
                      .orElse(false));
      JsonNode status = node.pipelineNow(p);
      assertThat(status.get("reason").asText())
          .as("a refused row halts with sink-rejected")
          .isEqualTo("sink-rejected");
      assertThat(status.get("detail").asText())
          .as("the detail names the SQLState")
          .contains("SQLState");
      System.out.printf("canary: pipeline %s halted: %s%n", p, status.get("detail").asText());
    }
    JsonAssert.noCanary(node, CHECK_CANARY, nodes);
    JsonAssert.noCanary(node, CAST_CANARY, nodes);
    assertThat(node.log()).as("the node should log the halts").contains("halted (sink-rejected)");
    String metrics = node.getUntil("/admin/metrics", true).body();
    assertThat(metrics)
        .as("halts are counted by reason")
        .contains("weir_cdc_halts_total{pipeline=\"checked\",reason=\"sink-rejected\"} 1.0")
        .contains("weir_cdc_rows_total{pipeline=\"checked\",table=\"public.checked\"} 1.0")
        .doesNotContain("NaN");
  }
}
