package io.weir.bench;

import io.weir.sharding.partition.OutboxReader;
import java.util.List;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Command-line options of {@link FeedBenchmark} (picocli). Connection settings come from the
 * environment that {@code deploy/bin/pg.sh start} prints (WEIR_PG_URL, WEIR_PG_USER,
 * WEIR_PG_PASSWORD).
 */
@Command(
    name = "FeedBenchmark",
    sortOptions = false,
    usageHelpWidth = 110,
    description =
        "The public read side (io.weir.node.feed.Feeds): changes-feed read throughput for an administrator and for"
            + " a principal restricted by a collection policy, then live-query read latency with many live queries while"
            + " documents are written. Prints figures; asserts nothing.",
    footer = {
      "",
      "Needs WEIR_PG_URL, WEIR_PG_USER and WEIR_PG_PASSWORD (eval \"$(deploy/bin/pg.sh start)\")."
    })
final class FeedBenchOptions {
  @Option(
      names = {"-h", "--help"},
      usageHelp = true,
      description = "this help")
  boolean help;

  @Option(
      names = "--phases",
      paramLabel = "LIST",
      split = ",",
      description =
          "feed, live, isolation (writes beside paced feed readers), comma-separated (default:"
              + " feed,live)")
  List<String> phases = List.of("feed", "live");

  @Option(
      names = "--partitions",
      paramLabel = "N",
      description =
          "partitions that ids are routed over, all on this one node (default: ${DEFAULT-VALUE})")
  int partitions = 16;

  // --- 1. changes feed ---

  @Option(
      names = "--changes",
      paramLabel = "N",
      description =
          "upserts of distinct documents preloaded into collection feed before the reads; the feed then"
              + " holds this many changes (default: ${DEFAULT-VALUE})")
  int changes = 200_000;

  @Option(
      names = "--body-bytes",
      paramLabel = "N",
      description = "size of each feed document's JSON body (default: ${DEFAULT-VALUE})")
  int bodyBytes = 1024;

  @Option(
      names = "--frame-upserts",
      paramLabel = "N",
      description =
          "upserts per ApplyFrame of the preloads (one partition each) (default: ${DEFAULT-VALUE})")
  int frameUpserts = 25;

  @Option(
      names = "--load-in-flight",
      paramLabel = "N",
      description = "preload frames asked at once (default: ${DEFAULT-VALUE})")
  int loadInFlight = 32;

  @Option(
      names = "--page-limit",
      paramLabel = "N",
      description =
          "positions one feed page (and one live read) examines at most, <= weir.feeds.read.max-entries"
              + " (default: ${DEFAULT-VALUE})")
  int pageLimit = 1000;

  @Option(
      names = "--rounds",
      paramLabel = "N",
      description =
          "full reads of the feed per principal, side by side, the order alternating (default: ${DEFAULT-VALUE})")
  int rounds = 3;

  @Option(
      names = "--warmup-changes",
      paramLabel = "N",
      description =
          "positions each principal reads before the rounds, not reported (default: ${DEFAULT-VALUE}; 0: none)")
  int warmupChanges = 50_000;

  // --- 2. live queries ---

  @Option(
      names = "--live-queries",
      paramLabel = "N",
      description = "concurrent live queries (default: ${DEFAULT-VALUE})")
  int liveQueries = 1000;

  @Option(
      names = "--predicates",
      paramLabel = "N",
      description =
          "distinct predicates (bucket = 0..N-1) the live queries share round-robin (default: ${DEFAULT-VALUE})")
  int predicates = 10;

  @Option(
      names = "--live-keys",
      paramLabel = "N",
      description =
          "documents of collection live, preloaded, then rewritten at random (default: ${DEFAULT-VALUE})")
  int liveKeys = 2000;

  @Option(
      names = "--live-body-bytes",
      paramLabel = "N",
      description = "size of each live document's JSON body (default: ${DEFAULT-VALUE})")
  int liveBodyBytes = 256;

