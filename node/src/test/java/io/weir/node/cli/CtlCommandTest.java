package io.weir.node.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpServer;
import io.weir.node.Main;
import io.weir.persistence.testing.TestPorts;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code weir ctl} in-process against a scripted HTTP server standing in for a node's admin API:
 * argument parsing, where the address and token come from, the requests each command sends, exit
 * statuses and what is printed. CliIT runs the same commands against a real node.
 */
class CtlCommandTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** One request the scripted node received. */
  record Request(String method, String path, String query, String authorization, String body) {}

  private HttpServer server;
  private final List<Request> requests = new ArrayList<>();
  private final Map<String, Deque<String[]>> replies = new HashMap<>();
  private String url;

  @TempDir Path dir;

  @BeforeEach
  void startServer() throws IOException {
    server =
        TestPorts.bound(
            port -> {
              try {
                return HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
              } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
              }
            });
    server.createContext(
        "/",
        exchange -> {
          String body =
              new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
          String key = exchange.getRequestMethod() + " " + exchange.getRequestURI().getRawPath();
          synchronized (requests) {
            requests.add(
                new Request(
                    exchange.getRequestMethod(),
                    exchange.getRequestURI().getRawPath(),
                    exchange.getRequestURI().getRawQuery(),
                    exchange.getRequestHeaders().getFirst("Authorization"),
                    body));
          }
          Deque<String[]> queue = replies.get(key);
          String[] reply =
              queue == null || queue.isEmpty()
                  ? new String[] {
                    "404",
                    "{\"error\":\"not-found\",\"message\":\"no such resource\",\"retryable\":false}",
                    "application/json"
                  }
                  : queue.size() == 1 ? queue.peek() : queue.poll();
          byte[] bytes = reply[1].getBytes(StandardCharsets.UTF_8);
          exchange.getResponseHeaders().add("Content-Type", reply[2]);
          exchange.sendResponseHeaders(Integer.parseInt(reply[0]), bytes.length);
          exchange.getResponseBody().write(bytes);
          exchange.close();
        });
    server.start();
    url = "http://127.0.0.1:" + server.getAddress().getPort();
  }

  @AfterEach
  void stopServer() {
    server.stop(0);
  }

  /** Scripts the replies to {@code method path}, in turn; the last one repeats. */
  private void reply(String methodAndPath, int status, String... bodies) {
    Deque<String[]> queue = replies.computeIfAbsent(methodAndPath, k -> new ArrayDeque<>());
    for (String b : bodies) {
      queue.add(new String[] {Integer.toString(status), b, "application/json"});
    }
  }

  record Run(int exit, String out, String err) {}

  private Run run(Map<String, String> env, String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    var cli = Main.commandLine(env);
    cli.setOut(new PrintWriter(out, true));
    cli.setErr(new PrintWriter(err, true));
    int exit = cli.execute(args);
    return new Run(exit, out.toString(), err.toString());
  }

  private Run ctl(String... args) {
    List<String> all = new ArrayList<>(List.of("ctl", "--url", url, "--token", "flag-token"));
    all.addAll(List.of(args));
    return run(Map.of(), all.toArray(String[]::new));
  }

  private Request only() {
    assertThat(requests).as("exactly one request should have been sent").hasSize(1);
    return requests.get(0);
  }

  // ---- usage errors: status 2 ----

  @Test
  void withoutACommandTheUsageIsPrintedAndTheStatusIsTwo() {
    Run bare = run(Map.of());
    assertThat(bare.exit()).as("a bare weir is a usage error").isEqualTo(2);
    assertThat(bare.err()).contains("Usage: weir").contains("node").contains("ctl");
    Run ctl = run(Map.of(), "ctl");
    assertThat(ctl.exit()).isEqualTo(2);
    assertThat(ctl.err()).contains("Usage: weir ctl").contains("Exit status:");
    Run group = run(Map.of(), "ctl", "pipelines");
    assertThat(group.exit()).isEqualTo(2);
    assertThat(group.err()).contains("Usage: weir ctl pipelines").contains("snapshot");
    assertThat(requests).as("no usage error reaches the node").isEmpty();
  }

  @Test
  void malformedArgumentsAreUsageErrors() {
    assertThat(ctl("bogus").exit()).isEqualTo(2);
    assertThat(ctl("pipelines", "status").exit()).as("missing NAME").isEqualTo(2);
    assertThat(ctl("outbox", "purge", "--partition", "x", "--through", "1").exit())
        .as("a partition that is no number")
        .isEqualTo(2);
    assertThat(ctl("outbox", "purge", "--partition", "1").exit())
        .as("--through is required")
        .isEqualTo(2);
    assertThat(ctl("grants", "grant", "alice", "orders").exit())
        .as("GRANT is required")
        .isEqualTo(2);
    assertThat(ctl("projections", "read", "--partition", "1", "--consumer", "c").exit())
        .as("--generation is required")
        .isEqualTo(2);
    Run badUrl = run(Map.of(), "ctl", "--url", "ftp://127.0.0.1:1", "cluster", "status");
    assertThat(badUrl.exit()).isEqualTo(2);
    assertThat(badUrl.err()).contains("--url must be http(s)://host:port");
    assertThat(ctl("--timeout", "0", "cluster", "status").exit()).isEqualTo(2);
    Run both =
        ctl("--insecure", "--ca-cert", dir.resolve("ca.pem").toString(), "cluster", "status");
    assertThat(both.exit()).isEqualTo(2);
    assertThat(both.err()).contains("exclude each other");
    Run badCa = ctl("--ca-cert", dir.resolve("missing.pem").toString(), "cluster", "status");
    assertThat(badCa.exit()).isEqualTo(2);
    assertThat(badCa.err()).contains("cannot use the CA certificate file");
    assertThat(requests).as("no usage error reaches the node").isEmpty();
  }

  @Test
  void versionAndHelpExitZero() {
    Run version = run(Map.of(), "ctl", "--version");
    assertThat(version.exit()).isZero();
    assertThat(version.out()).startsWith("weir ");
    Run help = run(Map.of(), "ctl", "projections", "commit", "--help");
    assertThat(help.exit()).isZero();
    assertThat(help.out()).contains("--batch-token").contains("--effects").contains("--url");
  }

  // ---- where the address and token come from ----

  @Test
  void theAddressAndTokenComeFromTheEnvironmentUnlessOptionsSayOtherwise() throws Exception {
    reply(
        "GET /admin/partitions",
        200,
        "{\"count\":4,\"running\":4,\"byNode\":{\"pekko://weir@a:1\":4}}");
    Run fromEnv =
        run(
            Map.of("WEIR_URL", url, "WEIR_ADMIN_TOKEN", "env-token"),
            "ctl",
            "cluster",
            "partitions");
    assertThat(fromEnv.exit()).as(fromEnv.err()).isZero();
    assertThat(requests.get(0).authorization()).isEqualTo("Bearer env-token");

    Run flag =
        run(
            Map.of("WEIR_URL", "http://127.0.0.1:1", "WEIR_ADMIN_TOKEN", "env-token"),
            "ctl",
            "cluster",
            "partitions",
            "--url",
            url,
            "--token",
            "flag-token");
    assertThat(flag.exit()).as(flag.err()).isZero();
    assertThat(requests.get(1).authorization())
        .as("--token and --url win over the environment")
        .isEqualTo("Bearer flag-token");

    Path file = dir.resolve("token");
    Files.writeString(file, "file-token\n");
    Run fromFile =
        run(
            Map.of("WEIR_URL", url, "WEIR_ADMIN_TOKEN", "env-token"),
            "ctl",
            "--token-file",
            file.toString(),
            "cluster",
            "partitions");
    assertThat(fromFile.exit()).as(fromFile.err()).isZero();
    assertThat(requests.get(2).authorization())
        .as("the file's token, trimmed")
        .isEqualTo("Bearer file-token");

    Run fromFileEnv =
        run(
            Map.of("WEIR_URL", url, "WEIR_ADMIN_TOKEN_FILE", file.toString()),
            "ctl",
            "cluster",
            "partitions");
    assertThat(fromFileEnv.exit()).as(fromFileEnv.err()).isZero();
    assertThat(requests.get(3).authorization()).isEqualTo("Bearer file-token");

    Run none = run(Map.of("WEIR_URL", url), "ctl", "cluster", "partitions");
    assertThat(none.exit()).isZero();
    assertThat(requests.get(4).authorization()).as("no token: no Authorization header").isNull();

    Run byPort =
        run(
            Map.of(
                "WEIR_HTTP_PORT", Integer.toString(server.getAddress().getPort()), "WEIR_URL", ""),
            "ctl",
            "cluster",
            "partitions");
    assertThat(byPort.exit())
        .as("without WEIR_URL, the node's own WEIR_HTTP_PORT on 127.0.0.1: " + byPort.err())
        .isZero();
    assertThat(requests).hasSize(6);

    Run missingFile =
        run(
            Map.of("WEIR_URL", url),
            "ctl",
            "--token-file",
            dir.resolve("nope").toString(),
            "cluster",
            "partitions");
    assertThat(missingFile.exit()).isEqualTo(2);
    assertThat(missingFile.err())
        .contains("cannot read the token file")
        .doesNotContain("file-token");
    assertThat(requests).hasSize(6);
  }

  @Test
  void sharedOptionsWorkBeforeAndAfterTheCommand() throws Exception {
    String list = "{\"owner\":\"pekko://weir@a:1\",\"pipelines\":[]}";
    reply("GET /admin/pipelines", 200, list);
    Run before =
        run(Map.of(), "ctl", "--json", "--url", url, "--timeout", "5", "pipelines", "list");
    Run after = run(Map.of(), "ctl", "pipelines", "list", "--json", "--url", url, "--timeout", "5");
    Run middle = run(Map.of(), "ctl", "--url", url, "pipelines", "--json", "list");
    for (Run r : List.of(before, after, middle)) {
      assertThat(r.exit()).as(r.err()).isZero();
      assertThat(JSON.readTree(r.out()))
          .as("--json prints the node's JSON wherever it is given")
          .isEqualTo(JSON.readTree(list));
    }
  }

  // ---- failures: status 1 and 3 ----

  @Test
  void aRefusedRequestPrintsTheCodeAndMessageAndExitsOne() throws Exception {
    String forbidden =
        "{\"error\":\"forbidden\",\"message\":\"this operation requires a cluster administrator\",\"retryable\":false}";
    reply("GET /admin/cluster", 403, forbidden);
    Run r = ctl("cluster", "status");
    assertThat(r.exit()).isEqualTo(1);
    assertThat(r.err().strip())
        .isEqualTo("forbidden: this operation requires a cluster administrator");
    assertThat(r.out()).isEmpty();

    Run json = ctl("cluster", "status", "--json");
    assertThat(json.exit()).isEqualTo(1);
    assertThat(JSON.readTree(json.out()))
        .as("--json puts the error body on stdout")
        .isEqualTo(JSON.readTree(forbidden));
    assertThat(json.err()).contains("forbidden: ");

    reply(
        "POST /admin/pipelines/demo/start",
        503,
        "{\"error\":\"unavailable\",\"message\":\"retry\",\"retryable\":true}");
    Run retryable = ctl("pipelines", "start", "demo");
    assertThat(retryable.exit()).isEqualTo(1);
    assertThat(retryable.err().strip()).isEqualTo("unavailable: retry (retryable)");
  }

  @Test
  void aReplyThatIsNotAWeirErrorIsRefusedWithoutEchoingIt() {
    replies
        .computeIfAbsent("GET /admin/cluster", k -> new ArrayDeque<>())
        .add(new String[] {"502", "<html>bad gateway secret-ish</html>", "text/html"});
    Run r = ctl("cluster", "status", "--json");
    assertThat(r.exit()).isEqualTo(1);
    assertThat(r.err().strip()).isEqualTo("http-502: the reply is not a Weir error body");
    assertThat(r.out()).isEmpty();
    assertThat(r.err()).doesNotContain("secret-ish");

    replies
        .computeIfAbsent("GET /admin/partitions", k -> new ArrayDeque<>())
        .add(new String[] {"200", "hello", "text/plain"});
    Run notJson = ctl("cluster", "partitions");
    assertThat(notJson.exit()).isEqualTo(1);
    assertThat(notJson.err()).startsWith("unexpected-reply: ");
  }

  @Test
  void anUnreachableNodeExitsThree() throws Exception {
    int closed = TestPorts.free(); // nothing listens there, and no other test takes it
    Run r = run(Map.of(), "ctl", "--url", "http://127.0.0.1:" + closed, "pipelines", "list");
    assertThat(r.exit()).isEqualTo(3);
    assertThat(r.err().strip())
        .isEqualTo(
            "unreachable: cannot reach the node at http://127.0.0.1:"
                + closed
                + " (connection refused)");
    Run unknownHost =
        run(
            Map.of(),
            "ctl",
            "--url",
            "http://no-such-host.invalid:8080",
            "--token",
            "t",
            "pipelines",
            "list");
    assertThat(unknownHost.exit()).isEqualTo(3);
    assertThat(unknownHost.err())
        .startsWith("unreachable: ")
        .doesNotContain("Bearer")
        .doesNotContain(" t ");
  }

  @Test
  void httpsIsCheckedAgainstTheCaFileOrNotAtAllWithInsecure() throws Exception {
    // A self-signed certificate for 127.0.0.1, made by the JDK's keytool.
    Path store = dir.resolve("node.p12");
    Path pem = dir.resolve("node.pem");
    String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
    for (List<String> command :
        List.of(
            List.of(
                keytool,
                "-genkeypair",
                "-keystore",
                store.toString(),
                "-storetype",
                "PKCS12",
                "-storepass",
                "changeit",
                "-alias",
                "node",
                "-keyalg",
                "EC",
                "-groupname",
                "secp256r1",
                "-dname",
                "CN=weir-test",
                "-ext",
                "SAN=ip:127.0.0.1",
                "-validity",
                "2"),
            List.of(
                keytool,
                "-exportcert",
                "-rfc",
                "-keystore",
                store.toString(),
                "-storepass",
                "changeit",
                "-alias",
                "node",
                "-file",
                pem.toString()))) {
      Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
      String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(p.waitFor()).as("keytool: " + output).isZero();
    }
    java.security.KeyStore ks = java.security.KeyStore.getInstance("PKCS12");
    try (var in = Files.newInputStream(store)) {
      ks.load(in, "changeit".toCharArray());
    }
    javax.net.ssl.KeyManagerFactory kmf =
        javax.net.ssl.KeyManagerFactory.getInstance(
            javax.net.ssl.KeyManagerFactory.getDefaultAlgorithm());
    kmf.init(ks, "changeit".toCharArray());
    javax.net.ssl.SSLContext tls = javax.net.ssl.SSLContext.getInstance("TLS");
    tls.init(kmf.getKeyManagers(), null, null);
    com.sun.net.httpserver.HttpsServer https =
        TestPorts.bound(
            port -> {
              try {
                return com.sun.net.httpserver.HttpsServer.create(
                    new InetSocketAddress("127.0.0.1", port), 0);
              } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
              }
            });
    https.setHttpsConfigurator(new com.sun.net.httpserver.HttpsConfigurator(tls));
    https.createContext(
        "/",
        exchange -> {
          byte[] bytes = "{\"owner\":null,\"pipelines\":[]}".getBytes(StandardCharsets.UTF_8);
          exchange.getResponseHeaders().add("Content-Type", "application/json");
          exchange.sendResponseHeaders(200, bytes.length);
          exchange.getResponseBody().write(bytes);
          exchange.close();
        });
    https.start();
    try {
      String secure = "https://127.0.0.1:" + https.getAddress().getPort();
      Run untrusted = run(Map.of(), "ctl", "--url", secure, "pipelines", "list");
      assertThat(untrusted.exit())
          .as("a certificate the JVM does not trust: not reachable")
          .isEqualTo(3);
      assertThat(untrusted.err()).startsWith("unreachable: ").contains("TLS handshake failed");
      Run trusted =
          run(Map.of(), "ctl", "--url", secure, "--ca-cert", pem.toString(), "pipelines", "list");
      assertThat(trusted.exit()).as(trusted.err()).isZero();
      Run fromEnv =
          run(
              Map.of("WEIR_URL", secure, "WEIR_CA_CERT", pem.toString()),
              "ctl",
              "pipelines",
              "list");
      assertThat(fromEnv.exit()).as(fromEnv.err()).isZero();
      Run otherName =
          run(
              Map.of(),
              "ctl",
              "--url",
              secure.replace("127.0.0.1", "localhost"),
              "--ca-cert",
              pem.toString(),
              "pipelines",
              "list");
      assertThat(otherName.exit())
          .as("the certificate names 127.0.0.1, not localhost: the host name is checked")
          .isEqualTo(3);
      Run insecure =
          run(
              Map.of(),
              "ctl",
              "--url",
              secure.replace("127.0.0.1", "localhost"),
              "--insecure",
              "pipelines",
              "list");
      assertThat(insecure.exit()).as(insecure.err()).isZero();
      assertThat(insecure.err()).contains("warning: --insecure");
    } finally {
      https.stop(0);
    }
  }

  // ---- what each command sends ----

  @Test
  void grantsSendTheCollectionTheGrantAndAField() throws Exception {
    reply("POST /admin/principals/alice/grants", 200, "{\"done\":true}");
    reply("POST /admin/principals/alice/grants/revoke", 200, "{\"done\":true}");
    Run g = ctl("grants", "grant", "alice", "orders", "DocumentsRead");
    assertThat(g.exit()).as(g.err()).isZero();
    assertThat(g.out().strip()).isEqualTo("granted DocumentsRead on orders to alice");
    Run f = ctl("grants", "revoke", "alice", "orders", "FieldRead:ssn");
    assertThat(f.exit()).as(f.err()).isZero();
    assertThat(requests)
        .extracting(Request::path)
        .containsExactly("/admin/principals/alice/grants", "/admin/principals/alice/grants/revoke");
    assertThat(JSON.readTree(requests.get(0).body()))
        .isEqualTo(JSON.readTree("{\"collection\":\"orders\",\"grant\":\"DocumentsRead\"}"));
    assertThat(JSON.readTree(requests.get(1).body()))
        .isEqualTo(
            JSON.readTree("{\"collection\":\"orders\",\"grant\":\"FieldRead\",\"field\":\"ssn\"}"));
  }

  @Test
  void principalsCreatePrintsOnlyTheTokenOnStdout() throws Exception {
    reply("POST /admin/principals", 201, "{\"id\":\"bob\",\"token\":\"tok-123\"}");
    Run r = ctl("principals", "create", "bob", "--group", "ops", "--group", "eu");
    assertThat(r.exit()).as(r.err()).isZero();
    assertThat(r.out())
        .as("stdout holds the token alone, for TOKEN=$(weir ctl principals create ...)")
        .isEqualTo("tok-123\n");
    assertThat(r.err()).contains("principal bob created");
    assertThat(JSON.readTree(only().body()))
        .isEqualTo(JSON.readTree("{\"id\":\"bob\",\"groups\":[\"ops\",\"eu\"]}"));
  }

  @Test
  void principalsDeleteRevokesWithAnEncodedId() {
    reply("POST /admin/principals/svc%40eu/revoke", 200, "{\"done\":true}");
    Run r = ctl("principals", "delete", "svc@eu");
    assertThat(r.exit()).as(r.err()).isZero();
    assertThat(only().path()).isEqualTo("/admin/principals/svc%40eu/revoke");
  }

  @Test
  void outboxCommandsSendTheirParameters() throws Exception {
    reply(
        "GET /admin/outbox/status",
        200,
        "{\"partition\":3,\"documents\":1,\"outboxFirst\":1,\"outboxNext\":5,"
            + "\"outboxEntries\":4,\"outboxBytes\":400,\"journalEvents\":9,\"watermarks\":{},\"consumers\":[]}");
    reply(
        "POST /admin/outbox/purge",
        200,
        "{\"partition\":3,\"outboxFirst\":3,\"outboxNext\":5,\"purged\":2,\"more\":true,\"pinned\":false}",
        "{\"partition\":3,\"outboxFirst\":4,\"outboxNext\":5,\"purged\":1,\"more\":false,\"pinned\":false}");
    Run status = ctl("outbox", "status", "--partition", "3");
    assertThat(status.exit()).as(status.err()).isZero();
    assertThat(requests.get(0).query()).isEqualTo("partition=3");
    assertThat(status.out()).contains("entries:").contains("no consumers");
    Run purge = ctl("outbox", "purge", "--partition", "3", "--through", "3", "--all");
    assertThat(purge.exit()).as(purge.err()).isZero();
    assertThat(requests).hasSize(3);
    assertThat(JSON.readTree(requests.get(1).body()))
        .isEqualTo(JSON.readTree("{\"partition\":3,\"through\":3}"));
    assertThat(purge.out().strip())
        .as("--all adds up every request")
        .isEqualTo("partition 3: purged 3 entries; outbox now 4..5");
  }

  @Test
  void projectionCommitReadsItsEffectsFromAFile() throws Exception {
    reply(
        "POST /admin/projections/commit",
        200,
        "{\"partition\":2,\"consumer\":\"c\",\"generation\":1,\"checkpoint\":7,"
            + "\"alreadyProcessed\":false,\"receipt\":{\"revisions\":[3]}}");
    Path effects = dir.resolve("effects.json");
    Files.writeString(
        effects,
        "[{\"op\":\"upsert\",\"collection\":\"totals\",\"id\":\"a\",\"expectedRevision\":0,"
            + "\"document\":{\"n\":1}}]");
    Run r =
        ctl(
            "projections",
            "commit",
            "--batch-token",
            "bt-1",
            "--command-id",
            "k1",
            "--effects",
            effects.toString());
    assertThat(r.exit()).as(r.err()).isZero();
    assertThat(r.out().strip())
        .isEqualTo("committed: partition 2 consumer c generation 1, checkpoint 7, 1 effects");
    JsonNode body = JSON.readTree(only().body());
    assertThat(body.get("token").asText()).isEqualTo("bt-1");
    assertThat(body.get("commandId").asText()).isEqualTo("k1");
    assertThat(body.get("effects").get(0).get("document").get("n").asInt()).isEqualTo(1);
    Files.writeString(effects, "{\"not\":\"an array\"}");
    assertThat(
            ctl("projections", "commit", "--batch-token", "bt-1", "--effects", effects.toString())
                .exit())
        .isEqualTo(2);
  }

  // ---- snapshot progress ----

  private static String status(String state, String snapshot) {
    return "{\"name\":\"demo\",\"state\":\""
        + state
        + "\",\"reason\":null,\"detail\":null,\"slot\":\"s\","
        + "\"confirmedLsn\":\"0/1\",\"lagBytes\":0,\"transactions\":0,\"rows\":0,\"restarts\":0,\"incarnation\":null,"
        + "\"snapshot\":"
        + snapshot
        + "}";
  }

  private static String snap(String state, int tablesDone, long rows) {
    return "{\"kind\":\"incremental\",\"state\":\""
        + state
        + "\",\"tablesDone\":"
        + tablesDone
        + ",\"tablesTotal\":2,"
        + "\"rowsDone\":"
        + rows
        + ",\"rowsEstimated\":1000,\"table\":\"public.t\",\"elapsedMillis\":1500}";
  }

  @Test
  void snapshotPollsTheStatusAndShowsProgressUntilDone() throws Exception {
    reply("POST /admin/pipelines/demo/snapshot", 202, status("running", snap("running", 0, 0)));
    reply(
        "GET /admin/pipelines/demo",
        200,
        status("running", snap("running", 1, 500)),
        status("running", snap("done", 2, 1000)));
    Run r =
        ctl(
            "pipelines",
            "snapshot",
            "demo",
            "--table",
            "public.t",
            "--table",
            "public.u",
            "--interval",
            "100");
    assertThat(r.exit()).as(r.err()).isZero();
    assertThat(JSON.readTree(requests.get(0).body()))
        .isEqualTo(JSON.readTree("{\"tables\":[\"public.t\",\"public.u\"]}"));
    assertThat(requests).extracting(Request::method).containsExactly("POST", "GET", "GET");
    assertThat(r.err())
        .as("progress goes to stderr")
        .contains("incremental snapshot running")
        .contains("100% tables 2/2");
    assertThat(r.out().strip())
        .isEqualTo("pipeline demo: snapshot done, 2 tables, 1,000 rows in 1s");
  }

  @Test
  void aFailedSnapshotExitsOne() throws Exception {
    reply("POST /admin/pipelines/demo/snapshot", 202, status("running", snap("running", 0, 0)));
    reply("GET /admin/pipelines/demo", 200, status("running", snap("failed", 0, 10)));
    Run r = ctl("pipelines", "snapshot", "demo", "--interval", "100", "--json");
    assertThat(r.exit()).isEqualTo(1);
    assertThat(requests.get(0).body()).as("no --table: no body, every published table").isEmpty();
    assertThat(r.err()).contains("snapshot-failed: the snapshot of pipeline demo failed");
    assertThat(JSON.readTree(r.out()).get("snapshot").get("state").asText()).isEqualTo("failed");

    reply("POST /admin/pipelines/other/snapshot", 202, status("running", snap("running", 0, 0)));
    reply("GET /admin/pipelines/other", 200, status("halted", snap("running", 0, 10)));
    Run halted = ctl("pipelines", "snapshot", "other", "--interval", "100");
    assertThat(halted.exit()).isEqualTo(1);
    assertThat(halted.err())
        .contains("pipeline-halted: pipeline other is halted before its snapshot finished");
  }

  @Test
  void snapshotWithoutWaitingReturnsAtOnce() {
    reply("POST /admin/pipelines/demo/snapshot", 202, status("running", snap("running", 0, 0)));
    Run r = ctl("pipelines", "snapshot", "demo", "--no-wait");
    assertThat(r.exit()).as(r.err()).isZero();
    assertThat(only().method()).isEqualTo("POST");
    assertThat(r.out()).contains("pipeline demo: incremental snapshot running");
  }

  // ---- tables ----

  @Test
  void pipelineListIsATable() throws Exception {
    reply(
        "GET /admin/pipelines",
        200,
        "{\"owner\":\"pekko://weir@h:1\",\"pipelines\":["
            + status("running", "null")
            + ","
            + status("halted", snap("done", 2, 1000)).replace("\"demo\"", "\"orders\"")
            + "]}");
    Run r = ctl("pipelines", "list");
    assertThat(r.exit()).as(r.err()).isZero();
    assertThat(r.out())
        .isEqualTo(
            """
        pipeline manager on: pekko://weir@h:1

        NAME    STATE    REASON  SLOT  CONFIRMED  LAG-BYTES  TRANSACTIONS  ROWS  RESTARTS  SNAPSHOT
        demo    running  -       s     0/1                0             0     0         0  -
        orders  halted   -       s     0/1                0             0     0         0  incremental done
        """);
  }
}
