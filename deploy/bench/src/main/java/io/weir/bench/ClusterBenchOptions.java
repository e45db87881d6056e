package io.weir.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Command-line options of {@link ClusterBenchmark} (picocli). Connection settings come from the
 * environment that {@code deploy/bin/pg.sh start} prints (WEIR_PG_URL, WEIR_PG_USER,
 * WEIR_PG_PASSWORD).
 */
@Command(
    name = "ClusterBenchmark",
    sortOptions = false,
    usageHelpWidth = 110,
    description =
        "Real node processes (java -jar node/target/weir-node.jar node) on loopback: failover time of a CDC"
            + " pipeline into the partitions when the slot owner of a 3-node cluster is SIGKILLed, then document-API"
            + " write throughput over HTTP with 1 node and with 3 nodes, side by side. Prints figures; asserts nothing.",
    footer = {
      "",
      "Needs WEIR_PG_URL, WEIR_PG_USER and WEIR_PG_PASSWORD (eval \"$(deploy/bin/pg.sh start)\")."
    })
final class ClusterBenchOptions {
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
          "failover, throughput, batch, restart, comma-separated (default: failover,throughput; batch"
              + " and restart run only when named)")
  List<String> phases = List.of("failover", "throughput");

  @Option(
      names = "--partitions",
      paramLabel = "N",
      description = "partitions of each cluster (WEIR_PARTITIONS) (default: ${DEFAULT-VALUE})")
  int partitions = 64;

  @Option(
      names = "--node-heap",
      paramLabel = "SIZE",
      description = "maximum heap of each node process (-Xmx) (default: ${DEFAULT-VALUE})")
  String nodeHeap = "1g";

  @Option(
      names = "--node-option",
      paramLabel = "JVM-OPTION",
      description =
          "an extra JVM option of every node process, repeatable (for example"
              + " -XX:StartFlightRecording=filename=node.jfr,settings=profile to profile the nodes)")
  List<String> nodeOptions = new ArrayList<>();

  @Option(
      names = "--acknowledged-marks",
      paramLabel = "on|off",
      description =
          "weir.storage.acknowledged-marks.enabled of every node (ADR 0036): off measures the writes"
              + " without the majority write of each group commit's mark (default: ${DEFAULT-VALUE})")
  String acknowledgedMarks = "on";

  @Option(
      names = "--stable-after",
      paramLabel = "DURATION",
      description =
          "pekko.cluster.split-brain-resolver.stable-after of every node: how long membership must be stable"
              + " before the resolver downs an unreachable member. The default is Weir's (ADR 0045); the"
              + " end-to-end tests use 3s. The removal margin after it is 1s unless a --node-option sets"
              + " -Dpekko.cluster.down-removal-margin (e.g. the stable-after value, as Pekko's own default)"
              + " (default: ${DEFAULT-VALUE})")
  String stableAfter = "7s";

  // --- 1. failover ---

  @Option(
      names = "--failover-runs",
      paramLabel = "N",
      description =
          "times the slot owner is SIGKILLed or frozen (--failover-fault; restarted before the next run)"
              + " (default: ${DEFAULT-VALUE})")
  int failoverRuns = 5;

  @Option(
      names = "--failover-fault",
      paramLabel = "kill|freeze",
      description =
          "what each run does to the slot owner: kill = SIGKILL (its sockets close, PostgreSQL ends its"
              + " sessions at once); freeze = SIGSTOP, a hung host (its sessions and its walsender stay"
              + " open until the cluster downs it and the new owner ends the walsender, ADR 0037); the"
              + " frozen process is SIGKILLed once the run is measured, then started again"
              + " (default: ${DEFAULT-VALUE})")
  String failoverFault = "kill";

  @Option(
      names = "--writer-interval-ms",
      paramLabel = "N",
      description =
          "pause of the source writer between its transactions (each inserts one row and updates another)"
              + " (default: ${DEFAULT-VALUE})")
  int writerIntervalMs = 20;

  @Option(
      names = "--failover-timeout",
      paramLabel = "S",
      description =
          "seconds a run waits for streaming and the document to come back before it gives up"
              + " (default: ${DEFAULT-VALUE})")
  int failoverTimeout = 180;

  // --- 2. throughput ---

  @Option(
      names = "--clients",
      paramLabel = "N",
      description =
          "concurrent HTTP clients, each waiting for its answer before the next PUT; client i writes"
              + " through node i mod nodes (default: ${DEFAULT-VALUE})")
  int clients = 32;

  @Option(
      names = "--seconds",
      paramLabel = "S",
      description = "length of each measured round (default: ${DEFAULT-VALUE})")
  int seconds = 20;

  @Option(
      names = "--warmup-seconds",
      paramLabel = "S",
      description =
          "writes to each configuration before its first round, not reported; the node JVMs compile the write"
              + " path meanwhile (default: ${DEFAULT-VALUE}; 0: none)")
  int warmupSeconds = 30;

  @Option(
      names = "--rounds",
      paramLabel = "N",
      description =
          "rounds per configuration, 1 node and 3 nodes side by side, the order alternating (default: ${DEFAULT-VALUE})")
  int rounds = 3;

  @Option(
      names = "--body-bytes",
      paramLabel = "N",
      description = "size of each document's JSON body (default: ${DEFAULT-VALUE})")
  int bodyBytes = 200;

  // --- 3. batch ---

  @Option(
      names = "--batch-clients",
      paramLabel = "N",
      description =
          "concurrent HTTP clients of the batch phase, each waiting for its answer before the next"
              + " POST /v1/documents/batch (default: ${DEFAULT-VALUE})")
  int batchClients = 16;

  @Option(
      names = "--batch-items",
      paramLabel = "N",
      description = "documents per batch (default: ${DEFAULT-VALUE})")
  int batchItems = 100;

  @Option(
      names = "--batch-seconds",
      paramLabel = "S",
      description = "length of each measured batch round (default: ${DEFAULT-VALUE})")
  int batchSeconds = 20;

  @Option(
      names = "--batch-warmup-seconds",
      paramLabel = "S",
      description =
          "batches and single PUTs before the first round, not reported (default: ${DEFAULT-VALUE})")
  int batchWarmupSeconds = 10;

  @Option(
      names = "--restart-runs",
      paramLabel = "N",
      description =
          "restarts of the restart phase's node per kind of start (plain java -jar, class-data"
              + " archive), alternating (default: ${DEFAULT-VALUE})")
  int restartRuns = 6;

  @Option(
      names = "--batch-kinds",
      paramLabel = "LIST",
      split = ",",
      description =
          "kinds of writes the batch phase measures, of batch, put and jdbc, comma-separated (default:"
              + " batch,put,jdbc)")
  List<String> batchKinds = List.of("batch", "put", "jdbc");

  @Option(
      names = "--http-client",
      paramLabel = "plain|jdk",
      description =
          "the clients' HTTP implementation: plain (one keep-alive HTTP/1.1 connection per client, the"
              + " protocol written and read directly, as wrk does: little client CPU beside the node) or jdk"
              + " (java.net.http.HttpClient, about 150 µs of CPU per request here) (default: ${DEFAULT-VALUE})")
  String httpClient = "plain";

  @Option(
      names = "--routed",
      description =
          "the throughput phase also measures the 3-node cluster with every client writing only documents"
              + " whose partition its node hosts, right after each round that forwards about 2 in 3 writes:"
              + " the difference in node CPU per write is what forwarding costs (issue 28)")
  boolean routed;

  @Option(
      names = "--keep-database",
      description = "keep the databases weir_cbench and weir_cbench1 afterwards")
  boolean keepDatabase;

  String url;
  String user;
  String password;

  static final String USAGE = BenchArgs.usage(new ClusterBenchOptions());

  boolean failoverPhase() {
    return phases.contains("failover");
  }

  boolean throughputPhase() {
    return phases.contains("throughput");
  }

  boolean batchPhase() {
    return phases.contains("batch");
  }

  boolean restartPhase() {
    return phases.contains("restart");
  }

  static ClusterBenchOptions parse(String[] args, Map<String, String> env)
      throws BenchArgs.UsageException {
    ClusterBenchOptions o = new ClusterBenchOptions();
    BenchArgs.parse(o, args);
    for (String p : o.phases) {
      if (!List.of("failover", "throughput", "batch", "restart").contains(p)) {
        throw new BenchArgs.UsageException(
            "--phases takes failover, throughput, batch and restart, comma-separated");
      }
    }
    if (o.restartRuns < 1) {
      throw new BenchArgs.UsageException("--restart-runs must be at least 1");
    }
    for (String k : o.batchKinds) {
      if (!List.of("batch", "put", "jdbc").contains(k)) {
        throw new BenchArgs.UsageException(
            "--batch-kinds takes batch, put and jdbc, comma-separated");
      }
    }
    if (!o.httpClient.equals("plain") && !o.httpClient.equals("jdk")) {
      throw new BenchArgs.UsageException("--http-client takes plain or jdk");
    }
    for (String option : o.nodeOptions) {
      if (!option.startsWith("-")) {
        throw new BenchArgs.UsageException("--node-option takes a JVM option such as -Xss1m");
      }
    }
    if (!o.acknowledgedMarks.equals("on") && !o.acknowledgedMarks.equals("off")) {
      throw new BenchArgs.UsageException("--acknowledged-marks takes on or off");
    }
    if (!o.nodeHeap.matches("[0-9]+[kmgKMG]")) {
      throw new BenchArgs.UsageException("--node-heap must be a heap size such as 512m or 1g");
    }
    if (!o.failoverFault.equals("kill") && !o.failoverFault.equals("freeze")) {
      throw new BenchArgs.UsageException("--failover-fault takes kill or freeze");
    }
    if (!o.stableAfter.matches("[0-9]+(ms|s|m)")) {
      throw new BenchArgs.UsageException(
          "--stable-after must be a duration such as 3s, 20s or 500ms");
    }
    BenchArgs.range("--partitions", o.partitions, 3, 1024);
    BenchArgs.range("--failover-runs", o.failoverRuns, 1, 100);
    BenchArgs.range("--writer-interval-ms", o.writerIntervalMs, 0, 60_000);
    BenchArgs.range("--failover-timeout", o.failoverTimeout, 10, 3600);
    BenchArgs.range("--clients", o.clients, 1, 1024);
    BenchArgs.range("--seconds", o.seconds, 1, 3600);
    BenchArgs.range("--warmup-seconds", o.warmupSeconds, 0, 3600);
    BenchArgs.range("--rounds", o.rounds, 1, 100);
    BenchArgs.range("--body-bytes", o.bodyBytes, 64, 1 << 20);
    BenchArgs.range("--batch-clients", o.batchClients, 1, 1024);
    BenchArgs.range("--batch-items", o.batchItems, 1, 1000);
    BenchArgs.range("--batch-seconds", o.batchSeconds, 1, 3600);
    BenchArgs.range("--batch-warmup-seconds", o.batchWarmupSeconds, 0, 3600);
    o.url = BenchArgs.url(env);
    o.user = env.getOrDefault("WEIR_PG_USER", "weir");
    o.password = env.getOrDefault("WEIR_PG_PASSWORD", "");
    return o;
  }
}
