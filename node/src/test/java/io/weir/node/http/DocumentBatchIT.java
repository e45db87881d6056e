package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.protocol.partition.Partitioning;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code POST /v1/documents/batch} on a one-node cluster over the real JDBC journal: groups per
 * partition written atomically and independently, per-item results, deletes, the Idempotency-Key of
 * a whole batch (replay group by group, reuse refused), the request refused whole when malformed or
 * not granted, and collection policies item by item.
 */
class DocumentBatchIT extends FeedNodeFixture {
  @Override
  String databaseName() {
    return "document_batch_it";
  }

  /** Documents in PostgreSQL's documents table, as on a node. */
  @Override
  boolean documentsInPostgres() {
    return true;
  }

  /** A pipeline whose partition sink writes the collection {@code cdc_orders}. */
  @Override
  List<io.weir.node.cdc.PipelineConfig> pipelines() {
    return io.weir.node.cdc.PipelineConfig.all(
        com.typesafe.config.ConfigFactory.parseString(
                "weir.postgres.url = \"jdbc:postgresql://127.0.0.1/weir\"\n"
                    + "weir.pipelines.orders { slot = orders_slot, publications = [orders_pub],"
                    + " autostart = false, sink { type = partitions,"
                    + " collections { \"public.orders\" = cdc_orders } } }")
            .withFallback(com.typesafe.config.ConfigFactory.load()));
  }

  @Test
  void aKeyedRetryAnswersEachItemWithItsOwnRevisionAndAnotherPrincipalsKeyNeverMatches()
      throws Exception {
    String c = "batch_replay";
    ok(put(c, "a", "{\"v\":1}", ADMIN));
    ok(put(c, "b", "{\"v\":1}", ADMIN));
    ok(put(c, "b", "{\"v\":2}", ADMIN));
    ok(put(c, "del", "{\"v\":1}", ADMIN));
    ObjectNode[] items = {
      putItem(c, "a", "{\"v\":2}", null),
      putItem(c, "b", "{\"v\":3}", 2L),
      deleteItem(c, "del", null),
      putItem(c, "new", "{\"v\":1}", 0L)
    };
    JsonNode first = ok(batch(ADMIN, "replay-key", items));
    assertThat(first.get("applied").asInt()).isEqualTo(4);
    long[] revisions = {2, 3, 2, 1};
    for (int i = 0; i < 4; i++) {
      assertThat(first.get("results").get(i).get("revision").asLong()).isEqualTo(revisions[i]);
    }
    JsonNode replayed = ok(batch(ADMIN, "replay-key", items));
    for (int i = 0; i < 4; i++) {
      JsonNode r = replayed.get("results").get(i);
      assertThat(r.get("status").asText()).isEqualTo("applied");
      assertThat(r.get("replayed").asBoolean()).isTrue();
      assertThat(r.get("revision").asLong())
          .as("item %d's own revision", i)
          .isEqualTo(revisions[i]);
    }
    assertThat(replayed.get("results").get(2).get("deleted").asBoolean()).isTrue();
    assertThat(revision(c, "a")).isEqualTo(2);
    // The same key and batch from another principal is a new request of its own.
    String other = principal("batch-other", List.of(), c, "DocumentsWrite", "DocumentsRead");
    JsonNode others = ok(batch(other, "replay-key", putItem(c, "a", "{\"v\":2}", null)));
    assertThat(others.get("results").get(0).get("replayed").asBoolean()).isFalse();
    assertThat(others.get("results").get(0).get("revision").asLong()).isEqualTo(3);
  }

