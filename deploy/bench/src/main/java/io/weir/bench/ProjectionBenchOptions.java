package io.weir.bench;

import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Command-line options of {@link ProjectionBenchmark}. Connection settings come from the
 * environment that {@code deploy/bin/pg.sh start} prints (WEIR_PG_URL, WEIR_PG_USER,
 * WEIR_PG_PASSWORD).
 *
 * @param consumers projection consumers of the one partition, each running its read+commit loop
 * @param writers concurrent document writers for the whole run (0: none; the consumers then drain
 *     the backlog only)
 * @param seconds length of the measured window in seconds (it ends earlier when a consumer reaches
 *     the end of the outbox)
 * @param warmupSeconds read+commit loops of warm-up consumers along with the writes, before the
 *     backlog; not reported (0: none)
 * @param maxEntries entries one read examines at most
 * @param backlog outbox entries written before the measured consumers are configured (0: none)
 * @param keys ids of the written collection (all in the partition); writes pick one at random
 * @param bodyBytes size of each written JSON body
 * @param purgeIntervalMs how often the outbox is purged through the lowest consumer checkpoint
 * @param keepDatabase leave the benchmark database behind
 */
record ProjectionBenchOptions(
    int consumers,
    int writers,
    int seconds,
    int warmupSeconds,
    int maxEntries,
    int backlog,
    int keys,
    int bodyBytes,
    int purgeIntervalMs,
    boolean keepDatabase,
    String url,
    String user,
    String password) {

  /** The command line, as picocli reads it. */
  @Command(
      name = "ProjectionBenchmark",
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
        names = "--consumers",
        paramLabel = "N",
        description =
            "projection consumers of partition 0, each one read+commit loop (default: ${DEFAULT-VALUE})")
    int consumers = 4;

    @Option(
        names = "--writers",
        paramLabel = "N",
        description =
            "concurrent document writers, each waiting for its answer before the next write, for the"
                + " whole run (default: ${DEFAULT-VALUE}; 0: none, the consumers drain the backlog only)")
    int writers = 4;

    @Option(
        names = "--seconds",
        paramLabel = "S",
        description =
            "length of the measured window; it ends earlier when a consumer reaches the end of the"
                + " outbox (default: ${DEFAULT-VALUE})")
    int seconds = 20;

    @Option(
        names = "--warmup-seconds",
        paramLabel = "S",
        description =
            "warm-up consumers read along with the writes before the backlog, not reported (default:"
                + " ${DEFAULT-VALUE}; 0: none)")
    int warmupSeconds = 5;

    @Option(
        names = "--max-entries",
        paramLabel = "N",
        description = "entries one read examines at most (default: ${DEFAULT-VALUE}, at most 1000)")
    int maxEntries = 100;

    @Option(
        names = "--backlog",
        paramLabel = "N",
        description =
            "outbox entries written before the measured consumers start: they begin this far behind"
                + " (default: ${DEFAULT-VALUE}; at most the outbox quota, 100000)")
    int backlog = 40_000;

    @Option(
        names = "--keys",
        paramLabel = "N",
        description =
            "ids of collection src in partition 0; writes pick one at random (default: ${DEFAULT-VALUE})")
    int keys = 10_000;

    @Option(
        names = "--body-bytes",
        paramLabel = "N",
        description = "size of each written JSON body (default: ${DEFAULT-VALUE})")
    int bodyBytes = 1024;

    @Option(
        names = "--purge-interval-ms",
        paramLabel = "N",
        description =
            "how often the outbox is purged through the lowest consumer checkpoint (default:"
                + " ${DEFAULT-VALUE})")
    int purgeIntervalMs = 1000;

    @Option(names = "--keep-database", description = "keep the weir_prbench database afterwards")
    boolean keepDatabase;
  }

  static final String USAGE = BenchArgs.usage(new Args());

  static ProjectionBenchOptions parse(String[] args, Map<String, String> env)
      throws BenchArgs.UsageException {
    Args a = BenchArgs.parse(new Args(), args);
    return new ProjectionBenchOptions(
        BenchArgs.range("--consumers", a.consumers, 1, 64),
        BenchArgs.range("--writers", a.writers, 0, 1024),
        BenchArgs.range("--seconds", a.seconds, 1, 3600),
        BenchArgs.range("--warmup-seconds", a.warmupSeconds, 0, 3600),
        BenchArgs.range("--max-entries", a.maxEntries, 1, 1000),
        BenchArgs.range("--backlog", a.backlog, 0, 100_000),
        BenchArgs.range("--keys", a.keys, 1, 1_000_000),
        BenchArgs.range("--body-bytes", a.bodyBytes, 64, 1 << 20),
        BenchArgs.range("--purge-interval-ms", a.purgeIntervalMs, 10, 60_000),
        a.keepDatabase,
        BenchArgs.url(env),
        env.getOrDefault("WEIR_PG_USER", "weir"),
        env.getOrDefault("WEIR_PG_PASSWORD", ""));
  }
}
