package io.weir.example;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.typesafe.config.ConfigFactory;
import io.weir.protocol.client.ClientReply;
import io.weir.protocol.client.ClientRequest;
import io.weir.protocol.client.Credentials;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.AddressFromURIString;

/**
 * Talks to a Weir cluster through its nodes' gateway ports (never joining the cluster), writes
 * documents, reads them back, deletes one, shows a typed conflict, then follows the collection's
 * changes feed with its cursor until it has seen every change it made. Prints one line per step and
 * exits 0 when every check held.
 *
 * <p>Environment: {@code WEIR_GATEWAYS} (host:port,... of server nodes' gateway ports, {@code
 * weir.protocol-gateway}), {@code WEIR_CLIENT_TOKEN} (a principal's bearer token with
 * DocumentsRead, DocumentsWrite and ChangesRead on the collection), {@code WEIR_EXAMPLE_COLLECTION}
 * (default {@code example}), {@code WEIR_EXAMPLE_DOCUMENTS} (default 10); {@code
 * WEIR_CLIENT_HOST}/{@code WEIR_CLIENT_PORT} for its own remoting address.
 */
public final class ClientExample {
  /** This client's own actor system name: any name but the nodes' does. */
  static final String SYSTEM_NAME = "weir-example-client";

  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * The example's own progress lines (stdout, message only: see logback.xml); no document content.
   */
  private static final org.slf4j.Logger log =
      org.slf4j.LoggerFactory.getLogger(ClientExample.class);

  private final WeirClient client;
  private final Credentials credentials;
  private final String collection;

  ClientExample(WeirClient client, Credentials credentials, String collection) {
    this.client = client;
    this.credentials = credentials;
    this.collection = collection;
  }