  @Option(
      names = "--write-rate",
      paramLabel = "N",
      description =
          "paced document writes per second during the live phase (default: ${DEFAULT-VALUE})")
  int writeRate = 1000;

  @Option(
      names = "--write-in-flight",
      paramLabel = "N",
      description =
          "paced writes awaiting their answer at most; beyond, writes fall behind schedule (default: ${DEFAULT-VALUE})")
  int writeInFlight = 256;

  @Option(
      names = "--live-seconds",
      paramLabel = "S",
      description = "length of the measured live window (default: ${DEFAULT-VALUE})")
  int liveSeconds = 30;

  @Option(
      names = "--live-warmup-seconds",
      paramLabel = "S",
      description =
          "writes and live reads before the window, not reported (default: ${DEFAULT-VALUE}; 0: none)")
  int liveWarmupSeconds = 5;

  @Option(
      names = "--drain-seconds",
      paramLabel = "S",
      description =
          "after the window the writes stop and the live queries read on until every expected delta"
              + " was delivered, at most this long (default: ${DEFAULT-VALUE}; 0: no drain)")
  int drainSeconds = 10;

  @Option(
      names = "--iso-changes",
      paramLabel = "N",
      description =
          "changes preloaded for the feed readers of the isolation phase (default: ${DEFAULT-VALUE})")
  int isoChanges = 100_000;

  @Option(
      names = "--iso-write-rate",
      paramLabel = "N",
      description = "paced writes per second in the isolation phase (default: ${DEFAULT-VALUE})")
  int isoWriteRate = 500;

  @Option(
      names = "--iso-read-rate",
      paramLabel = "N",
      description =
          "changes per second the isolation phase's feed readers read in all (default: ${DEFAULT-VALUE})")
  int isoReadRate = 20_000;

  @Option(
      names = "--iso-readers",
      paramLabel = "N",
      description = "feed readers in the isolation phase (default: ${DEFAULT-VALUE})")
  int isoReaders = 4;

  @Option(
      names = "--iso-seconds",
      paramLabel = "S",
      description =
          "length of each write window of the isolation phase (default: ${DEFAULT-VALUE})")
  int isoSeconds = 20;

  @Option(
      names = "--live-push",
      description =
          "the live queries follow pushed streams (LiveStreams, woken when an outbox grew, as GET"
              + " /v1/query/live/stream does) instead of polling")
  boolean livePush;

  @Option(
      names = "--idle-seconds",
      paramLabel = "S",
      description =
          "after the drain, the live queries stay open this long without writes and the process's CPU"
              + " is measured (default: ${DEFAULT-VALUE}; 0: not measured)")
  int idleSeconds = 20;

  @Option(
      names = "--idle-pause-ms",
      paramLabel = "N",
      description =
          "a live query whose read returned nothing and had nothing more waits this long (default: ${DEFAULT-VALUE})")
  int idlePauseMs = 100;

  @Option(
      names = "--max-concurrent",
      paramLabel = "N",
      description =
          "Feeds.Limits.maxConcurrent (weir.feeds.max-concurrent, 64 by default on a node); 0: the live"
              + " queries plus 100 (default: ${DEFAULT-VALUE})")
  int maxConcurrent = 0;

  @Option(
      names = "--outbox-cache-bytes",
      paramLabel = "N",
      description =
          "the outbox reader's cache of decoded journal events; 0 turns it off (default: ${DEFAULT-VALUE})")
  long outboxCacheBytes = OutboxReader.DEFAULT_CACHE_BYTES;

  @Option(
      names = "--journal-reads",
      paramLabel = "sql|pekko",
      description =
          "how the outbox reader reads journal events: one SQL query per read (as a node does), or"
              + " Pekko's read journal (the release before; default: ${DEFAULT-VALUE})")
  String journalReads = "sql";

