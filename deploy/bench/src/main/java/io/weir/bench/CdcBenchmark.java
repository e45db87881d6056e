package io.weir.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * CDC throughput benchmark: the same WAL drained by PostgreSQL's {@code pg_recvlogical} and by
 * Weir's slot stage into a no-op sink. Figures, not assertions: it prints rows/s for each consumer
 * and their ratio, per transaction size, with medians over the repeats.
 *
 * <p>Each round: empty the table, create both slots, commit the workload (outside any timing), then
 * drain each slot in turn, alternating which consumer goes first from round to round. Both slots
 * exist before the first change, so both decode exactly the same WAL. Only the drains are timed,
 * each from the consumer's start (process start, or the pipeline's Start command) to the workload's
 * last transaction. Run it with {@code deploy/bin/bench-cdc.sh}.
 *
 * <p>Prints its report to standard output: a benchmark program is the one place in the node module
 * where that is the point.
 */
public final class CdcBenchmark {
  private static final String LINE = "-".repeat(118);

  private final CdcBenchOptions options;
  private final BenchDatabase db;
  private final RecvLogicalDrain recv;
  private int roundCounter;

  /** One measured round. */
  record Round(
      int txnSize,
      int repeat,
      boolean recvFirst,
      BenchDatabase.Workload workload,
      long walBytes,
      RecvLogicalDrain.Result recv,
      WeirDrain.Result weir) {
    double recvRate() {
      return workload.rowChanges() / (recv.nanos() / 1e9);
    }

    double weirRate() {
      return workload.rowChanges() / (weir.nanos() / 1e9);
    }

    /** CPU seconds pg_recvlogical used per 100,000 row changes. */
    double recvCpuPer100k() {
      return recv.cpuSeconds() * 100_000 / workload.rowChanges();
    }

    /** CPU seconds the JVM used (all threads, JIT and GC included) per 100,000 row changes. */
    double weirCpuPer100k() {
      return weir.cpuSeconds() * 100_000 / workload.rowChanges();
    }

    /** Of {@link #weirCpuPer100k()}, the JIT compiler's share. */
    double weirJitPer100k() {
      return weir.jitSeconds() * 100_000 / workload.rowChanges();
    }

    /** Of {@link #weirCpuPer100k()}, the garbage collector's (and VM thread's) share. */
    double weirGcPer100k() {
      return weir.gcSeconds() * 100_000 / workload.rowChanges();
    }

    double ratio() {
      return weirRate() / recvRate();
    }
  }

  private CdcBenchmark(CdcBenchOptions options) {
    this.options = options;
    this.db = new BenchDatabase(options.url(), options.user(), options.password());
    this.recv = new RecvLogicalDrain(db, options.pgBindir());
  }

  public static void main(String[] args) {
    BenchMain.main(
        args,
        CdcBenchOptions::parse,
        CdcBenchOptions.USAGE,
        options -> new CdcBenchmark(options).run());
  }