  public static void main(String[] args) throws Exception {
    String gateways = required("WEIR_GATEWAYS");
    Credentials credentials = Credentials.bearer(required("WEIR_CLIENT_TOKEN"));
    String collection = System.getenv().getOrDefault("WEIR_EXAMPLE_COLLECTION", "example");
    int documents = Integer.parseInt(System.getenv().getOrDefault("WEIR_EXAMPLE_DOCUMENTS", "10"));

    ActorSystem system = ActorSystem.create(SYSTEM_NAME, ConfigFactory.load());
    int status = 1;
    try {
      List<Address> addresses = new ArrayList<>();
      for (String gateway : gateways.split(",")) {
        addresses.add(
            AddressFromURIString.parse(
                "pekko://" + ClientRequest.GATEWAY_SYSTEM + "@" + gateway.trim()));
      }
      WeirClient client = new WeirClient(system, addresses, Duration.ofSeconds(15), 6);
      log.info(
          "client-started: self={} gateways={} (not a cluster member)",
          ((org.apache.pekko.actor.ExtendedActorSystem) system).provider().getDefaultAddress(),
          client.gateways().size());
      new ClientExample(client, credentials, collection).run(documents);
      log.info("client-gateways: {} server nodes answered", client.answered().size());
      log.info("client-ok");
      status = 0;
    } catch (Exception e) {
      log.error("client-failed: {}", e.getMessage());
    } finally {
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
    System.exit(status);
  }

  void run(int count) throws Exception {
    String run = UUID.randomUUID().toString().substring(0, 8);
    Map<String, ObjectNode> written = new HashMap<>();
    Map<String, Long> revisions = new HashMap<>();
    for (int i = 0; i < count; i++) {
      String id = "doc-" + i;
      ObjectNode body = JSON.createObjectNode().put("n", i).put("text", "note " + i);
      ClientReply.Ok ok =
          ok(
              new ClientRequest.PutDocument(
                  credentials, collection, id, body, null, run + "-put-" + i));
      written.put(id, body);
      revisions.put(id, ok.body().get("revision").asLong());
    }
    // The same idempotency key again: the first answer is returned and nothing is written.
    ClientReply.Ok again =
        ok(
            new ClientRequest.PutDocument(
                credentials, collection, "doc-0", written.get("doc-0"), null, run + "-put-0"));
    boolean replayed = again.body().path("replayed").asBoolean();

    int equal = 0;
    for (Map.Entry<String, ObjectNode> e : written.entrySet()) {
      ClientReply.Ok read = ok(new ClientRequest.GetDocument(credentials, collection, e.getKey()));
      if (read.body().equals(e.getValue()) && revisions.get(e.getKey()).equals(read.revision())) {
        equal++;
      }
    }

    // Compare-and-set with a stale revision: a typed conflict, nothing written.
    ClientReply stale =
        client
            .ask(
                new ClientRequest.PutDocument(
                    credentials,
                    collection,
                    "doc-1",
                    JSON.createObjectNode().put("n", -1),
                    revisions.get("doc-1") + 5,
                    null))
            .toCompletableFuture()
            .get();
    String conflict =
        stale instanceof ClientReply.Failed f ? f.status() + "/" + f.error().error() : "none";
    ok(
        new ClientRequest.DeleteDocument(
            credentials, collection, "doc-0", revisions.get("doc-0"), run + "-delete-0"));
    log.info(
        "client-documents: written={} replayed={} read-equal={} stale-write={} deleted=1",
        count,
        replayed,
        equal,
        conflict);
    if (!replayed || equal != count || !conflict.equals("409/conflict")) {
      throw new IllegalStateException("a document check failed");
    }
    int batched = batch(run);
    followChanges(count + batched);
  }

  /**
   * Writes {@value #BATCH} documents in one batch (grouped per partition, each group atomic) with
   * an idempotency key, then sends the same batch again: every item answers from its group's
   * receipt. Returns the documents written.
   */
  private int batch(String run) throws Exception {
    ObjectNode request = JSON.createObjectNode();
    var items = request.putArray("items");
    for (int i = 0; i < BATCH; i++) {
      items
          .addObject()
          .put("op", "put")
          .put("collection", collection)
          .put("id", "batch-" + i)
          .set("body", JSON.createObjectNode().put("n", i).put("text", "batched " + i));
    }
    JsonNode first =
        ok(new ClientRequest.WriteDocuments(credentials, request, run + "-batch")).body();
    JsonNode again =
        ok(new ClientRequest.WriteDocuments(credentials, request, run + "-batch")).body();
    boolean replayed = true;
    for (JsonNode item : again.get("results")) {
      replayed &= item.path("replayed").asBoolean();
    }
    log.info(
        "client-batch: applied={} again-applied={} replayed={}",
        first.get("applied").asInt(),
        again.get("applied").asInt(),
        replayed);
    if (first.get("applied").asInt() != BATCH || !replayed) {
      throw new IllegalStateException("the batch check failed");
    }
    return BATCH;
  }

  /** Documents of the batch the example writes. */
  private static final int BATCH = 5;

  /**
   * Reads the collection's changes from the beginning until every upsert and the delete were seen.
   */
  private void followChanges(int count) throws Exception {
    Set<String> upserts = new HashSet<>();
    Set<String> deletes = new HashSet<>();
    int pages = 0;
    ObjectNode request =
        JSON.createObjectNode()
            .put("collection", collection)
            .put("start", "beginning")
            .put("limit", 100);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while ((upserts.size() < count || deletes.isEmpty()) && System.nanoTime() < deadline) {
      JsonNode page =
          ok(new ClientRequest.Post(credentials, ClientRequest.Endpoint.CHANGES_READ, request))
              .body();
      pages++;
      for (JsonNode change : page.get("changes")) {
        // At least once: a change may come again; (id, revision) identifies it.
        String key = change.get("id").asText() + "@" + change.get("revision").asLong();
        if (change.get("deleted").asBoolean()) {
          deletes.add(key);
        } else {
          upserts.add(key);
        }
      }
      request =
          JSON.createObjectNode()
              .put("collection", collection)
              .put("cursor", page.get("cursor").asText());
      if (!page.get("hasMore").asBoolean()) {
        Thread.sleep(200);
      }
    }
    log.info(
        "client-changes: upserts={} deletes={} pages={}", upserts.size(), deletes.size(), pages);
    if (upserts.size() != count || deletes.size() != 1) {
      throw new IllegalStateException("the changes feed did not show every change");
    }
  }

  private ClientReply.Ok ok(ClientRequest request) throws Exception {
    ClientReply reply = client.ask(request).toCompletableFuture().get(2, TimeUnit.MINUTES);
    if (reply instanceof ClientReply.Ok ok) {
      return ok;
    }
    ClientReply.Failed failed = (ClientReply.Failed) reply;
    throw new IllegalStateException(
        request.operation()
            + " answered "
            + failed.status()
            + " "
            + failed.error().error()
            + ": "
            + failed.error().message());
  }

  private static String required(String name) {
    String value = System.getenv(name);
    if (value == null || value.isBlank()) {
      log.error("{} is not set", name);
      System.exit(2);
    }
    return value;
  }
}
