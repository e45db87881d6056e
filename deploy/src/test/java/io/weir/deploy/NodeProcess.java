package io.weir.deploy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.testing.TestPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * A real Weir node: {@code java -jar node/target/weir-node.jar node} in a process of its own, with
 * its output in {@code deploy/target/e2e-logs/<name>.log}. {@link #kill()} sends SIGKILL; {@link
 * #close()} makes sure the process is gone whatever happened in the test.
 */
public final class NodeProcess implements AutoCloseable {
  public static final String ADMIN_TOKEN = "e2e-admin-token-0123456789";
  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final List<NodeProcess> LIVE = new ArrayList<>();

  static {
    // Last resort: no node outlives the test JVM, even when a test is aborted.
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  synchronized (LIVE) {
                    LIVE.forEach(n -> n.process.destroyForcibly());
                  }
                }));
  }

  private final String name;
  private final Process process;
  private final int httpPort;
  private final int clusterPort;
  private final Path log;
  private final String scheme;
  private final HttpClient http;

  private NodeProcess(
      String name,
      Process process,
      int httpPort,
      int clusterPort,
      Path log,
      javax.net.ssl.SSLContext https) {
    this.name = name;
    this.process = process;
    this.httpPort = httpPort;
    this.clusterPort = clusterPort;
    this.log = log;
    this.scheme = https == null ? "http" : "https";
    this.http =
        https == null
            ? HTTP
            : HttpClient.newBuilder()
                .connectTimeout(Duration.ofSeconds(2))
                .sslContext(https)
                .version(HttpClient.Version.HTTP_1_1)
                .build();
  }

  /** Options for one node. */
  public static final class Spec {
    final String name;
    final Map<String, String> env = new HashMap<>();
    final List<String> jvmProps = new ArrayList<>();
    final List<String> args = new ArrayList<>();
    final List<String> jvmOptions = new ArrayList<>();
    String maxHeap = "256m";
    int httpPort = freePort();
    int clusterPort = freePort();
    javax.net.ssl.SSLContext https;

    public Spec(String name) {
      this.name = name;
    }

    public Spec env(String key, String value) {
      env.put(key, value);
      return this;
    }

    public Spec without(String key) {
      env.put(key, null);
      return this;
    }

    public Spec prop(String key, String value) {
      jvmProps.add("-D" + key + "=" + value);
      return this;
    }

    /** The node's maximum heap ({@code -Xmx}), e.g. {@code 96m}; 256m unless set. */
    public Spec maxHeap(String size) {
      if (!size.matches("[0-9]+[kmg]")) {
        throw new IllegalArgumentException("a heap size such as 96m");
      }
      maxHeap = size;
      return this;
    }

    /** A raw JVM option, e.g. {@code -XX:+ExitOnOutOfMemoryError}. */
    public Spec jvm(String option) {
      jvmOptions.add(option);
      return this;
    }

    /** Arguments after {@code node}, e.g. {@code --config FILE}. */
    public Spec args(String... more) {
      args.addAll(List.of(more));
      return this;
    }

    public Spec httpPort(int port) {
      this.httpPort = port;
      return this;
    }

    /**
     * The node serves HTTPS (its environment must set {@code WEIR_HTTP_TLS_*}): this node's
     * requests go to {@code https://127.0.0.1:<port>} with a client whose SSL context is {@code
     * trusting}.
     */
    public Spec https(javax.net.ssl.SSLContext trusting) {
      https = trusting;
      return this;
    }

    public Spec clusterPort(int port) {
      clusterPort = port;
      return this;
    }

    public Spec database(TestPostgres.TestDatabase db) {
      return env("WEIR_PG_URL", db.url())
          .env("WEIR_PG_USER", db.server().user())
          .env("WEIR_PG_PASSWORD", db.server().password());
    }

    public int clusterPort() {
      return clusterPort;
    }
  }

  public static Path nodeJar() {
    Path jar = TestPostgres.repoRoot().resolve("node/target/weir-node.jar");
    if (!Files.isRegularFile(jar)) {
      throw new IllegalStateException(
          "node/target/weir-node.jar is missing: build with mvn package first");
    }
    return jar;
  }

  public static NodeProcess start(Spec spec) {
    try {
      Path logs = TestPostgres.repoRoot().resolve("deploy/target/e2e-logs");
      Files.createDirectories(logs);
      Path log = logs.resolve(spec.name + ".log");
      List<String> cmd = new ArrayList<>();
      cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      cmd.add("-Xmx" + spec.maxHeap);
      cmd.add("-XX:+UseSerialGC");
      cmd.addAll(spec.jvmOptions);
      cmd.addAll(spec.jvmProps);
      cmd.add("-jar");
      cmd.add(nodeJar().toString());
      cmd.add("node");
      cmd.addAll(spec.args);
      ProcessBuilder pb =
          new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
      Map<String, String> env = pb.environment();
      env.keySet().removeIf(k -> k.startsWith("WEIR_"));
      env.put("WEIR_ADMIN_TOKEN", ADMIN_TOKEN);
      env.put("WEIR_HTTP_PORT", Integer.toString(spec.httpPort));
      env.put("WEIR_CLUSTER_PORT", Integer.toString(spec.clusterPort));
      spec.env.forEach(
          (k, v) -> {
            if (v == null) {
              env.remove(k);
            } else {
              env.put(k, v);
            }
          });
      NodeProcess node =
          new NodeProcess(spec.name, pb.start(), spec.httpPort, spec.clusterPort, log, spec.https);
      synchronized (LIVE) {
        LIVE.add(node);
      }
      return node;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public static int freePort() {
    try (ServerSocket s = new ServerSocket(0)) {
      s.setReuseAddress(true);
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public String name() {
    return name;
  }

  public int clusterPort() {
    return clusterPort;
  }

  public int httpPort() {
    return httpPort;
  }

  public String clusterAddress() {
    return "pekko://weir@127.0.0.1:" + clusterPort;
  }

  public boolean isAlive() {
    return process.isAlive();
  }

  public long pid() {
    return process.pid();
  }

  public String log() {
    try {
      return Files.readString(log);
    } catch (IOException e) {
      return "";
    }
  }

  /** Waits for the process to exit and returns its status. */
  public int waitForExit(Duration timeout) throws InterruptedException {
    if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
      throw new AssertionError(name + " did not exit within " + timeout);
    }
    return process.exitValue();
  }

  /** GET a path; empty when the node does not answer. */
  public Optional<HttpResponse<String>> get(String path, boolean asAdmin) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(scheme + "://127.0.0.1:" + httpPort + path))
            .timeout(Duration.ofSeconds(5));
    if (asAdmin) {
      b.header("Authorization", "Bearer " + ADMIN_TOKEN);
    }
    try {
      return Optional.of(http.send(b.GET().build(), HttpResponse.BodyHandlers.ofString()));
    } catch (IOException e) {
      return Optional.empty();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.empty();
    }
  }

  /** POST a path as administrator; empty when the node does not answer. */
  public Optional<HttpResponse<String>> post(String path) {
    return post(path, null);
  }

  /**
   * POST a JSON body (null: none) to a path as administrator; empty when the node does not answer.
   */
  public Optional<HttpResponse<String>> post(String path, String jsonBody) {
    HttpRequest request =
        HttpRequest.newBuilder(URI.create(scheme + "://127.0.0.1:" + httpPort + path))
            .timeout(Duration.ofSeconds(15))
            .header("Authorization", "Bearer " + ADMIN_TOKEN)
            .header("Content-Type", "application/json")
            .POST(
                jsonBody == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString(jsonBody))
            .build();
    try {
      return Optional.of(http.send(request, HttpResponse.BodyHandlers.ofString()));
    } catch (IOException e) {
      return Optional.empty();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.empty();
    }
  }

  /**
   * Any request: {@code body} null for none, {@code headers} as given (an {@code Authorization}
   * header among them replaces the administrator's). Empty when the node does not answer.
   */
  public Optional<HttpResponse<String>> send(
      String method, String path, String body, Map<String, String> headers) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(scheme + "://127.0.0.1:" + httpPort + path))
            .timeout(Duration.ofSeconds(15))
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString(body));
    headers.forEach(b::header);
    if (!headers.containsKey("Authorization")) {
      b.header("Authorization", "Bearer " + ADMIN_TOKEN);
    }
    try {
      return Optional.of(http.send(b.build(), HttpResponse.BodyHandlers.ofString()));
    } catch (IOException e) {
      return Optional.empty();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.empty();
    }
  }

  /** The status JSON of one pipeline, or empty when the node does not answer. */
  public Optional<JsonNode> pipeline(String name) {
    return adminJson("/admin/pipelines/" + name);
  }

  /**
   * {@code GET /admin/partitions}: how many partitions run, per node; empty when it does not
   * answer.
   */
  public Optional<JsonNode> partitions() {
    return adminJson("/admin/partitions");
  }

  /** An admin route's JSON when it answers 200, else empty. */
  private Optional<JsonNode> adminJson(String path) {
    return get(path, true)
        .filter(r -> r.statusCode() == 200)
        .map(
            r -> {
              try {
                return JSON.readTree(r.body());
              } catch (IOException e) {
                throw new UncheckedIOException(e);
              }
            });
  }

  public boolean ready() {
    return get("/health/ready", false).map(r -> r.statusCode() == 200).orElse(false);
  }

  /** The node's /admin/cluster reply, or empty when it does not answer. */
  public Optional<JsonNode> cluster() {
    return adminJson("/admin/cluster");
  }

  /** Member address -> status as this node sees the cluster. */
  public Map<String, String> memberStatuses() {
    Map<String, String> out = new HashMap<>();
    cluster()
        .ifPresent(
            c ->
                c.get("members")
                    .forEach(m -> out.put(m.get("address").asText(), m.get("status").asText())));
    return out;
  }

  /** SIGKILL: no shutdown hook, no goodbye to the cluster. */
  public void kill() throws InterruptedException {
    process.destroyForcibly();
    process.waitFor(30, TimeUnit.SECONDS);
  }

  /**
   * SIGSTOP or SIGCONT: the process freezes (to the others it is unreachable, as if cut off) or
   * runs on.
   */
  public void signal(String name) throws java.io.IOException, InterruptedException {
    Process kill =
        new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).inheritIO().start();
    if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
      throw new AssertionError("kill -" + name + " " + process.pid() + " failed");
    }
  }

  /** SIGTERM: coordinated shutdown. */
  public void terminate() {
    process.destroy();
  }

  @Override
  public void close() {
    process.destroyForcibly();
    try {
      process.waitFor(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    synchronized (LIVE) {
      LIVE.remove(this);
    }
  }
}
