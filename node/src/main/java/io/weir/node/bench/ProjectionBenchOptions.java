package io.weir.node.bench;

import java.util.Map;

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

  static final String USAGE =
      """
      usage: ProjectionBenchmark [--consumers N] [--writers N] [--seconds S] [--warmup-seconds S]
                                 [--max-entries N] [--backlog N] [--keys N] [--body-bytes N]
                                 [--purge-interval-ms N] [--keep-database]

        --consumers N          projection consumers of partition 0, each one read+commit loop (default 4)
        --writers N            concurrent document writers, each waiting for its answer before the next write,
                               for the whole run (default 4; 0: none, the consumers drain the backlog only)
        --seconds S            length of the measured window; it ends earlier when a consumer reaches the
                               end of the outbox (default 20)
        --warmup-seconds S     warm-up consumers read along with the writes before the backlog, not
                               reported (default 5; 0: none)
        --max-entries N        entries one read examines at most (default 100, at most 1000)
        --backlog N            outbox entries written before the measured consumers start: they begin this
                               far behind (default 40000; at most the outbox quota, 100000)
        --keys N               ids of collection src in partition 0; writes pick one at random (default 10000)
        --body-bytes N         size of each written JSON body (default 1024)
        --purge-interval-ms N  how often the outbox is purged through the lowest consumer checkpoint (default 1000)
        --keep-database        keep the weir_prbench database afterwards

      Needs WEIR_PG_URL, WEIR_PG_USER and WEIR_PG_PASSWORD (eval "$(deploy/bin/pg.sh start)").
      """;

  static ProjectionBenchOptions parse(String[] args, Map<String, String> env)
      throws BenchOptions.UsageException {
    int consumers = 4;
    int writers = 4;
    int seconds = 20;
    int warmup = 5;
    int maxEntries = 100;
    int backlog = 40_000;
    int keys = 10_000;
    int bodyBytes = 1024;
    int purgeIntervalMs = 1000;
    boolean keep = false;
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      String value = null;
      int eq = arg.indexOf('=');
      if (arg.startsWith("--") && eq > 0) {
        value = arg.substring(eq + 1);
        arg = arg.substring(0, eq);
      }
      switch (arg) {
        case "--help", "-h" -> throw new BenchOptions.UsageException("");
        case "--keep-database" -> keep = true;
        case "--consumers",
            "--writers",
            "--seconds",
            "--warmup-seconds",
            "--max-entries",
            "--backlog",
            "--keys",
            "--body-bytes",
            "--purge-interval-ms" -> {
          if (value == null) {
            if (i + 1 >= args.length) {
              throw new BenchOptions.UsageException(arg + " needs a value");
            }
            value = args[++i];
          }
          switch (arg) {
            case "--consumers" -> consumers = BenchOptions.range(arg, value, 1, 64);
            case "--writers" -> writers = BenchOptions.range(arg, value, 0, 1024);
            case "--seconds" -> seconds = BenchOptions.range(arg, value, 1, 3600);
            case "--warmup-seconds" -> warmup = BenchOptions.range(arg, value, 0, 3600);
            case "--max-entries" -> maxEntries = BenchOptions.range(arg, value, 1, 1000);
            case "--backlog" -> backlog = BenchOptions.range(arg, value, 0, 100_000);
            case "--keys" -> keys = BenchOptions.range(arg, value, 1, 1_000_000);
            case "--body-bytes" -> bodyBytes = BenchOptions.range(arg, value, 64, 1 << 20);
            default -> purgeIntervalMs = BenchOptions.range(arg, value, 10, 60_000);
          }
        }
        default -> throw new BenchOptions.UsageException("unknown option " + arg);
      }
    }
    if (writers == 0 && backlog == 0) {
      throw new BenchOptions.UsageException(
          "--writers 0 needs a --backlog for the consumers to read");
    }
    String url = BenchOptions.require(env, "WEIR_PG_URL");
    if (!url.startsWith("jdbc:postgresql://")) {
      throw new BenchOptions.UsageException(
          "WEIR_PG_URL must be a JDBC URL starting with jdbc:postgresql://");
    }
    return new ProjectionBenchOptions(
        consumers,
        writers,
        seconds,
        warmup,
        maxEntries,
        backlog,
        keys,
        bodyBytes,
        purgeIntervalMs,
        keep,
        url,
        env.getOrDefault("WEIR_PG_USER", "weir"),
        env.getOrDefault("WEIR_PG_PASSWORD", ""));
  }
}
