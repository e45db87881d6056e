package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.NodeSettings;
import io.weir.node.documents.Documents;
import io.weir.node.projection.Projections;
import io.weir.protocol.partition.Partitioning;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * Projection batch reads are admitted like feed pages ({@code weir.projections.read.*}): with one
 * slot, a read while another runs is refused 429 {@code busy} at once, and a read stalled by its
 * database past its deadline is answered 503 {@code unavailable}; both retryable, and reads go on
 * once the database answers again. The stall is real: the journal table locked by another session.
 */
class ProjectionReadAdmissionIT extends FeedNodeFixture {
  private static final Duration DEADLINE = Duration.ofSeconds(2);

  @Override
  String databaseName() {
    return "projection_admission_it";
  }

  @Override
  Projections projections(Documents documents, io.weir.node.tokens.TokenKeys keys, Clock clock) {
    return projectionsWith(
        documents,
        keys,
        clock,
        new NodeSettings.Projections(100, 1000, 4L << 20, 16L << 20, 64 * 1024, 1, DEADLINE),
        100);
  }

  private ObjectNode consumer(int partition) {
    ObjectNode n = json.createObjectNode();
    n.put("partition", partition);
    n.put("consumer", "admitted");
    n.put("generation", 1);
    return n;
  }

  @Test
  void aSecondReadIsRefusedBusyAndAStalledOneAnswersUnavailableAtItsDeadline() throws Exception {
    String id = "a";
    int partition = Partitioning.partitionOf("src", id, partitions());
    ObjectNode configure = consumer(partition);
    configure.putArray("collections").add("src");
    ok(post("/admin/projections/configure", configure, ADMIN), 201);
    ok(send("PUT", "/v1/documents/src/" + id, "{}", ADMIN));
    // Not read before the stall: a read the node's outbox cache could answer would not stall.

    CompletableFuture<HttpResponse<String>> stalled;
    try (Connection c = database.dataSource().getConnection()) {
      c.setAutoCommit(false);
      try (Statement st = c.createStatement()) {
        st.execute("LOCK TABLE weir.event_journal IN ACCESS EXCLUSIVE MODE");
      }
      stalled =
          HttpClient.newHttpClient()
              .sendAsync(
                  HttpRequest.newBuilder(URI.create(base() + "/admin/projections/read"))
                      .timeout(Duration.ofSeconds(60))
                      .header("Authorization", "Bearer " + ADMIN)
                      .POST(HttpRequest.BodyPublishers.ofString(consumer(partition).toString()))
                      .build(),
                  HttpResponse.BodyHandlers.ofString());
      // The stalled read holds the only slot: another read is refused at once. (A poll that came
      // before the first read was admitted stalls too and ends at its deadline.)
      HttpResponse<String>[] busy = new HttpResponse[1];
      await("a read beside the stalled one is refused busy")
          .atMost(Duration.ofSeconds(60))
          .until(
              () -> {
                busy[0] = post("/admin/projections/read", consumer(partition), ADMIN);
                return busy[0].statusCode() == 429;
              });
      error(busy[0], 429, "busy");
      assertThat(json.readTree(busy[0].body()).get("retryable").asBoolean()).isTrue();
      HttpResponse<String> late = stalled.get(60, java.util.concurrent.TimeUnit.SECONDS);
      error(late, 503, "unavailable");
      assertThat(json.readTree(late.body()).get("message").asText())
          .contains("did not finish within " + DEADLINE.toSeconds() + " s");
      c.rollback();
    }
    // The stalled reads end with the lock and give their slots back.
    await("reads are admitted again once the database answers")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> post("/admin/projections/read", consumer(partition), ADMIN).statusCode() == 200);
    assertThat(ok(post("/admin/projections/read", consumer(partition), ADMIN)).get("entries"))
        .hasSize(1);
  }
}