  private int run() throws Exception {
    System.out.println(
        "Weir CDC throughput benchmark, "
            + ZonedDateTime.now(ZoneOffset.UTC)
                .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")));
    System.out.println(LINE);
    machine();
    db.recreate();
    AtomicBoolean cleaned = new AtomicBoolean();
    Thread cleanup =
        new Thread(
            () -> {
              if (cleaned.compareAndSet(false, true)) {
                try {
                  db.dropSlots();
                } catch (Exception e) {
                  System.err.println(
                      "bench: could not drop the benchmark's slots: " + e.getMessage());
                }
              }
            },
            "bench-cleanup");
    // Interrupted runs (Ctrl-C) drop their slots too: a forgotten slot holds WAL forever.
    Runtime.getRuntime().addShutdownHook(cleanup);
    WeirDrain weir = null;
    try {
      weir = new WeirDrain(db, options.weirBatch(), options.weirBatchDelay(), options.partitions());
      System.out.printf("PostgreSQL:    %s%n", db.show("server_version"));
      System.out.printf(
          "               shared_buffers %s, logical_decoding_work_mem %s, wal_sender_timeout %s%n",
          db.show("shared_buffers"),
          db.show("logical_decoding_work_mem"),
          db.show("wal_sender_timeout"));
      System.out.printf(
          "reference:     %s, options proto_version=1, publication_names=%s, messages=%s (as Weir);"
              + " output /dev/null, --fsync-interval=0%n",
          recv.version(), BenchDatabase.PUBLICATION, weir.messages());
      System.out.printf(
          "Weir:          %s; %s%n",
          options.partitions()
              ? "CdcPipeline + partition sink ("
                  + WeirDrain.PARTITIONS
                  + " partitions on a one-node cluster, group commit,"
                  + " JDBC journal in the same PostgreSQL; timed until the last transaction is durable in every partition)"
              : "CdcPipeline + no-op sink (in-memory checkpoint)",
          weir.describeSettings());
      System.out.printf(
          "workload:      %,d row changes per round (%d%% updates of earlier rows, the rest inserts) into"
              + " %s(id bigint pk, a int, b text(64 chars), c timestamptz), ~100 B rows%n",
          options.rows(), options.updatePercent(), BenchDatabase.TABLE);
      System.out.printf(
          "               transaction sizes %s; %d repeats each, alternating which consumer drains first%n",
          options.txnSizes(), options.repeats());
      System.out.println(LINE);

      if (options.warmupRows() > 0) {
        // The JIT keeps compiling long after the first rows (Pekko's, the journal's and Weir's
        // batch
        // paths run once per sink call or group commit, so they reach the optimising compiler
        // late),
        // and every pipeline start compiles some more: each warm-up round shows the JIT's share.
        System.out.printf(
            "warm-up: %d rounds of %,d rows per transaction size through both consumers (not reported"
                + " otherwise)%n",
            options.warmupRounds(), options.warmupRows());
        for (int size : options.txnSizes()) {
          System.out.printf("  txn size %d, the JIT's share of Weir's CPU per round:", size);
          for (int i = 1; i <= options.warmupRounds(); i++) {
            Round w = round(size, options.warmupRows(), -i, true, weir);
            System.out.printf(
                Locale.ROOT, " %.0f%%", 100 * w.weir().jitSeconds() / w.weir().cpuSeconds());
          }
          System.out.println();
        }
        System.out.println(LINE);
      }

      System.out.printf(
          "%8s %6s %5s %6s %7s | %7s %12s %8s | %7s %12s %8s %5s %5s | %9s%n",
          "txn size",
          "repeat",
          "first",
          "txns",
          "WAL MB",
          "recv s",
          "rows/s",
          "CPU/100k",
          "Weir s",
          "rows/s",
          "CPU/100k",
          "JIT",
          "GC",
          "Weir/recv");
      List<Round> rounds = new ArrayList<>();
      for (int size : options.txnSizes()) {
        for (int r = 0; r < options.repeats(); r++) {
          // Alternates across transaction sizes too, so each consumer goes first equally often.
          Round round = round(size, options.rows(), r + 1, rounds.size() % 2 == 0, weir);
          rounds.add(round);
          System.out.printf(
              Locale.ROOT,
              "%8d %6d %5s %6d %7.1f | %7.3f %,12.0f %7.2fs | %7.3f %,12.0f %7.2fs %5.2f %5.2f | %8.2fx%n",
              size,
              r + 1,
              round.recvFirst() ? "recv" : "Weir",
              round.workload().transactions(),
              round.walBytes() / 1e6,
              round.recv().nanos() / 1e9,
              round.recvRate(),
              round.recvCpuPer100k(),
              round.weir().nanos() / 1e9,
              round.weirRate(),
              round.weirCpuPer100k(),
              round.weirJitPer100k(),
              round.weirGcPer100k(),
              round.ratio());
        }
      }
      System.out.println(
          "recv = pg_recvlogical; first = which consumer drained first; CPU/100k = CPU seconds the"
              + " consumer process used per 100,000 row changes; JIT, GC = the part of Weir's CPU/100k spent by the JIT"
              + " compiler's threads and by the garbage collector's (with the VM thread)");
      summary(rounds);
      System.out.println(
          "load average (1/5/15 min) at the end: "
              + loadAverage()
              + " -- above about 1 means something besides this benchmark competed for the CPUs");
      return 0;
    } finally {
      try {
        // The actor system first: stopping its pipelines releases their slots.
        if (weir != null) {
          weir.close();
        }
        if (cleaned.compareAndSet(false, true)) {
          db.dropSlots();
        }
        if (!options.keepDatabase()) {
          db.drop();
        }
      } finally {
        try {
          Runtime.getRuntime().removeShutdownHook(cleanup);
        } catch (IllegalStateException shuttingDown) {
          // Already running the hooks.
        }
      }
    }
  }

  /**
   * One round: both slots, then the workload, then both drains in the given order.
   *
   * @param repeat 1-based repeat number; negative for a warm-up round
   */
  private Round round(int txnSize, int rows, int repeat, boolean recvFirst, WeirDrain weir)
      throws Exception {
    int n = ++roundCounter;
    db.reset();
    String recvSlot = "bench_recv_" + n;
    String weirSlot = "bench_weir_" + n;
    long recvStart = db.createSlot(recvSlot);
    long weirStart = db.createSlot(weirSlot);
    BenchDatabase.Workload workload = db.generate(rows, txnSize, options.updatePercent());
    RecvLogicalDrain.Result recvResult;
    WeirDrain.Result weirResult;
    if (recvFirst) {
      recvResult = recv.drain(recvSlot, workload.endLsn(), weir.messages());
      weirResult = weir.drain(weirSlot, workload);
    } else {
      weirResult = weir.drain(weirSlot, workload);
      recvResult = recv.drain(recvSlot, workload.endLsn(), weir.messages());
    }
    db.dropSlot(recvSlot);
    db.dropSlot(weirSlot);
    if (weirResult.rows() != workload.rowChanges()
        || weirResult.transactions() != workload.transactions()) {
      throw new IllegalStateException(
          String.format(
              "Weir's sink saw %d row changes in %d transactions; the workload committed %d in %d",
              weirResult.rows(),
              weirResult.transactions(),
              workload.rowChanges(),
              workload.transactions()));
    }
    long walBytes = workload.endLsn() - Math.min(recvStart, weirStart);
    return new Round(txnSize, repeat, recvFirst, workload, walBytes, recvResult, weirResult);
  }

  private void summary(List<Round> rounds) {
    System.out.println(LINE);
    System.out.println("medians over the repeats:");
    System.out.printf(
        "%8s %7s | %14s %8s | %14s %8s %5s | %21s | %s%n",
        "txn size",
        "repeats",
        "recv rows/s",
        "CPU/100k",
        "Weir rows/s",
        "CPU/100k",
        "JIT",
        "Weir/recv (min..max)",
        options.partitions() ? "goal Weir >= 0.5x" : "goal Weir >= 0.8x");
    for (int size : options.txnSizes()) {
      List<Round> mine = rounds.stream().filter(r -> r.txnSize() == size).toList();
      double[] ratios = mine.stream().mapToDouble(Round::ratio).sorted().toArray();
      double ratio = median(ratios);
      System.out.printf(
          Locale.ROOT,
          "%8d %7d | %,14.0f %7.2fs | %,14.0f %7.2fs %5.2f | %7.2fx (%.2f..%.2f) | %s%n",
          size,
          mine.size(),
          median(mine.stream().mapToDouble(Round::recvRate).toArray()),
          median(mine.stream().mapToDouble(Round::recvCpuPer100k).toArray()),
          median(mine.stream().mapToDouble(Round::weirRate).toArray()),
          median(mine.stream().mapToDouble(Round::weirCpuPer100k).toArray()),
          median(mine.stream().mapToDouble(Round::weirJitPer100k).toArray()),
          ratio,
          ratios[0],
          ratios[ratios.length - 1],
          ratio >= (options.partitions() ? 0.5 : 0.8) ? "met" : "not met");
    }
    System.out.println(
        "Weir/recv is the median of the per-round ratios (in a round both drain the same WAL).");
  }

  /** The median of {@code values} (NaN for none); the benchmarks' one median. */
  static double median(double[] values) {
    if (values.length == 0) {
      return Double.NaN;
    }
    double[] v = values.clone();
    Arrays.sort(v);
    int m = v.length / 2;
    return v.length % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
  }

  static void machine() {
    String cpus;
    try {
      Process p = new ProcessBuilder("nproc").redirectErrorStream(true).start();
      cpus = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
      p.waitFor(5, TimeUnit.SECONDS);
    } catch (IOException | InterruptedException e) {
      cpus = Runtime.getRuntime().availableProcessors() + " (JVM)";
    }
    String model = procField("/proc/cpuinfo", "model name");
    String mem = procField("/proc/meminfo", "MemTotal");
    if (mem.endsWith(" kB")) {
      mem =
          String.format(
              Locale.ROOT,
              "%.1f GiB",
              Long.parseLong(mem.replace(" kB", "").trim()) / 1024.0 / 1024.0);
    }
    System.out.printf(
        "machine:       nproc %s, %s, memory %s, %s %s%n",
        cpus, model, mem, System.getProperty("os.name"), System.getProperty("os.version"));
    System.out.printf(
        "Java:          %s %s, max heap %d MiB%n",
        System.getProperty("java.vm.name"),
        Runtime.version(),
        Runtime.getRuntime().maxMemory() / (1024 * 1024));
    System.out.printf("load average:  %s (1/5/15 min) before the benchmark%n", loadAverage());
  }

  static String loadAverage() {
    try {
      String[] f =
          Files.readString(Path.of("/proc/loadavg"), StandardCharsets.US_ASCII)
              .trim()
              .split("\\s+");
      return f[0] + " " + f[1] + " " + f[2];
    } catch (IOException | RuntimeException e) {
      return "unknown";
    }
  }

  private static String procField(String file, String field) {
    try {
      for (String line : Files.readAllLines(Path.of(file), StandardCharsets.UTF_8)) {
        int colon = line.indexOf(':');
        if (colon > 0 && line.substring(0, colon).trim().equals(field)) {
          return line.substring(colon + 1).trim();
        }
      }
    } catch (IOException e) {
      // Not Linux or not readable: say so below.
    }
    return "unknown " + field;
  }
}
