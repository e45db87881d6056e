package io.weir.bench;

import java.util.List;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Command-line options of {@link PartitionBenchmark}. Connection settings come from the environment
 * that {@code deploy/bin/pg.sh start} prints (WEIR_PG_URL, WEIR_PG_USER, WEIR_PG_PASSWORD).
 *
 * @param writers concurrent writers, each doing one write after the other
 * @param seconds length of a measured round in seconds (0 when {@code writes} bounds rounds)
 * @param writes writes per measured round, over all writers (0 when {@code seconds} bounds rounds)
 * @param warmupSeconds writes before the first round, not reported (0: none)
 * @param rounds measured rounds of writes, and recoveries per case
 * @param keys the key space of each collection: ids are drawn uniformly from it
 * @param collections collections written (drawn uniformly)
 * @param bodyBytes size of each JSON body
 * @param unkeyed writes carry no idempotency key (the document API's writes without an
 *     Idempotency-Key): the partitions keep no receipts for them
 * @param documents documents loaded into the one partition of the heap and recovery phase
 * @param writesPhase run the document writes
 * @param heapPhase run the heap and recovery measurements
 * @param keepDatabase leave the benchmark database behind
 */
record PartitionBenchOptions(
    int writers,
    int seconds,
    int writes,
    int warmupSeconds,
    int rounds,
    int keys,
    int collections,
    int bodyBytes,
    boolean unkeyed,
    int documents,
    boolean writesPhase,
    boolean heapPhase,
    boolean keepDatabase,
    String url,
    String user,
    String password) {

  /** The command line, as picocli reads it. */
  @Command(
      name = "PartitionBenchmark",
      sortOptions = false,
      usageHelpWidth = 110,
      footer = {
        "",
        "Needs WEIR_PG_URL, WEIR_PG_USER and WEIR_PG_PASSWORD (eval \"$(deploy/bin/pg.sh start)\")."
      })
  static final class Args {
    @Option(
        names = {"-h", "--help"},
        usageHelp = true,
        description = "this help")
    boolean help;

    @Option(
        names = "--writers",
        paramLabel = "N",
        description =
            "concurrent writers, each waiting for its write's answer before the next (default:"
                + " ${DEFAULT-VALUE})")
    int writers = 16;

    @Option(
        names = "--seconds",
        paramLabel = "S",
        description = "length of a measured round of writes (default: 20)")
    Integer seconds;

    @Option(
        names = "--writes",
        paramLabel = "N",
        description = "writes per measured round instead of a duration (over all writers)")
    Integer writes;

    @Option(
        names = "--warmup-seconds",
        paramLabel = "S",
        description =
            "writes before the first round, not reported (default: ${DEFAULT-VALUE}; 0: none)")
    int warmupSeconds = 10;

    @Option(
        names = "--rounds",
        paramLabel = "N",
        description =
            "measured rounds of writes, and restarts per recovery case (default: ${DEFAULT-VALUE})")
    int rounds = 3;

    @Option(
        names = "--keys",
        paramLabel = "N",
        description = "ids per collection; writes pick one at random (default: ${DEFAULT-VALUE})")
    int keys = 100_000;

    @Option(
        names = "--collections",
        paramLabel = "N",
        description = "collections; writes pick one at random (default: ${DEFAULT-VALUE})")
    int collections = 4;

    @Option(
        names = "--body-bytes",
        paramLabel = "N",
        description = "size of each document's JSON body (default: ${DEFAULT-VALUE})")
    int bodyBytes = 1024;

    @Option(
        names = "--unkeyed",
        description =
            "writes without an idempotency key, as the document API sends a write without an"
                + " Idempotency-Key header: no receipt is kept for them (default: every write keyed,"
                + " each keeping a receipt)")
    boolean unkeyed;

    @Option(
        names = "--documents",
        paramLabel = "N",
        description =
            "documents loaded into one partition for the heap and recovery figures (default:"
                + " ${DEFAULT-VALUE})")
    int documents = 100_000;

    @Option(
        names = "--phases",
        paramLabel = "LIST",
        split = ",",
        description = "writes, heap (heap includes recovery) or both (default: writes,heap)")
    List<String> phases = List.of("writes", "heap");

    @Option(names = "--keep-database", description = "keep the weir_pbench database afterwards")
    boolean keepDatabase;
  }

  static final String USAGE = BenchArgs.usage(new Args());

  static PartitionBenchOptions parse(String[] args, Map<String, String> env)
      throws BenchArgs.UsageException {
    Args a = BenchArgs.parse(new Args(), args);
    if (a.seconds != null && a.writes != null) {
      throw new BenchArgs.UsageException("--seconds and --writes exclude each other");
    }
    for (String phase : a.phases) {
      if (!phase.equals("writes") && !phase.equals("heap")) {
        throw new BenchArgs.UsageException("--phases takes writes, heap or both");
      }
    }
    int writes = a.writes == null ? 0 : BenchArgs.range("--writes", a.writes, 1, Integer.MAX_VALUE);
    int seconds =
        a.writes != null
            ? 0
            : BenchArgs.range("--seconds", a.seconds == null ? 20 : a.seconds, 1, 3600);
    return new PartitionBenchOptions(
        BenchArgs.range("--writers", a.writers, 1, 1024),
        seconds,
        writes,
        BenchArgs.range("--warmup-seconds", a.warmupSeconds, 0, 3600),
        BenchArgs.range("--rounds", a.rounds, 1, 100),
        BenchArgs.range("--keys", a.keys, 1, Integer.MAX_VALUE),
        BenchArgs.range("--collections", a.collections, 1, 1000),
        BenchArgs.range("--body-bytes", a.bodyBytes, 64, 1 << 20),
        a.unkeyed,
        BenchArgs.range("--documents", a.documents, 1000, 10_000_000),
        a.phases.contains("writes"),
        a.phases.contains("heap"),
        a.keepDatabase,
        BenchArgs.url(env),
        env.getOrDefault("WEIR_PG_USER", "weir"),
        env.getOrDefault("WEIR_PG_PASSWORD", ""));
  }
}
