package io.weir.node.bench;

import java.util.Map;

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
    int documents,
    boolean writesPhase,
    boolean heapPhase,
    boolean keepDatabase,
    String url,
    String user,
    String password) {

  static final String USAGE =
      """
      usage: PartitionBenchmark [--writers N] [--seconds S | --writes N] [--warmup-seconds S] [--rounds N]
                                [--keys N] [--collections N] [--body-bytes N] [--documents N]
                                [--phases writes,heap] [--keep-database]

        --writers N          concurrent writers, each waiting for its write's answer before the next (default 16)
        --seconds S          length of a measured round of writes (default 20)
        --writes N           writes per measured round instead of a duration (over all writers)
        --warmup-seconds S   writes before the first round, not reported (default 10; 0: none)
        --rounds N           measured rounds of writes, and restarts per recovery case (default 3)
        --keys N             ids per collection; writes pick one at random (default 100000)
        --collections N      collections; writes pick one at random (default 4)
        --body-bytes N       size of each document's JSON body (default 1024)
        --documents N        documents loaded into one partition for the heap and recovery figures (default 100000)
        --phases LIST        writes, heap (heap includes recovery) or both (default writes,heap)
        --keep-database      keep the weir_pbench database afterwards

      Needs WEIR_PG_URL, WEIR_PG_USER and WEIR_PG_PASSWORD (eval "$(deploy/bin/pg.sh start)").
      """;

  static PartitionBenchOptions parse(String[] args, Map<String, String> env)
      throws BenchOptions.UsageException {
    int writers = 16;
    int seconds = 20;
    int writes = 0;
    int warmup = 10;
    int rounds = 3;
    int keys = 100_000;
    int collections = 4;
    int bodyBytes = 1024;
    int documents = 100_000;
    boolean writesPhase = true;
    boolean heapPhase = true;
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
        case "--writers",
            "--seconds",
            "--writes",
            "--warmup-seconds",
            "--rounds",
            "--keys",
            "--collections",
            "--body-bytes",
            "--documents",
            "--phases" -> {
          if (value == null) {
            if (i + 1 >= args.length) {
              throw new BenchOptions.UsageException(arg + " needs a value");
            }
            value = args[++i];
          }
          switch (arg) {
            case "--writers" -> writers = BenchOptions.range(arg, value, 1, 1024);
            case "--seconds" -> {
              seconds = BenchOptions.range(arg, value, 1, 3600);
              writes = 0;
            }
            case "--writes" -> {
              writes = BenchOptions.positive(arg, value);
              seconds = 0;
            }
            case "--warmup-seconds" -> warmup = BenchOptions.range(arg, value, 0, 3600);
            case "--rounds" -> rounds = BenchOptions.range(arg, value, 1, 100);
            case "--keys" -> keys = BenchOptions.positive(arg, value);
            case "--collections" -> collections = BenchOptions.range(arg, value, 1, 1000);
            case "--body-bytes" -> bodyBytes = BenchOptions.range(arg, value, 64, 1 << 20);
            case "--documents" -> documents = BenchOptions.range(arg, value, 1000, 10_000_000);
            default -> {
              writesPhase = false;
              heapPhase = false;
              for (String part : value.split(",")) {
                switch (part.trim()) {
                  case "writes" -> writesPhase = true;
                  case "heap" -> heapPhase = true;
                  default ->
                      throw new BenchOptions.UsageException("--phases takes writes, heap or both");
                }
              }
            }
          }
        }
        default -> throw new BenchOptions.UsageException("unknown option " + arg);
      }
    }
    String url = BenchOptions.require(env, "WEIR_PG_URL");
    if (!url.startsWith("jdbc:postgresql://")) {
      throw new BenchOptions.UsageException(
          "WEIR_PG_URL must be a JDBC URL starting with jdbc:postgresql://");
    }
    return new PartitionBenchOptions(
        writers,
        seconds,
        writes,
        warmup,
        rounds,
        keys,
        collections,
        bodyBytes,
        documents,
        writesPhase,
        heapPhase,
        keep,
        url,
        env.getOrDefault("WEIR_PG_USER", "weir"),
        env.getOrDefault("WEIR_PG_PASSWORD", ""));
  }
}