  /**
   * A partition whose documents table PostgreSQL refuses to write (a constraint no row meets)
   * acknowledges writes until the table is as far behind as it may be (1,000 events), then answers
   * single writes and batch items 503 {@code table-apply-failed}, retryable, and its status says
   * why; once the table applies again, writes go on and the acknowledged ones are all there.
   */
  @Test
  void writesToAPartitionWhoseTableKeepsFailingAreRefusedTypedAtItsLagBound() throws Exception {
    String c = "batch_table_failing";
    int partition = Partitioning.partitionOf(c, "hot", partitions());
    sql("ALTER TABLE weir.documents ADD CONSTRAINT weir_it_refuse_rows CHECK (false) NOT VALID");
    int acknowledged = 0;
    try {
      HttpResponse<String> r;
      while (true) {
        r = put(c, "hot", "{\"n\":" + (acknowledged + 1) + "}", ADMIN);
        if (r.statusCode() != 200 && r.statusCode() != 201) {
          break;
        }
        acknowledged++;
        assertThat(acknowledged).as("writes past the lag bound are refused").isLessThan(1_100);
      }
      error(r, 503, "table-apply-failed");
      assertThat(json.readTree(r.body()).get("retryable").asBoolean()).isTrue();
      assertThat(acknowledged).as("acknowledged up to the lag bound").isGreaterThan(1_000);
      JsonNode refused = ok(batch(ADMIN, null, putItem(c, "hot", "{\"n\":-1}", null)));
      assertThat(refused.get("results").get(0).get("error").asText())
          .isEqualTo("table-apply-failed");
      JsonNode table =
          ok(send("GET", "/admin/outbox/status?partition=" + partition, null, ADMIN))
              .get("documentsTable");
      assertThat(table.get("state").asText()).isEqualTo("table-apply-failed");
      assertThat(table.get("lagEvents").asLong()).isGreaterThan(1_000);
      assertThat(table.get("lagBytes").asLong()).isPositive();
      assertThat(table.get("lastError").asText()).contains("23514");
    } finally {
      sql("ALTER TABLE weir.documents DROP CONSTRAINT IF EXISTS weir_it_refuse_rows");
    }
    int last = acknowledged + 1;
    await("writes are accepted once the table applies again")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(200))
        .until(() -> put(c, "hot", "{\"n\":" + last + "}", ADMIN).statusCode() == 200);
    assertThat(revision(c, "hot")).as("every acknowledged write, then the last").isEqualTo(last);
  }

  @Test
  void aCollectionCdcWritesIsRefusedOnlyToThoseWhoMayWriteIt() throws Exception {
    HttpResponse<String> r =
        batch(
            ADMIN,
            null,
            putItem("batch_free", "f1", "{}", null),
            putItem("cdc_orders", "o1", "{}", null));
    error(r, 409, "collection-fed-by-cdc");
    assertThat(r.body()).contains("item 1");
    assertThat(revision("batch_free", "f1")).isZero();
    String user = principal("batch-cdc-user", List.of(), "batch_free", "DocumentsWrite");
    error(batch(user, null, putItem("cdc_orders", "o1", "{}", null)), 403, "forbidden");
  }

  private ObjectNode putItem(String collection, String id, String body, Long ifMatch)
      throws Exception {
    ObjectNode n = json.createObjectNode();
    n.put("op", "put");
    n.put("collection", collection);
    n.put("id", id);
    n.set("body", json.readTree(body));
    if (ifMatch != null) {
      n.put("ifMatch", ifMatch);
    }
    return n;
  }

  private ObjectNode deleteItem(String collection, String id, Long ifMatch) {
    ObjectNode n = json.createObjectNode();
    n.put("op", "delete");
    n.put("collection", collection);
    n.put("id", id);
    if (ifMatch != null) {
      n.put("ifMatch", ifMatch);
    }
    return n;
  }

  private HttpResponse<String> batch(String token, String key, ObjectNode... items)
      throws Exception {
    ObjectNode body = json.createObjectNode();
    ArrayNode a = body.putArray("items");
    for (ObjectNode i : items) {
      a.add(i);
    }
    return send(
        "POST",
        "/v1/documents/batch",
        json.writeValueAsString(body),
        token,
        key == null ? Map.of() : Map.of("Idempotency-Key", key));
  }

  private void sql(String statement) throws Exception {
    try (java.sql.Connection conn = database.dataSource().getConnection();
        java.sql.Statement st = conn.createStatement()) {
      st.execute(statement);
    }
  }

  /** {@code n} ids of {@code collection} that live in partition {@code partition}. */
  private List<String> idsIn(String collection, int partition, int n, String prefix) {
    List<String> ids = new ArrayList<>();
    for (int i = 0; ids.size() < n; i++) {
      String id = prefix + i;
      if (Partitioning.partitionOf(collection, id, partitions()) == partition) {
        ids.add(id);
      }
    }
    return ids;
  }

  /** The document's revision, 0 when absent or deleted. */
  private long revision(String collection, String id) throws Exception {
    HttpResponse<String> r = send("GET", "/v1/documents/" + collection + "/" + id, null, ADMIN);
    if (r.statusCode() == 404) {
      return 0;
    }
    assertThat(r.statusCode()).as("%s", r.body()).isEqualTo(200);
    return Long.parseLong(r.headers().firstValue("ETag").orElseThrow().replace("\"", ""));
  }

  private static String status(JsonNode reply, int index) {
    return reply.get("results").get(index).get("status").asText();
  }

  @Test
  void itemsOfEveryPartitionAreWrittenAndEachGetsItsRevision() throws Exception {
    String c = "batch_basic";
    List<ObjectNode> items = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      items.add(putItem(c, "d" + i, "{\"n\":" + i + ",\"text\":\"ä\"}", null));
    }
    JsonNode r = ok(batch(ADMIN, null, items.toArray(ObjectNode[]::new)));
    assertThat(r.get("applied").asInt()).isEqualTo(40);
    assertThat(r.get("failed").asInt()).isZero();
    java.util.Set<Integer> partitionsSeen = new java.util.TreeSet<>();
    for (int i = 0; i < 40; i++) {
      JsonNode item = r.get("results").get(i);
      assertThat(item.get("index").asInt()).isEqualTo(i);
      assertThat(item.get("id").asText()).isEqualTo("d" + i);
      assertThat(item.get("status").asText()).isEqualTo("applied");
      assertThat(item.get("revision").asLong()).isEqualTo(1);
      assertThat(item.get("partition").asInt())
          .isEqualTo(Partitioning.partitionOf(c, "d" + i, partitions()));
      partitionsSeen.add(item.get("partition").asInt());
    }
    assertThat(partitionsSeen).hasSize(partitions());
    HttpResponse<String> got = send("GET", "/v1/documents/" + c + "/d7", null, ADMIN);
    assertThat(json.readTree(got.body())).isEqualTo(json.readTree("{\"n\":7,\"text\":\"ä\"}"));
    // Replaced and deleted in a second batch: deletes without ifMatch expect what is there.
    JsonNode second =
        ok(
            batch(
                ADMIN,
                null,
                putItem(c, "d0", "{\"n\":100}", 1L),
                deleteItem(c, "d1", null),
                deleteItem(c, "d2", 1L)));
    assertThat(second.get("applied").asInt()).isEqualTo(3);
    assertThat(second.get("results").get(0).get("revision").asLong()).isEqualTo(2);
    assertThat(second.get("results").get(1).get("deleted").asBoolean()).isTrue();
    assertThat(second.get("results").get(1).get("revision").asLong()).isEqualTo(2);
    assertThat(revision(c, "d1")).isZero();
    assertThat(revision(c, "d2")).isZero();
    assertThat(revision(c, "d0")).isEqualTo(2);
  }

  @Test
  void aFailedItemStopsItsPartitionsGroupOnlyAndARetryWithTheKeyFinishesTheRest() throws Exception {
    String c = "batch_atomic";
    List<String> p1 = idsIn(c, 1, 3, "a");
    List<String> p2 = idsIn(c, 2, 2, "b");
    // p1's last item expects a document that does not exist yet: p1's group is not written.
    ObjectNode[] items = {
      putItem(c, p1.get(0), "{\"v\":1}", null),
      putItem(c, p2.get(0), "{\"v\":1}", null),
      putItem(c, p1.get(1), "{\"v\":1}", 0L),
      putItem(c, p2.get(1), "{\"v\":1}", null),
      putItem(c, p1.get(2), "{\"v\":2}", 1L)
    };
    JsonNode r = ok(batch(ADMIN, "batch-key-1", items));
    assertThat(r.get("applied").asInt()).isEqualTo(2);
    assertThat(r.get("failed").asInt()).isEqualTo(3);
    assertThat(status(r, 0)).isEqualTo("aborted");
    assertThat(r.get("results").get(0).get("abortedBy").asInt()).isEqualTo(4);
    assertThat(status(r, 2)).isEqualTo("aborted");
    assertThat(status(r, 4)).isEqualTo("conflict");
    assertThat(r.get("results").get(4).get("actualRevision").asLong()).isZero();
    assertThat(status(r, 1)).isEqualTo("applied");
    assertThat(status(r, 3)).isEqualTo("applied");
    for (String id : p1) {
      assertThat(revision(c, id)).as("nothing of the conflicting group is written").isZero();
    }
    assertThat(revision(c, p2.get(0))).isEqualTo(1);

    // The same batch again: the written group answers its receipt, the other conflicts again.
    JsonNode again = ok(batch(ADMIN, "batch-key-1", items));
    assertThat(status(again, 1)).isEqualTo("applied");
    assertThat(again.get("results").get(1).get("replayed").asBoolean()).isTrue();
    assertThat(status(again, 4)).isEqualTo("conflict");

    // Once the expected document exists, the retry writes the rest; the first group is still
    // only replayed (revision 1, not 2).
    ok(put(c, p1.get(2), "{\"v\":1}", ADMIN));
    JsonNode finished = ok(batch(ADMIN, "batch-key-1", items));
    assertThat(finished.get("applied").asInt()).isEqualTo(5);
    assertThat(finished.get("results").get(0).get("replayed").asBoolean()).isFalse();
    assertThat(finished.get("results").get(4).get("revision").asLong()).isEqualTo(2);
    assertThat(finished.get("results").get(1).get("replayed").asBoolean()).isTrue();
    assertThat(revision(c, p2.get(0))).isEqualTo(1);
    assertThat(revision(c, p1.get(2))).isEqualTo(2);

    // The key with another batch: refused by every partition holding its receipt, nothing written.
    JsonNode reused =
        ok(
            batch(
                ADMIN,
                "batch-key-1",
                putItem(c, p1.get(0), "{\"v\":9}", null),
                putItem(c, p2.get(0), "{\"v\":9}", null)));
    assertThat(reused.get("applied").asInt()).isZero();
    assertThat(reused.get("results").get(0).get("error").asText())
        .isEqualTo("idempotency-key-reused");
    assertThat(reused.get("results").get(1).get("error").asText())
        .isEqualTo("idempotency-key-reused");
    assertThat(revision(c, p1.get(0))).isEqualTo(1);
  }

  @Test
  void aDeleteOfADocumentThatIsNotThereIsNotFoundAndWritesNoTombstone() throws Exception {
    String c = "batch_delete";
    List<String> ids = idsIn(c, 3, 2, "x");
    ok(put(c, ids.get(0), "{\"v\":1}", ADMIN));
    JsonNode r =
        ok(batch(ADMIN, null, deleteItem(c, ids.get(0), null), deleteItem(c, ids.get(1), null)));
    assertThat(status(r, 1)).isEqualTo("not-found");
    assertThat(status(r, 0)).isEqualTo("aborted");
    assertThat(revision(c, ids.get(0))).isEqualTo(1);
    // An ifMatch naming a tombstone's revision does not delete it again.
    ok(send("DELETE", "/v1/documents/" + c + "/" + ids.get(0), null, ADMIN));
    JsonNode tomb = ok(batch(ADMIN, null, deleteItem(c, ids.get(0), 2L)));
    assertThat(status(tomb, 0)).isEqualTo("not-found");
    assertThat(drain(c, "beginning", false, ADMIN, new String[1]))
        .as("one upsert and one delete, no third change")
        .hasSize(2);
    // A keyed delete retried after it went through answers its receipt.
    ok(put(c, ids.get(1), "{\"v\":1}", ADMIN));
    JsonNode first = ok(batch(ADMIN, "delete-key", deleteItem(c, ids.get(1), null)));
    assertThat(status(first, 0)).isEqualTo("applied");
    JsonNode retried = ok(batch(ADMIN, "delete-key", deleteItem(c, ids.get(1), null)));
    assertThat(status(retried, 0)).isEqualTo("applied");
    assertThat(retried.get("results").get(0).get("replayed").asBoolean()).isTrue();
  }

  @Test
  void aMalformedOrUngrantedBatchIsRefusedWholeAndWritesNothing() throws Exception {
    String c = "batch_refused";
    error(batch(ADMIN, null), 400, "bad-request");
    error(
        send(
            "POST",
            "/v1/documents/batch",
            "{\"items\":[{\"op\":\"put\",\"collection\":\""
                + c
                + "\",\"id\":\"ok1\",\"body\":{}}],\"x\":1}",
            ADMIN,
            Map.of()),
        400,
        "bad-request");
    error(
        send("POST", "/v1/documents/batch", "{\"items\":[", ADMIN, Map.of()),
        400,
        "malformed-json");
    HttpResponse<String> dup =
        batch(
            ADMIN,
            null,
            putItem(c, "ok1", "{}", null),
            putItem(c, "dupid", "{}", null),
            deleteItem(c, "dupid", null));
    error(dup, 400, "bad-request");
    assertThat(json.readTree(dup.body()).get("message").asText())
        .contains("item 2")
        .contains("item 1")
        .doesNotContain("dupid");
    HttpResponse<String> badName =
        batch(
            ADMIN,
            null,
            putItem(c, "ok1", "{}", null),
            putItem("no.dots", "secret-id", "{}", null));
    error(badName, 400, "invalid-name");
    assertThat(badName.body()).contains("item 1").doesNotContain("secret-id");
    ObjectNode badOp = putItem(c, "ok2", "{}", null);
    badOp.put("op", "patch");
    error(batch(ADMIN, null, putItem(c, "ok1", "{}", null), badOp), 400, "bad-request");
    ObjectNode bodyOnDelete = deleteItem(c, "ok2", null);
    bodyOnDelete.set("body", json.createObjectNode());
    error(batch(ADMIN, null, bodyOnDelete), 400, "bad-request");
    ObjectNode negative = putItem(c, "ok2", "{}", null);
    negative.put("ifMatch", -1);
    error(batch(ADMIN, null, negative), 400, "bad-request");
    String large = "{\"v\":\"" + "x".repeat((int) maxDocumentBytes()) + "\"}";
    error(
        batch(ADMIN, null, putItem(c, "ok1", "{}", null), putItem(c, "big", large, null)),
        413,
        "document-too-large");
    List<ObjectNode> many = new ArrayList<>();
    for (int i = 0; i < 1001; i++) {
      many.add(putItem(c, "m" + i, "{}", null));
    }
    error(batch(ADMIN, null, many.toArray(ObjectNode[]::new)), 400, "bad-request");
    HttpResponse<String> longKey = batch(ADMIN, "k".repeat(256), putItem(c, "ok1", "{}", null));
    error(longKey, 400, "bad-request");
    assertThat(longKey.body()).contains("Idempotency-Key");
    // DocumentsWrite on one collection of two: 403, and the granted one is not written either.
    String writer = principal("batch-writer", List.of(), c, "DocumentsWrite", "DocumentsRead");
    error(
        batch(
            writer, null, putItem(c, "ok1", "{}", null), putItem("batch_other", "o1", "{}", null)),
        403,
        "forbidden");
    for (String id : List.of("ok1", "ok2", "dupid", "big", "m0")) {
      assertThat(revision(c, id)).as("no item of a refused batch is written").isZero();
    }
    JsonNode granted = ok(batch(writer, null, putItem(c, "ok1", "{}", null)));
    assertThat(status(granted, 0)).isEqualTo("applied");
  }

  @Test
  void policiesApplyItemByItemAndARefusalStopsItsGroup() throws Exception {
    String c = "batch_policy";
    policy(c, List.of("salary"), "acl", "acl");
    String user = principal("batch-user", List.of(), c, "DocumentsWrite", "DocumentsRead");
    List<String> ids = idsIn(c, 5, 3, "p");
    List<String> other = idsIn(c, 6, 1, "q");
    // ids[0]: visible to the user, with a salary it may not read; ids[1]: hidden from it.
    ok(put(c, ids.get(0), "{\"acl\":[\"batch-user\"],\"salary\":100,\"v\":1}", ADMIN));
    ok(put(c, ids.get(1), "{\"acl\":[\"someone-else\"],\"v\":1}", ADMIN));

    // Writing the sensitive field is refused; the rest of its group is aborted.
    JsonNode sensitive =
        ok(
            batch(
                user,
                null,
                putItem(c, ids.get(2), "{\"acl\":[\"batch-user\"],\"v\":1}", null),
                putItem(c, ids.get(0), "{\"acl\":[\"batch-user\"],\"salary\":1}", null),
                putItem(c, other.get(0), "{\"acl\":[\"batch-user\"],\"v\":1}", null)));
    assertThat(status(sensitive, 1)).isEqualTo("failed");
    assertThat(sensitive.get("results").get(1).get("error").asText()).isEqualTo("forbidden");
    assertThat(status(sensitive, 0)).isEqualTo("aborted");
    assertThat(status(sensitive, 2)).isEqualTo("applied");
    assertThat(revision(c, ids.get(2))).isZero();

    // A hidden row is not found for a delete and forbidden for a put; an invisible new row too.
    JsonNode hidden = ok(batch(user, null, deleteItem(c, ids.get(1), null)));
    assertThat(status(hidden, 0)).isEqualTo("not-found");
    JsonNode hiddenPut =
        ok(batch(user, null, putItem(c, ids.get(1), "{\"acl\":[\"batch-user\"]}", null)));
    assertThat(hiddenPut.get("results").get(0).get("error").asText()).isEqualTo("forbidden");
    JsonNode invisible = ok(batch(user, null, putItem(c, ids.get(2), "{\"acl\":[\"x\"]}", null)));
    assertThat(invisible.get("results").get(0).get("error").asText()).isEqualTo("forbidden");
    assertThat(revision(c, ids.get(1))).isEqualTo(1);

    // A keyed write replayed after its row was hidden from the writer: the receipt answers, even
    // though the checks would refuse the write now.
    JsonNode keyed =
        ok(
            batch(
                user,
                "policy-key",
                putItem(c, other.get(0), "{\"acl\":[\"batch-user\"],\"v\":2}", null)));
    assertThat(status(keyed, 0)).isEqualTo("applied");
    long written = keyed.get("results").get(0).get("revision").asLong();
    ok(put(c, other.get(0), "{\"acl\":[\"someone-else\"],\"v\":3}", ADMIN));
    JsonNode retried =
        ok(
            batch(
                user,
                "policy-key",
                putItem(c, other.get(0), "{\"acl\":[\"batch-user\"],\"v\":2}", null)));
    assertThat(status(retried, 0)).isEqualTo("applied");
    assertThat(retried.get("results").get(0).get("replayed").asBoolean()).isTrue();
    assertThat(retried.get("results").get(0).get("revision").asLong()).isEqualTo(written);
    assertThat(revision(c, other.get(0))).isEqualTo(written + 1);

    // A visible row is replaced keeping the sensitive field the user may not read.
    JsonNode replaced =
        ok(batch(user, null, putItem(c, ids.get(0), "{\"acl\":[\"batch-user\"],\"v\":2}", 1L)));
    assertThat(status(replaced, 0)).isEqualTo("applied");
    JsonNode stored =
        json.readTree(send("GET", "/v1/documents/" + c + "/" + ids.get(0), null, ADMIN).body());
    assertThat(stored.get("salary").asInt()).isEqualTo(100);
    assertThat(stored.get("v").asInt()).isEqualTo(2);
  }
}
