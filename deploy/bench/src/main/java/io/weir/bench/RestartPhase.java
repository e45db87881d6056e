package io.weir.bench;

import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The cluster benchmark's restart phase (issue 28's restart -> ready): one node on a database of
 * its own, started and stopped again and again, timed from the launch of its process to the first
 * 200 of {@code GET /health/ready}, and the CPU seconds its process used until then. Two kinds of
 * start alternate, run by run, on the same ports and database (a restart, as an operator's): plain
 * {@code java -jar}, and with a class-data archive ({@code -XX:SharedArchiveFile}, what {@code
 * deploy/bin/weir node} does), written by the first start of the phase when it stops. That first
 * start also migrates the schema and is reported apart. Each start is stopped with SIGTERM 3 s
 * after it was ready (its coordinated shutdown runs) before the next one begins.
 */
final class RestartPhase {
  private static final Duration READY_TIMEOUT = Duration.ofMinutes(3);
  private static final Duration STOP_TIMEOUT = Duration.ofMinutes(1);
  private static final Duration AFTER_READY = Duration.ofSeconds(3);
  private static final long POLL_MILLIS = 25;
  private static final String LINE = "-".repeat(118);

  private final BenchCluster node;
  private final Path archive;
  private final int runs;

  /**
   * @param node a one-node cluster (not started)
   * @param archive where the class-data archive is written (replaced)
   * @param runs starts of each kind
   */
  RestartPhase(BenchCluster node, Path archive, int runs) {
    this.node = node;
    this.archive = archive;
    this.runs = runs;
  }

  /** One start: seconds from the launch to ready, CPU seconds of the process until then. */
  private record Start(double seconds, double cpu) {}

  void run() throws Exception {
    System.out.printf(
        "Restart to ready, one node (%d partitions): %d starts of each kind, alternating; load"
            + " average %s before%n",
        node.partitions(), runs, CdcBenchmark.loadAverage());
    node.database().recreateEmpty();
    Files.deleteIfExists(archive);
    Start first = start(List.of("-XX:ArchiveClassesAtExit=" + archive));
    System.out.printf(
        "  first start (migrates the schema, writes the class-data archive when it stops): ready"
            + " after %.1f s, %.1f CPU-s%n",
        first.seconds(), first.cpu());
    if (!Files.isRegularFile(archive)) {
      System.out.println(
          "  no class-data archive was written (the JVM refused it): only plain starts measured");
    }
    List<String> shared =
        List.of("-XX:SharedArchiveFile=" + archive, "-Xshare:auto", "-Xlog:cds=off");
    List<Start> plain = new ArrayList<>();
    List<Start> archived = new ArrayList<>();
    for (int r = 0; r < runs; r++) {
      // The order alternates, so neither kind always runs right after the other's stop.
      boolean plainFirst = r % 2 == 0;
      for (int k = 0; k < 2; k++) {
        boolean isPlain = (k == 0) == plainFirst;
        if (!isPlain && !Files.isRegularFile(archive)) {
          continue;
        }
        Start s = start(isPlain ? List.of() : shared);
        (isPlain ? plain : archived).add(s);
        System.out.printf(
            "  run %d %-22s ready after %5.1f s, %5.1f CPU-s to ready%n",
            r + 1, isPlain ? "java -jar:" : "class-data archive:", s.seconds(), s.cpu());
      }
    }
    System.out.println(LINE);
    report("java -jar", plain);
    report("class-data archive", archived);
    System.out.println(
        "  (issue 28: restart -> ready <= 5 s median on an idle machine; deploy/bin/weir node keeps"
            + " such an archive per build)");
    System.out.println(LINE);
  }

  private static void report(String kind, List<Start> starts) {
    if (starts.isEmpty()) {
      return;
    }
    double[] s = starts.stream().mapToDouble(Start::seconds).toArray();
    double[] c = starts.stream().mapToDouble(Start::cpu).toArray();
    System.out.printf(
        "  %-20s median %.1f s to ready (%.1f..%.1f), %.1f CPU-s (%.1f..%.1f), %d starts%n",
        kind + ":",
        CdcBenchmark.median(s),
        Arrays.stream(s).min().orElse(Double.NaN),
        Arrays.stream(s).max().orElse(Double.NaN),
        CdcBenchmark.median(c),
        Arrays.stream(c).min().orElse(Double.NaN),
        Arrays.stream(c).max().orElse(Double.NaN),
        s.length);
  }

  /** Starts the node with {@code extraJvm}, waits until it is ready, then stops it. */
  private Start start(List<String> extraJvm) throws Exception {
    long t0 = System.nanoTime();
    node.start(0, extraJvm);
    long pid = node.pid(0);
    long deadline = t0 + READY_TIMEOUT.toNanos();
    Start s = null;
    while (s == null) {
      if (!node.alive(0)) {
        throw new IllegalStateException(
            node.nodeName(0) + " ended before it was ready; see " + node.currentLog(0));
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(
            node.nodeName(0) + " was not ready within " + READY_TIMEOUT.toSeconds() + " s");
      }
      if (ready()) {
        s = new Start((System.nanoTime() - t0) / 1e9, CpuTimes.process(pid));
      } else {
        TimeUnit.MILLISECONDS.sleep(POLL_MILLIS);
      }
    }
    TimeUnit.MILLISECONDS.sleep(AFTER_READY.toMillis());
    if (!node.stop(0, STOP_TIMEOUT)) {
      System.out.printf(
          "  (the node did not stop within %d s of SIGTERM: killed)%n", STOP_TIMEOUT.toSeconds());
    }
    return s;
  }

  private boolean ready() {
    try {
      HttpResponse<String> r =
          node.getAsync(0, "/health/ready", Duration.ofSeconds(1)).get(2, TimeUnit.SECONDS);
      return r.statusCode() == 200;
    } catch (Exception e) {
      return false; // not listening yet, or not answering in time
    }
  }
}
