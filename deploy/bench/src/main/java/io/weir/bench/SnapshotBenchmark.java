package io.weir.bench;

import io.weir.persistence.cdc.PipelineContext;
import io.weir.persistence.cdc.PipelineSettings;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.persistence.cdc.snapshot.SnapshotChunk;
import io.weir.persistence.cdc.source.StartMode;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.Transaction;
import java.io.OutputStream;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicLong;
import org.postgresql.PGConnection;

/**
 * Initial snapshot throughput: Weir's snapshot path (slot created with an exported snapshot,
 * catalog read, {@code COPY ... TO STDOUT} parsed into row images and handed to a sink in batches,
 * hand-off checkpoint) against the plain reference, {@code COPY (SELECT ...) TO STDOUT} of the same
 * table read by pgjdbc into a null stream (PostgreSQL's own fastest way out, with no parsing). Both
 * in the same rounds, alternating which goes first; figures are medians, and the ratio is the
 * median of the per-round ratios. The sink discards rows, so the figure is Weir's reading cost, not
 * a target database's write speed. Run it with {@code deploy/bin/bench-snapshot.sh}.
 *
 * <p>Prints its report to standard output, by design.
 */
public final class SnapshotBenchmark {
  private static final String LINE = "-".repeat(100);

  private SnapshotBenchmark() {}

