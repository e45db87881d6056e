package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.IThrowableProxy;
import ch.qos.logback.core.read.ListAppender;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.typesafe.config.ConfigFactory;
import io.weir.node.NodeView;
import io.weir.node.auth.TokenAuthenticator;
import io.weir.node.cdc.PipelineAdmin;
import io.weir.node.cdc.PipelineConfig;
import io.weir.node.cdc.PipelineManager;
import io.weir.node.documents.Documents;
import io.weir.persistence.StorageStatus;
import io.weir.persistence.cdc.CdcPipeline;
import io.weir.persistence.testing.TestPorts;
import io.weir.sharding.partition.PartitionSettings;
import io.weir.sharding.partition.PartitionSharding;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.http.javadsl.server.Route;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.slf4j.LoggerFactory;

/**
 * The trust boundary between a client and the node's log and answers, over real HTTP on loopback
 * with raw sockets (java.net.http refuses to send most of these requests): no value a client sends
 * (a token, a header value, a path with a document id, a method, a query) reaches a log line, while
 * every refused request leaves one line with its method, route template, status and typed reason;
 * errors raised by the HTTP layer itself are the node's typed JSON; bodies must be valid UTF-8 and
 * nothing but one JSON value; paths must percent-decode to valid UTF-8; a refused snapshot does not
 * echo the caller's table. The node is a single-node cluster with partitions on Pekko's in-memory
 * journal and a stand-in pipeline manager (no database).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class HttpHygieneTest {
  /** Sent in every header, path, query, method and body shape; must never reach the log. */
  private static final String CANARY = "zq7canary";

  /** The bootstrap administrator's token carries the canary too. */
  private static final String ADMIN = CANARY + "-admin-token-4d1f9a";

  private static final int PARTITIONS = 4;

  private ActorTestKit kit;
  private ServerBinding binding;
  private Route routes;
  private ListAppender<ILoggingEvent> logged;
  private final ObjectMapper json = new ObjectMapper();

  @BeforeAll
  void start() throws Exception {
    logged = new ListAppender<>();
    LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
    logged.setContext(context);
    logged.start();
    context.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME).addAppender(logged);

    Path snapshots = Files.createTempDirectory("http-hygiene-test");
    kit =
        TestPorts.kit(
            "weir",
            ConfigFactory.parseString(
                    "pekko.actor.provider = cluster\n"
                        + "pekko.persistence.journal.plugin = \"pekko.persistence.journal.inmem\"\n"
                        + "pekko.persistence.snapshot-store.plugin = \"pekko.persistence.snapshot-store.local\"\n"
                        + "pekko.persistence.snapshot-store.local.dir = \""
                        + snapshots.toString().replace("\\", "/")
                        + "\"\n")
                .withFallback(ConfigFactory.load()));
    Cluster cluster = Cluster.get(kit.system());
    cluster.manager().tell(Join.create(cluster.selfMember().address()));
    PartitionSharding.init(kit.system(), new PartitionSettings(1000, 1L << 30, 256, 20_000));
    Documents documents =
        new Documents(kit.system(), PARTITIONS, List.of(), Duration.ofSeconds(10));
    PipelineConfig orders =
        PipelineConfig.all(
                ConfigFactory.parseString(
                        "weir.postgres.url = \"jdbc:postgresql://127.0.0.1/weir\"\n"
                            + "weir.pipelines.orders { slot = orders_slot, publications = [orders_pub],"
                            + " autostart = false, sink { type = partitions,"
                            + " collections { \"public.orders\" = orders } } }")
                    .withFallback(ConfigFactory.load()))
            .get(0);
    // A pipeline manager that refuses every snapshot the way a pipeline does for a table it does
    // not publish: its message names the table as the caller spelt it.
    ActorRef<PipelineManager.Command> manager =
        kit.spawn(
            Behaviors.<PipelineManager.Command>receiveMessage(
                message -> {
                  if (message instanceof PipelineManager.Snapshot s) {
                    s.replyTo()
                        .tell(
                            new CdcPipeline.SnapshotReply(
                                null,
                                "unknown-table",
                                "table "
                                    + String.join(",", s.tables())
                                    + " is not in the pipeline's publications"));
                  }
                  return Behaviors.same();
                }));
    StorageStatus storage = new StorageStatus.Starting(Instant.now());
    HttpApi api =
        new HttpApi(
            json,
            ApiServices.builder(
                    TokenAuthenticator.withBootstrapAdmin(ADMIN),
                    new NodeView(kit.system(), () -> storage, PARTITIONS, NodeView.NO_PIPELINES))
                .pipelines(new PipelineAdmin(manager, kit.system(), List.of(orders)))
                .documents(documents, 4096)
                .build());
    routes = api.routes();
    binding = bind(routes, s -> s);
    org.awaitility.Awaitility.await("the node is an Up member")
        .atMost(java.time.Duration.ofSeconds(120))
        .pollInterval(java.time.Duration.ofMillis(50))
        .until(() -> cluster.selfMember().status() == MemberStatus.up());
  }

  /** Binds {@code routes} the way WeirNode does, with {@code settings} adapted. */
  private ServerBinding bind(
      Route routes,
      org.apache.pekko.japi.function.Function<
              org.apache.pekko.http.javadsl.settings.ServerSettings,
              org.apache.pekko.http.javadsl.settings.ServerSettings>
          settings)
      throws Exception {
    return TestPorts.bound(
        port ->
            NodeHttpServer.at(kit.system(), "127.0.0.1", port)
                .adaptSettings(settings)
                .bind(routes)
                .toCompletableFuture()
                .orTimeout(10, TimeUnit.SECONDS)
                .join());
  }

  @AfterAll
  void stop() {
    LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
    context.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME).detachAppender(logged);
    kit.shutdownTestKit();
  }

  @BeforeEach
  void clearLog() throws Exception {
    drainPekkoLog(); // Pekko logs asynchronously: let the previous test's lines arrive first
    synchronized (logged) {
      logged.list.clear();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Item 1: nothing a client sends reaches the log; each refusal leaves one value-free line.

  @Test
  void noValueAClientSendsReachesTheLogAndEveryRefusalLeavesOneLine() throws Exception {
    String nbsp = "\u00a0";
    String doc = "/v1/documents/things/";
    String auth = "Authorization: Bearer " + ADMIN;
    List<byte[]> requests = new ArrayList<>();
    // Bearer tokens in Authorization headers Pekko finds illegal, and a well-formed unknown one.
    requests.add(request("GET", "/admin/cluster", "Authorization: Bearer " + ADMIN + nbsp));
    requests.add(request("GET", "/admin/cluster", "Authorization: Bearer " + ADMIN + ", realm=x"));
    requests.add(request("GET", "/admin/cluster", "Authorization: Bearer " + CANARY + "-unknown"));
    requests.add(request("GET", "/admin/cluster", "Authorization: Basic " + CANARY + "=="));
    // Illegal Content-Type, If-None-Match, Accept, Content-Length; two Content-Types; a bad Host.
    requests.add(
        withBody(
            "PUT",
            doc + "ct",
            "{\"a\":1}",
            auth,
            "Content-Type: application/" + CANARY + ";;=\"",
            "Content-Length: 7"));
    requests.add(request("GET", doc + "ct", auth, "If-None-Match: " + CANARY + "\"unquoted"));
    requests.add(request("GET", doc + "ct", auth, "Accept: " + CANARY + "/;;q=x"));
    requests.add(request("POST", "/admin/outbox/purge", auth, "Content-Length: " + CANARY));
    requests.add(
        withBody(
            "PUT",
            doc + "ct2",
            "{}",
            auth,
            "Content-Type: application/json",
            "Content-Type: text/" + CANARY,
            "Content-Length: 2"));
    requests.add(request("GET", "/health/alive", "Host: " + CANARY + ":99x"));
    // Malformed request targets carrying a document id; a valid one Pekko decodes lossily.
    requests.add(request("GET", doc + CANARY + "%zz", auth));
    requests.add(request("GET", doc + CANARY + "|x", auth));
    requests.add(request("GET", doc + CANARY + "\"<x>", auth));
    requests.add(request("GET", doc + CANARY + "%FF", auth));
    requests.add(request("GET", "/admin/outbox/status?partition=" + CANARY + "%zz", auth));
    requests.add(request("GET", "/admin/outbox/status?partition=" + CANARY, auth));
    // Limits: a long URI, a long header, an illegal header character.
    requests.add(request("GET", doc + CANARY + "x".repeat(3000), auth));
    requests.add(request("GET", "/health/alive", "X-Probe: " + CANARY + "y".repeat(9000)));
    requests.add(request("GET", "/health/alive", "X-Probe: " + CANARY + "\u0001"));
    // Methods HTTP does not define, short and over the parser's length limit.
    requests.add(request("ZQ7CANARY", "/health/alive"));
    requests.add(request("ZQ7CANARYMETHODLONGER", "/health/alive"));
    // Bodies that are not one JSON object.
    requests.add(withBody("PUT", doc + "b1", "{\"" + CANARY + "\": 1", auth));
    requests.add(withBody("PUT", doc + "b2", "{\"a\":\"" + CANARY + "\"} trailing", auth));
    requests.add(
        withBody("POST", "/admin/outbox/purge", "{\"partition\":0,\"through\":0} " + CANARY, auth));
    requests.add(
        withBody(
            "POST",
            "/admin/pipelines/orders/snapshot",
            "{\"tables\":[\"public." + CANARY + "\"]}",
            auth));
    // A 2xx answered before the request body ended (Pekko's "early response" warning quotes the
    // URI): a chunked body that never finishes.
    requests.add(
        ("GET /health/alive?"
                + CANARY
                + "=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
            .getBytes(StandardCharsets.UTF_8));

    List<Reply> replies = new ArrayList<>();
    for (byte[] r : requests) {
      replies.add(send(r));
    }
    int refused = 0;
    for (int i = 0; i < replies.size(); i++) {
      Reply r = replies.get(i);
      assertThat(r.status()).as("request %d should be answered", i).isPositive();
      assertThat(r.body().toLowerCase(Locale.ROOT))
          .as("answer %d (%d) should not echo the canary", i, r.status())
          .doesNotContain(CANARY);
      if (r.status() >= 400) {
        refused++;
      }
    }
    drainPekkoLog();

    List<String> hits = new ArrayList<>();
    List<String> refusals = new ArrayList<>();
    for (ILoggingEvent e : events()) {
      String text = render(e);
      if (text.toLowerCase(Locale.ROOT).contains(CANARY)) {
        hits.add(text);
      }
      if (e.getLoggerName().equals("io.weir.node.http.RequestLog")) {
        refusals.add(e.getFormattedMessage());
      }
    }
    assertThat(hits).as("no log line may carry a value a client sent").isEmpty();
    assertThat(refusals)
        .as("one line per refused request (%d refused): %s", refused, replies)
        .hasSize(refused);
    assertThat(refusals)
        .allMatch(
            l ->
                l.matches(
                    "refused method=(GET|HEAD|PUT|POST|DELETE|PATCH|OPTIONS|TRACE|CONNECT|OTHER|-)"
                        + " route=(unmatched|/[a-z0-9{}/.*-]*) status=[45][0-9][0-9]"
                        + " reason=[a-z][a-z-]*"),
            "method, route template, status and typed reason, nothing else")
        .contains(
            "refused method=GET route=/admin/cluster status=401 reason=unauthenticated",
            "refused method=- route=unmatched status=414 reason=uri-too-long",
            "refused method=- route=unmatched status=431 reason=headers-too-large",
            "refused method=- route=unmatched status=501 reason=not-implemented",
            "refused method=- route=unmatched status=400 reason=bad-request",
            "refused method=GET route=/v1/documents/{collection}/{id} status=400"
                + " reason=invalid-name",
            "refused method=PUT route=/v1/documents/{collection}/{id} status=400"
                + " reason=malformed-json",
            "refused method=POST route=/admin/outbox/purge status=400 reason=malformed-json",
            "refused method=GET route=/admin/outbox/status status=400 reason=bad-request");
  }

  // ---------------------------------------------------------------------------------------------
  // Item 2: a refused snapshot does not echo the caller's table name.

  @Test
  void aRefusedSnapshotDoesNotEchoTheCallersTable() throws Exception {
    Reply r =
        send(
            withBody(
                "POST",
                "/admin/pipelines/orders/snapshot",
                "{\"tables\":[\"public." + CANARY + "<b>\"]}",
                "Authorization: Bearer " + ADMIN));
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.json().path("error").asText()).isEqualTo("bad-request");
    assertThat(r.body()).as("the table as the caller spelt it").doesNotContain(CANARY);
  }

  // ---------------------------------------------------------------------------------------------
  // Item 3: errors the HTTP layer raises itself are typed JSON.

  @Test
  void errorsOfTheHttpLayerAreTypedJson() throws Exception {
    List<Map.Entry<String, byte[]>> cases =
        List.of(
            Map.entry("400 bad-request", request("GET", "/health/alive", "X-Probe: a\u0001b")),
            Map.entry("400 bad-request", request("GET", "/v1/documents/a/b%zz")),
            Map.entry("414 uri-too-long", request("GET", "/v1/documents/a/" + "x".repeat(3000))),
            Map.entry(
                "431 headers-too-large",
                request("GET", "/health/alive", "X-P: " + "y".repeat(9000))),
            Map.entry("501 not-implemented", request("FROBNICATE", "/health/alive")),
            Map.entry(
                "505 http-version-not-supported",
                "GET /health/alive HTTP/3.0\r\nHost: x\r\n\r\n"
                    .getBytes(StandardCharsets.US_ASCII)),
            Map.entry(
                "400 bad-request",
                request(
                    "GET",
                    "/admin/outbox/status?partition=%zz",
                    "Authorization: Bearer " + ADMIN)));
    for (Map.Entry<String, byte[]> c : cases) {
      Reply r = send(c.getValue());
      String[] expected = c.getKey().split(" ");
      assertThat(r.status()).as("%s: %s", c.getKey(), r).isEqualTo(Integer.parseInt(expected[0]));
      assertThat(r.headers().get("content-type"))
          .as("%s should be JSON: %s", c.getKey(), r)
          .startsWith("application/json");
      JsonNode body = r.json();
      assertThat(body.path("error").asText()).as(c.getKey()).isEqualTo(expected[1]);
      assertThat(body.path("message").isTextual()).isTrue();
      assertThat(body.path("retryable").isBoolean()).isTrue();
    }
  }

  @Test
  void aRequestTheNodeDoesNotAnswerInTimeIsTypedJson() throws Exception {
    // The stand-in pipeline manager never answers a status request; the pipeline admin would give
    // up after 10 s, this server's request timeout after 1 s.
    ServerBinding quick =
        bind(
            routes,
            s ->
                s.withTimeouts(
                    s.getTimeouts()
                        .withRequestTimeout(
                            scala.concurrent.duration.Duration.create(1, TimeUnit.SECONDS))));
    try {
      Reply r =
          send(
              quick.localAddress().getPort(),
              request("GET", "/admin/pipelines/orders", "Authorization: Bearer " + ADMIN));
      assertThat(r.status()).as("%s", r).isEqualTo(503);
      assertThat(r.headers().get("content-type")).as("%s", r).startsWith("application/json");
      assertThat(r.json().path("error").asText()).isEqualTo("unavailable");
      assertThat(r.json().path("retryable").asBoolean()).isTrue();
      drainPekkoLog();
      assertThat(
              events().stream()
                  .filter(e -> e.getLoggerName().equals("io.weir.node.http.RequestLog"))
                  .map(ILoggingEvent::getFormattedMessage))
          .contains(
              "refused method=GET route=/admin/pipelines/{name} status=503 reason=unavailable");
      assertThat(events().stream().map(HttpHygieneTest::render))
          .noneMatch(l -> l.contains("/admin/pipelines/orders"));
    } finally {
      quick.unbind().toCompletableFuture().get(10, TimeUnit.SECONDS);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Item 4: bodies are valid UTF-8 and one JSON value; paths percent-decode to valid UTF-8.

  @Test
  void anOverlongUtf8SequenceInABodyIsMalformedJson() throws Exception {
    String auth = "Authorization: Bearer " + ADMIN;
    // {"a":"<C0 AF>"}: an overlong spelling of "/" that Jackson would store as "/".
    byte[] overlong =
        concat(
            "{\"a\":\"".getBytes(StandardCharsets.US_ASCII),
            new byte[] {(byte) 0xC0, (byte) 0xAF},
            "\"}".getBytes(StandardCharsets.US_ASCII));
    Reply put = send(withBody("PUT", "/v1/documents/things/overlong", overlong, auth));
    assertThat(put.status()).as("%s", put).isEqualTo(400);
    assertThat(put.json().path("error").asText()).isEqualTo("malformed-json");
    assertThat(send(request("GET", "/v1/documents/things/overlong", auth)).status())
        .as("nothing stored")
        .isEqualTo(404);
    // An encoded surrogate (ED A0 80) and a lone continuation byte, in the purge route's body.
    for (byte[] bad :
        List.of(new byte[] {(byte) 0xED, (byte) 0xA0, (byte) 0x80}, new byte[] {(byte) 0x80})) {
      byte[] body =
          concat(
              "{\"partition\":0,\"through\":0,\"x\":\"".getBytes(StandardCharsets.US_ASCII),
              bad,
              "\"}".getBytes(StandardCharsets.US_ASCII));
      Reply r = send(withBody("POST", "/admin/outbox/purge", body, auth));
      assertThat(r.status()).as("%s", r).isEqualTo(400);
      assertThat(r.json().path("error").asText()).isEqualTo("malformed-json");
    }
    Reply ok =
        send(
            withBody(
                "PUT",
                "/v1/documents/things/utf8",
                "{\"a\":\"\u00e9\u20ac\ud83d\ude00\"}".getBytes(StandardCharsets.UTF_8),
                auth));
    assertThat(ok.status()).as("valid UTF-8 is stored: %s", ok).isEqualTo(200);
  }

  @Test
  void trailingContentAfterTheJsonBodyIsRefusedOnEveryRoute() throws Exception {
    String auth = "Authorization: Bearer " + ADMIN;
    Map<String, String> routes = new LinkedHashMap<>();
    routes.put("/admin/outbox/purge", "{\"partition\":0,\"through\":0} {}");
    routes.put("/admin/pipelines/orders/snapshot", "{\"tables\":[]} x");
    for (Map.Entry<String, String> e : routes.entrySet()) {
      Reply r = send(withBody("POST", e.getKey(), e.getValue(), auth));
      assertThat(r.status()).as("%s: %s", e.getKey(), r).isEqualTo(400);
      assertThat(r.json().path("error").asText()).as(e.getKey()).isEqualTo("malformed-json");
    }
    Reply doc = send(withBody("PUT", "/v1/documents/things/t", "{\"a\":1} {\"b\":2}", auth));
    assertThat(doc.status()).isEqualTo(400);
    assertThat(doc.json().path("error").asText()).isEqualTo("malformed-json");
  }

  @Test
  void aPathSegmentThatIsNotPercentEncodedUtf8IsAnInvalidName() throws Exception {
    String auth = "Authorization: Bearer " + ADMIN;
    Reply first = send(withBody("PUT", "/v1/documents/things/a%FF", "{\"v\":1}", auth));
    assertThat(first.status()).as("%%FF: %s", first).isEqualTo(400);
    assertThat(first.json().path("error").asText()).isEqualTo("invalid-name");
    for (String id : List.of("a%FE", "a%C0%AF", "a%ED%A0%80", "a%E2%82")) {
      Reply r = send(request("GET", "/v1/documents/things/" + id, auth));
      assertThat(r.status()).as("%s: %s", id, r).isEqualTo(400);
      assertThat(r.json().path("error").asText()).isEqualTo("invalid-name");
    }
    Reply collection = send(request("GET", "/v1/documents/th%FFings/a", auth));
    assertThat(collection.json().path("error").asText()).isEqualTo("invalid-name");
    Reply valid = send(withBody("PUT", "/v1/documents/things/caf%C3%A9", "{\"v\":1}", auth));
    assertThat(valid.status()).as("valid UTF-8 is a fine id: %s", valid).isEqualTo(200);
    assertThat(valid.json().path("id").asText()).isEqualTo("caf\u00e9");
    Reply replacement = send(request("GET", "/v1/documents/things/caf%EF%BF%BD", auth));
    assertThat(replacement.status())
        .as("U+FFFD spelt validly is another id, not an alias of the first")
        .isEqualTo(404);
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * Waits until every line Pekko logged so far has reached the captured log: Pekko's log events go
   * through its event stream to the SLF4J logger actor in the order they were published, so once a
   * marker published now has arrived, so has everything before it.
   */
  private void drainPekkoLog() {
    String marker = "log-drained-" + java.util.UUID.randomUUID();
    org.apache.pekko.actor.typed.javadsl.Adapter.toClassic(kit.system()).log().warning(marker);
    org.awaitility.Awaitility.await("Pekko's log reaches the captured lines")
        .atMost(java.time.Duration.ofSeconds(60))
        .pollInterval(java.time.Duration.ofMillis(20))
        .until(() -> events().stream().anyMatch(e -> e.getFormattedMessage().equals(marker)));
  }

  private List<ILoggingEvent> events() {
    synchronized (logged) {
      return new ArrayList<>(logged.list);
    }
  }

  /** Everything of a log event that an appender could write. */
  private static String render(ILoggingEvent e) {
    StringBuilder out = new StringBuilder();
    out.append(e.getLoggerName()).append(' ').append(e.getLevel()).append(' ');
    out.append(e.getThreadName()).append(' ').append(e.getMDCPropertyMap()).append(' ');
    out.append(e.getFormattedMessage());
    for (IThrowableProxy t = e.getThrowableProxy(); t != null; t = t.getCause()) {
      out.append(" | ").append(t.getClassName()).append(": ").append(t.getMessage());
    }
    return out.toString();
  }

  private static byte[] request(String method, String target, String... headers) {
    return withBody(method, target, (byte[]) null, headers);
  }

  private static byte[] withBody(String method, String target, String body, String... headers) {
    return withBody(method, target, body.getBytes(StandardCharsets.UTF_8), headers);
  }

  /**
   * One HTTP/1.1 request in UTF-8 with {@code Connection: close}; a Content-Length for the body
   * unless a header line gives one.
   */
  private static byte[] withBody(String method, String target, byte[] body, String... headers) {
    StringBuilder head = new StringBuilder();
    head.append(method).append(' ').append(target).append(" HTTP/1.1\r\n");
    boolean host = false;
    boolean length = false;
    for (String h : headers) {
      host |= h.regionMatches(true, 0, "Host:", 0, 5);
      length |= h.regionMatches(true, 0, "Content-Length:", 0, 15);
    }
    if (!host) {
      head.append("Host: 127.0.0.1\r\n");
    }
    head.append("Connection: close\r\n");
    for (String h : headers) {
      head.append(h).append("\r\n");
    }
    if (body != null && !length) {
      head.append("Content-Length: ").append(body.length).append("\r\n");
    }
    head.append("\r\n");
    return concat(
        head.toString().getBytes(StandardCharsets.UTF_8), body == null ? new byte[0] : body);
  }

  private static byte[] concat(byte[]... parts) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (byte[] p : parts) {
      out.writeBytes(p);
    }
    return out.toByteArray();
  }

  /** An answer as read off the socket. */
  record Reply(int status, Map<String, String> headers, String body) {
    JsonNode json() throws IOException {
      return new ObjectMapper().readTree(body);
    }

    @Override
    public String toString() {
      return status + " " + headers.get("content-type") + " " + body;
    }
  }

  /** Sends {@code request} on a new connection and reads one answer (status -1: none came). */
  private Reply send(byte[] request) throws IOException {
    return send(binding.localAddress().getPort(), request);
  }

  private static Reply send(int port, byte[] request) throws IOException {
    try (Socket s = new Socket("127.0.0.1", port)) {
      s.setSoTimeout(20_000);
      OutputStream out = s.getOutputStream();
      try {
        out.write(request);
        out.flush();
      } catch (IOException e) {
        // The server may answer and close before a long request is written: read its answer.
      }
      return read(s.getInputStream());
    }
  }

  private static Reply read(InputStream in) throws IOException {
    ByteArrayOutputStream head = new ByteArrayOutputStream();
    int matched = 0;
    while (matched < 4) {
      int b;
      try {
        b = in.read();
      } catch (IOException e) {
        b = -1;
      }
      if (b < 0) {
        return new Reply(-1, Map.of(), head.toString(StandardCharsets.ISO_8859_1));
      }
      head.write(b);
      matched = (b == (matched % 2 == 0 ? '\r' : '\n')) ? matched + 1 : (b == '\r' ? 1 : 0);
    }
    String[] lines = head.toString(StandardCharsets.ISO_8859_1).split("\r\n");
    int status = Integer.parseInt(lines[0].split(" ")[1]);
    Map<String, String> headers = new LinkedHashMap<>();
    for (int i = 1; i < lines.length; i++) {
      int colon = lines[i].indexOf(':');
      if (colon > 0) {
        headers.put(
            lines[i].substring(0, colon).trim().toLowerCase(Locale.ROOT),
            lines[i].substring(colon + 1).trim());
      }
    }
    int length = Integer.parseInt(headers.getOrDefault("content-length", "0"));
    byte[] body = in.readNBytes(length);
    return new Reply(status, headers, new String(body, StandardCharsets.UTF_8));
  }
}
