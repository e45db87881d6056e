package io.weir.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.protocol.partition.Partitioning;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import java.util.function.ToDoubleFunction;
import org.HdrHistogram.Histogram;

/**
 * Benchmark of a cluster of real node processes on loopback (figures, not assertions). Every node
 * is {@code java -jar node/target/weir-node.jar node} with its own ports, a log file under {@code
 * node/target/bench-cluster/} and the split-brain resolver's {@code stable-after} from {@code
 * --stable-after}; the nodes' journals are in databases of their own on the private PostgreSQL
 * ({@value #DATABASE} for the 3-node cluster, {@value #DATABASE_ONE} for the 1-node one), created
 * afresh and dropped at the end.
 *
 * <ol>
 *   <li><b>Failover.</b> A 3-node cluster runs pipeline {@value #PIPELINE} (a slot on publication
 *       {@value #PUBLICATION} of table {@code public.src}, sink {@code partitions}: collection
 *       {@value #SOURCE}) while a writer commits small transactions into {@code public.src}. Each
 *       run SIGKILLs the slot owner ({@code slotOwner} of {@code GET /admin/cluster}), or with
 *       {@code --failover-fault freeze} SIGSTOPs it (a hung host: its sessions and walsender stay),
 *       and times, from the signal, with probes every {@value #PROBE_MILLIS} ms to the survivors:
 *       until a survivor no longer lists it as up (downed for its ended session, ADR 0051, or by
 *       the split-brain resolver); until {@code GET /admin/pipelines/<name>} says {@code running}
 *       with {@code transactions > 0} (streaming again on a survivor); until the row of the first
 *       source transaction begun after the kill is readable through {@code GET
 *       /v1/documents/src/<id>} (end to end). Then the node (SIGKILLed if it was frozen) is started
 *       again on its ports and the run waits until 3 members are up and every partition and the
 *       pipeline run.
 *   <li><b>Document-API writes, 1 node against 3.</b> {@code --clients} HTTP clients ({@code
 *       --http-client}, HTTP/1.1 keep-alive) each PUT distinct documents of {@code --body-bytes} to
 *       {@code /v1/documents/}{@value #COLLECTION}{@code /<id>}, waiting for each answer; client i
 *       sends to node i mod n. A 1-node cluster and the 3-node one (its pipeline stopped, its
 *       partitions spread evenly first) are measured side by side for {@code --rounds} rounds of
 *       {@code --seconds}, the order alternating: writes/s, latency (HdrHistogram), the share of
 *       writes a node had to forward to the partition's node, CPU.
 * </ol>
 *
 * Run it with {@code deploy/bin/bench-cluster.sh}. Prints its report to standard output, by design;
 * never a document body or any row value (nor the administrator token, which is random per run).
 */
public final class ClusterBenchmark {
  static final String DATABASE = "weir_cbench";
  static final String DATABASE_ONE = "weir_cbench1";
  static final String PIPELINE = "cbench";
  static final String SLOT = "weir_cbench_slot";
  static final String PUBLICATION = "cbench_pub";

  /** The collection the pipeline's partition sink writes public.src into. */
  static final String SOURCE = "src";

  /** The collection the throughput phase writes through the document API. */
  static final String COLLECTION = "bench";

  static final long PROBE_MILLIS = 200;

  /**
   * Probes of one kind awaiting their answer at most; beyond, a tick is skipped. Enough for a probe
   * every {@value #PROBE_MILLIS} ms to wait out its whole HTTP timeout (15 s): the admin routes'
   * asks to a singleton that was on the killed node go unanswered for their 10 s, and with fewer
   * (25 until 2026-12-06) the probes stopped going out until those came back, so no answer could
   * say "delivering" before about 10.2 s.
   */
  private static final int PROBES_IN_FLIGHT = 100;

  private static final Duration UP_TIMEOUT = Duration.ofMinutes(5);
  private static final Duration BALANCE_TIMEOUT = Duration.ofMinutes(3);

  /** Partitions not moved for this long are as spread as the coordinator makes them. */
  private static final Duration BALANCE_SETTLED = Duration.ofSeconds(35);

  private static final String LINE = "-".repeat(118);
  private static final long MAX_MICROS = PartitionBenchmark.MAX_MICROS;
  private static final ObjectMapper JSON = new ObjectMapper();

  private final ClusterBenchOptions options;

  /** The administrator token of every node: random, never printed. */
  private final String token;

  private final BenchDatabase three;
  private final BenchDatabase one;
  private final Path logs;
  private final List<String> jvmOptions;

  /** Random hex text that bodies take their padding from (a body is never printed). */
  private final String padding;

  private final List<BenchCluster> clusters = new ArrayList<>();
  private final ScheduledExecutorService timer =
      Executors.newSingleThreadScheduledExecutor(
          r -> {
            Thread t = new Thread(r, "bench-probes");
            t.setDaemon(true);
            return t;
          });

  private ClusterBenchmark(ClusterBenchOptions options) {
    this.options = options;
    byte[] secret = new byte[24];
    new SecureRandom().nextBytes(secret);
    this.token = "bench-" + HexFormat.of().formatHex(secret);
    this.three = new BenchDatabase(options.url, options.user, options.password, DATABASE);
    this.one = new BenchDatabase(options.url, options.user, options.password, DATABASE_ONE);
    this.logs = BenchCluster.nodeJar().getParent().resolve("bench-cluster");
    List<String> jvm = new ArrayList<>();
    jvm.add("-Xmx" + options.nodeHeap);
    jvm.add("-Dpekko.cluster.split-brain-resolver.stable-after=" + options.stableAfter);
    jvm.add("-Dweir.storage.acknowledged-marks.enabled=" + options.acknowledgedMarks);
    jvm.addAll(options.nodeOptions);
    this.jvmOptions = List.copyOf(jvm);
    this.padding = PartitionBenchmark.padding(options.bodyBytes);
  }

  public static void main(String[] args) {
    BenchMain.main(
        args,
        ClusterBenchOptions::parse,
        ClusterBenchOptions.USAGE,
        options -> new ClusterBenchmark(options).run());
  }

