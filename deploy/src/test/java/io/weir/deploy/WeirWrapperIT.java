package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

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
    Path out = java.nio.file.Files.createTempFile("weir-wrapper", ".out");
    Path err = java.nio.file.Files.createTempFile("weir-wrapper", ".err");
    pb.redirectOutput(out.toFile()).redirectError(err.toFile());
    Process p = pb.start();
    assertThat(p.waitFor(120, TimeUnit.SECONDS))
        .as("weir %s should end within 120 s", String.join(" ", args))
        .isTrue();
    Run run =
        new Run(
            p.exitValue(),
            java.nio.file.Files.readString(out, StandardCharsets.UTF_8),
            java.nio.file.Files.readString(err, StandardCharsets.UTF_8));
    java.nio.file.Files.delete(out);
    java.nio.file.Files.delete(err);
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
}
