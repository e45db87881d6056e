package io.weir.deploy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.metrics.RouteTemplates;
import io.weir.persistence.testing.TestPorts;
import io.weir.persistence.testing.TestPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real Weir node: {@code java -jar node/target/weir-node.jar node} in a process of its own, with
 * its output in {@code deploy/target/e2e-logs/[fork-N/]<name>.log} ({@link #logs()}). {@link
 * #kill()} sends SIGKILL; {@link #close()} makes sure the process is gone whatever happened in the
 * test.
 *
 * <p>Requests come in two kinds. The single-shot ones ({@link #get}, {@link #post}, {@link #send})
 * return empty when the node does not answer: for polls inside a condition wait, and for callers
 * that decide themselves what a missing answer means. The retrying ones ({@link #getUntil}, {@link
 * #sendIdempotent}, {@link #jsonUntil}) repeat an idempotent request that got no answer (or a
 * 502/503/504) until a deadline and then fail naming the route; {@link #sendOnce} is for a write
 * whose repetition would double its effect: it is repeated only while the node certainly never saw
 * it (the connection was refused), and a missing answer after that fails the test.
 *
 * <p>A node whose HTTP or cluster port was taken between the pick and its bind exits during
 * start-up with "Address already in use" in its log. When the test did not choose that port itself,
 * the node is started again on a new one (at most {@value #MAX_BIND_RESTARTS} times): the first
 * request that finds it gone, {@link #isAlive()} or {@link #waitForExit} does so, so every wait for
 * readiness covers it.
 */
public final class NodeProcess implements AutoCloseable {
  public static final String ADMIN_TOKEN = "e2e-admin-token-0123456789";

  /**
   * How long an idempotent request is retried by default: long enough for a node that is starting
   * or recovering on a machine four times slower than a quiet one.
   */
  public static final Duration ANSWER_DEADLINE = Duration.ofSeconds(90);

  /** How long one attempt of a retried request waits for its answer. */
  private static final Duration ATTEMPT_TIMEOUT = Duration.ofSeconds(20);

  /** How long a write sent once ({@link #sendOnce}) waits for its answer. */
  private static final Duration WRITE_TIMEOUT = Duration.ofSeconds(60);

  private static final long RETRY_PAUSE_MILLIS = 250;
  private static final int MAX_BIND_RESTARTS = 3;
  private static final Pattern BIND_FAILED =
      Pattern.compile("Address already in use|BindException");
  private static final Pattern BIND_FAILED_PORT =
      Pattern.compile(
          "(?:Bind failed for TCP channel on endpoint \\[|BindException: \\[|cannot bind HTTP on )"
              + "[^\\]\\s]*:(\\d+)");
  private static final RouteTemplates ROUTES = RouteTemplates.node();

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
  private final Spec spec;
  private final String scheme;
  private final HttpClient http;
  private final Object lifecycle = new Object();
  private volatile Process process;
  private volatile int httpPort;
  private volatile int clusterPort;
  private volatile Path log;

  /** An HTTP answer came from the current process: its start-up bound both ports. */
  private volatile boolean answered;

  /** The test stopped the process (kill, terminate, close): it is never started again here. */
  private volatile boolean stopped;

  private int bindRestarts;

  private NodeProcess(Spec spec, Process process, int httpPort, int clusterPort, Path log) {
    this.name = spec.name;
    this.spec = spec;
    this.process = process;
    this.httpPort = httpPort;
    this.clusterPort = clusterPort;
    this.log = log;
    this.scheme = spec.https == null ? "http" : "https";
    this.http =
        spec.https == null
            ? HTTP
            : HttpClient.newBuilder()
                .connectTimeout(Duration.ofSeconds(2))
                .sslContext(spec.https)
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
    boolean httpPortChosen;
    boolean clusterPortChosen;
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

    /** The HTTP port, chosen by the test: kept if the node cannot bind it. */
    public Spec httpPort(int port) {
      this.httpPort = port;
      this.httpPortChosen = true;
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

    /** The cluster port, chosen by the test (e.g. a seed's): kept if the node cannot bind it. */
    public Spec clusterPort(int port) {
      clusterPort = port;
      clusterPortChosen = true;
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

    /** The test set the HTTP port (or WEIR_HTTP_PORT) itself. */
    boolean httpPortFixed() {
      return httpPortChosen || env.containsKey("WEIR_HTTP_PORT");
    }

    /** The test set the cluster port (or WEIR_CLUSTER_PORT) itself. */
    boolean clusterPortFixed() {
      return clusterPortChosen || env.containsKey("WEIR_CLUSTER_PORT");
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
    Path log = logs().resolve(spec.name + ".log");
    NodeProcess node =
        new NodeProcess(
            spec,
            launch(spec, spec.httpPort, spec.clusterPort, log),
            spec.httpPort,
            spec.clusterPort,
            log);
    synchronized (LIVE) {
      LIVE.add(node);
    }
    return node;
  }

  /**
   * Where node logs and other test artifacts go: {@code deploy/target/e2e-logs}, in a folder {@code
   * fork-N} of its own for each parallel test JVM (Failsafe sets {@code weir.e2e.fork}), so classes
   * running at the same time never write the same file.
   */
  public static Path logs() {
    try {
      String fork = System.getProperty("weir.e2e.fork", "");
      Path logs =
          TestPostgres.repoRoot()
              .resolve("deploy/target/e2e-logs")
              .resolve(fork.isEmpty() ? "." : "fork-" + fork)
              .normalize();
      Files.createDirectories(logs);
      return logs;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static Process launch(Spec spec, int httpPort, int clusterPort, Path log) {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-Xmx" + spec.maxHeap);
    cmd.add("-XX:+UseSerialGC");
    // C1 only: a test node lives seconds to minutes, and C2's compilations cost more CPU than they
    // give back there (measured: 5.4-6.2 CPU-s to ready + 5 s instead of 8.4-11.6), CPU the two
    // cores of a parallel suite run short of. Benchmarks start nodes elsewhere, with the full JIT.
    cmd.add("-XX:TieredStopAtLevel=1");
    if (spec.jvmOptions.stream().noneMatch(o -> o.startsWith("-XX:ArchiveClassesAtExit"))) {
      cmd.addAll(NodeClassArchive.options()); // not for the node that makes the archive
    }
    cmd.addAll(spec.jvmOptions);
    // For profiling a test's nodes, e.g. -Dweir.e2e.node-jvm-options=-XX:StartFlightRecording=...
    String extra = System.getProperty("weir.e2e.node-jvm-options", "").trim();
    if (!extra.isEmpty()) {
      cmd.addAll(List.of(extra.split("\\s+")));
    }
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
    env.put("WEIR_HTTP_PORT", Integer.toString(httpPort));
    env.put("WEIR_CLUSTER_PORT", Integer.toString(clusterPort));
    // The acknowledged marks' durable store (ADR 0036): per test fork, named by the node's port
    // (Pekko appends the system, host and port to a directory named ...ddata).
    env.put("WEIR_MARKS_DIR", logs().resolve("ddata").toString());
    spec.env.forEach(
        (k, v) -> {
          if (v == null) {
            env.remove(k);
          } else {
            env.put(k, v);
          }
        });
    try {
      return pb.start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * When the process exited during start-up because its HTTP or cluster port was taken (and the
   * test did not choose that port), starts it again on a new port, at most {@value
   * #MAX_BIND_RESTARTS} times. True when it did.
   */
  private boolean restartIfBindRace() {
    if (answered || stopped || process.isAlive()) {
      return false;
    }
    synchronized (lifecycle) {
      if (answered || stopped || process.isAlive() || bindRestarts >= MAX_BIND_RESTARTS) {
        return false;
      }
      String text = log();
      if (!BIND_FAILED.matcher(text).find()) {
        return false;
      }
      Set<Integer> taken = new HashSet<>();
      Matcher m = BIND_FAILED_PORT.matcher(text);
      while (m.find()) {
        taken.add(Integer.parseInt(m.group(1)));
      }
      boolean newHttp;
      boolean newCluster;
      if (taken.isEmpty()) {
        // The log does not say which port: a new one for each the test did not choose.
        newHttp = !spec.httpPortFixed();
        newCluster = !spec.clusterPortFixed();
      } else {
        if (taken.stream().anyMatch(p -> p != httpPort && p != clusterPort)) {
          return false; // another port (e.g. management): not ours to move
        }
        newHttp = taken.contains(httpPort);
        newCluster = taken.contains(clusterPort);
        if ((newHttp && spec.httpPortFixed()) || (newCluster && spec.clusterPortFixed())) {
          return false;
        }
      }
      if (!newHttp && !newCluster) {
        return false;
      }
      bindRestarts++;
      try {
        Files.move(
            log,
            log.resolveSibling(name + ".bind-failure-" + bindRestarts + ".log"),
            StandardCopyOption.REPLACE_EXISTING);
      } catch (IOException e) {
        // the new process overwrites it
      }
      int http = newHttp ? freePort() : httpPort;
      int cluster = newCluster ? freePort() : clusterPort;
      System.out.printf(
          "e2e: %s lost a bind race for its %s port; started again on a new one (%d of %d)%n",
          name,
          newHttp && newCluster ? "HTTP or cluster" : newHttp ? "HTTP" : "cluster",
          bindRestarts,
          MAX_BIND_RESTARTS);
      process = launch(spec, http, cluster, log);
      httpPort = http;
      clusterPort = cluster;
      return true;
    }
  }

  /** A listening port for a node: below the ephemeral range, held by this JVM (see TestPorts). */
  public static int freePort() {
    return TestPorts.free();
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
    restartIfBindRace();
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

  /**
   * Waits for the process to exit and returns its status (a start-up lost to a bind race is started
   * again and waited for anew).
   */
  public int waitForExit(Duration timeout) throws InterruptedException {
    while (true) {
      Process p = process;
      if (!p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
        throw new AssertionError(name + " did not exit within " + timeout);
      }
      if (!restartIfBindRace()) {
        return p.exitValue();
      }
    }
  }

  /** What one attempt of a request came to. */
  private record Attempt(HttpResponse<String> response, boolean maybeSeen) {}

  /**
   * One request: {@code headers} as given, the administrator's token unless {@code asAdmin} is
   * false or they hold an {@code Authorization} header.
   */
  private Attempt attempt(
      String method,
      String path,
      String body,
      Map<String, String> headers,
      boolean asAdmin,
      Duration timeout) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create(scheme + "://127.0.0.1:" + httpPort + path))
            .timeout(timeout)
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString(body));
    headers.forEach(b::header);
    if (asAdmin && !headers.containsKey("Authorization")) {
      b.header("Authorization", "Bearer " + ADMIN_TOKEN);
    }
    try {
      HttpResponse<String> r = http.send(b.build(), HttpResponse.BodyHandlers.ofString());
      answered = true;
      return new Attempt(r, true);
    } catch (IOException e) {
      restartIfBindRace();
      // Refused or not connected in time: the node never saw the request.
      return new Attempt(
          null, !(e instanceof ConnectException || e instanceof HttpConnectTimeoutException));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new Attempt(null, true);
    }
  }

  /** GET a path; empty when the node does not answer. */
  public Optional<HttpResponse<String>> get(String path, boolean asAdmin) {
    return Optional.ofNullable(
        attempt("GET", path, null, Map.of(), asAdmin, Duration.ofSeconds(5)).response());
  }

  /** POST a path as administrator; empty when the node does not answer. */
  public Optional<HttpResponse<String>> post(String path) {
    return post(path, null);
  }

  /**
   * POST a JSON body (null: none) to a path as administrator; empty when the node does not answer.
   */
  public Optional<HttpResponse<String>> post(String path, String jsonBody) {
    return Optional.ofNullable(
        attempt(
                "POST",
                path,
                jsonBody,
                Map.of("Content-Type", "application/json"),
                true,
                Duration.ofSeconds(15))
            .response());
  }

  /**
   * Any request: {@code body} null for none, {@code headers} as given (an {@code Authorization}
   * header among them replaces the administrator's). Empty when the node does not answer.
   */
  public Optional<HttpResponse<String>> send(
      String method, String path, String body, Map<String, String> headers) {
    return Optional.ofNullable(
        attempt(method, path, body, headers, true, Duration.ofSeconds(15)).response());
  }

  /**
   * An idempotent GET ({@code asAdmin}: with the administrator's token), repeated while the node
   * does not answer or answers 502, 503 or 504, until {@code deadline}; its first other answer.
   */
  public HttpResponse<String> getUntil(String path, boolean asAdmin, Duration deadline) {
    return retried(() -> this, "GET", path, null, Map.of(), asAdmin, deadline, true).response();
  }

  /** {@link #getUntil(String, boolean, Duration)} within {@link #ANSWER_DEADLINE}. */
  public HttpResponse<String> getUntil(String path, boolean asAdmin) {
    return getUntil(path, asAdmin, ANSWER_DEADLINE);
  }

  /**
   * A GET repeated only while the node does not answer (for routes whose 503 is an answer, such as
   * {@code /health/ready}), until {@code deadline}.
   */
  public HttpResponse<String> getAnswer(String path, boolean asAdmin, Duration deadline) {
    return retried(() -> this, "GET", path, null, Map.of(), asAdmin, deadline, false).response();
  }

  /**
   * An idempotent request (a read, a registration with a deterministic identity, a PUT with an
   * Idempotency-Key, a request the node refuses without an effect), repeated while the node does
   * not answer or answers 502, 503 or 504, until {@code deadline}; its first other answer. Headers
   * as in {@link #send}.
   */
  public HttpResponse<String> sendIdempotent(
      String method, String path, String body, Map<String, String> headers, Duration deadline) {
    return retried(() -> this, method, path, body, headers, true, deadline, true).response();
  }

  /**
   * {@link #sendIdempotent(String, String, String, Map, Duration)} within {@link #ANSWER_DEADLINE}.
   */
  public HttpResponse<String> sendIdempotent(
      String method, String path, String body, Map<String, String> headers) {
    return sendIdempotent(method, path, body, headers, ANSWER_DEADLINE);
  }

  /**
   * The answer to a retried request, and how many earlier attempts may have reached the node
   * without an answer or got a 502/503/504 (so an effect of theirs cannot be ruled out: a
   * registration answered 200 "exists" after one of them is its own).
   */
  public record Retried(HttpResponse<String> response, int uncertain) {}

  /**
   * {@link #sendIdempotent} that also reports the attempts before the answer; {@code
   * retryUnavailable}: 502/503/504 are retried too.
   */
  public Retried sendRetrying(
      String method,
      String path,
      String body,
      Map<String, String> headers,
      Duration deadline,
      boolean retryUnavailable) {
    return retried(() -> this, method, path, body, headers, true, deadline, retryUnavailable);
  }

  /**
   * An idempotent request to whichever node {@code node} supplies at each attempt (a killed one is
   * replaced meanwhile), as {@link #sendIdempotent}.
   */
  public static HttpResponse<String> sendIdempotent(
      Supplier<NodeProcess> node,
      String method,
      String path,
      String body,
      Map<String, String> headers,
      Duration deadline) {
    return retried(node, method, path, body, headers, true, deadline, true).response();
  }

  private static Retried retried(
      Supplier<NodeProcess> node,
      String method,
      String path,
      String body,
      Map<String, String> headers,
      boolean asAdmin,
      Duration deadline,
      boolean retryUnavailable) {
    long end = System.nanoTime() + deadline.toNanos();
    int attempts = 0;
    int uncertain = 0;
    String last = "no answer";
    NodeProcess n = node.get();
    while (true) {
      n = node.get();
      long left = end - System.nanoTime();
      Duration timeout =
          Duration.ofNanos(
              Math.max(Duration.ofSeconds(1).toNanos(), Math.min(left, ATTEMPT_TIMEOUT.toNanos())));
      Attempt a = n.attempt(method, path, body, headers, asAdmin, timeout);
      attempts++;
      HttpResponse<String> r = a.response();
      if (r != null && !(retryUnavailable && unavailable(r.statusCode()))) {
        return new Retried(r, uncertain);
      }
      if (r != null || a.maybeSeen()) {
        uncertain++;
      }
      last = r == null ? "no answer" : "status " + r.statusCode();
      if (System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RETRY_PAUSE_MILLIS) > end) {
        throw new AssertionError(
            describe(n, method, path)
                + ": no usable answer within "
                + deadline
                + " ("
                + attempts
                + " attempts, last: "
                + last
                + ")");
      }
      try {
        Thread.sleep(RETRY_PAUSE_MILLIS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(describe(n, method, path) + ": interrupted");
      }
    }
  }

  private static boolean unavailable(int status) {
    return status == 502 || status == 503 || status == 504;
  }

  /** "METHOD /route/{template} on name": the route, never an id or a value from the path. */
  private static String describe(NodeProcess n, String method, String path) {
    int query = path.indexOf('?');
    return method
        + " "
        + ROUTES.label(query < 0 ? path : path.substring(0, query))
        + " on "
        + n.name;
  }

  /**
   * A request that must not be repeated blindly (its repetition would double an effect: a create, a
   * rotation, a write without an Idempotency-Key). It is sent again only while the node certainly
   * did not see it (the connection was refused: a node starting), within {@link #ANSWER_DEADLINE};
   * once sent it waits up to a minute for the answer, and no answer fails the test. Headers as in
   * {@link #send}.
   */
  public HttpResponse<String> sendOnce(
      String method, String path, String body, Map<String, String> headers) {
    long end = System.nanoTime() + ANSWER_DEADLINE.toNanos();
    while (true) {
      Attempt a = attempt(method, path, body, headers, true, WRITE_TIMEOUT);
      if (a.response() != null) {
        return a.response();
      }
      if (a.maybeSeen()) {
        throw new AssertionError(
            describe(this, method, path)
                + ": no answer within "
                + WRITE_TIMEOUT
                + " (not repeated: the node may have acted on it)");
      }
      if (System.nanoTime() > end) {
        throw new AssertionError(
            describe(this, method, path) + ": not reachable within " + ANSWER_DEADLINE);
      }
      try {
        Thread.sleep(RETRY_PAUSE_MILLIS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(describe(this, method, path) + ": interrupted");
      }
    }
  }

  /**
   * An admin route's JSON: GET retried as {@link #getUntil}; any status but 200 fails the test
   * (naming the route and the status).
   */
  public JsonNode jsonUntil(String path, Duration deadline) {
    HttpResponse<String> r = getUntil(path, true, deadline);
    if (r.statusCode() != 200) {
      throw new AssertionError(describe(this, "GET", path) + ": status " + r.statusCode());
    }
    try {
      return JSON.readTree(r.body());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The status JSON of one pipeline, or empty when the node does not answer. */
  public Optional<JsonNode> pipeline(String name) {
    return adminJson("/admin/pipelines/" + name);
  }

  /**
   * The status JSON of one pipeline, asked again until the node answers (see {@link #jsonUntil}).
   */
  public JsonNode pipelineNow(String name) {
    return jsonUntil("/admin/pipelines/" + name, ANSWER_DEADLINE);
  }

  /**
   * {@code GET /admin/partitions}: how many partitions run, per node; empty when it does not
   * answer.
   */
  public Optional<JsonNode> partitions() {
    return adminJson("/admin/partitions");
  }

  /** {@code GET /admin/partitions}, asked again until the node answers. */
  public JsonNode partitionsNow() {
    return jsonUntil("/admin/partitions", ANSWER_DEADLINE);
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

  /** The node's /admin/cluster reply, asked again until the node answers. */
  public JsonNode clusterNow() {
    return jsonUntil("/admin/cluster", ANSWER_DEADLINE);
  }

  /** Member address -> status as this node sees the cluster; empty when it does not answer. */
  public Map<String, String> memberStatuses() {
    return cluster().map(NodeProcess::members).orElseGet(HashMap::new);
  }

  /** Member address -> status as this node sees the cluster, asked again until it answers. */
  public Map<String, String> memberStatusesNow() {
    return members(clusterNow());
  }

  private static Map<String, String> members(JsonNode cluster) {
    Map<String, String> out = new HashMap<>();
    cluster
        .get("members")
        .forEach(m -> out.put(m.get("address").asText(), m.get("status").asText()));
    return out;
  }

  /** SIGKILL: no shutdown hook, no goodbye to the cluster. */
  public void kill() throws InterruptedException {
    Process p = stop();
    p.destroyForcibly();
    p.waitFor(30, TimeUnit.SECONDS);
  }

  /** Marks the node stopped by the test (never started again) and returns its process. */
  private Process stop() {
    synchronized (lifecycle) {
      stopped = true;
      return process;
    }
  }

  /**
   * SIGSTOP or SIGCONT: the process freezes (to the others it is unreachable, as if cut off) or
   * runs on.
   */
  public void signal(String name) throws java.io.IOException, InterruptedException {
    signal(name, process.pid());
  }

  /** Sends signal {@code name} to process {@code pid} (one of the test's, or any as root). */
  public static void signal(String name, long pid)
      throws java.io.IOException, InterruptedException {
    Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(pid)).inheritIO().start();
    if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
      throw new AssertionError("kill -" + name + " " + pid + " failed");
    }
  }

  /** SIGTERM: coordinated shutdown. */
  public void terminate() {
    stop().destroy();
  }

  @Override
  public void close() {
    Process p = stop();
    if (!System.getProperty("weir.e2e.node-jvm-options", "").isBlank()) {
      // Profiling: a SIGTERM first, so that the JVM writes its flight recording at exit.
      p.destroy();
      try {
        p.waitFor(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    p.destroyForcibly();
    try {
      p.waitFor(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    synchronized (LIVE) {
      LIVE.remove(this);
    }
  }
}
