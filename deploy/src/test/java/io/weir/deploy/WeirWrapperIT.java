package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The operator's path: {@code deploy/bin/weir} runs the packaged jar (its Main-Class and lib/ class
 * path) and {@code weir ctl} talks to a node process, with the address and token from the
 * environment. The commands themselves are covered by CliIT in the node module.
 */
class WeirWrapperIT extends EndToEndTest {
  private final ObjectMapper json = new ObjectMapper();

  record Run(int exit, String out, String err) {}

  private static Run wrapper(Map<String, String> env, String... args) throws Exception {
    List<String> command = new ArrayList<>();
    command.add(TestPostgres.repoRoot().resolve("deploy/bin/weir").toString());
    command.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(command);
    pb.environment().keySet().removeIf(k -> k.startsWith("WEIR_"));
    pb.environment().putAll(env);
    // The wrapper must find java on the PATH: the one running this test.
    pb.environment()
        .put("PATH", Path.of(System.getProperty("java.home"), "bin") + ":" + System.getenv("PATH"));
    Path out = Files.createTempFile("weir-wrapper", ".out");
    Path err = Files.createTempFile("weir-wrapper", ".err");
    pb.redirectOutput(out.toFile()).redirectError(err.toFile());
    Process p = pb.start();
    assertThat(p.waitFor(120, TimeUnit.SECONDS))
        .as("weir %s should end within 120 s", String.join(" ", args))
        .isTrue();
    Run run =
        new Run(
            p.exitValue(),
            Files.readString(out, StandardCharsets.UTF_8),
            Files.readString(err, StandardCharsets.UTF_8));
    Files.delete(out);
    Files.delete(err);
    return run;
  }

