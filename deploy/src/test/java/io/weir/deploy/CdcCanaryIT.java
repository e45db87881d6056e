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
 * Row values never reach logs, errors or status: canary values are streamed into mirror sinks that
 * refuse them (a CHECK constraint whose error DETAIL quotes the row, a malformed integer whose
 * error quotes the text, and a UNIQUE constraint whose DETAIL quotes the key). The pipelines halt
 * with typed reasons; the node's whole log, {@code /metrics} and the admin status routes are
 * searched for the canaries ({@link Canaries}). The file and partition sinks are {@link
 * SinkCanaryIT}, the read surfaces {@link ReaderCanaryIT}.
 */
class CdcCanaryIT extends EndToEndTest {
  private final Canaries canaries = new Canaries("cdc-canary");
  private final String checkCanary = canaries.next("check");
  private final String castCanary = canaries.next("cast");
  private final String uniqueCanary = canaries.next("unique");

  @Test
  void refusedRowsHaltPipelinesWithoutLeakingTheirValues() throws Exception {
    db = TestPostgres.server().freshDatabase("mirrorleaks");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.checked (id int PRIMARY KEY, note text)");
      s.execute("CREATE TABLE public.casted (id int PRIMARY KEY, amount text)");
      s.execute("CREATE PUBLICATION checked_pub FOR TABLE public.checked");
      s.execute("CREATE PUBLICATION casted_pub FOR TABLE public.casted");
      s.execute("CREATE TABLE public.uniq (id int PRIMARY KEY, note text)");
      s.execute("CREATE PUBLICATION uniq_pub FOR TABLE public.uniq");
      s.execute("CREATE SCHEMA m1");
      s.execute(
          "CREATE TABLE m1.checked (id int PRIMARY KEY, note text CHECK (note NOT LIKE 'CANARY%'))");
      s.execute("CREATE SCHEMA m2");
      s.execute("CREATE TABLE m2.casted (id int PRIMARY KEY, amount int)");
      s.execute("CREATE SCHEMA m3");
      s.execute("CREATE TABLE m3.uniq (id int PRIMARY KEY, note text UNIQUE)");
    }
    Path config = Files.createTempFile("weir-mirrors", ".conf");
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
                + ", publications = [casted_pub], sink.target-schema = m2 }",
            "weir.pipelines.uniq { slot = uniq_"
                + suffix
                + ", publications = [uniq_pub], sink.target-schema = m3 }"));
    NodeProcess node =
        NodeProcess.start(
            new NodeProcess.Spec("mirrorleaks").database(db).args("--config", config.toString()));
    nodes.add(node);
    List<String> pipelines = List.of("checked", "casted", "uniq");
    for (String p : pipelines) {
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
      s.execute("INSERT INTO public.checked VALUES (2, '" + checkCanary + "')");
      s.execute("INSERT INTO public.casted VALUES (1, '" + castCanary + "')");
      s.execute("INSERT INTO public.uniq VALUES (1, '" + uniqueCanary + "')");
      s.execute("INSERT INTO public.uniq VALUES (2, '" + uniqueCanary + "')");
    }
    for (String p : pipelines) {
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
    assertThat(node.pipelineNow("uniq").get("detail").asText())
        .as("the unique violation is named by its SQLState only")
        .contains("SQLState 23505");
    JsonAssert.noCanary(node, checkCanary, nodes);
    JsonAssert.noCanary(node, castCanary, nodes);
    assertThat(node.log()).as("the node should log the halts").contains("halted (sink-rejected)");
    canaries.assertNoLeak(node, nodes, pipelines);
    String metrics = node.getUntil("/admin/metrics", true).body();
    assertThat(metrics)
        .as("halts are counted by reason")
        .contains("weir_cdc_halts_total{pipeline=\"checked\",reason=\"sink-rejected\"} 1.0")
        .contains("weir_cdc_rows_total{pipeline=\"checked\",table=\"public.checked\"} 1.0")
        .doesNotContain("NaN");
  }
}