  private int run() throws Exception {
    System.out.println(
        "Weir cluster benchmark (node processes on loopback), "
            + ZonedDateTime.now(ZoneOffset.UTC)
                .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")));
    System.out.println(LINE);
    CdcBenchmark.machine();
    // No node outlives this program, whatever ends it.
    Runtime.getRuntime().addShutdownHook(new Thread(this::closeClusters, "bench-cluster-stop"));
    try {
      three.recreateEmpty();
      System.out.printf(
          "PostgreSQL:    %s, shared_buffers %s, synchronous_commit %s, fsync %s; databases %s (3 nodes)"
              + " and %s (1 node)%n",
          three.show("server_version"),
          three.show("shared_buffers"),
          three.show("synchronous_commit"),
          three.show("fsync"),
          DATABASE,
          DATABASE_ONE);
      Files.createDirectories(logs);
      try (var old = Files.newDirectoryStream(logs, "*.log")) {
        for (Path p : old) {
          Files.delete(p);
        }
      }
      System.out.printf(
          "nodes:         java %s -jar %s node; %d partitions per cluster; every node a seed; logs in %s%n",
          String.join(" ", jvmOptions),
          Path.of("").toAbsolutePath().relativize(BenchCluster.nodeJar()),
          options.partitions,
          Path.of("").toAbsolutePath().relativize(logs));
      System.out.println(LINE);
      if (options.failoverPhase()) {
        failover();
      }
      if (options.throughputPhase()) {
        throughput();
      }
      if (options.batchPhase()) {
        batches();
      }
      if (options.restartPhase()) {
        new RestartPhase(
                cluster(
                    new BenchCluster(
                        "restart", 1, one, token, logs, options.partitions, jvmOptions, List.of())),
                logs.resolve("restart-node.jsa"),
                options.restartRuns)
            .run();
      }
      System.out.println(
          "load average (1/5/15 min) at the end: "
              + CdcBenchmark.loadAverage()
              + " -- above about 1 means something besides this benchmark competed for the CPUs");
      return 0;
    } finally {
      closeClusters();
      timer.shutdownNow();
      if (!options.keepDatabase) {
        three.drop();
        one.drop();
      }
    }
  }

  private BenchCluster cluster(BenchCluster c) {
    synchronized (clusters) {
      clusters.add(c);
    }
    return c;
  }

  private void closeClusters() {
    synchronized (clusters) {
      clusters.forEach(BenchCluster::close);
    }
  }

  // ==== 1. failover ====

  /** One failover run: seconds from the kill (NaN: not within --failover-timeout). */
  private record Failover(
      int killed,
      String placement,
      double downed,
      double streaming,
      double readable,
      int rowPartition,
      boolean rowOnKilled,
      int newOwner,
      double rejoined,
      double partitions,
      FailoverTimeline steps) {}

  /**
   * Sets up the source table, its publication and the pipeline, starts the 3-node cluster, runs the
   * failover runs and kills the cluster again.
   */
  private void failover() throws Exception {
    try (Connection c = three.connect();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.src (id bigint PRIMARY KEY, v bigint NOT NULL, note text)");
      s.execute("CREATE PUBLICATION " + PUBLICATION + " FOR TABLE public.src");
    }
    Path config = logs.resolve("pipeline.conf");
    Files.writeString(
        config,
        String.join(
            "\n",
            "weir.pipelines." + PIPELINE + " {",
            "  slot = " + SLOT,
            "  publications = [" + PUBLICATION + "]",
            "  sink { type = partitions, collections { \"public.src\" = " + SOURCE + " } }",
            "}",
            ""));
    BenchCluster c =
        cluster(
            new BenchCluster(
                "f3",
                3,
                three,
                token,
                logs,
                options.partitions,
                jvmOptions,
                List.of("--config", config.toString())));
    long t0 = System.nanoTime();
    c.startAll();
    c.awaitUp(PIPELINE, UP_TIMEOUT);
    System.out.printf(
        Locale.ROOT,
        "1. failover: 3-node cluster f3 up in %.1f s (3 members up, %d partitions and the pipeline"
            + " running); partitions per node %s%n",
        (System.nanoTime() - t0) / 1e9,
        options.partitions,
        c.placement().map(p -> BenchCluster.perNode(p, 3)).orElse("?"));
    try {
      failover(c);
    } finally {
      c.close();
    }
  }

  private void failover(BenchCluster c) throws Exception {
    System.out.printf(
        "   pipeline %s (slot %s, publication %s of public.src; sink partitions: collection %s) on the"
            + " slot owner;%n   a writer commits transactions of one insert and one update into public.src, pausing %d ms"
            + " between them%n",
        PIPELINE, SLOT, PUBLICATION, SOURCE, options.writerIntervalMs);
    System.out.printf(
        "   each run %s the slot owner (slotOwner of GET /admin/cluster), then probes the survivors every"
            + " %d ms, in turn:%n"
            + "     downed    = a survivor's GET /admin/cluster no longer lists the killed member as up (ended-session"
            + " downing or the split-brain resolver, stable-after %s;%n                 timed at the probe's sending: the route takes the membership"
            + " first, then waits for the lost node)%n"
            + "     streaming = GET /admin/pipelines/%s answers state running with transactions > 0 (started again on a"
            + " survivor and delivering)%n"
            + "     readable  = GET /v1/documents/%s/<id> answers 200 for the row inserted by the first source transaction"
            + " begun after the kill%n"
            + "   (seconds from the signal to the first probe answer that says so, within about %d ms); then the"
            + " killed node starts again on its ports:%n"
            + "     rejoined  = from that start until 3 members are up, all partitions and the pipeline run (the next run"
            + " waits for it)%n",
        fault(), PROBE_MILLIS, options.stableAfter, PIPELINE, SOURCE, 2 * PROBE_MILLIS);
    SourceWriter writer = new SourceWriter(three, options.writerIntervalMs);
    Thread writerThread = new Thread(writer, "bench-source-writer");
    writerThread.setDaemon(true);
    writerThread.start();
    List<Failover> runs = new ArrayList<>();
    try {
      // Streaming before the first kill: the writer's first row is readable.
      long ready = System.nanoTime() + TimeUnit.SECONDS.toNanos(options.failoverTimeout);
      while (!readable(c, c.firstAlive(), "1")) {
        if (System.nanoTime() > ready || writer.error.get() != null) {
          throw new IllegalStateException(
              "the writer's first row did not reach the document API", writer.error.get());
        }
        Thread.sleep(PROBE_MILLIS);
      }
      System.out.printf(
          "%-4s %-10s %-11s %8s %10s %9s %-20s %-9s %9s%n",
          "run",
          "killed",
          "partitions",
          "downed s",
          "streaming s",
          "readable s",
          "row's partition",
          "new owner",
          "rejoined s");
      for (int r = 1; r <= options.failoverRuns; r++) {
        Thread.sleep(2000); // the writer and the pipeline in their stride
        if (writer.error.get() != null) {
          throw new IllegalStateException("the source writer failed", writer.error.get());
        }
        Failover f = failoverRun(c, writer);
        runs.add(f);
        System.out.printf(
            Locale.ROOT,
            "%-4d %-10s %-11s %8s %10s %9s %-20s %-9s %9s%n",
            r,
            "node " + (f.killed() + 1),
            f.placement(),
            seconds(f.downed()),
            seconds(f.streaming()),
            seconds(f.readable()),
            f.rowPartition() < 0
                ? "?"
                : f.rowPartition() + (f.rowOnKilled() ? " (on killed node)" : " (on a survivor)"),
            f.newOwner() < 0 ? "?" : "node " + (f.newOwner() + 1),
            seconds(f.rejoined()));
      }
    } finally {
      writer.stop = true;
      writerThread.join(TimeUnit.SECONDS.toMillis(30));
    }
    if (writer.error.get() != null) {
      throw new IllegalStateException("the source writer failed", writer.error.get());
    }
    System.out.printf(
        "partitions = partitions per node (node 1/2/3) when the slot owner was killed; row's partition ="
            + " the partition of the row timed by 'readable'%nwriter: %,d source transactions committed%n",
        writer.transactions.get());
    System.out.println(LINE);
    System.out.printf(
        Locale.ROOT,
        "failover summary over %d runs (stable-after %s), seconds from the %s, median / max:"
            + "%n   downed %s / %s; streaming again %s / %s; new row readable %s / %s; (rejoin after restart %s / %s)%n",
        runs.size(),
        options.stableAfter,
        signal(),
        figure(median(runs, Failover::downed)),
        figure(max(runs, Failover::downed)),
        figure(median(runs, Failover::streaming)),
        figure(max(runs, Failover::streaming)),
        figure(median(runs, Failover::readable)),
        figure(max(runs, Failover::readable)),
        figure(median(runs, Failover::rejoined)),
        figure(max(runs, Failover::rejoined)));
    steps(runs);
    long missing =
        runs.stream()
            .filter(f -> Double.isNaN(f.streaming()) || Double.isNaN(f.readable()))
            .count();
    if (missing > 0) {
      System.out.printf(
          "   %d run(s) did not stream again or make the row readable within %d s: left out of the figures%n",
          missing, options.failoverTimeout);
    }
    System.out.println(LINE);
  }

  /**
   * Where each run's time went, from the survivors' logs ({@link FailoverTimeline}) and the probes,
   * and the median of each step over the runs.
   */
  private void steps(List<Failover> runs) {
    System.out.printf(
        "where the time went, seconds from the %s (survivors' logs: unreachable = failure"
            + " detector, downed = ended-session downing or resolver's decision,%n   removed = leader removes the member,"
            + " singletons = pipelines' singleton starts on a survivor, streaming = the pipeline's"
            + " 'streaming slot' line;%n   probes: delivering = streaming with transactions > 0,"
            + " partitions = all %d partitions running on the survivors):%n",
        signal(), options.partitions);
    System.out.printf(
        "%-4s %11s %7s %8s %11s %10s %11s %11s%n",
        "run",
        "unreachable",
        "downed",
        "removed",
        "singletons",
        "streaming",
        "delivering",
        "partitions");
    for (int r = 0; r < runs.size(); r++) {
      Failover f = runs.get(r);
      FailoverTimeline t = f.steps();
      System.out.printf(
          Locale.ROOT,
          "%-4d %11s %7s %8s %11s %10s %11s %11s%n",
          r + 1,
          figure(t.unreachable()),
          figure(t.downed()),
          figure(t.removed()),
          figure(t.singletons()),
          figure(t.streaming()),
          seconds(f.streaming()),
          seconds(f.partitions()));
    }
    System.out.printf(
        Locale.ROOT,
        "steps, median over the runs: detection %s s; stable-after %s s; removal %s s; removal margin"
            + " and hand-over %s s;%n   pipeline start to streaming %s s; to the first delivery %s s;"
            + " downing to streaming %s s, to all partitions running %s s%n",
        figure(median(runs, f -> f.steps().unreachable())),
        figure(median(runs, f -> f.steps().downed() - f.steps().unreachable())),
        figure(median(runs, f -> f.steps().removed() - f.steps().downed())),
        figure(median(runs, f -> f.steps().singletons() - f.steps().removed())),
        figure(median(runs, f -> f.steps().streaming() - f.steps().singletons())),
        figure(median(runs, f -> f.streaming() - f.steps().streaming())),
        figure(median(runs, f -> f.steps().streaming() - f.steps().downed())),
        figure(median(runs, f -> f.partitions() - f.steps().downed())));
  }

  /** What a run does to the slot owner, as the report says it. */
  private String fault() {
    return options.failoverFault.equals("freeze")
        ? "freezes (SIGSTOP; SIGKILLed once measured)"
        : "SIGKILLs";
  }

  /** The signal the run's seconds count from. */
  private String signal() {
    return options.failoverFault.equals("freeze") ? "SIGSTOP" : "SIGKILL";
  }

  private Failover failoverRun(BenchCluster c, SourceWriter writer) throws Exception {
    int owner = slotOwner(c);
    Optional<int[]> before = c.placement();
    String killedAddress = c.address(owner);
    writer.tracked.set(null);
    boolean freeze = options.failoverFault.equals("freeze");
    if (freeze) {
      c.freeze(owner);
    } else {
      c.kill(owner);
    }
    long killed = System.nanoTime();
    Instant killedAt = Instant.now();
    writer.trackAfter = killed;
    long deadline = killed + TimeUnit.SECONDS.toNanos(options.failoverTimeout);
    List<Integer> survivors = new ArrayList<>();
    for (int i = 0; i < c.size(); i++) {
      if (i != owner && c.alive(i)) {
        survivors.add(i);
      }
    }
    // GET /admin/cluster takes the membership when the request arrives, then waits for the lost
    // node's shard region (3 s) and the pipeline manager: its send time is when the state held.
    CompletableFuture<Long> downed =
        firstAnswer(
            c,
            survivors,
            "/admin/cluster",
            true,
            r -> {
              JsonNode status = json(r);
              if (status == null) {
                return false;
              }
              for (JsonNode m : status.get("members")) {
                if (m.get("address").asText().equals(killedAddress)) {
                  return !m.get("status").asText().equals("up");
                }
              }
              return true;
            },
            deadline);
    CompletableFuture<Long> streaming =
        firstAnswer(
            c,
            survivors,
            "/admin/pipelines/" + PIPELINE,
            false,
            r -> {
              JsonNode status = json(r);
              return status != null
                  && status.path("state").asText().equals("running")
                  && status.path("transactions").asLong() > 0;
            },
            deadline);
    CompletableFuture<Long> partitionsBack =
        firstAnswer(
            c,
            survivors,
            "/admin/partitions",
            false,
            r -> {
              JsonNode status = json(r);
              return status != null
                  && status.path("running").asInt() == options.partitions
                  && status.path("byNode").size() == survivors.size();
            },
            deadline);
    // The row of the first source transaction begun after the kill.
    long[] row;
    while ((row = writer.tracked.get()) == null
        && System.nanoTime() < deadline
        && writer.error.get() == null) {
      Thread.sleep(5);
    }
    writer.trackAfter = Long.MAX_VALUE;
    CompletableFuture<Long> readable =
        row == null
            ? CompletableFuture.completedFuture(-1L)
            : firstAnswer(
                c,
                survivors,
                "/v1/documents/" + SOURCE + "/" + row[0],
                false,
                r -> r.statusCode() == 200,
                deadline);
    long waitMillis = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()) + 30_000;
    double downedS = since(killed, downed.get(waitMillis, TimeUnit.MILLISECONDS));
    double streamingS = since(killed, streaming.get(waitMillis, TimeUnit.MILLISECONDS));
    double readableS = since(killed, readable.get(waitMillis, TimeUnit.MILLISECONDS));
    double partitionsS = since(killed, partitionsBack.get(waitMillis, TimeUnit.MILLISECONDS));
    FailoverTimeline steps =
        FailoverTimeline.read(
            survivors.stream().map(c::currentLog).toList(), killedAt, killedAddress, PIPELINE);
    int rowPartition =
        row == null
            ? -1
            : Partitioning.partitionOf(SOURCE, Long.toString(row[0]), options.partitions);
    boolean rowOnKilled =
        before.isPresent() && rowPartition >= 0 && before.get()[rowPartition] == owner;
    int newOwner = Double.isNaN(streamingS) ? -1 : slotOwner(c);
    if (freeze) {
      c.kill(owner);
    }
    long restart = System.nanoTime();
    c.start(owner);
    c.awaitUp(PIPELINE, UP_TIMEOUT);
    double rejoined = (System.nanoTime() - restart) / 1e9;
    return new Failover(
        owner,
        before.map(p -> BenchCluster.perNode(p, c.size())).orElse("?"),
        downedS,
        streamingS,
        readableS,
        rowPartition,
        rowOnKilled,
        newOwner,
        rejoined,
        partitionsS,
        steps);
  }

