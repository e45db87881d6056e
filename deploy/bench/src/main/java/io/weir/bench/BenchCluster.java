package io.weir.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A Weir cluster of node processes on loopback for {@link ClusterBenchmark}: each node is {@code
 * java -Xmx<heap> -jar weir-node.jar node [--config file]} (the jar this program runs from), on
 * HTTP and remoting ports chosen free once (a restarted node gets the same ports), every node a
 * seed, the journal in the given database. A node's output goes to {@code
 * <logs>/<name>-node<N>-g<G>.log} (G counts its restarts). {@link #kill(int)} is SIGKILL; {@link
 * #close()} kills whatever still runs.
 */
final class BenchCluster implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** HTTP of the admin probes: one connection pool for the whole program. */
  static final HttpClient HTTP =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(2))
          .build();

  private final String name;
  private final BenchDatabase database;
  private final String token;
  private final Path logs;
  private final List<String> jvmOptions;
  private final List<String> nodeArgs;
  private final int partitions;
  private final int[] httpPorts;
  private final int[] clusterPorts;
  private final Process[] processes;
  private final int[] generations;
  private final String seeds;

  /**
   * @param name the cluster's name in log file names
   * @param size nodes
   * @param database where the nodes keep their journal and cluster identity (schema weir)
   * @param token the administrator token every node gets (WEIR_ADMIN_TOKEN)
   * @param jvmOptions JVM options of every node (heap, system properties)
   * @param nodeArgs arguments after {@code node}, e.g. {@code --config file}
   */
  BenchCluster(
      String name,
      int size,
      BenchDatabase database,
      String token,
      Path logs,
      int partitions,
      List<String> jvmOptions,
      List<String> nodeArgs) {
    this.name = name;
    this.database = database;
    this.token = token;
    this.logs = logs;
    this.partitions = partitions;
    this.jvmOptions = List.copyOf(jvmOptions);
    this.nodeArgs = List.copyOf(nodeArgs);
    this.httpPorts = new int[size];
    this.clusterPorts = new int[size];
    this.processes = new Process[size];
    this.generations = new int[size];
    List<String> seedList = new ArrayList<>();
    for (int i = 0; i < size; i++) {
      httpPorts[i] = freePort();
      clusterPorts[i] = freePort();
      seedList.add("127.0.0.1:" + clusterPorts[i]);
    }
    this.seeds = String.join(",", seedList);
  }

  /**
   * The node jar the benchmark's node processes run: {@code -Dweir.bench.node-jar}, by default
   * {@code node/target/weir-node.jar} under the working directory (the bench scripts run from the
   * repository's root and build it first).
   */
  static Path nodeJar() {
    Path jar =
        Path.of(System.getProperty("weir.bench.node-jar", "node/target/weir-node.jar"))
            .toAbsolutePath()
            .normalize();
    if (!Files.isRegularFile(jar)) {
      throw new IllegalStateException(
          "the node jar "
              + jar
              + " is missing: build it (mvn package -pl node -am) or name it with"
              + " -Dweir.bench.node-jar");
    }
    return jar;
  }

  /** The cluster's name (its nodes' log names start with it). */
  String name() {
    return name;
  }

  int size() {
    return processes.length;
  }

  int partitions() {
    return partitions;
  }

  BenchDatabase database() {
    return database;
  }

  /**
   * Starts every node (the order does not matter: each is a seed, the first reachable one forms the
   * cluster).
   */
  void startAll() throws IOException {
    for (int i = 0; i < size(); i++) {
      start(i);
    }
  }

  /** Starts node {@code i} (again) on its ports, with its log in a new file. */
  synchronized void start(int i) throws IOException {
    start(i, List.of());
  }

  /**
   * Starts node {@code i} (again) on its ports, with {@code extraJvm} after the cluster's JVM
   * options.
   */
  synchronized void start(int i, List<String> extraJvm) throws IOException {
    if (processes[i] != null && processes[i].isAlive()) {
      throw new IllegalStateException(nodeName(i) + " is still running");
    }
    Files.createDirectories(logs);
    Path log = logs.resolve(name + "-node" + (i + 1) + "-g" + generations[i] + ".log");
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(jvmOptions);
    cmd.addAll(extraJvm);
    cmd.add("-jar");
    cmd.add(nodeJar().toString());
    cmd.add("node");
    cmd.addAll(nodeArgs);
    ProcessBuilder pb =
        new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
    Map<String, String> env = pb.environment();
    // The node's settings are exactly these (nothing inherited from the caller's WEIR_* variables).
    env.keySet().removeIf(k -> k.startsWith("WEIR_"));
    env.put("WEIR_ADMIN_TOKEN", token);
    env.put("WEIR_HTTP_HOST", "127.0.0.1");
    env.put("WEIR_HTTP_PORT", Integer.toString(httpPorts[i]));
    env.put("WEIR_CLUSTER_HOST", "127.0.0.1");
    env.put("WEIR_CLUSTER_PORT", Integer.toString(clusterPorts[i]));
    env.put("WEIR_SEED_NODES", seeds);
    env.put("WEIR_PARTITIONS", Integer.toString(partitions));
    env.put("WEIR_PG_URL", database.url());
    env.put("WEIR_PG_USER", database.user());
    env.put("WEIR_PG_PASSWORD", database.password());
    // Each node keeps its acknowledged marks beside its logs (never in the working directory);
    // a restarted node finds its own again, a new run starts without the last run's.
    Path marks = logs.resolve(name + "-node" + (i + 1) + "-marks");
    if (generations[i] == 0) {
      deleteTree(marks);
    }
    env.put("WEIR_MARKS_DIR", marks.toString());
    processes[i] = pb.start();
    generations[i]++;
  }

  /**
   * SIGTERMs node {@code i} (its coordinated shutdown runs) and waits for the process to end, at
   * most {@code timeout}; SIGKILLs it after that. Whether it ended by itself.
   */
  boolean stop(int i, Duration timeout) throws InterruptedException {
    Process p = processes[i];
    p.destroy();
    if (p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
      return true;
    }
    kill(i);
    return false;
  }

  /** The process id of node {@code i}'s current process. */
  long pid(int i) {
    return processes[i].pid();
  }

  /** SIGKILLs node {@code i} and waits for the process to be gone. */
  void kill(int i) throws InterruptedException {
    Process p = processes[i];
    p.destroyForcibly();
    if (!p.waitFor(30, TimeUnit.SECONDS)) {
      throw new IllegalStateException(nodeName(i) + " did not die within 30 s of SIGKILL");
    }
  }

  /**
   * SIGSTOPs node {@code i}: the process and its sockets stay, it answers nothing (a hung host).
   * {@link #kill} ends it afterwards (SIGKILL works on a stopped process).
   */
  void freeze(int i) throws IOException, InterruptedException {
    Process signal =
        new ProcessBuilder("kill", "-STOP", Long.toString(processes[i].pid()))
            .redirectErrorStream(true)
            .start();
    if (!signal.waitFor(30, TimeUnit.SECONDS) || signal.exitValue() != 0) {
      throw new IllegalStateException(nodeName(i) + " could not be sent SIGSTOP");
    }
  }

  boolean alive(int i) {
    return processes[i] != null && processes[i].isAlive();
  }

  /** Process ids of the nodes that run. */
  List<Long> pids() {
    List<Long> out = new ArrayList<>();
    for (Process p : processes) {
      if (p != null && p.isAlive()) {
        out.add(p.pid());
      }
    }
    return out;
  }

  /** The running node processes' JIT and GC threads' CPU so far, by process id. */
  Map<Long, CpuTimes.ThreadCpu> threadCpu() {
    Map<Long, CpuTimes.ThreadCpu> out = new HashMap<>();
    for (long pid : pids()) {
      out.put(pid, CpuTimes.ThreadCpu.of(pid));
    }
    return out;
  }

  /**
   * CPU seconds the node processes' JIT compiler threads used since {@code earlier} ({@link
   * #threadCpu}).
   */
  double jitSecondsSince(Map<Long, CpuTimes.ThreadCpu> earlier) {
    return since(earlier, CpuTimes.ThreadCpu::jitSince);
  }

  /**
   * CPU seconds the node processes' garbage collector and VM threads used since {@code earlier}
   * ({@link #threadCpu}).
   */
  double gcSecondsSince(Map<Long, CpuTimes.ThreadCpu> earlier) {
    return since(earlier, CpuTimes.ThreadCpu::gcSince);
  }

  private double since(
      Map<Long, CpuTimes.ThreadCpu> earlier,
      java.util.function.ToDoubleBiFunction<CpuTimes.ThreadCpu, CpuTimes.ThreadCpu> part) {
    double sum = 0;
    for (Map.Entry<Long, CpuTimes.ThreadCpu> e : threadCpu().entrySet()) {
      CpuTimes.ThreadCpu before = earlier.get(e.getKey());
      if (before != null) {
        sum += part.applyAsDouble(e.getValue(), before);
      }
    }
    return sum;
  }

  /** CPU seconds the running node processes used so far (user + system). */
  double cpuSeconds() {
    return pids().stream().mapToDouble(CpuTimes::process).sum();
  }

  String nodeName(int i) {
    return name + " node " + (i + 1);
  }

  /** The log file of node {@code i}'s current (or last) process. */
  synchronized Path currentLog(int i) {
    return logs.resolve(name + "-node" + (i + 1) + "-g" + Math.max(0, generations[i] - 1) + ".log");
  }

  String address(int i) {
    return "pekko://weir@127.0.0.1:" + clusterPorts[i];
  }

  /** Index of the node with cluster address {@code address}, or -1. */
  int indexOf(String address) {
    for (int i = 0; i < size(); i++) {
      if (address != null && address.endsWith("@127.0.0.1:" + clusterPorts[i])) {
        return i;
      }
    }
    return -1;
  }

  URI uri(int i, String path) {
    return URI.create("http://127.0.0.1:" + httpPorts[i] + path);
  }

  /** A request to node {@code i} as administrator. */
  HttpRequest.Builder request(int i, String path, Duration timeout) {
    return HttpRequest.newBuilder(uri(i, path))
        .timeout(timeout)
        .header("Authorization", "Bearer " + token);
  }

  /**
   * GET {@code path} of node {@code i} as administrator, asynchronously; a failed exchange
   * completes exceptionally.
   */
  CompletableFuture<HttpResponse<String>> getAsync(int i, String path, Duration timeout) {
    return HTTP.sendAsync(
        request(i, path, timeout).GET().build(), HttpResponse.BodyHandlers.ofString());
  }

  /** An admin route's JSON when node {@code i} answers 200 within 5 s, else empty. */
  Optional<JsonNode> json(int i, String path) {
    try {
      HttpResponse<String> r =
          HTTP.send(
              request(i, path, Duration.ofSeconds(5)).GET().build(),
              HttpResponse.BodyHandlers.ofString());
      return r.statusCode() == 200 ? Optional.of(JSON.readTree(r.body())) : Optional.empty();
    } catch (IOException e) {
      return Optional.empty();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.empty();
    }
  }

  /**
   * POST an empty body to {@code path} of node {@code i} as administrator; the status code (-1: no
   * answer).
   */
  int post(int i, String path) {
    try {
      return HTTP.send(
              request(i, path, Duration.ofSeconds(15))
                  .POST(HttpRequest.BodyPublishers.noBody())
                  .build(),
              HttpResponse.BodyHandlers.discarding())
          .statusCode();
    } catch (IOException e) {
      return -1;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return -1;
    }
  }

  /** {@code GET /admin/cluster} of the first running node that answers, else empty. */
  Optional<JsonNode> clusterStatus() {
    for (int i = 0; i < size(); i++) {
      if (alive(i)) {
        Optional<JsonNode> c = json(i, "/admin/cluster");
        if (c.isPresent()) {
          return c;
        }
      }
    }
    return Optional.empty();
  }

  /**
   * Where the partitions run, from {@code GET /admin/cluster}: partition -> node index (-1 where no
   * member listed it); empty when no node answered or a member's shard region did not.
   */
  Optional<int[]> placement() {
    Optional<JsonNode> c = clusterStatus();
    if (c.isEmpty()) {
      return Optional.empty();
    }
    int[] hostOf = new int[partitions];
    Arrays.fill(hostOf, -1);
    for (JsonNode m : c.get().get("members")) {
      int node = indexOf(m.get("address").asText());
      JsonNode list = m.get("partitions");
      if (list == null || list.isNull()) {
        return Optional.empty();
      }
      for (JsonNode p : list) {
        if (node >= 0 && p.asInt() >= 0 && p.asInt() < partitions) {
          hostOf[p.asInt()] = node;
        }
      }
    }
    return Optional.of(hostOf);
  }

  /** Partitions per node, e.g. "22/21/21" (a node hosting none shows 0). */
  static String perNode(int[] hostOf, int size) {
    int[] counts = new int[size];
    for (int h : hostOf) {
      if (h >= 0) {
        counts[h]++;
      }
    }
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < size; i++) {
      b.append(i == 0 ? "" : "/").append(counts[i]);
    }
    return b.toString();
  }

  /**
   * Waits until every running node is ready and sees all of them as Up members, all partitions run
   * and (unless {@code pipeline} is null) the pipeline runs; throws after {@code timeout}.
   */
  void awaitUp(String pipeline, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    String last = "no answer";
    while (System.nanoTime() < deadline) {
      for (int i = 0; i < size(); i++) {
        if (processes[i] != null && !processes[i].isAlive()) {
          throw new IllegalStateException(
              nodeName(i)
                  + " exited with status "
                  + processes[i].exitValue()
                  + "; see its log in "
                  + logs);
        }
      }
      last = notUpBecause(pipeline);
      if (last == null) {
        return;
      }
      Thread.sleep(250);
    }
    throw new IllegalStateException(
        name + " was not up within " + timeout.toSeconds() + " s: " + last + "; logs in " + logs);
  }

  /** Why the cluster is not up yet, or null when it is. */
  private String notUpBecause(String pipeline) {
    int running = 0;
    for (int i = 0; i < size(); i++) {
      if (!alive(i)) {
        continue;
      }
      running++;
      Optional<JsonNode> c = json(i, "/admin/cluster");
      if (c.isEmpty()) {
        return nodeName(i) + " does not answer GET /admin/cluster";
      }
      JsonNode members = c.get().get("members");
      int up = 0;
      for (JsonNode m : members) {
        up += m.get("status").asText().equals("up") ? 1 : 0;
      }
      if (up != members.size()) {
        return nodeName(i) + " sees " + up + " of " + members.size() + " members up";
      }
      if (members.size() != pids().size()) {
        return nodeName(i) + " sees " + members.size() + " members";
      }
      if (json(i, "/health/ready").isEmpty()) {
        return nodeName(i) + " is not ready";
      }
    }
    if (running == 0) {
      return "no node runs";
    }
    int any = firstAlive();
    int partitionsRunning =
        json(any, "/admin/partitions").map(p -> p.get("running").asInt()).orElse(-1);
    if (partitionsRunning != partitions) {
      return partitionsRunning + " of " + partitions + " partitions running";
    }
    if (pipeline != null) {
      String state =
          json(any, "/admin/pipelines/" + pipeline)
              .map(p -> p.get("state").asText())
              .orElse("no answer");
      if (!state.equals("running")) {
        return "pipeline " + pipeline + " is " + state;
      }
    }
    return null;
  }

  int firstAlive() {
    for (int i = 0; i < size(); i++) {
      if (alive(i)) {
        return i;
      }
    }
    throw new IllegalStateException("no node of " + name + " runs");
  }

  /** Kills every node still running. */
  @Override
  public void close() {
    for (Process p : processes) {
      if (p != null) {
        p.destroyForcibly();
      }
    }
    for (Process p : processes) {
      if (p != null) {
        try {
          p.waitFor(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    }
  }

  private static void deleteTree(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> all = Files.walk(dir)) {
      for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }

  /**
   * A port nothing listens on now, from 20000..31999: below Linux's ephemeral range (32768 and up),
   * where any outbound connection on the machine may take a port between this pick and the node's
   * bind (a benchmark run lost a node that way).
   */
  static int freePort() {
    ThreadLocalRandom random = ThreadLocalRandom.current();
    for (int attempt = 0; attempt < 2_000; attempt++) {
      int port = random.nextInt(20_000, 32_000);
      try (ServerSocket s = new ServerSocket()) {
        s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
        return port;
      } catch (IOException taken) {
        // in use: try another
      }
    }
    throw new UncheckedIOException(new IOException("no free port in 20000..31999"));
  }
}
