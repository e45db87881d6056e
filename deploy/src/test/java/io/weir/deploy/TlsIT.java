package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.weir.persistence.testing.TestCertificates;
import io.weir.persistence.testing.TestPorts;
import io.weir.persistence.testing.TestPostgres;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.security.KeyStore;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Stream;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * TLS end to end, with certificates made at run time (keytool) and a PostgreSQL of the test's own
 * with {@code ssl = on} that rejects every connection without TLS (pg_hba {@code hostnossl ...
 * reject}, replication included):
 *
 * <ul>
 *   <li>two nodes with mutual TLS on remoting (host name verification on) form a cluster, serve
 *       HTTPS only, and reach PostgreSQL with {@code sslmode=verify-full} from every pool and from
 *       a pipeline's replication connection; a pipeline whose source root certificate is another
 *       CA's halts saying so;
 *   <li>a node whose certificate another CA signed, and a node without TLS, never become members;
 *   <li>a wrong PostgreSQL root certificate, a URL host the server's certificate does not name and
 *       a wrong key store password each stop a node at start with status 2 and a value-free
 *       message.
 * </ul>
 */
class TlsIT extends EndToEndTest {
  private static Path base;
  private static Path pgHome;
  private static String pgUrl;
  private static String pgUser;
  private static String pgPassword;
  private static TestCertificates.Authority clusterCa;
  private static TestCertificates.Authority otherCa;
  private static TestCertificates.Leaf nodeCert;
  private static TestCertificates.Leaf rogueCert;
  private static SSLContext trustingClusterCa;

  @BeforeAll
  static void certificatesAndPostgres() throws Exception {
    long t0 = System.nanoTime();
    // As root the server runs as postgres, which must reach its home: a folder it may traverse, in
    // /var/tmp like deploy/bin/pg.sh's own fallback; the certificates' folder stays private.
    base = Files.createTempDirectory(Path.of("/var/tmp"), "weir-tls-it-");
    Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
    Path certs =
        Files.createDirectory(
            base.resolve("certs"),
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    pgHome = base.resolve("pg");
    TestCertificates tc = TestCertificates.in(certs);
    CompletableFuture<Map<String, String>> pg =
        CompletableFuture.supplyAsync(
            () ->
                TestPostgres.pgScript(
                    Map.of(
                        "WEIR_PG_HOME", pgHome.toString(),
                        "WEIR_PG_PORT_BASE", Integer.toString(TestPorts.freeBlock(4))),
                    "start"));
    CompletableFuture<TestCertificates.Leaf> rogue =
        CompletableFuture.supplyAsync(
            () -> {
              otherCa = tc.authority("other-ca");
              return tc.issue(otherCa, "rogue-node", List.of("ip:127.0.0.1"));
            });
    clusterCa = tc.authority("cluster-ca");
    nodeCert = tc.issue(clusterCa, "weir-node", List.of("ip:127.0.0.1", "dns:localhost"));
    // The server's certificate names 127.0.0.1 only, so verify-full through "localhost" must fail.
    TestCertificates.Leaf serverCert =
        tc.issue(clusterCa, "postgres-server", List.of("ip:127.0.0.1"));
    rogueCert = rogue.join();
    Map<String, String> env = pg.join();
    pgUrl = env.get("WEIR_PG_URL");
    pgUser = env.get("WEIR_PG_USER");
    pgPassword = env.get("WEIR_PG_PASSWORD");
    System.out.printf(
        "tls-setup: certificates and a PostgreSQL of the test's own in %.1f s%n",
        (System.nanoTime() - t0) / 1e9);
    enableServerTls(serverCert);

    KeyStore trust = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(clusterCa.trustStore())) {
      trust.load(in, TestCertificates.PASSWORD.toCharArray());
    }
    TrustManagerFactory tmf =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(trust);
    trustingClusterCa = SSLContext.getInstance("TLS");
    trustingClusterCa.init(null, tmf.getTrustManagers(), null);
    System.out.printf(
        "tls-setup: PostgreSQL ssl=on, non-TLS connections rejected, after %.1f s%n",
        (System.nanoTime() - t0) / 1e9);
  }

