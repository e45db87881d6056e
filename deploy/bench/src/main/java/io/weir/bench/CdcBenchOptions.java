package io.weir.bench;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Command-line options of {@link CdcBenchmark}. Connection settings come from the environment that
 * {@code deploy/bin/pg.sh start} prints (WEIR_PG_URL, WEIR_PG_USER, WEIR_PG_PASSWORD,
 * WEIR_PG_BINDIR).
 *
 * @param rows row changes per round (per transaction size and repeat)
 * @param repeats rounds per transaction size; the order of the two consumers alternates
 * @param txnSizes row changes per source transaction, one workload each
 * @param updatePercent share of each transaction's row changes that update earlier rows
 * @param warmupRows rows per warm-up round, drained by both consumers before measuring (0: no
 *     warm-up)
 * @param warmupRounds warm-up rounds per transaction size
 * @param weirBatch transactions per sink call ({@code PipelineSettings.withBatching})
 * @param weirBatchDelay how long a partial batch may wait for more transactions
 * @param keepDatabase leave the benchmark database behind (its slots are always dropped)
 * @param partitions Weir's sink is the partition sink (64 partitions on a one-node cluster, journal
 *     in the benchmark database) instead of the no-op counting sink
 */
record CdcBenchOptions(
    int rows,
    int repeats,
    List<Integer> txnSizes,
    int updatePercent,
    int warmupRows,
    int warmupRounds,
    int weirBatch,
    Duration weirBatchDelay,
    boolean keepDatabase,
    boolean partitions,
    String url,
    String user,
    String password,
    String pgBindir) {

  /** The command line, as picocli reads it. */
  @Command(
      name = "CdcBenchmark",
      sortOptions = false,
      usageHelpWidth = 110,
      footer = {
        "",
        "Needs WEIR_PG_URL, WEIR_PG_USER, WEIR_PG_PASSWORD and WEIR_PG_BINDIR (eval"
            + " \"$(deploy/bin/pg.sh start)\")."
      })
  static final class Args {
    @Option(
        names = {"-h", "--help"},
        usageHelp = true,
        description = "this help")
    boolean help;

    @Option(
        names = "--rows",
        paramLabel = "N",
        description = "row changes per round (default: ${DEFAULT-VALUE})")
    int rows = 200_000;

    @Option(
        names = "--repeats",
        paramLabel = "N",
        description =
            "rounds per transaction size, alternating which consumer goes first (default:"
                + " ${DEFAULT-VALUE})")
    int repeats = 3;

    @Option(
        names = "--txn-sizes",
        paramLabel = "A,B,...",
        split = ",",
        description = "row changes per source transaction, one workload each (default: 100,10000)")
    List<Integer> txnSizes = List.of(100, 10_000);

    @Option(
        names = "--update-percent",
        paramLabel = "P",
        description =
            "share of row changes that are updates of earlier rows (default: ${DEFAULT-VALUE})")
    int updatePercent = 10;

    @Option(
        names = "--warmup-rows",
        paramLabel = "N",
        description =
            "rows per warm-up round, drained by both consumers before measuring (default:"
                + " ${DEFAULT-VALUE}; 0: none)")
    int warmupRows = 50_000;

    @Option(
        names = "--warmup-rounds",
        paramLabel = "N",
        description =
            "warm-up rounds per transaction size (default: ${DEFAULT-VALUE}): the JIT keeps compiling"
                + " for hundreds of thousands of rows, and each round shows how much of Weir's CPU it"
                + " took")
    int warmupRounds = 10;

    @Option(
        names = "--weir-batch",
        paramLabel = "N",
        description =
            "transactions per sink call (PipelineSettings.withBatching; default: ${DEFAULT-VALUE}; 1:"
                + " no batching)")
    int weirBatch = 256;

    @Option(
        names = "--weir-batch-delay-ms",
        paramLabel = "N",
        description =
            "how long a partial batch may wait for more transactions (default: ${DEFAULT-VALUE})")
    int weirBatchDelayMs = 5;

    @Option(
        names = "--keep-database",
        description = "keep the weir_bench database afterwards (slots are dropped regardless)")
    boolean keepDatabase;

    @Option(
        names = "--sink",
        paramLabel = "counting|partitions",
        description =
            "Weir's sink: counting (no-op, the slot stage alone; default) or partitions (64"
                + " partitions, durable in the journal: CDC -> partitions end to end)")
    String sink = "counting";
  }

  static final String USAGE = BenchArgs.usage(new Args());

  static CdcBenchOptions parse(String[] args, Map<String, String> env)
      throws BenchArgs.UsageException {
    Args a = BenchArgs.parse(new Args(), args);
    if (!a.sink.equals("counting") && !a.sink.equals("partitions")) {
      throw new BenchArgs.UsageException("--sink must be counting or partitions");
    }
    if (a.txnSizes.isEmpty()) {
      throw new BenchArgs.UsageException("--txn-sizes needs at least one size");
    }
    for (int size : a.txnSizes) {
      BenchArgs.range("--txn-sizes", size, 1, Integer.MAX_VALUE);
    }
    return new CdcBenchOptions(
        BenchArgs.range("--rows", a.rows, 1, Integer.MAX_VALUE),
        BenchArgs.range("--repeats", a.repeats, 1, Integer.MAX_VALUE),
        List.copyOf(a.txnSizes),
        BenchArgs.range("--update-percent", a.updatePercent, 0, 90),
        BenchArgs.range("--warmup-rows", a.warmupRows, 0, Integer.MAX_VALUE),
        BenchArgs.range("--warmup-rounds", a.warmupRounds, 1, 1_000),
        BenchArgs.range("--weir-batch", a.weirBatch, 1, Integer.MAX_VALUE),
        Duration.ofMillis(BenchArgs.range("--weir-batch-delay-ms", a.weirBatchDelayMs, 1, 60_000)),
        a.keepDatabase,
        a.sink.equals("partitions"),
        BenchArgs.url(env),
        env.getOrDefault("WEIR_PG_USER", "weir"),
        env.getOrDefault("WEIR_PG_PASSWORD", ""),
        BenchArgs.require(env, "WEIR_PG_BINDIR"));
  }
}
