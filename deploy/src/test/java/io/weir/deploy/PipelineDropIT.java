package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code DELETE /admin/pipelines/{name}} on a real node and PostgreSQL: refused while the pipeline
 * streams (409) and without the confirmation (400); after a stop and a confirmed drop the slot, the
 * {@code weir.cdc_slot} row and the mirror's checkpoint are gone and the status says {@code
 * dropped}; a later start creates a fresh slot (another incarnation) and streams again.
 */
class PipelineDropIT extends EndToEndTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void dropsAStoppedPipelinesSlotAndRecordsAndStartsAfresh() throws Exception {
    db = TestPostgres.server().freshDatabase("drop");
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.items (id int PRIMARY KEY, note text)");
      s.execute("CREATE PUBLICATION items_pub FOR TABLE public.items");
      s.execute("CREATE SCHEMA m1");
      s.execute("CREATE TABLE m1.items (id int PRIMARY KEY, note text)");
    }
    String slot = "items_" + db.name().substring(db.name().length() - 8);
    Path config = Files.createTempFile("weir-drop", ".conf");
    Files.writeString(
        config,
        "weir.pipelines.items { slot = "
            + slot
            + ", publications = [items_pub], sink.target-schema = m1 }\n");
    NodeProcess node = startNode("drop", config);
    awaitRunning(node, "items");
    String firstIncarnation = node.pipelineNow("items").get("incarnation").asText();
    JsonNode check = node.jsonUntil("/admin/pipelines/items/check", NodeProcess.ANSWER_DEADLINE);
    assertThat(check.get("pipeline").asText()).isEqualTo("items");
    assertThat(check.get("tables")).hasSize(1);
    assertThat(check.get("tables").get(0).get("table").asText()).isEqualTo("public.items");
    assertThat(check.get("tables").get(0).get("handling").asText())
        .as("the mirror finds m1.items rows by its primary key")
        .isEqualTo("by-primary-key");

    sql("INSERT INTO public.items VALUES (1, 'one')");
    awaitMirrored(1);

    assertThat(delete(node, "/admin/pipelines/items?confirm=items").statusCode())
        .as("a streaming pipeline is not dropped")
        .isEqualTo(409);
    assertThat(count("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'"))
        .isEqualTo(1);

    assertThat(command(node, "stop").statusCode()).isEqualTo(200);
    HttpResponse<String> unconfirmed = delete(node, "/admin/pipelines/items");
    assertThat(unconfirmed.statusCode()).isEqualTo(400);
    assertThat(JSON.readTree(unconfirmed.body()).get("error").asText()).isEqualTo("bad-request");
    assertThat(unconfirmed.body()).contains("?confirm=");
    assertThat(delete(node, "/admin/pipelines/items?confirm=other").statusCode()).isEqualTo(400);
    assertThat(count("SELECT count(*) FROM weir.cdc_slot WHERE pipeline = 'items'"))
        .as("nothing changes without the confirmation")
        .isEqualTo(1);
    assertThat(delete(node, "/admin/pipelines/nope?confirm=nope").statusCode()).isEqualTo(404);

    HttpResponse<String> dropped = delete(node, "/admin/pipelines/items?confirm=items");
    assertThat(dropped.statusCode()).as(dropped.body()).isEqualTo(200);
    assertThat(JSON.readTree(dropped.body()).get("state").asText()).isEqualTo("dropped");
    assertThat(node.pipelineNow("items").get("state").asText()).isEqualTo("dropped");
    assertThat(count("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'"))
        .as("the slot is dropped on the source")
        .isZero();
    assertThat(count("SELECT count(*) FROM weir.cdc_slot WHERE pipeline = 'items'")).isZero();
    assertThat(count("SELECT count(*) FROM m1.weir_mirror_checkpoint WHERE pipeline = 'items'"))
        .as("the mirror forgets its checkpoint")
        .isZero();
    assertThat(count("SELECT count(*) FROM m1.items"))
        .as("mirror tables are not touched")
        .isEqualTo(1);
    assertThat(delete(node, "/admin/pipelines/items?confirm=items").statusCode())
        .as("dropping a dropped pipeline is harmless")
        .isEqualTo(200);

    sql("INSERT INTO public.items VALUES (2, 'while dropped')"); // go-forward: not streamed
    assertThat(command(node, "start").statusCode()).isEqualTo(200);
    awaitRunning(node, "items");
    JsonNode restarted = node.pipelineNow("items");
    assertThat(restarted.get("incarnation").asText())
        .as("a fresh slot incarnation")
        .isNotEqualTo(firstIncarnation);
    assertThat(count("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'"))
        .isEqualTo(1);
    assertThat(count("SELECT count(*) FROM weir.cdc_slot WHERE pipeline = 'items'")).isEqualTo(1);
    sql("INSERT INTO public.items VALUES (3, 'three')");
    await("row 3 mirrored")
        .atMost(Duration.ofSeconds(120))
        .until(() -> count("SELECT count(*) FROM m1.items WHERE id = 3") == 1);
    assertThat(count("SELECT count(*) FROM m1.items WHERE id = 2"))
        .as("go-forward after a drop does not backfill what changed meanwhile")
        .isZero();
    System.out.printf(
        "pipeline-drop: slot %s dropped and recreated; incarnation %s -> %s%n",
        slot, firstIncarnation, restarted.get("incarnation").asText());
  }

  /**
   * DELETE, repeated while the node does not answer: a refused drop changes nothing and dropping a
   * dropped pipeline is harmless (asserted above), so a repetition has no effect of its own.
   */
  private HttpResponse<String> delete(NodeProcess node, String path) {
    return node.sendIdempotent("DELETE", path, null, Map.of());
  }

  /** POST start or stop: a state command, repeated while the node does not answer. */
  private HttpResponse<String> command(NodeProcess node, String command) {
    return node.sendIdempotent("POST", "/admin/pipelines/items/" + command, null, Map.of());
  }

  private void awaitMirrored(int rows) {
    await("mirrored")
        .atMost(Duration.ofSeconds(120))
        .until(() -> count("SELECT count(*) FROM m1.items") == rows);
  }

  private void sql(String statement) throws Exception {
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute(statement);
    }
  }

  private long count(String query) throws Exception {
    try (Connection c = db.connect();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(query)) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
