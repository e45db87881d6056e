package io.weir.node.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

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
record BenchOptions(
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

  static final String USAGE =
      """
      usage: CdcBenchmark [--rows N] [--repeats N] [--txn-sizes 100,10000] [--update-percent P]
                          [--warmup-rows N] [--warmup-rounds N] [--weir-batch N]
                          [--weir-batch-delay-ms N] [--keep-database]
                          [--sink counting|partitions]

        --rows N                 row changes per round (default 200000)
        --repeats N              rounds per transaction size, alternating which consumer goes first (default 3)
        --txn-sizes A,B,...      row changes per source transaction, one workload each (default 100,10000)
        --update-percent P       share of row changes that are updates of earlier rows (default 10)
        --warmup-rows N          rows per warm-up round, drained by both consumers before measuring (default 50000; 0: none)
        --warmup-rounds N        warm-up rounds per transaction size (default 10): the JIT keeps compiling for
                                 hundreds of thousands of rows, and each round shows how much of Weir's CPU it took
        --weir-batch N           transactions per sink call (PipelineSettings.withBatching; default 256; 1: no batching)
        --weir-batch-delay-ms N  how long a partial batch may wait for more transactions (default 5)
        --keep-database          keep the weir_bench database afterwards (slots are dropped regardless)
        --sink counting          Weir's sink: counting (no-op, the slot stage alone; default) or partitions
                                 (64 partitions, durable in the journal: CDC -> partitions end to end)

      Needs WEIR_PG_URL, WEIR_PG_USER, WEIR_PG_PASSWORD and WEIR_PG_BINDIR (eval "$(deploy/bin/pg.sh start)").
      """;

  /** Thrown for a malformed command line; the message says what was wrong. */
  static final class UsageException extends Exception {
    UsageException(String message) {
      super(message);
    }
  }

  static BenchOptions parse(String[] args, Map<String, String> env) throws UsageException {
    int rows = 200_000;
    int repeats = 3;
    List<Integer> sizes = List.of(100, 10_000);
    int updatePercent = 10;
    int warmupRows = 50_000;
    int warmupRounds = 10;
    int batch = 256;
    long batchDelayMs = 5;
    boolean keep = false;
    boolean partitions = false;
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      String value = null;
      int eq = arg.indexOf('=');
      if (arg.startsWith("--") && eq > 0) {
        value = arg.substring(eq + 1);
        arg = arg.substring(0, eq);
      }
      switch (arg) {
        case "--help", "-h" -> throw new UsageException("");
        case "--keep-database" -> keep = true;
        case "--rows",
            "--repeats",
            "--txn-sizes",
            "--update-percent",
            "--warmup-rows",
            "--warmup-rounds",
            "--weir-batch",
            "--weir-batch-delay-ms",
            "--sink" -> {
          if (value == null) {
            if (i + 1 >= args.length) {
              throw new UsageException(arg + " needs a value");
            }
            value = args[++i];
          }
          switch (arg) {
            case "--rows" -> rows = positive(arg, value);
            case "--repeats" -> repeats = positive(arg, value);
            case "--txn-sizes" -> sizes = sizes(arg, value);
            case "--update-percent" -> updatePercent = range(arg, value, 0, 90);
            case "--warmup-rows" -> warmupRows = range(arg, value, 0, Integer.MAX_VALUE);
            case "--warmup-rounds" -> warmupRounds = range(arg, value, 1, 1_000);
            case "--weir-batch" -> batch = positive(arg, value);
            case "--sink" -> {
              if (!value.equals("counting") && !value.equals("partitions")) {
                throw new UsageException("--sink must be counting or partitions");
              }
              partitions = value.equals("partitions");
            }
            default -> batchDelayMs = range(arg, value, 1, 60_000);
          }
        }
        default -> throw new UsageException("unknown option " + arg);
      }
    }
    String url = require(env, "WEIR_PG_URL");
    if (!url.startsWith("jdbc:postgresql://")) {
      throw new UsageException("WEIR_PG_URL must be a JDBC URL starting with jdbc:postgresql://");
    }
    return new BenchOptions(
        rows,
        repeats,
        sizes,
        updatePercent,
        warmupRows,
        warmupRounds,
        batch,
        Duration.ofMillis(batchDelayMs),
        keep,
        partitions,
        url,
        env.getOrDefault("WEIR_PG_USER", "weir"),
        env.getOrDefault("WEIR_PG_PASSWORD", ""),
        require(env, "WEIR_PG_BINDIR"));
  }

  static String require(Map<String, String> env, String name) throws UsageException {
    String v = env.get(name);
    if (v == null || v.isBlank()) {
      throw new UsageException(name + " is not set; run: eval \"$(deploy/bin/pg.sh start)\"");
    }
    return v;
  }

  static int positive(String option, String value) throws UsageException {
    return range(option, value, 1, Integer.MAX_VALUE);
  }

  static int range(String option, String value, int min, int max) throws UsageException {
    try {
      int n = Integer.parseInt(value.replace("_", ""));
      if (n < min || n > max) {
        throw new UsageException(option + " must be between " + min + " and " + max);
      }
      return n;
    } catch (NumberFormatException e) {
      throw new UsageException(option + " must be a whole number");
    }
  }

  private static List<Integer> sizes(String option, String value) throws UsageException {
    List<Integer> out = new ArrayList<>();
    for (String part : value.split(",")) {
      if (!part.isBlank()) {
        out.add(positive(option, part.trim()));
      }
    }
    if (out.isEmpty()) {
      throw new UsageException(option + " needs at least one size");
    }
    return List.copyOf(out);
  }
}