  public static void main(String[] args) throws Exception {
    if (System.getProperty("WEIR_LOG_LEVEL") == null && System.getenv("WEIR_LOG_LEVEL") == null) {
      System.setProperty("WEIR_LOG_LEVEL", "WARN");
    }
    int rows = 1_000_000;
    int repeats = 3;
    int batchRows = 5_000;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--rows" -> rows = Integer.parseInt(args[++i]);
        case "--repeats" -> repeats = Integer.parseInt(args[++i]);
        case "--batch-rows" -> batchRows = Integer.parseInt(args[++i]);
        case "--help", "-h" -> {
          System.out.println(
              "usage: bench-snapshot.sh [--rows N (1000000)] [--repeats N (3)] [--batch-rows N (5000)]");
          return;
        }
        default -> {
          System.err.println("bench: unknown option " + args[i]);
          System.exit(2);
        }
      }
    }
    String url = System.getenv("WEIR_PG_URL");
    if (url == null || !url.startsWith("jdbc:postgresql://")) {
      System.err.println(
          "bench: WEIR_PG_URL must be a JDBC URL (run through deploy/bin/bench-snapshot.sh)");
      System.exit(2);
    }
    BenchDatabase db =
        new BenchDatabase(
            url,
            System.getenv().getOrDefault("WEIR_PG_USER", "weir"),
            System.getenv().getOrDefault("WEIR_PG_PASSWORD", ""));
    System.exit(run(db, rows, repeats, batchRows));
  }

  private static int run(BenchDatabase db, int rows, int repeats, int batchRows) throws Exception {
    System.out.println(
        "Weir initial snapshot benchmark, "
            + ZonedDateTime.now(ZoneOffset.UTC)
                .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")));
    System.out.println(LINE);
    db.recreate();
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      s.execute(
          "INSERT INTO public.bench SELECT g, g % 100000, md5(g::text) || md5((g + 1)::text), "
              + "timestamptz '2026-01-01' + g * interval '1 second' FROM generate_series(1, "
              + rows
              + ") g");
      s.execute("VACUUM ANALYZE public.bench");
    }
    long tableBytes;
    try (Connection c = db.connect();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT pg_relation_size('public.bench')")) {
      rs.next();
      tableBytes = rs.getLong(1);
    }
    List<double[]> rounds =
        new ArrayList<>(); // copy rows/s, weir rows/s, copy MB/s, weir MB/s, ratio
    try (WeirDrain weir = new WeirDrain(db, 1, Duration.ofMillis(5))) {
      System.out.printf(
          "PostgreSQL:  %s, shared_buffers %s%n",
          db.show("server_version"), db.show("shared_buffers"));
      System.out.printf(
          "table:       %,d rows of (id bigint pk, a int, b text(64 chars), c timestamptz), heap %,d MB%n",
          rows, tableBytes >> 20);
      System.out.printf(
          "reference:   COPY (SELECT id, a, b, c FROM ONLY public.bench) TO STDOUT, pgjdbc into a null stream%n");
      System.out.printf(
          "Weir:        CdcPipeline start-mode snapshot, batches of %,d rows to a sink that discards them%n",
          batchRows);
      System.out.println(LINE);
      // Warm-up (cache, JIT), not reported.
      copy(db);
      snapshot(weir, db, batchRows, 0, rows);
      for (int r = 1; r <= repeats; r++) {
        boolean copyFirst = r % 2 == 1;
        long[] copy = null;
        double[] w = null;
        for (int step = 0; step < 2; step++) {
          if ((step == 0) == copyFirst) {
            copy = copy(db);
          } else {
            w = snapshot(weir, db, batchRows, r, rows);
          }
        }
        double copySeconds = copy[0] / 1e9;
        double mb = copy[1] / 1e6;
        double weirSeconds = w[0] / 1e9;
        double[] round = {
          rows / copySeconds,
          rows / weirSeconds,
          mb / copySeconds,
          mb / weirSeconds,
          copySeconds / weirSeconds
        };
        rounds.add(round);
        System.out.printf(
            "round %d (%s first): COPY %.2f s %,.0f rows/s %.1f MB/s | Weir %.2f s %,.0f rows/s %.1f MB/s,"
                + " first rows after %.2f s, JVM CPU %.2f s | Weir/COPY %.2fx%n",
            r,
            copyFirst ? "COPY" : "Weir",
            copySeconds,
            round[0],
            round[2],
            weirSeconds,
            round[1],
            round[3],
            w[2],
            w[1],
            round[4]);
      }
    } finally {
      db.drop();
    }
    System.out.println(LINE);
    System.out.printf(
        "median: COPY %,.0f rows/s %.1f MB/s | Weir %,.0f rows/s %.1f MB/s | Weir/COPY %.2fx (median of per-round ratios)%n",
        median(rounds, 0),
        median(rounds, 2),
        median(rounds, 1),
        median(rounds, 3),
        median(rounds, 4));
    System.out.println(
        "MB: bytes of COPY text output (the same rows both ways). Weir's time runs from the pipeline's Start"
            + " to the hand-off checkpoint: it includes connecting, creating the slot with an exported snapshot and reading"
            + " the catalog ('first rows after').");
    return 0;
  }

  private static double median(List<double[]> rounds, int column) {
    double[] v = rounds.stream().mapToDouble(r -> r[column]).sorted().toArray();
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  }

  /**
   * The reference: nanoseconds and bytes of one COPY TO STDOUT read in a REPEATABLE READ
   * transaction.
   */
  private static long[] copy(BenchDatabase db) throws Exception {
    try (Connection c = db.connect()) {
      c.setAutoCommit(false);
      try (Statement s = c.createStatement()) {
        s.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
      }
      AtomicLong bytes = new AtomicLong();
      OutputStream sink =
          new OutputStream() {
            @Override
            public void write(int b) {
              bytes.incrementAndGet();
            }

            @Override
            public void write(byte[] b, int off, int len) {
              bytes.addAndGet(len);
            }
          };
      long start = System.nanoTime();
      c.unwrap(PGConnection.class)
          .getCopyAPI()
          .copyOut("COPY (SELECT id, a, b, c FROM ONLY public.bench) TO STDOUT", sink);
      long nanos = System.nanoTime() - start;
      c.commit();
      return new long[] {nanos, bytes.get()};
    }
  }

  /** Weir: nanoseconds from Start to the hand-off checkpoint, and the JVM's CPU seconds. */
  private static double[] snapshot(
      WeirDrain weir, BenchDatabase db, int batchRows, int round, int expected) throws Exception {
    String slot = "bench_snap_" + round + "_" + System.nanoTime() % 100000;
    PipelineSettings settings =
        PipelineSettings.of("bench_snapshot_" + slot, slot, List.of(BenchDatabase.PUBLICATION))
            .toBuilder()
            .startMode(StartMode.SNAPSHOT)
            .snapshotBatchRows(batchRows)
            .statusInterval(Duration.ofSeconds(10))
            .build();
    DiscardingSnapshotSink sink = new DiscardingSnapshotSink();
    try {
      long start = System.nanoTime();
      WeirDrain.Result r = weir.run(settings.name(), settings, sink, sink.handedOff, expected);
      if (sink.rows.get() != expected) {
        throw new IllegalStateException(
            "the snapshot delivered " + sink.rows.get() + " rows, expected " + expected);
      }
      return new double[] {r.nanos(), r.cpuSeconds(), (sink.firstBatchAt.get() - start) / 1e9};
    } finally {
      db.dropSlot(slot);
    }
  }

  /** Counts snapshot rows and completes at the hand-off; stores nothing. */
  static final class DiscardingSnapshotSink implements ChangeSink {
    final AtomicLong rows = new AtomicLong();
    final AtomicLong firstBatchAt = new AtomicLong();
    final CompletableFuture<Long> handedOff = new CompletableFuture<>();
    private static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);

    @Override
    public CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context) {
      return CompletableFuture.completedFuture(Optional.empty());
    }

    @Override
    public CompletionStage<Void> apply(List<Transaction> transactions) {
      return DONE;
    }

    @Override
    public boolean supportsSnapshots() {
      return true;
    }

    @Override
    public CompletionStage<Void> applySnapshot(SnapshotChunk chunk) {
      firstBatchAt.compareAndSet(0, System.nanoTime());
      rows.addAndGet(chunk.rows().size());
      return DONE;
    }

    @Override
    public CompletionStage<Void> completeSnapshot(Lsn handOff) {
      handedOff.complete(System.nanoTime());
      return DONE;
    }
  }
}
