package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.node.NodeView;
import io.weir.node.auth.TokenAuthenticator;
import io.weir.node.documents.Documents;
import io.weir.node.feed.Feeds;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.StorageStatus;
import io.weir.persistence.testing.TestPorts;
import io.weir.persistence.testing.TestPostgres;
import io.weir.sharding.partition.JournalEntries;
import io.weir.sharding.partition.OutboxReader;
import io.weir.sharding.partition.PartitionSettings;
import io.weir.sharding.partition.PartitionSharding;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;

/**
 * A one-node cluster serving the document API, collection policies, the changes feed and queries
 * over HTTP, its partitions on the real JDBC journal in a fresh PostgreSQL database, with helpers
 * to call it. Tests use collections of their own.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class FeedNodeFixture {
  static final String ADMIN = "admin-token-for-node-http-it";

  private TestPostgres.TestDatabase db;
  io.weir.node.tokens.TokenKeys keys;
  io.weir.node.auth.Principals principals;
  Documents documents;
  io.weir.node.auth.Policies policies;
  io.weir.persistence.Database database;
  ActorTestKit kit;
  private ServerBinding binding;
  final AtomicLong clockOffset = new AtomicLong();
  private final HttpClient client =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  final ObjectMapper json = new ObjectMapper();

  /** The test database's name (one per test class). */
  abstract String databaseName();

  /** The cluster's partition count. */
  int partitions() {
    return 8;
  }

  /**
   * Whether the partitions keep their documents in the test database's documents table, as a node
   * does (else in memory).
   */
  boolean documentsInPostgres() {
    return false;
  }

  PartitionSettings partitionLimits() {
    return PartitionSettings.DEFAULTS;
  }

  /** Pipelines the document API knows of (their collections are read-only). */
  List<io.weir.node.cdc.PipelineConfig> pipelines() {
    return List.of();
  }

  /** Principals known by token besides the stored ones: the bootstrap administrator. */
  TokenAuthenticator bootstrap() {
    return TokenAuthenticator.withBootstrapAdmin(ADMIN);
  }

  /** The largest document body the API accepts. */
  long maxDocumentBytes() {
    return 64 * 1024;
  }

  /** The feeds' limits (candidate bytes 1 MiB, at most 50 rows). */
  Feeds.Limits feedLimits() {
    return new Feeds.Limits(100, 1000, 4L << 20, 16L << 20, 1L << 20, 50, 64, Duration.ofHours(24));
  }

  /**
   * The reader of the partitions' outboxes, as a node has it: the journal read by SQL (ADR 0058) on
   * threads of its own.
   */
  OutboxReader outboxReader(org.apache.pekko.actor.typed.ActorSystem<?> system) {
    return new OutboxReader(
        system,
        JournalEntries.sql(system, database.dataSource(), "weir", outboxReads),
        OutboxReader.DEFAULT_CACHE_BYTES);
  }

  /** The outbox reads' threads (they wait for connections). */
  private final java.util.concurrent.ExecutorService outboxReads =
      java.util.concurrent.Executors.newFixedThreadPool(
          4,
          r -> {
            Thread t = new Thread(r, "fixture-outbox-reads");
            t.setDaemon(true);
            return t;
          });

  /**
   * Pushed live queries' settings, or null for none. With settings, the partitions report grown
   * outboxes to a {@link io.weir.node.feed.TailSignals} that this node polls every 25 ms, as a
   * node's signal loop does (without the cluster topic: one node).
   */
  io.weir.node.feed.LiveStreams.Settings liveStreamSettings() {
    return null;
  }

  /** The pushed live queries, when {@link #liveStreamSettings} gave settings. */
  io.weir.node.feed.LiveStreams liveStreams;

  /** Reads the live streams made of the partitions (shared reads count once). */
  final java.util.concurrent.atomic.AtomicInteger liveStreamReads =
      new java.util.concurrent.atomic.AtomicInteger();

  /**
   * Projection consumers' service on this fixture's outbox reader with {@code reads} (budgets and
   * admission), batches of at most {@code maxEffects} effects valid for an hour.
   */
  io.weir.node.projection.Projections projectionsWith(
      Documents documents,
      io.weir.node.tokens.TokenKeys keys,
      Clock clock,
      io.weir.node.NodeSettings.Projections reads,
      int maxEffects) {
    return new io.weir.node.projection.Projections(
        documents, outboxReader(kit.system()), keys, reads, maxEffects, Duration.ofHours(1), clock);
  }

  /** Projection consumers' service, or null for none. */
  io.weir.node.projection.Projections projections(
      Documents documents, io.weir.node.tokens.TokenKeys keys, Clock clock) {
    return null;
  }

  @BeforeAll
  void start() throws Exception {
    db = TestPostgres.server().freshDatabase(databaseName());
    Config config =
        ConfigFactory.parseString(
                "pekko.actor.provider = cluster\n" + "pekko.cluster.roles = [server]\n")
            .withFallback(db.config())
            .withFallback(ConfigFactory.parseResources("weir-persistence.conf"));
    config = ConfigFactory.load(config);
    database =
        io.weir.persistence.Database.create(
            io.weir.persistence.PostgresSettings.create(config), "feed-api-it");
    SchemaMigrator.migrate(database.dataSource(), "weir");
    try (var c = database.dataSource().getConnection()) {
      io.weir.persistence.ClusterIdentityStore.loadOrCreate(c, "weir", partitions());
    }
    var blocking = java.util.concurrent.ForkJoinPool.commonPool();
    keys =
        new io.weir.node.tokens.TokenKeys(
            database.dataSource(), "weir", blocking, Duration.ofSeconds(2));
    keys.reload().toCompletableFuture().get(10, TimeUnit.SECONDS);
    kit = TestPorts.kit("weir", config);
    Cluster cluster = Cluster.get(kit.system());
    cluster.manager().tell(Join.create(cluster.selfMember().address()));
    io.weir.node.feed.TailSignals signals = new io.weir.node.feed.TailSignals();
    PartitionSharding.init(
        kit.system(),
        (documentsInPostgres()
                ? io.weir.sharding.partition.PartitionWiring.jdbc(
                    partitionLimits(), database.dataSource(), "weir", blocking, blocking)
                : io.weir.sharding.partition.PartitionWiring.inMemory(partitionLimits()))
            .withObserver(signals));
    documents = new Documents(kit.system(), partitions(), pipelines(), Duration.ofSeconds(20));
    Clock clock =
        new Clock() {
          @Override
          public java.time.ZoneId getZone() {
            return ZoneOffset.UTC;
          }

          @Override
          public Clock withZone(java.time.ZoneId zone) {
            return this;
          }

          @Override
          public Instant instant() {
            return Instant.now().plusMillis(clockOffset.get());
          }
        };
    principals =
        new io.weir.node.auth.Principals(bootstrap(), database.dataSource(), "weir", blocking);
    principals.reload().toCompletableFuture().get(10, TimeUnit.SECONDS);
    policies = new io.weir.node.auth.Policies(database.dataSource(), "weir", blocking, documents);
    policies.reload().toCompletableFuture().get(10, TimeUnit.SECONDS);
    Feeds feeds =
        new Feeds(documents, outboxReader(kit.system()), keys, policies, feedLimits(), clock);
    if (liveStreamSettings() != null) {
      io.weir.node.auth.Principals known = principals;
      liveStreams =
          new io.weir.node.feed.LiveStreams(
              (principal, query, cursor, limit, maxBytes, through) -> {
                liveStreamReads.incrementAndGet();
                return feeds.readLive(principal, query, cursor, limit, maxBytes, through);
              },
              liveStreamSettings(),
              known::current,
              known::fresh,
              (principal, query) -> feeds.refusal(principal, query, true));
      io.weir.node.feed.LiveStreams streams = liveStreams;
      kit.system()
          .scheduler()
          .scheduleWithFixedDelay(
              Duration.ofMillis(25),
              Duration.ofMillis(25),
              () -> {
                if (signals.takeGrown()) {
                  streams.wake();
                }
              },
              kit.system().executionContext());
    }
    StorageStatus storage = new StorageStatus.Starting(Instant.now());
    HttpApi api =
        new HttpApi(
            json,
            ApiServices.builder(
                    principals,
                    new NodeView(kit.system(), () -> storage, partitions(), NodeView.NO_PIPELINES))
                .documents(documents, maxDocumentBytes())
                .projections(projections(documents, keys, clock))
                .tokenKeys(keys)
                .principals(principals)
                .policies(policies)
                .feeds(feeds)
                .liveStreams(liveStreams)
                .build());
    // As a node binds: its server log scrubbed.
    binding =
        TestPorts.bound(
            port ->
                NodeHttpServer.at(kit.system(), "127.0.0.1", port)
                    .bind(api.routes())
                    .toCompletableFuture()
                    .orTimeout(10, TimeUnit.SECONDS)
                    .join());
    // A single-node cluster is Up within seconds; the bound allows a machine four times slower.
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(120))
        .until(() -> cluster.selfMember().status() == MemberStatus.up());
  }

  @AfterAll
  void stop() {
    if (liveStreams != null) {
      liveStreams.close();
    }
    if (kit != null) {
      kit.shutdownTestKit();
    }
    outboxReads.shutdownNow();
    if (database != null) {
      database.close();
    }
    if (db != null) {
      db.close();
    }
  }

  // ---- helpers ----

  /** The node's HTTP address, e.g. {@code http://127.0.0.1:PORT}. */
  String base() {
    return "http://127.0.0.1:" + binding.localAddress().getPort();
  }

  HttpResponse<String> send(String method, String path, String body, String token)
      throws Exception {
    return send(method, path, body, token, Map.of());
  }

  HttpResponse<String> send(
      String method, String path, String body, String token, Map<String, String> headers)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + binding.localAddress().getPort() + path))
            .timeout(Duration.ofSeconds(30))
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString(body));
    if (token != null) {
      b.header("Authorization", "Bearer " + token);
    }
    headers.forEach(b::header);
    return client.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  HttpResponse<String> post(String path, Object body, String token) throws Exception {
    return send("POST", path, body instanceof String s ? s : json.writeValueAsString(body), token);
  }

  JsonNode ok(HttpResponse<String> r, int status) throws Exception {
    assertThat(r.statusCode()).as("%s", r.body()).isEqualTo(status);
    return json.readTree(r.body());
  }

  JsonNode ok(HttpResponse<String> r) throws Exception {
    return ok(r, 200);
  }

  void error(HttpResponse<String> r, int status, String code) throws Exception {
    assertThat(r.statusCode()).as("%s", r.body()).isEqualTo(status);
    JsonNode body = json.readTree(r.body());
    assertThat(body.get("error").asText()).as("%s", r.body()).isEqualTo(code);
    assertThat(body.has("message")).isTrue();
    assertThat(body.has("retryable")).isTrue();
  }

  /**
   * Creates a principal in {@code groups} with {@code grants} on {@code collection}; returns its
   * token.
   */
  String principal(String id, List<String> groups, String collection, String... grants)
      throws Exception {
    String token =
        ok(post("/admin/principals", Map.of("id", id, "groups", groups), ADMIN), 201)
            .get("token")
            .asText();
    for (String g : grants) {
      grant(id, collection, g);
    }
    return token;
  }

  /** {@code FieldRead:x} and {@code FieldUse:x} are field grants. */
  void grant(String id, String collection, String grant) throws Exception {
    Map<String, String> body =
        grant.contains(":")
            ? Map.of(
                "collection",
                collection,
                "grant",
                grant.substring(0, grant.indexOf(':')),
                "field",
                grant.substring(grant.indexOf(':') + 1))
            : Map.of("collection", collection, "grant", grant);
    ok(post("/admin/principals/" + id + "/grants", body, ADMIN));
  }

  void policy(String collection, List<String> sensitive, String visibility, String field)
      throws Exception {
    Map<String, Object> body = new HashMap<>();
    body.put("sensitiveFields", sensitive);
    body.put("visibility", visibility);
    if (field != null) {
      body.put("field", field);
    }
    JsonNode r =
        ok(send("PUT", "/admin/policies/" + collection, json.writeValueAsString(body), ADMIN));
    assertThat(r.get("partitions").asInt()).isEqualTo(partitions());
  }

  HttpResponse<String> put(String collection, String id, String body, String token)
      throws Exception {
    return send("PUT", "/v1/documents/" + collection + "/" + id, body, token);
  }

  JsonNode changes(
      String collection,
      String startOrCursor,
      boolean cursor,
      String token,
      Integer limit,
      Long maxBytes)
      throws Exception {
    return ok(changesRaw(collection, startOrCursor, cursor, token, limit, maxBytes));
  }

  HttpResponse<String> changesRaw(
      String collection,
      String startOrCursor,
      boolean cursor,
      String token,
      Integer limit,
      Long maxBytes)
      throws Exception {
    ObjectNode n = json.createObjectNode();
    n.put("collection", collection);
    n.put(cursor ? "cursor" : "start", startOrCursor);
    if (limit != null) {
      n.put("limit", limit);
    }
    if (maxBytes != null) {
      n.put("maxBytes", maxBytes);
    }
    return post("/v1/changes/read", n, token);
  }

  /**
   * Every change after {@code start}, page after page until hasMore is false; the last cursor in
   * [0].
   */
  List<JsonNode> drain(String collection, String start, boolean cursor, String token, String[] last)
      throws Exception {
    List<JsonNode> all = new ArrayList<>();
    String at = start;
    boolean isCursor = cursor;
    for (int pages = 0; pages < 1000; pages++) {
      JsonNode page = changes(collection, at, isCursor, token, 3, null);
      page.get("changes").forEach(all::add);
      at = page.get("cursor").asText();
      isCursor = true;
      if (!page.get("hasMore").asBoolean()) {
        last[0] = at;
        return all;
      }
    }
    throw new AssertionError("the feed never ended");
  }

  /** A query request body: {@code {"query": <q>, "limit"?}}. */
  ObjectNode queryBody(String q, Integer limit) throws Exception {
    ObjectNode n = json.createObjectNode();
    n.set("query", json.readTree(q));
    if (limit != null) {
      n.put("limit", limit);
    }
    return n;
  }
}