  /**
   * Installs the server's certificate and key in the data folder (owned by the server's user, key
   * mode 0600, as PostgreSQL demands), turns ssl on, rejects TCP connections without TLS
   * (replication too), and creates the source table and publication of the test's pipelines.
   */
  private static void enableServerTls(TestCertificates.Leaf server) throws Exception {
    Path data = pgHome.resolve("data");
    Path crt =
        Files.copy(
            server.certificate(), data.resolve("server.crt"), StandardCopyOption.REPLACE_EXISTING);
    Path key =
        Files.copy(server.key(), data.resolve("server.key"), StandardCopyOption.REPLACE_EXISTING);
    Files.setPosixFilePermissions(crt, PosixFilePermissions.fromString("rw-r--r--"));
    Files.setPosixFilePermissions(key, PosixFilePermissions.fromString("rw-------"));
    Path hba = data.resolve("pg_hba.conf");
    Files.writeString(
        hba,
        "hostnossl all all 0.0.0.0/0 reject\nhostnossl replication all 0.0.0.0/0 reject\n"
            + Files.readString(hba));
    if (System.getProperty("user.name").equals("root")) {
      UserPrincipal postgres =
          data.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByName("postgres");
      for (Path p : List.of(crt, key, hba)) {
        Files.setOwner(p, postgres);
      }
    }
    try (Connection c = DriverManager.getConnection(pgUrl, pgUser, pgPassword);
        Statement s = c.createStatement()) {
      s.execute("ALTER SYSTEM SET ssl = on");
      s.execute("ALTER SYSTEM SET ssl_cert_file = 'server.crt'");
      s.execute("ALTER SYSTEM SET ssl_key_file = 'server.key'");
      s.execute("SELECT pg_reload_conf()");
    }
    await("PostgreSQL accepts verify-full connections")
        .atMost(Duration.ofSeconds(90))
        .pollInterval(Duration.ofMillis(200))
        .ignoreExceptions()
        .until(
            () -> {
              try (Connection c = admin();
                  ResultSet rs = c.createStatement().executeQuery("SHOW ssl")) {
                return rs.next() && rs.getString(1).equals("on");
              }
            });
    await("plain connections are rejected")
        .atMost(Duration.ofSeconds(90))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> {
              try (Connection c =
                  DriverManager.getConnection(pgUrl + "?sslmode=disable", pgUser, pgPassword)) {
                return false;
              } catch (SQLException e) {
                return true;
              }
            });
    try (Connection c = admin();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.tls_src (id int PRIMARY KEY, note text)");
      s.execute("CREATE PUBLICATION tls_pub FOR TABLE public.tls_src");
      s.execute("CREATE SCHEMA tls_mirror");
      s.execute("CREATE TABLE tls_mirror.tls_src (id int PRIMARY KEY, note text)");
    }
  }

  /** The test's own connection: TLS, verified against the cluster CA. */
  private static Connection admin() throws SQLException {
    Properties p = new Properties();
    p.setProperty("user", pgUser);
    p.setProperty("password", pgPassword);
    p.setProperty("sslmode", "verify-full");
    p.setProperty("sslrootcert", clusterCa.certificate().toString());
    return DriverManager.getConnection(pgUrl, p);
  }

  @AfterAll
  static void destroyPostgresAndCertificates() throws IOException {
    if (pgHome != null) {
      TestPostgres.pgScript(Map.of("WEIR_PG_HOME", pgHome.toString()), "destroy");
    }
    if (base != null) {
      try (Stream<Path> files = Files.walk(base)) {
        files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  /** A node on the test's PostgreSQL with verify-full, named {@code name}. */
  private static NodeProcess.Spec node(String name) {
    return new NodeProcess.Spec(name)
        .env("WEIR_PG_URL", pgUrl)
        .env("WEIR_PG_USER", pgUser)
        .env("WEIR_PG_PASSWORD", pgPassword)
        .env("WEIR_PG_SSLMODE", "verify-full")
        .env("WEIR_PG_SSLROOTCERT", clusterCa.certificate().toString())
        .env("WEIR_PARTITIONS", "8");
  }

  /** Mutual TLS on remoting with {@code leaf}'s key store, trusting {@code ca}. */
  private static NodeProcess.Spec clusterTls(
      NodeProcess.Spec spec, TestCertificates.Leaf leaf, TestCertificates.Authority ca) {
    return spec.env("WEIR_CLUSTER_TLS_KEY_STORE", leaf.keyStore().toString())
        .env("WEIR_CLUSTER_TLS_KEY_STORE_PASSWORD", TestCertificates.PASSWORD)
        .env("WEIR_CLUSTER_TLS_TRUST_STORE", ca.trustStore().toString())
        .env("WEIR_CLUSTER_TLS_TRUST_STORE_PASSWORD", TestCertificates.PASSWORD)
        .prop("weir.cluster.tls.hostname-verification", "on");
  }

  private static NodeProcess.Spec https(NodeProcess.Spec spec) {
    return spec.env("WEIR_HTTP_TLS_KEY_STORE", nodeCert.keyStore().toString())
        .env("WEIR_HTTP_TLS_KEY_STORE_PASSWORD", TestCertificates.PASSWORD)
        .https(trustingClusterCa);
  }

  @Test
  void mutualTlsClusterServesHttpsOnlyAndKeepsOthersOut() throws Exception {
    Path config = base.resolve("pipelines.conf");
    Files.writeString(
        config,
        """
        weir.pipelines {
          tls_mirror { slot = tls_mirror_slot, publications = [tls_pub], sink.target-schema = tls_mirror }
          # Its source is verified against another CA: it must halt, saying TLS is why.
          tls_wrong_ca {
            slot = tls_wrong_slot, publications = [tls_pub], sink.target-schema = tls_wrong
            source.tls { mode = verify-full, root-cert = "%s" }
            max-command-retries = 2, min-backoff = 100ms, max-backoff = 200ms
          }
        }
        """
            .formatted(otherCa.certificate()));
    int seedPort = NodeProcess.freePort();
    String seeds = "127.0.0.1:" + seedPort;
    long t0 = System.nanoTime();
    for (int i = 1; i <= 2; i++) {
      NodeProcess.Spec spec =
          https(clusterTls(node("tls-node-" + i), nodeCert, clusterCa))
              .env("WEIR_SEED_NODES", seeds)
              .args("--config", config.toString());
      if (i == 1) {
        spec.clusterPort(seedPort);
      }
      nodes.add(NodeProcess.start(spec));
    }
    awaitOrDump(
        START_UP,
        "both TLS nodes Up and ready",
        () -> {
          // Asked each time: a node that lost a bind race for its cluster port has a new one.
          Set<String> members =
              Set.of(nodes.get(0).clusterAddress(), nodes.get(1).clusterAddress());
          return nodes.stream()
              .allMatch(
                  n -> {
                    Map<String, String> seen = n.memberStatuses();
                    return seen.keySet().equals(members)
                        && seen.values().stream().allMatch("up"::equals)
                        && n.ready();
                  });
        });
    Set<String> members = Set.of(nodes.get(0).clusterAddress(), nodes.get(1).clusterAddress());
    System.out.printf(
        "tls-cluster: 2 members Up and ready over mutual TLS (TLSv1.3, host names verified) after %.1f s%n",
        (System.nanoTime() - t0) / 1e9);
    for (NodeProcess n : nodes) {
      assertThat(n.log())
          .contains("HTTP on https://")
          .contains("(mutual TLS, TLSv1.3)")
          .contains("PostgreSQL connections: sslmode verify-full")
          .doesNotContain(TestCertificates.PASSWORD)
          .doesNotContain(pgPassword);
    }

    // HTTPS only: a plain HTTP request gets no HTTP answer; a client that does not trust the CA
    // fails.
    NodeProcess first = nodes.get(0);
    HttpClient plain = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    String plainOutcome = outcome(plain, "http://127.0.0.1:" + first.httpPort() + "/health/alive");
    String untrustingOutcome =
        outcome(plain, "https://127.0.0.1:" + first.httpPort() + "/health/alive");
    System.out.println(
        "tls-http: https with the cluster CA trusted: "
            + first.get("/health/alive", false).map(HttpResponse::statusCode).orElse(-1)
            + "; plain http: "
            + plainOutcome
            + "; https without trusting the CA: "
            + untrustingOutcome);
    assertThat(first.getUntil("/health/alive", false).statusCode())
        .as("HTTPS answers")
        .isEqualTo(200);
    assertThat(plainOutcome).as("plain HTTP on the HTTPS port").startsWith("failed");
    assertThat(untrustingOutcome).as("HTTPS without trusting the cluster CA").startsWith("failed");

    // CDC over verify-full: a row reaches the mirror through the pipeline's replication connection.
    awaitRunning(first, "tls_mirror");
    try (Connection c = admin();
        Statement s = c.createStatement()) {
      s.execute("INSERT INTO public.tls_src VALUES (1, 'over tls')");
    }
    await("the row is mirrored")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(200))
        .ignoreExceptions()
        .until(
            () -> {
              try (Connection c = admin();
                  ResultSet rs =
                      c.createStatement().executeQuery("SELECT count(*) FROM tls_mirror.tls_src")) {
                return rs.next() && rs.getInt(1) == 1;
              }
            });
    awaitOrDump(
        Duration.ofSeconds(120),
        "the pipeline with the wrong source CA halts",
        () ->
            first
                .pipeline("tls_wrong_ca")
                .map(p -> p.get("state").asText().equals("halted"))
                .orElse(false));
    String halted = first.pipelineNow("tls_wrong_ca").toString();
    System.out.println(
        "tls-cdc: tls_mirror streamed a row over verify-full; tls_wrong_ca: " + halted);
    assertThat(halted)
        .contains("retries-exhausted")
        .contains("TLS to the source")
        .contains("not signed by a certificate authority");

    // Every connection of the nodes to PostgreSQL (Weir's pools, the journal's, the pipelines') is
    // TLS
    // (the server would reject any other), a replication connection among them.
    try (Connection c = admin();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT count(*), count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE a.backend_type = 'walsender' AND s.ssl),"
                        + " string_agg(DISTINCT s.version, ',') FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)"
                        + " WHERE a.client_addr IS NOT NULL AND a.pid <> pg_backend_pid()")) {
      rs.next();
      System.out.printf(
          "tls-postgres: %d node connections, %d with TLS (%s), %d of them replication%n",
          rs.getInt(1), rs.getInt(2), rs.getString(4), rs.getInt(3));
      assertThat(rs.getInt(1)).isPositive();
      assertThat(rs.getInt(2)).isEqualTo(rs.getInt(1));
      assertThat(rs.getInt(3)).as("the pipeline's walsender").isPositive();
    }

    // Outsiders: a node whose certificate another CA signed, and a node without TLS, try to join.
    NodeProcess otherCaNode =
        NodeProcess.start(
            clusterTls(node("tls-rogue-other-ca"), rogueCert, otherCa)
                .env("WEIR_SEED_NODES", seeds));
    NodeProcess plainNode =
        NodeProcess.start(node("tls-rogue-plain").env("WEIR_SEED_NODES", seeds));
    nodes.add(otherCaNode);
    nodes.add(plainNode);
    long r0 = System.nanoTime();
    // Until both outsiders serve HTTP (they started and are trying to join), then long enough for
    // several more join attempts (the seed-node timeout is 5 s): each is refused in its handshake.
    long quietUntil = Long.MAX_VALUE;
    long deadline = r0 + START_UP.toNanos();
    int looks = 0;
    while (System.nanoTime() < quietUntil) {
      Thread.sleep(1000);
      Map<String, String> seen =
          first.memberStatuses(); // empty when the node is too busy to answer in time
      if (!seen.isEmpty()) {
        looks++;
        assertThat(seen.keySet())
            .as("the cluster's members while outsiders knock")
            .isEqualTo(members);
      }
      if (quietUntil == Long.MAX_VALUE
          && otherCaNode.get("/health/alive", false).isPresent()
          && plainNode.get("/health/alive", false).isPresent()) {
        quietUntil = System.nanoTime() + Duration.ofSeconds(15).toNanos();
      }
      assertThat(System.nanoTime())
          .as("the outsiders should start within %s", START_UP)
          .isLessThan(deadline);
    }
    assertThat(looks)
        .as("membership answers while the outsiders were up")
        .isGreaterThanOrEqualTo(5);
    for (NodeProcess rogue : List.of(otherCaNode, plainNode)) {
      assertThat(rogue.isAlive()).isTrue();
      assertThat(rogue.ready()).as(rogue.name() + " is no Up member").isFalse();
      // 503 is the answer here: asked again only while the node does not answer.
      assertThat(rogue.getAnswer("/health/ready", false, NodeProcess.ANSWER_DEADLINE).body())
          .contains("cluster-member");
    }
    System.out.printf(
        "tls-outsiders: after %.0f s (%d membership checks) the cluster still lists only its 2 members;"
            + " neither outsider is ready%n",
        (System.nanoTime() - r0) / 1e9, looks);
    printMatching(otherCaNode, "SSLHandshake|Couldn't join|HandshakeTimeout");
    printMatching(plainNode, "SSLHandshake|Couldn't join|HandshakeTimeout");
  }

  @Test
  void certificateProblemsStopANodeAtStartWithoutValues() throws Exception {
    String wrongKeyStorePassword = "canary-wrong-store-password-3b7";
    List<NodeProcess> refused = new ArrayList<>();
    refused.add(
        NodeProcess.start(
            node("tls-wrong-root").env("WEIR_PG_SSLROOTCERT", otherCa.certificate().toString())));
    refused.add(
        NodeProcess.start(
            node("tls-wrong-host").env("WEIR_PG_URL", pgUrl.replace("127.0.0.1", "localhost"))));
    refused.add(
        NodeProcess.start(
            clusterTls(node("tls-wrong-password"), nodeCert, clusterCa)
                .env("WEIR_CLUSTER_TLS_KEY_STORE_PASSWORD", wrongKeyStorePassword)));
    nodes.addAll(refused);
    List<String> expected =
        List.of(
            "configuration error: weir.postgres.tls: the server's certificate is not signed by a certificate authority",
            "configuration error: weir.postgres.tls: the server's certificate does not name the host of the URL",
            "configuration error: weir.cluster.tls.key-store-password: does not open weir.cluster.tls.key-store (wrong password)");
    for (int i = 0; i < refused.size(); i++) {
      NodeProcess n = refused.get(i);
      int status = n.waitForExit(Duration.ofSeconds(120));
      String line =
          n.log().lines().filter(l -> l.startsWith("weir: ")).findFirst().orElse("(no weir: line)");
      System.out.printf("tls-refused: %s exited %d: %s%n", n.name(), status, line);
      assertThat(status).as(n.name() + " exit status (configuration error)").isEqualTo(2);
      assertThat(line).contains(expected.get(i));
      assertThat(n.log())
          .doesNotContain(pgPassword)
          .doesNotContain(TestCertificates.PASSWORD)
          .doesNotContain(wrongKeyStorePassword);
    }
  }

  /** "status N" for an HTTP answer, else "failed: <exception class>". */
  private static String outcome(HttpClient client, String uri) {
    try {
      HttpResponse<String> r =
          client.send(
              HttpRequest.newBuilder(URI.create(uri)).timeout(Duration.ofSeconds(5)).build(),
              HttpResponse.BodyHandlers.ofString());
      return "status " + r.statusCode();
    } catch (IOException e) {
      return "failed: " + e.getClass().getSimpleName();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted";
    }
  }

  private static void printMatching(NodeProcess n, String regex) {
    java.util.regex.Pattern p = java.util.regex.Pattern.compile(regex);
    List<String> lines =
        n.log()
            .lines()
            .filter(l -> p.matcher(l).find())
            .limit(4)
            .map(l -> l.length() > 300 ? l.substring(0, 300) + "..." : l)
            .toList();
    System.out.println(
        "tls-log " + n.name() + ": " + (lines.isEmpty() ? "(no matching line)" : ""));
    lines.forEach(l -> System.out.println("    " + l));
  }

  private void awaitOrDump(
      Duration timeout, String what, java.util.concurrent.Callable<Boolean> condition) {
    try {
      await(what).atMost(timeout).pollInterval(Duration.ofMillis(500)).until(condition);
    } catch (org.awaitility.core.ConditionTimeoutException e) {
      nodes.forEach(
          n ->
              System.err.println(
                  "---- log of " + n.name() + " ----\n" + ThreeNodeClusterIT.tail(n.log())));
      throw e;
    }
  }
}