  /** Node index of the slot owner as GET /admin/cluster names it; waits up to a minute for one. */
  private int slotOwner(BenchCluster c) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(1);
    while (System.nanoTime() < deadline) {
      Optional<JsonNode> status = c.clusterStatus();
      if (status.isPresent() && !status.get().path("slotOwner").isNull()) {
        int i = c.indexOf(status.get().path("slotOwner").asText());
        if (i >= 0 && c.alive(i)) {
          return i;
        }
      }
      Thread.sleep(PROBE_MILLIS);
    }
    throw new IllegalStateException("no node was named slot owner within a minute");
  }

  private boolean readable(BenchCluster c, int node, String id) {
    try {
      return c.getAsync(node, "/v1/documents/" + SOURCE + "/" + id, Duration.ofSeconds(15))
              .get()
              .statusCode()
          == 200;
    } catch (Exception e) {
      return false;
    }
  }

  /**
   * Completes with the moment (System.nanoTime) the first answer satisfying {@code done} arrived
   * (or, with {@code sendTime}, when that probe was sent), or -1 at {@code deadline}. A probe goes
   * to the next of {@code nodes} every {@value #PROBE_MILLIS} ms (asynchronously: a probe stuck on
   * a lost node does not hold up the next).
   */
  private CompletableFuture<Long> firstAnswer(
      BenchCluster c,
      List<Integer> nodes,
      String path,
      boolean sendTime,
      Predicate<HttpResponse<String>> done,
      long deadline) {
    CompletableFuture<Long> result = new CompletableFuture<>();
    AtomicInteger inFlight = new AtomicInteger();
    AtomicInteger turn = new AtomicInteger();
    ScheduledFuture<?> task =
        timer.scheduleAtFixedRate(
            () -> {
              if (result.isDone()) {
                return;
              }
              if (System.nanoTime() > deadline) {
                result.complete(-1L);
                return;
              }
              if (inFlight.get() >= PROBES_IN_FLIGHT) {
                return;
              }
              int node = nodes.get(Math.floorMod(turn.getAndIncrement(), nodes.size()));
              inFlight.incrementAndGet();
              long sent = System.nanoTime();
              c.getAsync(node, path, Duration.ofSeconds(15))
                  .whenComplete(
                      (r, e) -> {
                        long now = System.nanoTime();
                        inFlight.decrementAndGet();
                        if (e == null && done.test(r)) {
                          result.complete(sendTime ? sent : now);
                        }
                      });
            },
            0,
            PROBE_MILLIS,
            TimeUnit.MILLISECONDS);
    result.whenComplete((v, e) -> task.cancel(false));
    return result;
  }

  private static JsonNode json(HttpResponse<String> r) {
    if (r.statusCode() != 200) {
      return null;
    }
    try {
      return JSON.readTree(r.body());
    } catch (IOException e) {
      return null;
    }
  }

  private static double since(long start, long at) {
    return at < 0 ? Double.NaN : (at - start) / 1e9;
  }

  /**
   * Commits transactions into public.src until stopped: each inserts the next id (v = id, note
   * null) and adds 1 to v of a random earlier row. Remembers the first transaction begun after
   * {@link #trackAfter} (its id and commit time) in {@link #tracked}.
   */
  private static final class SourceWriter implements Runnable {
    private final BenchDatabase db;
    private final long pauseMillis;
    final AtomicLong transactions = new AtomicLong();
    final AtomicReference<Throwable> error = new AtomicReference<>();
    final AtomicReference<long[]> tracked = new AtomicReference<>();
    volatile long trackAfter = Long.MAX_VALUE;
    volatile boolean stop;

    SourceWriter(BenchDatabase db, long pauseMillis) {
      this.db = db;
      this.pauseMillis = pauseMillis;
    }

    @Override
    public void run() {
      SplittableRandom random = new SplittableRandom(1);
      try (Connection c = db.connect()) {
        c.setAutoCommit(false);
        try (PreparedStatement insert =
                c.prepareStatement("INSERT INTO public.src (id, v) VALUES (?, ?)");
            PreparedStatement update =
                c.prepareStatement("UPDATE public.src SET v = v + 1 WHERE id = ?")) {
          long next = 1;
          while (!stop) {
            long began = System.nanoTime();
            insert.setLong(1, next);
            insert.setLong(2, next);
            insert.executeUpdate();
            update.setLong(1, 1 + random.nextLong(next));
            update.executeUpdate();
            c.commit();
            long committed = System.nanoTime();
            if (began > trackAfter && tracked.get() == null) {
              tracked.set(new long[] {next, committed});
            }
            next++;
            transactions.incrementAndGet();
            if (pauseMillis > 0) {
              Thread.sleep(pauseMillis);
            }
          }
        }
      } catch (Throwable t) {
        error.set(t);
      }
    }
  }

  // ==== 2. document-API writes, 1 node against 3 ====

  /** One measured (or warm-up) round of one configuration. */
  private record Round(
      int nodes,
      boolean routed,
      long writes,
      long nanos,
      Histogram latency,
      long forwarded,
      double nodeCpu,
      double nodeJit,
      double nodeGc,
      double pgCpu,
      double clientCpu,
      double idleCpu,
      double machineCpu,
      Map<String, Long> failures) {
    double seconds() {
      return nanos / 1e9;
    }

    double rate() {
      return writes / seconds();
    }

    Round routed(boolean r) {
      return new Round(
          nodes,
          r,
          writes,
          nanos,
          latency,
          forwarded,
          nodeCpu,
          nodeJit,
          nodeGc,
          pgCpu,
          clientCpu,
          idleCpu,
          machineCpu,
          failures);
    }

    /** Node CPU per acknowledged write, microseconds. */
    double cpuPerWrite() {
      return nodeCpu * 1e6 / Math.max(1, writes);
    }

    /** Node CPU per acknowledged write without the JIT compiler's threads, microseconds. */
    double cpuPerWriteWithoutJit() {
      return (nodeCpu - nodeJit) * 1e6 / Math.max(1, writes);
    }

    /** The share of writes sent to a node that does not host the document's partition. */
    double forwardedShare() {
      return (double) forwarded / Math.max(1, writes + failed());
    }

    long failed() {
      return failures.values().stream().mapToLong(Long::longValue).sum();
    }
  }

  private void throughput() throws Exception {
    System.out.printf(
        "2. document-API writes: %d HTTP clients (%s, HTTP/1.1 keep-alive), each PUTs a distinct %,d-byte JSON"
            + " document to%n   /v1/documents/%s/<id> as administrator and waits for the answer before the next; client i"
            + " writes through node i mod n;%n   1 node (cluster w1) and 3 nodes (w3) side by side, %d rounds of %d s, the"
            + " order alternating, after a warm-up of %d s each; acknowledged marks %s%n",
        options.clients,
        options.httpClient.equals("jdk") ? "java.net.http" : "plain: the protocol written directly",
        options.bodyBytes,
        COLLECTION,
        options.rounds,
        options.seconds,
        options.warmupSeconds,
        options.acknowledgedMarks);
    System.out.println(
        "   NOTE: all nodes, PostgreSQL and these clients share this machine's CPUs: 3 nodes are not expected"
            + " to be faster here.\n   The comparison shows what spreading the partitions over 3 processes costs (2 in 3 writes"
            + " are forwarded to another node).");
    // Fresh clusters in fresh databases, without pipelines, all nodes started at once: the
    // partitions
    // are spread as the nodes join (after a single node's restart the coordinator moves one every
    // 10 s).
    three.recreateEmpty();
    one.recreateEmpty();
    BenchCluster c1 =
        cluster(
            new BenchCluster("w1", 1, one, token, logs, options.partitions, jvmOptions, List.of()));
    BenchCluster c3 =
        cluster(
            new BenchCluster(
                "w3", 3, three, token, logs, options.partitions, jvmOptions, List.of()));
    long t0 = System.nanoTime();
    c1.startAll();
    c3.startAll();
    c1.awaitUp(null, UP_TIMEOUT);
    c3.awaitUp(null, UP_TIMEOUT);
    System.out.printf(
        Locale.ROOT,
        "   w1 (database %s) and w3 (database %s) up in %.1f s%n",
        DATABASE_ONE,
        DATABASE,
        (System.nanoTime() - t0) / 1e9);
    int[] placement = awaitBalanced(c3);
    System.out.printf("   w3: partitions per node %s%n", BenchCluster.perNode(placement, 3));
    ExecutorService pool =
        Executors.newFixedThreadPool(
            options.clients,
            r -> {
              Thread t = new Thread(r, "bench-http-client");
              t.setDaemon(true);
              return t;
            });
    try {
      if (options.warmupSeconds > 0) {
        for (BenchCluster c : List.of(c1, c3)) {
          Round w =
              writeRound(c, c == c1 ? c3 : c1, pool, "w" + c.size(), options.warmupSeconds, false);
          System.out.printf(
              Locale.ROOT,
              "   warm-up (not reported), %d node%s: %,d writes, %,.0f writes/s, failed %d%n",
              c.size(),
              c.size() == 1 ? "" : "s",
              w.writes(),
              w.rate(),
              w.failed());
        }
      }
      System.out.printf(
          "%5s %5s %8s %6s %9s | %7s %7s %7s %8s | %5s | %5s %5s %5s %5s %5s %5s %5s  %s%n",
          "round",
          "nodes",
          "writes",
          "s",
          "writes/s",
          "p50 ms",
          "p90 ms",
          "p99 ms",
          "max ms",
          "fwd",
          "nodes",
          "jit",
          "gc",
          "PG",
          "cli",
          "idle",
          "all",
          "failed");
      List<Round> ones = new ArrayList<>();
      List<Round> threes = new ArrayList<>();
      List<Round> routed = new ArrayList<>();
      for (int r = 1; r <= options.rounds; r++) {
        List<BenchCluster> order = r % 2 == 1 ? List.of(c1, c3) : List.of(c3, c1);
        List<Round> these = new ArrayList<>();
        for (BenchCluster c : order) {
          these.add(
              writeRound(
                  c, c == c1 ? c3 : c1, pool, "r" + r + "n" + c.size(), options.seconds, false));
          if (options.routed && c == c3) {
            // Right after the same cluster's forwarded round: the difference is the forwarding.
            these.add(writeRound(c3, c1, pool, "r" + r + "n3r", options.seconds, true));
          }
        }
        for (Round round : these) {
          (round.nodes() == 1 ? ones : round.routed() ? routed : threes).add(round);
          double s = round.seconds();
          System.out.printf(
              Locale.ROOT,
              "%5d %5s %,8d %6.1f %,9.0f | %7.2f %7.2f %7.2f %8.1f | %4.0f%% | %5.2f %5.2f %5.2f %5.2f %5.2f %5.2f %5.2f  %s%n",
              r,
              round.nodes() + (round.routed() ? "r" : ""),
              round.writes(),
              s,
              round.rate(),
              ms(round.latency(), 50),
              ms(round.latency(), 90),
              ms(round.latency(), 99),
              round.latency().getMaxValue() / 1000.0,
              100.0 * round.forwarded() / Math.max(1, round.writes() + round.failed()),
              round.nodeCpu() / s,
              round.nodeJit() / s,
              round.nodeGc() / s,
              round.pgCpu() / s,
              round.clientCpu() / s,
              round.idleCpu() / s,
              round.machineCpu() / s,
              round.failures().isEmpty() ? "0" : round.failures().toString());
        }
      }
      System.out.println(
          "latency = from sending the PUT to its answer (200: durable in the partition's journal); fwd ="
              + " writes sent to a node that does not host\nthe document's partition (by GET /admin/cluster before the round);"
              + " nodes / PG / cli / idle / all = cores busy during the round:\nthe measured cluster's node processes (jit, gc:"
              + " their JIT compiler threads and their GC and VM threads), the"
              + " PostgreSQL backends of its database, this JVM (the clients), the other cluster's node processes (idle),"
              + "\nthe whole machine (other work on it included)");
      System.out.println(LINE);
      summary(ones, threes);
      if (!routed.isEmpty()) {
        forwarding(threes, routed);
      }
    } finally {
      pool.shutdownNow();
    }
    System.out.println(LINE);
  }

  private void summary(List<Round> ones, List<Round> threes) {
    double[] ratios = new double[ones.size()];
    StringBuilder each = new StringBuilder();
    for (int i = 0; i < ratios.length; i++) {
      ratios[i] = threes.get(i).rate() / ones.get(i).rate();
      each.append(i == 0 ? "" : ", ").append(String.format(Locale.ROOT, "%.2f", ratios[i]));
    }
    for (List<Round> rounds : List.of(ones, threes)) {
      Histogram all = new Histogram(MAX_MICROS, 3);
      rounds.forEach(r -> all.add(r.latency()));
      double[] rates = rounds.stream().mapToDouble(Round::rate).toArray();
      double cores =
          rounds.stream().mapToDouble(r -> r.nodeCpu() / r.seconds()).sum() / rounds.size();
      // The same cluster's CPU while the other one was measured: what it costs doing nothing.
      List<Round> others = rounds == ones ? threes : ones;
      double idleCores =
          others.stream().mapToDouble(r -> r.idleCpu() / r.seconds()).sum() / others.size();
      double cpuPer1k =
          rounds.stream().mapToDouble(Round::nodeCpu).sum()
              * 1000
              * 1000
              / Math.max(1, rounds.stream().mapToLong(Round::writes).sum());
      int nodes = rounds.get(0).nodes();
      System.out.printf(
          Locale.ROOT,
          "%d node%s: median %,.0f writes/s (%,.0f..%,.0f) over %d rounds; all rounds' writes: p50 %.2f ms,"
              + " p99 %.2f ms, max %.1f ms;%n          nodes' CPU %.2f cores while writing (%.0f ms per 1,000 writes),"
              + " %.2f cores while idle%n",
          nodes,
          nodes == 1 ? " " : "s",
          median(rates),
          min(rates),
          max(rates),
          rates.length,
          ms(all, 50),
          ms(all, 99),
          all.getMaxValue() / 1000.0,
          cores,
          cpuPer1k,
          idleCores);
    }
    System.out.printf(
        Locale.ROOT,
        "3 nodes / 1 node, writes/s per round: %s; median %.2f%n",
        each,
        median(ratios));
    System.out.println(
        "(one machine: every node and PostgreSQL share the same CPUs, so the ratio measures the cost of"
            + " forwarding between nodes, not scaling)");
  }

  /**
   * What a forwarded write costs against a local one, from the 3-node rounds whose clients write
   * through node i mod 3 (about 2 in 3 forwarded) and the ones right after them whose clients write
   * only documents their node hosts (none forwarded): per round pair, the extra node CPU per write
   * divided by the forwarded share is the extra CPU of one forwarded write.
   */
  private static void forwarding(List<Round> forwarded, List<Round> routed) {
    int n = Math.min(forwarded.size(), routed.size());
    double[] local = new double[n];
    double[] extra = new double[n];
    double[] ratio = new double[n];
    double[] ratioWithoutJit = new double[n];
    StringBuilder each = new StringBuilder();
    for (int i = 0; i < n; i++) {
      Round f = forwarded.get(i);
      Round l = routed.get(i);
      local[i] = l.cpuPerWrite();
      extra[i] = (f.cpuPerWrite() - l.cpuPerWrite()) / Math.max(0.01, f.forwardedShare());
      ratio[i] = (local[i] + extra[i]) / local[i];
      double localWithoutJit = l.cpuPerWriteWithoutJit();
      ratioWithoutJit[i] =
          (localWithoutJit
                  + (f.cpuPerWriteWithoutJit() - localWithoutJit)
                      / Math.max(0.01, f.forwardedShare()))
              / localWithoutJit;
      each.append(i == 0 ? "" : "; ")
          .append(
              String.format(
                  Locale.ROOT,
                  "%.0f µs routed, %.0f µs with %.0f%% forwarded -> %.0f µs more per forwarded"
                      + " write (%.2fx)",
                  l.cpuPerWrite(),
                  f.cpuPerWrite(),
                  100 * f.forwardedShare(),
                  extra[i],
                  ratio[i]));
    }
    System.out.printf(
        Locale.ROOT,
        "forwarding, 3 nodes' CPU per write per round pair: %s%n"
            + "forwarded / local write, node CPU: median %.2fx (a local write %.0f µs, a forwarded one"
            + " %.0f µs more; without the JIT's threads %.2fx; issue 28's goal: at most 1.5x)%n",
        each,
        median(ratio),
        median(local),
        median(extra),
        median(ratioWithoutJit));
  }

  /**
   * Waits until the partitions of {@code c} are spread evenly (the counts per node differ by at
   * most one; the shard coordinator moves a few every 10 s after a node joined) or {@value
   * #BALANCE_TIMEOUT} passed; returns the placement.
   */
  private int[] awaitBalanced(BenchCluster c) throws InterruptedException {
    long deadline = System.nanoTime() + BALANCE_TIMEOUT.toNanos();
    long t0 = System.nanoTime();
    int[] last = null;
    long unchangedSince = System.nanoTime();
    while (System.nanoTime() < deadline) {
      Optional<int[]> p = c.placement();
      if (p.isPresent()) {
        if (last == null || !Arrays.equals(last, p.get())) {
          unchangedSince = System.nanoTime();
        }
        last = p.get();
        int[] counts = new int[c.size()];
        boolean all = true;
        for (int h : last) {
          if (h < 0) {
            all = false;
          } else {
            counts[h]++;
          }
        }
        int lo = Arrays.stream(counts).min().orElse(0);
        int hi = Arrays.stream(counts).max().orElse(0);
        if (all && hi - lo <= 1) {
          System.out.printf(
              Locale.ROOT,
              "   %s: partitions spread evenly after %.1f s of waiting%n",
              c.name(),
              (System.nanoTime() - t0) / 1e9);
          return last;
        }
        // The coordinator moves a partition every 10 s while it finds the spread uneven by its
        // own threshold; unchanged for longer than a few of those, it is done.
        if (all && System.nanoTime() - unchangedSince > BALANCE_SETTLED.toNanos()) {
          System.out.printf(
              Locale.ROOT,
              "   %s: partitions unmoved for %d s after %.1f s of waiting (the coordinator's spread)%n",
              c.name(),
              BALANCE_SETTLED.toSeconds(),
              (System.nanoTime() - t0) / 1e9);
          return last;
        }
      }
      Thread.sleep(1000);
    }
    if (last == null) {
      throw new IllegalStateException("GET /admin/cluster did not name the partitions' nodes");
    }
    System.out.printf(
        "   %s: partitions still not spread evenly after %d s; measuring as they are%n",
        c.name(), BALANCE_TIMEOUT.toSeconds());
    return last;
  }

  /**
   * One round on {@code c} (the CPU of {@code idle}, the other cluster, is measured too): every
   * client PUTs distinct documents (ids {@code <tag>-<client>-<n>}) until {@code seconds} have
   * passed, each through its node; timed from releasing the clients to the last answer.
   */
  private Round writeRound(
      BenchCluster c,
      BenchCluster idle,
      ExecutorService pool,
      String tag,
      int seconds,
      boolean routed)
      throws Exception {
    int[] hostOf =
        c.placement()
            .orElseThrow(() -> new IllegalStateException("GET /admin/cluster did not answer"));
    Map<String, Long> failures = new ConcurrentHashMap<>();
    AtomicLong forwarded = new AtomicLong();
    CountDownLatch go = new CountDownLatch(1);
    long nanos = TimeUnit.SECONDS.toNanos(seconds);
    List<Future<Histogram>> clients = new ArrayList<>();
    for (int k = 0; k < options.clients; k++) {
      int client = k;
      int node = k % c.size();
      clients.add(
          pool.submit(
              () -> {
                SplittableRandom random = new SplittableRandom(System.nanoTime() + client);
                Histogram h = new Histogram(MAX_MICROS, 3);
                String base = c.uri(node, "/v1/documents/" + COLLECTION + "/").toString();
                // A client of its own per round: no connection left idle since an earlier round
                // (the server may have closed it).
                try (BenchHttp http = BenchHttp.of(options.httpClient, token)) {
                  go.await();
                  long deadline = System.nanoTime() + nanos;
                  long n = 0;
                  while (System.nanoTime() < deadline) {
                    String id = tag + "-" + client + "-" + (n++);
                    if (hostOf[Partitioning.partitionOf(COLLECTION, id, hostOf.length)] != node) {
                      if (routed) {
                        continue; // routed: only documents whose partition this node hosts
                      }
                      forwarded.incrementAndGet();
                    }
                    URI uri = URI.create(base + id);
                    String body = PartitionBenchmark.body(random, id, options.bodyBytes, padding);
                    long t = System.nanoTime();
                    try {
                      BenchHttp.Answer r = http.send("PUT", uri, body, Duration.ofSeconds(30));
                      if (r.status() == 200) {
                        h.recordValue(Math.min((System.nanoTime() - t) / 1000, MAX_MICROS));
                      } else {
                        failures.merge("HTTP " + r.status(), 1L, Long::sum);
                      }
                    } catch (IOException e) {
                      failures.merge(e.getClass().getSimpleName(), 1L, Long::sum);
                    }
                  }
                }
                return h;
              }));
    }
    return measured(c, idle, go, clients, null, forwarded::get, failures).routed(routed);
  }

  /**
   * Releases the clients waiting on {@code go} and measures them to their end: CPU of {@code c}'s
   * nodes, its database's server processes, this JVM, {@code idle}'s nodes (null: none) and the
   * machine. {@code writes}: what the round wrote (null: the requests answered, the histogram's
   * count).
   */
  private static Round measured(
      BenchCluster c,
      BenchCluster idle,
      CountDownLatch go,
      List<Future<Histogram>> clients,
      java.util.function.LongSupplier writes,
      java.util.function.LongSupplier forwarded,
      Map<String, Long> failures)
      throws Exception {
    double nodeCpu = c.cpuSeconds();
    Map<Long, CpuTimes.ThreadCpu> nodeThreads = c.threadCpu();
    double pgCpu = c.database().backendCpuSeconds();
    double clientCpu = CpuTimes.now().self();
    double idleCpu = idle == null ? 0 : idle.cpuSeconds();
    double machineCpu = CpuTimes.machineBusy();
    long start = System.nanoTime();
    go.countDown();
    Histogram latency = new Histogram(MAX_MICROS, 3);
    for (Future<Histogram> f : clients) {
      latency.add(f.get());
    }
    long elapsed = System.nanoTime() - start;
    return new Round(
        c.size(),
        false,
        writes == null ? latency.getTotalCount() : writes.getAsLong(),
        elapsed,
        latency,
        forwarded.getAsLong(),
        c.cpuSeconds() - nodeCpu,
        c.jitSecondsSince(nodeThreads),
        c.gcSecondsSince(nodeThreads),
        c.database().backendCpuSeconds() - pgCpu,
        CpuTimes.now().self() - clientCpu,
        idle == null ? 0 : idle.cpuSeconds() - idleCpu,
        CpuTimes.machineBusy() - machineCpu,
        new TreeMap<>(failures));
  }

  // ==== 3. batch writes against single PUTs, one node ====

  private void batches() throws Exception {
    System.out.printf(
        "3. batch writes: %d HTTP clients each POST /v1/documents/batch with %d distinct %,d-byte documents of"
            + " /v1/documents/%s\n   (over all %d partitions) and wait for the answer before the next; against"
            + " %d clients PUTting one document each (--clients);\n   one node, %d rounds of %d s each, the order"
            + " alternating, after a warm-up of %d s each; only applied documents counted; acknowledged marks %s;\n   and"
            + " as a reference without Weir, %d JDBC clients each upserting one row per commit (autocommit) into a plain"
            + " table\n   public.plain_docs (id text PRIMARY KEY, body text) of the same database, same bodies, same durability%n",
        options.batchClients,
        options.batchItems,
        options.bodyBytes,
        COLLECTION,
        options.partitions,
        options.clients,
        options.rounds,
        options.batchSeconds,
        options.batchWarmupSeconds,
        options.acknowledgedMarks,
        options.clients);
    one.recreateEmpty();
    BenchCluster c1 =
        cluster(
            new BenchCluster("b1", 1, one, token, logs, options.partitions, jvmOptions, List.of()));
    long t0 = System.nanoTime();
    c1.startAll();
    c1.awaitUp(null, UP_TIMEOUT);
    awaitBalanced(c1);
    System.out.printf(
        Locale.ROOT,
        "   b1 (database %s) up in %.1f s%n",
        DATABASE_ONE,
        (System.nanoTime() - t0) / 1e9);
    ExecutorService pool =
        Executors.newFixedThreadPool(
            Math.max(options.clients, options.batchClients),
            r -> {
              Thread t = new Thread(r, "bench-http-client");
              t.setDaemon(true);
              return t;
            });
    try {
      if (options.batchWarmupSeconds > 0) {
        Round wb =
            options.batchKinds.contains("batch")
                ? batchRound(c1, pool, "wb", options.batchWarmupSeconds)
                : null;
        Round ws =
            options.batchKinds.contains("put")
                ? writeRound(c1, null, pool, "ws", options.batchWarmupSeconds, false)
                : null;
        System.out.printf(
            Locale.ROOT,
            "   warm-up (not reported): batches %,.0f documents/s, single PUTs %,.0f writes/s%n",
            wb == null ? Double.NaN : wb.rate(),
            ws == null ? Double.NaN : ws.rate());
      }
      System.out.printf(
          "%5s %7s %9s %6s %11s | %9s %9s %9s | %6s %5s %5s %5s %5s %5s %7s %7s  %s%n",
          "round",
          "kind",
          "docs",
          "s",
          "docs/s",
          "p50 ms",
          "p99 ms",
          "max ms",
          "node",
          "JIT",
          "GC",
          "PG",
          "cli",
          "all",
          "µs/doc",
          "w/o JIT",
          "not applied");
      try (Connection con = one.connect();
          Statement st = con.createStatement()) {
        st.execute(
            "CREATE TABLE IF NOT EXISTS public.plain_docs (id text PRIMARY KEY, body text NOT NULL)");
      }
      List<Round> batched = new ArrayList<>();
      List<Round> single = new ArrayList<>();
      List<Round> jdbc = new ArrayList<>();
      List<List<String>> orders =
          List.of(
              List.of("batch", "put", "jdbc"),
              List.of("put", "jdbc", "batch"),
              List.of("jdbc", "batch", "put"));
      for (int r = 1; r <= options.rounds; r++) {
        for (String kind : orders.get((r - 1) % orders.size())) {
          if (!options.batchKinds.contains(kind)) {
            continue;
          }
          boolean batch = kind.equals("batch");
          Round round =
              switch (kind) {
                case "batch" -> batchRound(c1, pool, "b" + r, options.batchSeconds);
                case "put" -> writeRound(c1, null, pool, "s" + r, options.batchSeconds, false);
                default -> jdbcRound(c1, pool, "j" + r, options.batchSeconds);
              };
          (batch ? batched : kind.equals("put") ? single : jdbc).add(round);
          double sec = round.seconds();
          System.out.printf(
              Locale.ROOT,
              "%5d %7s %,9d %6.1f %,11.0f | %9.2f %9.2f %9.1f | %6.2f %5.2f %5.2f %5.2f %5.2f %5.2f %7.0f"
                  + " %7.0f"
                  + "  %s%n",
              r,
              kind,
              round.writes(),
              sec,
              round.rate(),
              ms(round.latency(), 50),
              ms(round.latency(), 99),
              round.latency().getMaxValue() / 1000.0,
              round.nodeCpu() / sec,
              round.nodeJit() / sec,
              round.nodeGc() / sec,
              round.pgCpu() / sec,
              round.clientCpu() / sec,
              round.machineCpu() / sec,
              round.nodeCpu() * 1e6 / Math.max(1, round.writes()),
              (round.nodeCpu() - round.nodeJit()) * 1e6 / Math.max(1, round.writes()),
              round.failures().isEmpty() ? "0" : round.failures().toString());
        }
      }
      System.out.println(
          "docs = documents applied (a batch's items with status applied; a PUT answered 200); latency = per"
              + " request (a whole batch, or one PUT);\nnode / PG / cli / all = cores busy: the node process,"
              + " the PostgreSQL backends of its database, this JVM (the clients), the whole machine;"
              + "\nJIT, GC = of the node's cores, its JIT compiler threads' (warm-up still compiling) and its"
              + " garbage collector's and VM thread's;"
              + "\nµs/doc = node CPU per applied document; w/o JIT = the same without the JIT's share");
      double[] rates = batched.stream().mapToDouble(Round::rate).toArray();
      double[] ratios = new double[Math.min(batched.size(), single.size())];
      for (int i = 0; i < ratios.length; i++) {
        ratios[i] = batched.get(i).rate() / single.get(i).rate();
      }
      System.out.printf(
          Locale.ROOT,
          "batch: median %,.0f documents/s (%,.0f..%,.0f); batch/single per round: median %.1fx (%.1f..%.1f)%n",
          median(rates),
          min(rates),
          max(rates),
          median(ratios),
          min(ratios),
          max(ratios));
      double[] putRates = single.stream().mapToDouble(Round::rate).toArray();
      double[] jdbcRates = jdbc.stream().mapToDouble(Round::rate).toArray();
      double[] putToJdbc = new double[Math.min(single.size(), jdbc.size())];
      for (int i = 0; i < putToJdbc.length; i++) {
        putToJdbc[i] = single.get(i).rate() / jdbc.get(i).rate();
      }
      System.out.printf(
          Locale.ROOT,
          "single PUTs: median %,.0f writes/s; plain JDBC upserts: median %,.0f rows/s; PUT/JDBC per round:"
              + " median %.2fx (%.2f..%.2f)%n",
          median(putRates),
          median(jdbcRates),
          median(putToJdbc),
          min(putToJdbc),
          max(putToJdbc));
    } finally {
      pool.shutdownNow();
    }
    System.out.println(LINE);
  }

  /**
   * One reference round without Weir: {@code --clients} JDBC connections each upsert distinct rows
   * of {@code public.plain_docs} one per commit (autocommit, the server's synchronous_commit) with
   * the bodies the PUT rounds send, until {@code seconds} have passed. "nodeCpu" is the idle node.
   */
  private Round jdbcRound(BenchCluster c, ExecutorService pool, String tag, int seconds)
      throws Exception {
    Map<String, Long> failures = new ConcurrentHashMap<>();
    CountDownLatch go = new CountDownLatch(1);
    long nanos = TimeUnit.SECONDS.toNanos(seconds);
    List<Future<Histogram>> clients = new ArrayList<>();
    // Open until the CPU of their server processes has been read.
    List<Connection> connections = new ArrayList<>();
    for (int k = 0; k < options.clients; k++) {
      connections.add(one.connect());
    }
    for (int k = 0; k < options.clients; k++) {
      int client = k;
      Connection con = connections.get(k);
      clients.add(
          pool.submit(
              () -> {
                SplittableRandom random = new SplittableRandom(System.nanoTime() + client);
                Histogram h = new Histogram(MAX_MICROS, 3);
                try (PreparedStatement upsert =
                    con.prepareStatement(
                        "INSERT INTO public.plain_docs (id, body) VALUES (?, ?) ON CONFLICT (id)"
                            + " DO UPDATE SET body = EXCLUDED.body")) {
                  con.setAutoCommit(true);
                  go.await();
                  long deadline = System.nanoTime() + nanos;
                  long n = 0;
                  while (System.nanoTime() < deadline) {
                    String id = tag + "-" + client + "-" + (n++);
                    upsert.setString(1, id);
                    upsert.setString(
                        2, PartitionBenchmark.body(random, id, options.bodyBytes, padding));
                    long t = System.nanoTime();
                    try {
                      upsert.executeUpdate();
                      h.recordValue(Math.min((System.nanoTime() - t) / 1000, MAX_MICROS));
                    } catch (java.sql.SQLException e) {
                      failures.merge("SQLState " + e.getSQLState(), 1L, Long::sum);
                    }
                  }
                }
                return h;
              }));
    }
    Round round = measured(c, null, go, clients, null, () -> 0, failures);
    for (Connection con : connections) {
      con.close();
    }
    return round;
  }

  /**
   * One batch round on {@code c}: every client POSTs batches of {@code --batch-items} distinct
   * documents (ids {@code <tag>-<client>-<n>}) until {@code seconds} have passed; writes = applied
   * documents, latency per batch.
   */
  private Round batchRound(BenchCluster c, ExecutorService pool, String tag, int seconds)
      throws Exception {
    Map<String, Long> failures = new ConcurrentHashMap<>();
    AtomicLong applied = new AtomicLong();
    CountDownLatch go = new CountDownLatch(1);
    long nanos = TimeUnit.SECONDS.toNanos(seconds);
    List<Future<Histogram>> clients = new ArrayList<>();
    for (int k = 0; k < options.batchClients; k++) {
      int client = k;
      clients.add(
          pool.submit(
              () -> {
                SplittableRandom random = new SplittableRandom(System.nanoTime() + client);
                Histogram h = new Histogram(MAX_MICROS, 3);
                URI uri = c.uri(0, "/v1/documents/batch");
                try (BenchHttp http = BenchHttp.of(options.httpClient, token)) {
                  go.await();
                  long deadline = System.nanoTime() + nanos;
                  long n = 0;
                  while (System.nanoTime() < deadline) {
                    StringBuilder body = new StringBuilder("{\"items\":[");
                    for (int i = 0; i < options.batchItems; i++) {
                      String id = tag + "-" + client + "-" + (n++);
                      body.append(i == 0 ? "" : ",")
                          .append("{\"op\":\"put\",\"collection\":\"")
                          .append(COLLECTION)
                          .append("\",\"id\":\"")
                          .append(id)
                          .append("\",\"body\":")
                          .append(PartitionBenchmark.body(random, id, options.bodyBytes, padding))
                          .append('}');
                    }
                    body.append("]}");
                    long t = System.nanoTime();
                    try {
                      BenchHttp.Answer r =
                          http.send("POST", uri, body.toString(), Duration.ofSeconds(60));
                      if (r.status() != 200) {
                        failures.merge("HTTP " + r.status(), (long) options.batchItems, Long::sum);
                        continue;
                      }
                      h.recordValue(Math.min((System.nanoTime() - t) / 1000, MAX_MICROS));
                      JsonNode reply = JSON.readTree(r.body());
                      applied.addAndGet(reply.path("applied").asLong());
                      for (JsonNode item : reply.path("results")) {
                        if (!item.path("status").asText().equals("applied")) {
                          failures.merge(
                              item.path("status").asText() + "/" + item.path("error").asText(),
                              1L,
                              Long::sum);
                        }
                      }
                    } catch (IOException e) {
                      failures.merge(
                          e.getClass().getSimpleName(), (long) options.batchItems, Long::sum);
                    }
                  }
                }
                return h;
              }));
    }
    return measured(c, null, go, clients, applied::get, () -> 0, failures);
  }

  // ==== helpers ====

  /** A run's seconds; NaN: it did not happen within --failover-timeout. */
  private static String seconds(double s) {
    return Double.isNaN(s) ? "timeout" : String.format(Locale.ROOT, "%.1f", s);
  }

  /** A summary's seconds; NaN: no run to summarize. */
  private static String figure(double s) {
    return Double.isNaN(s) ? "-" : String.format(Locale.ROOT, "%.1f", s);
  }

  private static double ms(Histogram h, double percentile) {
    return h.getTotalCount() == 0 ? Double.NaN : h.getValueAtPercentile(percentile) / 1000.0;
  }

  private static double median(List<Failover> runs, ToDoubleFunction<Failover> f) {
    return median(runs.stream().mapToDouble(f).filter(v -> !Double.isNaN(v)).toArray());
  }

  private static double max(List<Failover> runs, ToDoubleFunction<Failover> f) {
    return max(runs.stream().mapToDouble(f).filter(v -> !Double.isNaN(v)).toArray());
  }

  private static double median(double[] values) {
    return CdcBenchmark.median(values);
  }

  private static double min(double[] values) {
    return Arrays.stream(values).min().orElse(Double.NaN);
  }

  private static double max(double[] values) {
    return Arrays.stream(values).max().orElse(Double.NaN);
  }
}