  /**
   * A read-only {@code weir ctl} command, run again while it exits 3 (the node was not reached or
   * did not answer in time: a busy machine), for up to two minutes.
   */
  private static Run reaching(Map<String, String> env, String... args) throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
    while (true) {
      Run run = wrapper(env, args);
      if (run.exit() != 3 || System.nanoTime() > deadline) {
        return run;
      }
      Thread.sleep(500);
    }
  }

  @Test
  void theWrapperRunsCtlAgainstANodeProcess() throws Exception {
    Run usage = wrapper(Map.of());
    assertThat(usage.exit()).as("a bare weir is a usage error").isEqualTo(2);
    assertThat(usage.err()).contains("Usage: weir").contains("ctl");

    db = TestPostgres.server().freshDatabase("weir_wrapper");
    NodeProcess node =
        NodeProcess.start(new NodeProcess.Spec("wrapper").database(db).env("WEIR_PARTITIONS", "4"));
    nodes.add(node);
    awaitReady(node, 4);
    Map<String, String> env =
        Map.of(
            "WEIR_URL",
            "http://127.0.0.1:" + node.httpPort(),
            "WEIR_ADMIN_TOKEN",
            NodeProcess.ADMIN_TOKEN);

    Run status = reaching(env, "ctl", "cluster", "status");
    assertThat(status.exit()).as(status.err()).isZero();
    assertThat(status.out())
        .contains("this node:  " + node.clusterAddress())
        .contains(node.clusterAddress() + "  up");
    Run partitions = reaching(env, "ctl", "cluster", "partitions", "--json");
    assertThat(partitions.exit()).as(partitions.err()).isZero();
    JsonNode p = json.readTree(partitions.out());
    assertThat(p.get("count").asInt()).isEqualTo(4);

    Run wrongToken =
        reaching(
            Map.of("WEIR_URL", env.get("WEIR_URL"), "WEIR_ADMIN_TOKEN", "not-the-token"),
            "ctl",
            "pipelines",
            "list");
    assertThat(wrongToken.exit()).isEqualTo(1);
    assertThat(wrongToken.err().strip())
        .isEqualTo("unauthenticated: a valid bearer token is required");
  }

  /**
   * {@code weir node} with class-data sharing (issue 28, restart to ready): the first run writes an
   * archive of the classes it loaded when it stops on SIGTERM, after checking every byte of it; the
   * next run maps it (the JVM's mapping of the file shows in /proc).
   */
  @Test
  void weirNodeWritesAClassArchiveOnACleanStopAndMapsItNextTime(@TempDir Path cds)
      throws Exception {
    db = TestPostgres.server().freshDatabase("weir_wrapper_cds");
    Process first = node(cds);
    try {
      awaitReady(first);
      assertThat(archives(cds)).as("no archive while the first run is up").isEmpty();
    } finally {
      stop(first);
    }
    List<Path> written = archives(cds);
    assertThat(written).as("the first run's archive").hasSize(1);
    FileTime writtenAt = Files.getLastModifiedTime(written.get(0));
    Process second = node(cds);
    try {
      awaitReady(second);
      String maps = Files.readString(Path.of("/proc/" + second.pid() + "/maps"));
      assertThat(maps).as("the second run maps the archive").contains(written.get(0).toString());
    } finally {
      stop(second);
    }
    assertThat(archives(cds)).as("kept").isEqualTo(written);
    assertThat(Files.getLastModifiedTime(written.get(0)))
        .as("not written again")
        .isEqualTo(writtenAt);
  }

  private int cdsHttpPort;

  private Process node(Path cds) throws Exception {
    cdsHttpPort = NodeProcess.freePort();
    ProcessBuilder pb =
        new ProcessBuilder(TestPostgres.repoRoot().resolve("deploy/bin/weir").toString(), "node");
    Map<String, String> env = pb.environment();
    env.keySet().removeIf(k -> k.startsWith("WEIR_"));
    env.put("PATH", Path.of(System.getProperty("java.home"), "bin") + ":" + System.getenv("PATH"));
    env.put("WEIR_CDS_DIR", cds.toString());
    env.put("WEIR_JAVA_OPTS", "-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC");
    env.put("WEIR_PG_URL", db.url());
    env.put("WEIR_PG_USER", db.server().user());
    env.put("WEIR_PG_PASSWORD", db.server().password());
    env.put("WEIR_ADMIN_TOKEN", NodeProcess.ADMIN_TOKEN);
    env.put("WEIR_PARTITIONS", "4");
    env.put("WEIR_HTTP_PORT", Integer.toString(cdsHttpPort));
    env.put("WEIR_CLUSTER_PORT", Integer.toString(NodeProcess.freePort()));
    env.put("WEIR_MARKS_DIR", cds.resolve("marks").toString());
    Path log = NodeProcess.logs().resolve("wrapper-cds.log");
    pb.redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
    return pb.start();
  }

  private void awaitReady(Process p) {
    HttpClient http = HttpClient.newHttpClient();
    Awaitility.await("the node started by weir node is ready")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(250))
        .until(
            () -> {
              assertThat(p.isAlive()).as("the node process is running").isTrue();
              try {
                return http.send(
                            HttpRequest.newBuilder(
                                    URI.create("http://127.0.0.1:" + cdsHttpPort + "/health/ready"))
                                .timeout(Duration.ofSeconds(5))
                                .build(),
                            HttpResponse.BodyHandlers.discarding())
                        .statusCode()
                    == 200;
              } catch (IOException e) {
                return false;
              }
            });
  }

  /** SIGTERM, as systemd and docker stop do, and the wait for the process (and its archive). */
  private static void stop(Process p) throws InterruptedException {
    p.destroy();
    assertThat(p.waitFor(120, TimeUnit.SECONDS)).as("weir node stops on SIGTERM").isTrue();
    assertThat(p.exitValue()).as("the node's own exit status, through the wrapper").isIn(0, 143);
  }

  private static List<Path> archives(Path dir) throws IOException {
    try (Stream<Path> files = Files.list(dir)) {
      return files.filter(f -> f.getFileName().toString().endsWith(".jsa")).sorted().toList();
    }
  }
}