  @Option(names = "--keep-database", description = "keep the weir_fbench database afterwards")
  boolean keepDatabase;

  String url;
  String user;
  String password;

  static final String USAGE = BenchArgs.usage(new FeedBenchOptions());

  boolean feedPhase() {
    return phases.contains("feed");
  }

  boolean livePhase() {
    return phases.contains("live");
  }

  boolean isolationPhase() {
    return phases.contains("isolation");
  }

  /** The admission limit the benchmark's {@code Feeds} gets. */
  int admission() {
    return maxConcurrent > 0 ? maxConcurrent : liveQueries + 100;
  }

  static FeedBenchOptions parse(String[] args, Map<String, String> env)
      throws BenchArgs.UsageException {
    FeedBenchOptions o = new FeedBenchOptions();
    BenchArgs.parse(o, args);
    for (String p : o.phases) {
      if (!p.equals("feed") && !p.equals("live") && !p.equals("isolation")) {
        throw new BenchArgs.UsageException(
            "--phases takes feed, live and isolation, comma-separated");
      }
    }
    BenchArgs.range("--partitions", o.partitions, 1, 1024);
    BenchArgs.range("--changes", o.changes, 1, 5_000_000);
    BenchArgs.range("--body-bytes", o.bodyBytes, 128, 1 << 20);
    BenchArgs.range("--frame-upserts", o.frameUpserts, 1, 1000);
    BenchArgs.range("--load-in-flight", o.loadInFlight, 1, 1024);
    BenchArgs.range("--page-limit", o.pageLimit, 1, 1_000_000);
    BenchArgs.range("--rounds", o.rounds, 1, 100);
    if (!o.journalReads.equals("sql") && !o.journalReads.equals("pekko")) {
      throw new IllegalArgumentException("--journal-reads takes sql or pekko");
    }
    BenchArgs.range("--iso-changes", o.isoChanges, 1, 10_000_000);
    BenchArgs.range("--iso-write-rate", o.isoWriteRate, 1, 100_000);
    BenchArgs.range("--iso-read-rate", o.isoReadRate, 1, 10_000_000);
    BenchArgs.range("--iso-readers", o.isoReaders, 1, 64);
    BenchArgs.range("--iso-seconds", o.isoSeconds, 1, 3600);
    BenchArgs.range("--warmup-changes", o.warmupChanges, 0, Integer.MAX_VALUE);
    BenchArgs.range("--live-queries", o.liveQueries, 1, 100_000);
    BenchArgs.range("--predicates", o.predicates, 1, o.liveQueries);
    BenchArgs.range("--live-keys", o.liveKeys, 1, 1_000_000);
    BenchArgs.range("--live-body-bytes", o.liveBodyBytes, 96, 1 << 20);
    BenchArgs.range("--write-rate", o.writeRate, 0, 1_000_000);
    BenchArgs.range("--write-in-flight", o.writeInFlight, 1, 100_000);
    BenchArgs.range("--live-seconds", o.liveSeconds, 1, 3600);
    BenchArgs.range("--live-warmup-seconds", o.liveWarmupSeconds, 0, 3600);
    BenchArgs.range("--drain-seconds", o.drainSeconds, 0, 3600);
    BenchArgs.range("--idle-pause-ms", o.idlePauseMs, 0, 60_000);
    BenchArgs.range("--idle-seconds", o.idleSeconds, 0, 3600);
    BenchArgs.range("--max-concurrent", o.maxConcurrent, 0, 1_000_000);
    if (o.writeInFlight >= o.liveKeys) {
      throw new BenchArgs.UsageException(
          "--write-in-flight must be below --live-keys (a key is written once at a time)");
    }
    o.url = BenchArgs.url(env);
    o.user = env.getOrDefault("WEIR_PG_USER", "weir");
    o.password = env.getOrDefault("WEIR_PG_PASSWORD", "");
    return o;
  }
}
