package io.weir.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.typesafe.config.Config;
import io.weir.node.auth.Policies;
import io.weir.node.auth.Principal;
import io.weir.node.documents.Documents;
import io.weir.node.feed.Feeds;
import io.weir.node.feed.LiveStreams;
import io.weir.node.feed.TailSignals;
import io.weir.node.tokens.TokenKeys;
import io.weir.persistence.ClusterIdentityStore;
import io.weir.persistence.Database;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.persistence.PolicyStore.Visibility;
import io.weir.persistence.PostgresSettings;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.query.Q1Query;
import io.weir.sharding.partition.JournalEntries;
import io.weir.sharding.partition.OutboxReader;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.PartitionSettings;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntFunction;
import org.HdrHistogram.Histogram;

/**
 * Benchmark of the public read side ({@link Feeds}): figures, not assertions. In process, on a
 * one-node cluster whose JDBC journal is the benchmark database ({@value #DATABASE}, durable,
 * created afresh), through the Java API the HTTP routes call (no HTTP).
 *
 * <ol>
 *   <li><b>Changes feed.</b> Collection {@value #FEED} gets a policy first (row rule {@code acl} on
 *       field {@code acl}, sensitive field {@value #SENSITIVE}), then {@code --changes} upserts of
 *       distinct documents, spread over {@code --partitions} partitions as {@code ApplyFrame}s of
 *       {@code --frame-upserts} upserts. Every other document lists the restricted principal in its
 *       ACL. Then the feed is read from the beginning to the end, page after page ({@code
 *       --page-limit} positions), by an administrator and by the restricted principal (half the
 *       rows visible, the sensitive field omitted), side by side for {@code --rounds} rounds,
 *       alternating which goes first: changes/s, page latency, CPU; medians and ratios.
 *   <li><b>Live queries.</b> Collection {@value #LIVE} (no policy) gets {@code --live-keys}
 *       documents, each in one of {@code --predicates} buckets. {@code --live-queries} live queries
 *       ({@code bucket = k}, k round-robin) are started ({@link Feeds#startLive}); each then loops
 *       on {@link Feeds#readLive} with its cursor, applying its deltas to its own copy of the
 *       result, at once again while a read delivered deltas or had more waiting, after {@code
 *       --idle-pause-ms} otherwise. Meanwhile {@code --write-rate} writes/s, paced, rewrite random
 *       documents with a random bucket ({@link Documents#put}). Per read: latency (HdrHistogram),
 *       deltas; per delivered delta: the delay from the write's answer to the read that returned
 *       it. Warm-up, a measured window, then a drain without writes.
 * </ol>
 *
 * Run it with {@code deploy/bin/bench-feeds.sh}. Prints its report to standard output, by design;
 * never a document body or any row value.
 */
public final class FeedBenchmark {
  static final String DATABASE = "weir_fbench";
  static final String FEED = "feed";
  static final String LIVE = "live";
  static final String SENSITIVE = "secret";
  static final String READER = "bench-reader";
  static final String OTHER = "bench-other";
  private static final Duration ASK = Duration.ofSeconds(30);
  private static final String LINE = "-".repeat(118);
  private static final long MAX_MICROS = PartitionBenchmark.MAX_MICROS;
  private static final ObjectMapper JSON = new ObjectMapper();

  private final FeedBenchOptions options;
  private final String benchUrl;

  /** Random hex text that bodies take their padding from (a body is never printed). */
  private final String padding;

  private Database keysDatabase;
  private Database outboxDatabase;
  private ExecutorService outboxIo;
  private long maxBytes;

  private FeedBenchmark(FeedBenchOptions options) {
    this.options = options;
    this.benchUrl = PartitionBenchmark.databaseUrl(options.url, DATABASE);
    this.padding = PartitionBenchmark.padding(Math.max(options.bodyBytes, options.liveBodyBytes));
  }

  public static void main(String[] args) {
    BenchMain.main(
        args,
        FeedBenchOptions::parse,
        FeedBenchOptions.USAGE,
        options -> new FeedBenchmark(options).run());
  }

  private int run() throws Exception {
    BenchMain.header("Weir changes-feed and live-query benchmark");
    try {
      PartitionBenchmark.recreateDatabase(options.url, options.user, options.password, DATABASE);
      System.out.printf(
          "PostgreSQL:    %s, shared_buffers %s, synchronous_commit %s, fsync %s; database %s%n",
          show("server_version"),
          show("shared_buffers"),
          show("synchronous_commit"),
          show("fsync"),
          DATABASE);
      try (PartitionBenchmark.Node node =
          new PartitionBenchmark.Node(
              benchUrl,
              options.user,
              options.password,
              "weir-fbench",
              PartitionSettings.DEFAULTS,
              false)) {
        measure(node);
      } finally {
        if (keysDatabase != null) {
          keysDatabase.close();
        }
        if (outboxDatabase != null) {
          outboxIo.shutdownNow();
          outboxDatabase.close();
        }
      }
      System.out.println(
          "load average (1/5/15 min) at the end: "
              + CdcBenchmark.loadAverage()
              + " -- above about 1 means something besides this benchmark competed for the CPUs");
      return 0;
    } finally {
      if (!options.keepDatabase) {
        PartitionBenchmark.dropDatabase(options.url, options.user, options.password, DATABASE);
      }
    }
  }

  private void measure(PartitionBenchmark.Node node) throws Exception {
    Config c = node.system.settings().config();
    int partitions = options.partitions;
    Documents documents = new Documents(node.system, partitions, List.of(), ASK);
    var blocking =
        node.system
            .dispatchers()
            .lookup(
                org.apache.pekko.actor.typed.DispatcherSelector.fromConfig(
                    "weir.blocking-io-dispatcher"));
    // The cluster's token keys and the collection policies, as a node loads them.
    keysDatabase = Database.create(PostgresSettings.create(c), "fbench-keys");
    try (Connection connection = keysDatabase.dataSource().getConnection()) {
      ClusterIdentityStore.loadOrCreate(connection, "weir", partitions);
    }
    TokenKeys keys = new TokenKeys(keysDatabase.dataSource(), "weir", blocking, Duration.ZERO);
    keys.reload().toCompletableFuture().get(30, TimeUnit.SECONDS);
    Policies policies = new Policies(keysDatabase.dataSource(), "weir", blocking, documents);
    get(policies.reload());
    Feeds.Limits limits =
        new Feeds.Limits(
            c.getInt("weir.feeds.read.default-entries"),
            c.getInt("weir.feeds.read.max-entries"),
            c.getBytes("weir.feeds.read.default-bytes"),
            c.getBytes("weir.feeds.read.max-bytes"),
            c.getBytes("weir.feeds.query.candidate-bytes"),
            c.getInt("weir.feeds.query.max-rows"),
            options.admission(),
            c.getDuration("weir.feeds.cursor-ttl"));
    if (options.pageLimit > limits.maxLimit()) {
      throw new IllegalArgumentException(
          "--page-limit is above weir.feeds.read.max-entries (" + limits.maxLimit() + ")");
    }
    maxBytes = limits.defaultBytes();
    JournalEntries journal;
    if (options.journalReads.equals("sql")) {
      // As a node reads its outboxes: a pool of weir.postgres.read-pool-size connections.
      int readers = c.getInt("weir.postgres.read-pool-size");
      outboxDatabase =
          Database.create(PostgresSettings.create(c).withPoolSize(readers), "fbench-outbox");
      outboxIo = Executors.newFixedThreadPool(readers);
      journal =
          JournalEntries.sql(
              node.system,
              outboxDatabase.dataSource(),
              PostgresSettings.create(c).schema(),
              outboxIo);
    } else {
      journal = JournalEntries.pekko(node.system);
    }
    OutboxReader outbox = new OutboxReader(node.system, journal, options.outboxCacheBytes);
    Feeds feeds = new Feeds(documents, outbox, keys, policies, limits, Clock.systemUTC());
    // Every partition up before anything is timed.
    long t0 = System.nanoTime();
    get(documents.statusAll());
    System.out.printf(
        Locale.ROOT,
        "node:          one-node cluster (Cluster Sharding, role server), %d partitions (started in"
            + " %.2f s), JDBC journal in schema weir of %s,%n               %s journal connections"
            + " (weir.postgres.journal-pool-size; outbox reads have their own, weir.postgres.read-pool-size); default PartitionSettings%n"
            + "               journal reads: %s%n",
        partitions,
        (System.nanoTime() - t0) / 1e9,
        DATABASE,
        PartitionBenchmark.setting(c, "weir.postgres.journal-pool-size"),
        options.journalReads.equals("sql")
            ? "one SQL query per read (JournalEntries.sql, as a node)"
            : "Pekko's read journal (--journal-reads pekko)");
    System.out.printf(
        "feeds:         Feeds.Limits: maxConcurrent %,d (a node's default is %d), maxBytes %d MiB per read"
            + " (weir.feeds.read.default-bytes), cursor TTL %s; requests refused BUSY are counted%n",
        limits.maxConcurrent(),
        c.getInt("weir.feeds.max-concurrent"),
        maxBytes >> 20,
        limits.cursorTtl());
    System.out.println(LINE);
    if (options.feedPhase()) {
      feedPhase(documents, feeds, policies);
    }
    if (options.livePhase()) {
      if (options.feedPhase()) {
        System.out.println(LINE);
      }
      livePhase(documents, feeds, node.tails);
    }
    if (options.isolationPhase()) {
      if (options.feedPhase() || options.livePhase()) {
        System.out.println(LINE);
      }
      isolationPhase(documents, feeds);
    }
  }

  // ==== 1. the changes feed ====

  /** One full (or warm-up) read of the feed by one principal. */
  private record ReadRun(
      String who,
      long pages,
      long delivered,
      long withSensitive,
      double seconds,
      Histogram latency,
      double jvmCpu,
      double pgCpu,
      double machineCpu,
      Map<String, Long> failures) {}

  private void feedPhase(Documents documents, Feeds feeds, Policies policies) throws Exception {
    CollectionPolicy policy =
        new CollectionPolicy(FEED, 0, List.of(SENSITIVE), Visibility.ACL, "acl");
    Policies.Installed installed = get(policies.put(policy));
    if (installed.partitions() != installed.total()) {
      throw new IllegalStateException(
          "the policy reached "
              + installed.partitions()
              + " of "
              + installed.total()
              + " partitions");
    }
    System.out.printf(
        "1. changes feed: collection %s, policy version %d: row rule acl (field acl), sensitive field %s,"
            + " installed in %d partitions%n",
        FEED, installed.version(), SENSITIVE, installed.total());
    List<String> ids = new ArrayList<>(options.changes);
    for (int i = 0; i < options.changes; i++) {
      ids.add("d" + i);
    }
    SplittableRandom random = new SplittableRandom(7);
    Load load = preload(documents, FEED, ids, i -> feedBody(random, i, ids.get(i)));
    List<PartitionStatus> status = get(documents.statusAll());
    long positions = 0;
    long events = 0;
    long smallest = Long.MAX_VALUE;
    long largest = 0;
    for (PartitionStatus s : status) {
      long retained = s.outboxNext() - s.outboxFirst();
      positions += retained;
      events += s.journalEvents();
      smallest = Math.min(smallest, retained);
      largest = Math.max(largest, retained);
    }
    System.out.printf(
        Locale.ROOT,
        "   preload: %,d upserts of distinct documents (%,d-byte JSON bodies; every other one's acl"
            + " lists the restricted principal),%n            ApplyFrames of %d upserts, %d in flight: %.1f s (%,.0f"
            + " upserts/s); failed %s%n            outbox: %,d changes over %d partitions (%,d..%,d each), %,d journal"
            + " events (%.1f changes per event)%n",
        options.changes,
        options.bodyBytes,
        options.frameUpserts,
        options.loadInFlight,
        load.seconds(),
        options.changes / load.seconds(),
        load.failures().isEmpty() ? "0" : load.failures(),
        positions,
        status.size(),
        smallest,
        largest,
        events,
        (double) positions / Math.max(1, events));

    Principal admin = new Principal("bench-admin", true);
    Principal reader =
        new Principal(READER, false, Map.of(FEED, Set.of("DocumentsRead", "ChangesRead")), 0);
    System.out.printf(
        "   principals: administrator (every row and field); restricted = %s with DocumentsRead and"
            + " ChangesRead on %s,%n               no FieldRead on %s, listed in half the rows' acl%n",
        READER, FEED, SENSITIVE);
    System.out.printf(
        "   each read: Feeds.read from beginning, then with the returned cursor, page after page (limit %,d"
            + " positions, maxBytes %d MiB) until hasMore is false%n",
        options.pageLimit, maxBytes >> 20);
    if (options.warmupChanges > 0) {
      long pages = Math.max(1, options.warmupChanges / options.pageLimit);
      for (Principal p : List.of(admin, reader)) {
        ReadRun w = readFeed(feeds, p, pages, true);
        System.out.printf(
            Locale.ROOT,
            "   warm-up (not reported): %s read %,d pages, %,d changes delivered, %,d of them with"
                + " field %s%s%n",
            w.who(),
            w.pages(),
            w.delivered(),
            w.withSensitive(),
            SENSITIVE,
            p.administrator() ? "" : " (expected 0)");
      }
    }
    System.out.printf(
        "%-5s %-13s %6s %9s %10s %7s %10s %11s | %8s %8s %8s | %5s %5s %5s  %s%n",
        "round",
        "principal",
        "pages",
        "changes",
        "delivered",
        "s",
        "changes/s",
        "delivered/s",
        "page p50",
        "p99",
        "max",
        "JVM",
        "PG",
        "all",
        "failed");
    List<ReadRun> admins = new ArrayList<>();
    List<ReadRun> readers = new ArrayList<>();
    for (int r = 1; r <= options.rounds; r++) {
      List<Principal> order = r % 2 == 1 ? List.of(admin, reader) : List.of(reader, admin);
      for (Principal p : order) {
        ReadRun run = readFeed(feeds, p, Long.MAX_VALUE, false);
        (p.administrator() ? admins : readers).add(run);
        double s = run.seconds();
        System.out.printf(
            Locale.ROOT,
            "%-5d %-13s %,6d %,9d %,10d %7.2f %,10.0f %,11.0f | %8.2f %8.2f %8.1f | %5.2f %5.2f %5.2f  %s%n",
            r,
            run.who(),
            run.pages(),
            positions,
            run.delivered(),
            s,
            positions / s,
            run.delivered() / s,
            ms(run.latency(), 50),
            ms(run.latency(), 99),
            run.latency().getMaxValue() / 1000.0,
            run.jvmCpu() / s,
            run.pgCpu() / s,
            run.machineCpu() / s,
            run.failures().isEmpty() ? "0" : run.failures().toString());
      }
    }
    System.out.println(
        "changes = positions of the feed read (every change of the collection); delivered = changes the"
            + " principal may see; page = one\nFeeds.read (latency in ms); JVM / PG / all = cores busy during the read: this JVM,"
            + " the PostgreSQL backends of "
            + DATABASE
            + ", the whole machine");
    long total = positions;
    double[] adminRates = admins.stream().mapToDouble(run -> total / run.seconds()).toArray();
    double[] readerRates = readers.stream().mapToDouble(run -> total / run.seconds()).toArray();
    double[] ratios = new double[options.rounds];
    StringBuilder each = new StringBuilder();
    for (int i = 0; i < options.rounds; i++) {
      ratios[i] = readerRates[i] / adminRates[i];
      each.append(i == 0 ? "" : ", ").append(String.format(Locale.ROOT, "%.2f", ratios[i]));
    }
    Histogram adminPages = new Histogram(MAX_MICROS, 3);
    Histogram readerPages = new Histogram(MAX_MICROS, 3);
    admins.forEach(run -> adminPages.add(run.latency()));
    readers.forEach(run -> readerPages.add(run.latency()));
    System.out.printf(
        Locale.ROOT,
        "feed summary (medians over %d rounds): administrator %,.0f changes/s (%,.0f..%,.0f), page p50"
            + " %.1f ms, p99 %.1f ms;%n              restricted %,.0f changes/s (%,.0f..%,.0f; %,.0f delivered/s), page p50"
            + " %.1f ms, p99 %.1f ms;%n              restricted / administrator per round: %s, median %.2f%n",
        options.rounds,
        CdcBenchmark.median(adminRates),
        min(adminRates),
        max(adminRates),
        ms(adminPages, 50),
        ms(adminPages, 99),
        CdcBenchmark.median(readerRates),
        min(readerRates),
        max(readerRates),
        CdcBenchmark.median(
            readers.stream().mapToDouble(run -> run.delivered() / run.seconds()).toArray()),
        ms(readerPages, 50),
        ms(readerPages, 99),
        each,
        CdcBenchmark.median(ratios));
  }

  /**
   * Reads the feed from the beginning, page after page, until hasMore is false or {@code maxPages}
   * were read.
   */
  private ReadRun readFeed(Feeds feeds, Principal principal, long maxPages, boolean check)
      throws Exception {
    Histogram latency = new Histogram(MAX_MICROS, 3);
    Map<String, Long> failures = new TreeMap<>();
    long pages = 0;
    long delivered = 0;
    long withSensitive = 0;
    int consecutiveFailures = 0;
    Feeds.Start start = new Feeds.Beginning();
    double cpu0 = CpuTimes.now().self();
    double machine0 = CpuTimes.machineBusy();
    Map<Long, Double> pg0 = backendCpu();
    long t0 = System.nanoTime();
    while (pages < maxPages) {
      long t = System.nanoTime();
      Feeds.Page page;
      try {
        page = get(feeds.read(principal, FEED, start, options.pageLimit, maxBytes));
      } catch (Exception e) {
        failures.merge(kind(e), 1L, Long::sum);
        if (++consecutiveFailures > 100) {
          throw new IllegalStateException(
              "reading the feed failed 100 times in a row: " + failures);
        }
        Thread.sleep(10);
        continue;
      }
      consecutiveFailures = 0;
      latency.recordValue(Math.min((System.nanoTime() - t) / 1000, MAX_MICROS));
      pages++;
      delivered += page.changes().size();
      if (check) {
        for (Feeds.Change ch : page.changes()) {
          if ((ch.after() != null && ch.after().contains("\"" + SENSITIVE + "\""))
              || (ch.before() != null && ch.before().contains("\"" + SENSITIVE + "\""))) {
            withSensitive++;
          }
        }
      }
      start = new Feeds.FromCursor(page.cursor());
      if (!page.hasMore()) {
        break;
      }
    }
    double seconds = (System.nanoTime() - t0) / 1e9;
    double jvm = CpuTimes.now().self() - cpu0;
    double machine = CpuTimes.machineBusy() - machine0;
    double pg = 0;
    for (Map.Entry<Long, Double> backend : backendCpu().entrySet()) {
      pg += backend.getValue() - pg0.getOrDefault(backend.getKey(), 0.0);
    }
    return new ReadRun(
        principal.administrator() ? "administrator" : "restricted",
        pages,
        delivered,
        withSensitive,
        seconds,
        latency,
        jvm,
        pg,
        machine,
        failures);
  }

  private String feedBody(SplittableRandom random, int i, String id) {
    String head =
        "{\"acl\":[\""
            + (i % 2 == 0 ? READER : OTHER)
            + "\"],\"bucket\":"
            + (i % 10)
            + ",\"id\":\""
            + id
            + "\",\"n\":"
            + i
            + ",\""
            + SENSITIVE
            + "\":\""
            + Long.toHexString(random.nextLong())
            + "\",\"pad\":\"";
    return pad(random, head, options.bodyBytes);
  }

  private String pad(SplittableRandom random, String head, int bytes) {
    int pad = Math.max(0, bytes - head.length() - 2);
    int from = random.nextInt(padding.length() - pad + 1);
    return head + padding.substring(from, from + pad) + "\"}";
  }

  // ==== preload ====

  private record Load(double seconds, Map<String, Long> failures) {}

  /**
   * One upsert per id, grouped by partition into ApplyFrames of {@code --frame-upserts}, the
   * partitions' frames interleaved, {@code --load-in-flight} frames asked at once.
   */
  private Load preload(
      Documents documents, String collection, List<String> ids, IntFunction<String> body)
      throws Exception {
    List<List<Integer>> byPartition = new ArrayList<>();
    for (int p = 0; p < documents.partitions(); p++) {
      byPartition.add(new ArrayList<>());
    }
    for (int i = 0; i < ids.size(); i++) {
      byPartition.get(documents.partitionOf(collection, ids.get(i))).add(i);
    }
    List<int[]> frames = new ArrayList<>(); // partition, from, to (indexes into byPartition's list)
    int size = options.frameUpserts;
    for (int from = 0; ; from += size) {
      boolean any = false;
      for (int p = 0; p < byPartition.size(); p++) {
        int n = byPartition.get(p).size();
        if (from < n) {
          frames.add(new int[] {p, from, Math.min(n, from + size)});
          any = true;
        }
      }
      if (!any) {
        break;
      }
    }
    Semaphore inFlight = new Semaphore(options.loadInFlight);
    Map<String, Long> failures = new ConcurrentHashMap<>();
    long t0 = System.nanoTime();
    int n = 0;
    for (int[] f : frames) {
      List<Mutation> upserts = new ArrayList<>(f[2] - f[1]);
      for (int k = f[1]; k < f[2]; k++) {
        int i = byPartition.get(f[0]).get(k);
        upserts.add(new Upsert(collection, ids.get(i), body.apply(i), Optional.empty()));
      }
      String commandId = "fbench-" + collection + "-" + (n++);
      inFlight.acquire();
      documents
          .<FrameReply>ask(f[0], r -> new ApplyFrame(commandId, upserts, Optional.empty(), r))
          .whenComplete(
              (reply, error) -> {
                if (error != null) {
                  failures.merge(kind(error), 1L, Long::sum);
                } else if (!(reply instanceof Applied)) {
                  failures.merge(reply.getClass().getSimpleName(), 1L, Long::sum);
                }
                inFlight.release();
              });
    }
    inFlight.acquire(options.loadInFlight);
    inFlight.release(options.loadInFlight);
    double seconds = (System.nanoTime() - t0) / 1e9;
    if (!failures.isEmpty()) {
      throw new IllegalStateException(
          "preloading " + collection + " failed: " + new TreeMap<>(failures));
    }
    return new Load(seconds, new TreeMap<>(failures));
  }

  // ==== 2. live queries ====

  /**
   * One live query: its predicate, cursor and copy of the result (id -> revision); touched by its
   * own loop only.
   */
  private static final class LiveQuery {
    final int bucket;
    final Q1Query query;
    String cursor;
    final Map<String, Long> rows = new HashMap<>();

    LiveQuery(int bucket, Q1Query query) {
      this.bucket = bucket;
      this.query = query;
    }
  }

  /** The live figures of one phase (warm-up, window, drain); recorded while it is current. */
  private static final class LiveStats {
    long start;
    long end;
    long reads;
    long idleReads;
    long morePages;
    long upserts;
    long removes;

    /** Deltas whose write's answer had not been processed yet when the read returned them. */
    long unmatched;

    final Histogram readLatency = new Histogram(MAX_MICROS, 3);
    final Histogram ackToSeen = new Histogram(MAX_MICROS, 3);
    final Histogram sentToSeen = new Histogram(MAX_MICROS, 3);

    /**
     * Pushed mode: write answered -> the stream handed the page to its sink (what the node's HTTP
     * sink offers to the response's queue), before the benchmark's client thread applies it.
     */
    final Histogram ackToHanded = new Histogram(MAX_MICROS, 3);

    /** Pushed mode: the most pages waiting for the benchmark's client thread at once. */
    final AtomicLong clientQueueMax = new AtomicLong();

    /**
     * Whether the delays count only deltas of writes answered in this phase (the warm-up and the
     * window; not the drain, which has no writes of its own): a backlog left by the phase before is
     * no delay of this one's writes, and is counted apart ({@link #earlier}).
     */
    boolean ownWrites = true;

    /** Deltas of writes answered before this phase that arrived in it; the longest delay of one. */
    long earlier;

    long earlierMaxMicros;

    final Map<String, Long> failures = new TreeMap<>();
    long writes;
    final Histogram writeLatency = new Histogram(MAX_MICROS, 3);
    final Map<String, Long> writeFailures = new TreeMap<>();
    double jvmCpu;
    double pgCpu;
    double machineCpu;

    double seconds() {
      return (end - start) / 1e9;
    }

    synchronized void failure(String kind) {
      failures.merge(kind, 1L, Long::sum);
    }

    synchronized void write(long micros) {
      writes++;
      writeLatency.recordValue(Math.min(micros, MAX_MICROS));
    }

    synchronized void writeFailure(String kind) {
      writeFailures.merge(kind, 1L, Long::sum);
    }
  }

  // Shared with the live loops and the writer.
  private volatile LiveStats live;
  private volatile boolean polling = true;
  private volatile boolean writing = true;
  private final ConcurrentHashMap<Long, long[]> written = new ConcurrentHashMap<>();
  private final AtomicLong expected = new AtomicLong();
  private final AtomicLong delivered = new AtomicLong();

  /** Pushed mode: pages handed to the benchmark's client thread and not applied yet. */
  private final AtomicLong clientQueue = new AtomicLong();

  private final AtomicInteger writesInFlight = new AtomicInteger();
  private volatile long writesBehind;

  private void livePhase(Documents documents, Feeds feeds, TailSignals tails) throws Exception {
    int keys = options.liveKeys;
    int predicates = options.predicates;
    AtomicIntegerArray bucketOf = new AtomicIntegerArray(keys);
    SplittableRandom random = new SplittableRandom(11);
    List<String> ids = new ArrayList<>(keys);
    for (int k = 0; k < keys; k++) {
      ids.add("l" + k);
      bucketOf.set(k, random.nextInt(predicates));
    }
    Load load =
        preload(documents, LIVE, ids, k -> liveBody(random, ids.get(k), bucketOf.get(k), 0));
    int[] queriesPerBucket = new int[predicates];
    List<LiveQuery> queries = new ArrayList<>();
    for (int i = 0; i < options.liveQueries; i++) {
      int bucket = i % predicates;
      queriesPerBucket[bucket]++;
      ObjectNode q = JSON.createObjectNode().put("collection", LIVE);
      q.putObject("where").put("op", "eq").put("field", "bucket").put("value", bucket);
      queries.add(new LiveQuery(bucket, Q1Query.parse(q)));
    }
    Principal principal =
        new Principal(
            "bench-live",
            false,
            Map.of(LIVE, Set.of("QueryRead", "DocumentsRead", "ChangesRead", "FieldUse:*")),
            0);
    System.out.printf(
        Locale.ROOT,
        "2. live queries: collection %s (no policy), %,d documents of %,d bytes preloaded in %.1f s,"
            + " each in one of %d buckets;%n   %,d live queries {\"op\":\"eq\",\"field\":\"bucket\",\"value\":k}, k = i mod"
            + " %d (%,d per predicate), principal %s (QueryRead, DocumentsRead,%n   ChangesRead, FieldUse:*; not an"
            + " administrator)%n",
        LIVE,
        keys,
        options.liveBodyBytes,
        load.seconds(),
        predicates,
        options.liveQueries,
        predicates,
        options.liveQueries / predicates,
        principal.id());

    // Start them, 16 at a time.
    Histogram starts = new Histogram(MAX_MICROS, 3);
    Map<String, Long> startFailures = new ConcurrentHashMap<>();
    AtomicLong initialRows = new AtomicLong();
    ExecutorService starters = Executors.newFixedThreadPool(16, daemon("bench-live-start"));
    long t0 = System.nanoTime();
    List<Future<?>> started = new ArrayList<>();
    for (LiveQuery q : queries) {
      started.add(
          starters.submit(
              () -> {
                for (int attempt = 0; ; attempt++) {
                  long t = System.nanoTime();
                  try {
                    Feeds.Result result =
                        get(feeds.startLive(principal, q.query, Integer.MAX_VALUE, maxBytes));
                    synchronized (starts) {
                      starts.recordValue(Math.min((System.nanoTime() - t) / 1000, MAX_MICROS));
                    }
                    q.cursor = result.cursor();
                    result.rows().forEach(row -> q.rows.put(row.id(), row.revision()));
                    initialRows.addAndGet(result.rows().size());
                    return null;
                  } catch (Exception e) {
                    startFailures.merge(kind(e), 1L, Long::sum);
                    if (attempt >= 100) {
                      throw e;
                    }
                    Thread.sleep(20);
                  }
                }
              }));
    }
    for (var f : started) {
      f.get();
    }
    starters.shutdown();
    double startSeconds = (System.nanoTime() - t0) / 1e9;
    System.out.printf(
        Locale.ROOT,
        "   started (Feeds.startLive, 16 at a time) in %.1f s: p50 %.1f ms, p99 %.1f ms, max %.1f ms;"
            + " %,d initial rows in all; retried %s%n",
        startSeconds,
        ms(starts, 50),
        ms(starts, 99),
        starts.getMaxValue() / 1000.0,
        initialRows.get(),
        startFailures.isEmpty() ? "0" : new TreeMap<>(startFailures));
    if (options.livePush) {
      System.out.printf(
          Locale.ROOT,
          "   pushed: LiveStreams (as GET /v1/query/live/stream, without HTTP; limit %,d positions,"
              + " maxBytes %d MiB); each stream's sink hands its pages to one client thread, which"
              + " applies the deltas to the copies%n",
          options.pageLimit,
          maxBytes >> 20);
    } else {
      System.out.printf(
          Locale.ROOT,
          "   loops: each live query reads Feeds.readLive (limit %,d positions, maxBytes %d MiB) with"
              + " its cursor and applies the deltas to its copy of the result;%n   it reads again at"
              + " once after a read that delivered deltas or had more waiting, else after %d ms; 2"
              + " threads schedule the loops%n",
          options.pageLimit,
          maxBytes >> 20,
          options.idlePauseMs);
    }
    System.out.printf(
        Locale.ROOT,
        "   writes: %,d/s paced (at most %,d awaiting their answer), Documents.put of a random document"
            + " (one written at a time) with a random bucket%n",
        options.writeRate,
        options.writeInFlight);

    // The loops and the writer.
    live = new LiveStats();
    live.start = System.nanoTime();
    ScheduledExecutorService loops = Executors.newScheduledThreadPool(2, daemon("bench-live"));
    CountDownLatch stopped = new CountDownLatch(options.livePush ? 0 : queries.size());
    LiveStreams streams = null;
    if (options.livePush) {
      streams = push(feeds, principal, queries, tails, loops);
    } else {
      for (LiveQuery q : queries) {
        loops.execute(() -> poll(feeds, principal, q, loops, stopped));
      }
    }
    Thread writer =
        new Thread(() -> writeLoop(documents, bucketOf, queriesPerBucket), "bench-live-writer");
    writer.setDaemon(true);
    writer.start();

    LiveStats warmup = live;
    long settled = 0;
    if (options.liveWarmupSeconds > 0) {
      Thread.sleep(TimeUnit.SECONDS.toMillis(options.liveWarmupSeconds));
      settled = settle(warmup);
    }
    LiveStats window = begin();
    warmup.end = window.start;
    if (options.liveWarmupSeconds > 0) {
      System.out.printf(
          Locale.ROOT,
          "   warm-up (not reported): %.1f s, then %.1f s more until the deltas owed were at most 100"
              + " ms' worth (%,d owed at the window's start);%n   in all %,d reads, %,d deltas, %,d"
              + " writes%n",
          warmup.seconds() - settled / 1e9,
          settled / 1e9,
          expected.get() - delivered.get(),
          warmup.reads,
          warmup.upserts + warmup.removes,
          warmup.writes);
    }
    Thread.sleep(TimeUnit.SECONDS.toMillis(options.liveSeconds));
    writing = false;
    LiveStats drain = begin();
    drain.ownWrites = false;
    finish(window, drain.start);
    long lagAtEnd = expected.get() - delivered.get();
    long behindAtEnd = writesBehind;
    writer.join(TimeUnit.SECONDS.toMillis(ASK.toSeconds() + 5));
    // The drain: no writes; until every expected delta was delivered, or --drain-seconds.
    long drainDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(options.drainSeconds);
    while (System.nanoTime() < drainDeadline
        && (writesInFlight.get() > 0 || delivered.get() < expected.get())) {
      Thread.sleep(20);
    }
    LiveStats after = begin();
    finish(drain, after.start);
    LiveStats idle = null;
    if (options.idleSeconds > 0) {
      // No writes: what the open live queries cost while nothing changes.
      idle = after;
      Thread.sleep(TimeUnit.SECONDS.toMillis(options.idleSeconds));
      finish(idle, System.nanoTime());
      begin();
    }
    polling = false;
    if (streams != null) {
      streams.close();
    }
    stopped.await(ASK.toSeconds() + 5, TimeUnit.SECONDS);
    loops.shutdown();
    long rows = 0;
    for (LiveQuery q : queries) {
      rows += q.rows.size();
    }
    reportLive(window, drain, lagAtEnd, behindAtEnd, rows, answering(documents));
    if (idle != null) {
      System.out.printf(
          Locale.ROOT,
          "   idle:    %,d live queries open (%s), no writes, %.1f s: this process %.3f cores, PostgreSQL"
              + " backends %.3f cores, machine %.2f cores; %,d reads (%,.1f/s)%n",
          options.liveQueries,
          options.livePush
              ? "pushed: woken by outbox signals, a safety read every 30 s"
              : "polling: a read, then " + options.idlePauseMs + " ms pause when it had nothing",
          idle.seconds(),
          idle.jvmCpu / idle.seconds(),
          idle.pgCpu / idle.seconds(),
          idle.machineCpu / idle.seconds(),
          idle.reads,
          idle.reads / idle.seconds());
    }
  }

  /**
   * Pushed mode: every live query follows a {@link LiveStreams} stream (as {@code GET
   * /v1/query/live/stream} does, without HTTP) woken when an outbox grew ({@link TailSignals},
   * polled every 25 ms as a node's signal loop does).
   */
  private LiveStreams push(
      Feeds feeds,
      Principal principal,
      List<LiveQuery> queries,
      TailSignals tails,
      ScheduledExecutorService loops) {
    LiveStreams streams =
        new LiveStreams(
            feeds::readLive,
            new LiveStreams.Settings(
                queries.size(),
                queries.size(),
                Math.max(1, Math.min(16, options.admission() - 1)),
                Duration.ofSeconds(30),
                Duration.ofSeconds(60),
                1024,
                Duration.ofSeconds(15)),
            Optional::of,
            () -> CompletableFuture.completedFuture(null),
            (p, q) -> null);
    loops.scheduleWithFixedDelay(
        () -> {
          if (tails.takeGrown()) {
            streams.wake();
          }
        },
        25,
        25,
        TimeUnit.MILLISECONDS);
    // The clients: a sink hands each page over and returns, as the node's HTTP sink offers it to
    // the response's queue; one thread applies every client's pages, in order, apart from the
    // streams' own threads (it does all the clients' work: each delta into its copy, the figures).
    java.util.concurrent.ExecutorService clients =
        Executors.newSingleThreadExecutor(daemon("bench-live-clients"));
    for (LiveQuery q : queries) {
      LiveStreams.Refusal refused = streams.admit(principal);
      if (refused != null) {
        throw new IllegalStateException("a stream was refused: " + refused.code().wire());
      }
      LiveStreams.Stream stream =
          streams.start(
              principal,
              q.query,
              q.cursor,
              options.pageLimit,
              maxBytes,
              new LiveStreams.Sink() {
                @Override
                public boolean page(Feeds.LivePage page) {
                  long handed = System.nanoTime();
                  long queued = clientQueue.incrementAndGet();
                  live.clientQueueMax.accumulateAndGet(queued, Math::max);
                  clients.execute(
                      () -> {
                        clientQueue.decrementAndGet();
                        delivered.addAndGet(record(q, page, -1, handed, System.nanoTime()));
                      });
                  return true;
                }

                @Override
                public boolean progress(String cursor) {
                  clients.execute(() -> q.cursor = cursor);
                  return true;
                }

                @Override
                public void end(ErrorCode code, String message) {
                  if (polling) {
                    live.failure(code.wire());
                  }
                }

                @Override
                public void close() {}
              });
      stream.wake();
    }
    return streams;
  }

  /**
   * How many partitions answer GetStatus within 10 s (an overload can stop partitions: journal
   * writes failed).
   */
  private static int answering(Documents documents) {
    List<CompletableFuture<PartitionStatus>> asks = new ArrayList<>();
    for (int n = 0; n < documents.partitions(); n++) {
      asks.add(documents.status(n).toCompletableFuture().orTimeout(10, TimeUnit.SECONDS));
    }
    int answered = 0;
    for (CompletableFuture<PartitionStatus> ask : asks) {
      try {
        ask.get(15, TimeUnit.SECONDS);
        answered++;
      } catch (Exception e) {
        // Counted as not answering.
      }
    }
    return answered;
  }

  /**
   * Waits (at most {@link #SETTLE_LIMIT}) until the deltas owed are no more than 100 ms' worth of
   * what the writes owe per second: the start of 1,000 streams leaves a backlog that would
   * otherwise drain into the window and delay its first writes' deltas. Returns the nanoseconds
   * waited.
   */
  private long settle(LiveStats warmup) throws InterruptedException {
    long began = System.nanoTime();
    // Deltas owed per second by the writes (each answered write owes one per query it concerns).
    double perSecond = expected.get() / Math.max(1e-9, (began - warmup.start) / 1e9);
    long allowed = Math.max(1, (long) (perSecond / 10));
    while (expected.get() - delivered.get() > allowed
        && System.nanoTime() - began < SETTLE_LIMIT.toNanos()) {
      Thread.sleep(20);
    }
    return System.nanoTime() - began;
  }

  private static final Duration SETTLE_LIMIT = Duration.ofSeconds(60);

  /** A new current phase, its CPU counters taken. */
  private LiveStats begin() throws SQLException {
    LiveStats s = new LiveStats();
    s.jvmCpu = CpuTimes.now().self();
    s.machineCpu = CpuTimes.machineBusy();
    s.pgCpu = backendCpu().values().stream().mapToDouble(Double::doubleValue).sum();
    s.start = System.nanoTime();
    live = s;
    return s;
  }

  /** Ends phase {@code s} at {@code end}: its CPU counters become the phase's use. */
  private void finish(LiveStats s, long end) throws SQLException {
    s.end = end;
    s.jvmCpu = CpuTimes.now().self() - s.jvmCpu;
    s.machineCpu = CpuTimes.machineBusy() - s.machineCpu;
    s.pgCpu = backendCpu().values().stream().mapToDouble(Double::doubleValue).sum() - s.pgCpu;
  }

  /** One read of a live query's loop; schedules the next. */
  private void poll(
      Feeds feeds,
      Principal principal,
      LiveQuery q,
      ScheduledExecutorService loops,
      CountDownLatch stopped) {
    if (!polling) {
      stopped.countDown();
      return;
    }
    long t0 = System.nanoTime();
    CompletionStage<Feeds.LivePage> stage;
    try {
      stage = feeds.readLive(principal, q.query, q.cursor, options.pageLimit, maxBytes);
    } catch (RuntimeException e) {
      stage = CompletableFuture.failedFuture(e);
    }
    stage.whenComplete(
        (page, error) -> {
          long now = System.nanoTime();
          LiveStats s = live;
          long pause;
          if (error != null) {
            s.failure(kind(error));
            pause = Math.max(10, options.idlePauseMs);
          } else {
            int deliveredHere = record(q, page, t0, -1, now);
            delivered.addAndGet(deliveredHere);
            pause = page.deltas().isEmpty() && !page.hasMore() ? options.idlePauseMs : 0;
          }
          try {
            if (pause == 0) {
              loops.execute(() -> poll(feeds, principal, q, loops, stopped));
            } else {
              loops.schedule(
                  () -> poll(feeds, principal, q, loops, stopped), pause, TimeUnit.MILLISECONDS);
            }
          } catch (RejectedExecutionException e) {
            stopped.countDown();
          }
        });
  }

  /**
   * Applies a page to {@code q}'s copy of the result and counts it in the current phase; {@code t0}
   * when the read began (-1: unknown, no latency recorded), {@code handed} when a stream handed the
   * page to its sink (-1: polled). Returns the deltas it held.
   */
  private int record(LiveQuery q, Feeds.LivePage page, long t0, long handed, long now) {
    LiveStats s = live;
    q.cursor = page.cursor();
    int deliveredHere = 0;
    synchronized (s) {
      s.reads++;
      if (t0 >= 0) {
        s.readLatency.recordValue(Math.min((now - t0) / 1000, MAX_MICROS));
      }
      if (page.hasMore()) {
        s.morePages++;
      }
      for (Feeds.Delta d : page.deltas()) {
        if (d.upsert()) {
          q.rows.put(d.id(), d.revision());
          s.upserts++;
        } else {
          q.rows.remove(d.id());
          s.removes++;
        }
        deliveredHere++;
        long[] w = written.get(key(d.partition(), d.sequence()));
        if (w == null) {
          s.unmatched++;
        } else if (s.ownWrites && w[1] - s.start < 0) {
          s.earlier++;
          s.earlierMaxMicros = Math.max(s.earlierMaxMicros, (now - w[1]) / 1000);
        } else {
          s.sentToSeen.recordValue(Math.min(Math.max(0, now - w[0]) / 1000, MAX_MICROS));
          s.ackToSeen.recordValue(Math.min(Math.max(0, now - w[1]) / 1000, MAX_MICROS));
          if (handed >= 0) {
            s.ackToHanded.recordValue(Math.min(Math.max(0, handed - w[1]) / 1000, MAX_MICROS));
          }
        }
      }
      if (page.deltas().isEmpty() && !page.hasMore()) {
        s.idleReads++;
      }
    }
    return deliveredHere;
  }

  private static long key(int partition, long sequence) {
    return ((long) partition << 48) | sequence;
  }

  /**
   * The paced writer: issues writes as the schedule says ({@code --write-rate} per second since the
   * start), each on a random document not being written, while fewer than {@code --write-in-flight}
   * await their answer; behind schedule it catches up as answers come.
   */
  private void writeLoop(Documents documents, AtomicIntegerArray bucketOf, int[] queriesPerBucket) {
    SplittableRandom random = new SplittableRandom(System.nanoTime());
    AtomicIntegerArray busy = new AtomicIntegerArray(bucketOf.length());
    long start = System.nanoTime();
    long issued = 0;
    long n = 0;
    while (writing) {
      long due = (long) ((System.nanoTime() - start) / 1e9 * options.writeRate);
      while (issued < due && writesInFlight.get() < options.writeInFlight && writing) {
        int k;
        do {
          k = random.nextInt(bucketOf.length());
        } while (!busy.compareAndSet(k, 0, 1));
        int key = k;
        int old = bucketOf.get(k);
        int bucket = random.nextInt(queriesPerBucket.length);
        bucketOf.set(k, bucket);
        String id = "l" + k;
        String body = liveBody(random, id, bucket, ++n);
        int partition = documents.partitionOf(LIVE, id);
        writesInFlight.incrementAndGet();
        long sent = System.nanoTime();
        issued++;
        documents
            .put(LIVE, id, body, Optional.empty(), Optional.empty())
            .whenComplete(
                (reply, error) -> {
                  long ack = System.nanoTime();
                  LiveStats s = live;
                  if (reply instanceof Applied a) {
                    written.put(key(partition, a.firstSequence()), new long[] {sent, ack});
                    expected.addAndGet(
                        queriesPerBucket[bucket] + (old != bucket ? queriesPerBucket[old] : 0));
                    s.write((ack - sent) / 1000);
                  } else {
                    bucketOf.set(key, old);
                    s.writeFailure(error != null ? kind(error) : reply.getClass().getSimpleName());
                  }
                  busy.set(key, 0);
                  writesInFlight.decrementAndGet();
                });
      }
      writesBehind = due - issued;
      LockSupport.parkNanos(500_000);
    }
  }

  private String liveBody(SplittableRandom random, String id, int bucket, long n) {
    return pad(
        random,
        "{\"bucket\":" + bucket + ",\"id\":\"" + id + "\",\"n\":" + n + ",\"pad\":\"",
        options.liveBodyBytes);
  }

  private void reportLive(
      LiveStats w, LiveStats d, long lagAtEnd, long behindAtEnd, long rows, int answering) {
    double s = w.seconds();
    long deltas = w.upserts + w.removes;
    System.out.printf(Locale.ROOT, "measured window: %.2f s%n", s);
    System.out.printf(
        Locale.ROOT,
        "   reads:   %,d (%,.0f/s, %,.2f per live query per s); latency p50 %.2f ms, p90 %.2f ms, p99"
            + " %.2f ms, max %.1f ms;%n            %,d with more waiting (hasMore), %,d idle (nothing delivered, nothing"
            + " more: then the %d ms pause); failed %s%n",
        w.reads,
        w.reads / s,
        w.reads / s / options.liveQueries,
        ms(w.readLatency, 50),
        ms(w.readLatency, 90),
        ms(w.readLatency, 99),
        w.readLatency.getMaxValue() / 1000.0,
        w.morePages,
        w.idleReads,
        options.idlePauseMs,
        w.failures.isEmpty() ? "0" : w.failures.toString());
    System.out.printf(
        Locale.ROOT,
        "   deltas:  %,d delivered (%,.0f/s: %,d upserts, %,d removes); expected but not yet delivered"
            + " at the window's end: %,d%n",
        deltas,
        deltas / s,
        w.upserts,
        w.removes,
        lagAtEnd);
    System.out.printf(
        Locale.ROOT,
        "   writes:  %,d answered (%,.0f/s of %,d/s asked), p50 %.2f ms, p99 %.2f ms, max %.1f ms;"
            + " behind schedule at the end %,d; failed %s%n",
        w.writes,
        w.writes / s,
        options.writeRate,
        ms(w.writeLatency, 50),
        ms(w.writeLatency, 99),
        w.writeLatency.getMaxValue() / 1000.0,
        behindAtEnd,
        w.writeFailures.isEmpty() ? "0" : w.writeFailures.toString());
    System.out.printf(
        Locale.ROOT,
        "   delay:   write answered -> delta returned by a read: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms,"
            + " max %.1f ms;%n            write asked -> delta returned: p50 %.1f ms, p99 %.1f ms (%,d deltas; %,d more"
            + " were returned before their write's answer%n            was processed: not in these figures)%n",
        ms(w.ackToSeen, 50),
        ms(w.ackToSeen, 90),
        ms(w.ackToSeen, 99),
        w.ackToSeen.getMaxValue() / 1000.0,
        ms(w.sentToSeen, 50),
        ms(w.sentToSeen, 99),
        w.ackToSeen.getTotalCount(),
        w.unmatched);
    System.out.printf(
        Locale.ROOT,
        "            (only writes answered in the window count: %,d deltas of earlier writes arrived in"
            + " it, the longest %.1f ms after its write's answer)%n",
        w.earlier,
        w.earlierMaxMicros / 1000.0);
    if (w.ackToHanded.getTotalCount() > 0) {
      System.out.printf(
          Locale.ROOT,
          "            write answered -> page handed to the stream's sink (the node's part; the"
              + " figures above add the one client thread's queue):%n            p50 %.1f ms, p90"
              + " %.1f ms, p99 %.1f ms, max %.1f ms; at most %,d pages waited for the client thread%n",
          ms(w.ackToHanded, 50),
          ms(w.ackToHanded, 90),
          ms(w.ackToHanded, 99),
          w.ackToHanded.getMaxValue() / 1000.0,
          w.clientQueueMax.get());
    }
    System.out.printf(
        Locale.ROOT,
        "   CPU:     this JVM %.2f cores, PostgreSQL backends of %s %.2f cores, the whole machine"
            + " %.2f cores%n",
        w.jvmCpu / s,
        DATABASE,
        w.pgCpu / s,
        w.machineCpu / s);
    if (options.drainSeconds > 0) {
      boolean caughtUp = delivered.get() >= expected.get();
      System.out.printf(
          Locale.ROOT,
          "drain (writes stopped): %s after %.1f s; %,d deltas delivered, %,d reads (p50 %.1f ms, p99"
              + " %.1f ms); delay p50 %.1f ms, p99 %.1f ms%n",
          caughtUp
              ? "every expected delta delivered"
              : String.format(
                  Locale.ROOT, "%,d deltas still undelivered", expected.get() - delivered.get()),
          d.seconds(),
          d.upserts + d.removes,
          d.reads,
          ms(d.readLatency, 50),
          ms(d.readLatency, 99),
          ms(d.ackToSeen, 50),
          ms(d.ackToSeen, 99));
    }
    System.out.printf(
        "   rows held by the live queries' copies at the end: %,d in all; partitions answering GetStatus"
            + " after the run: %d of %d%n",
        rows, answering, options.partitions);
    System.out.println(LINE);
    System.out.printf(
        Locale.ROOT,
        "live summary: %,d live queries, %,d writes/s asked, %,.0f answered; readLive p50 %.2f ms, p99"
            + " %.2f ms, max %.1f ms; %,.0f reads/s;%n              %,.0f deltas/s; write answered -> delta seen p50 %.1f ms,"
            + " p99 %.1f ms; BUSY refusals %,d%n",
        options.liveQueries,
        options.writeRate,
        w.writes / s,
        ms(w.readLatency, 50),
        ms(w.readLatency, 99),
        w.readLatency.getMaxValue() / 1000.0,
        w.reads / s,
        deltas / s,
        ms(w.ackToSeen, 50),
        ms(w.ackToSeen, 99),
        w.failures.getOrDefault("Refused busy", 0L));
    System.out.println(LINE);
  }

  // ==== helpers ====

  // ==== 3. writes beside feed readers ====

  static final String ISO = "iso";
  static final String ISO_WRITES = "isow";

  /** One window of paced writes: their latency and what the readers read meanwhile. */
  private record IsoRun(
      boolean readers,
      long writes,
      long failed,
      double seconds,
      Histogram latency,
      long changesRead,
      double jvmCpu,
      double pgCpu,
      double machineCpu) {}

  /**
   * Writes paced at {@code --iso-write-rate} into a collection of their own, alone and while {@code
   * --iso-readers} feed readers read another collection's changes from the beginning, paced at
   * {@code --iso-read-rate} changes/s in all, side by side for {@code --rounds} rounds: whether
   * reads make writes wait (one journal pool, one dispatcher).
   */
  private void isolationPhase(Documents documents, Feeds feeds) throws Exception {
    List<String> ids = new ArrayList<>(options.isoChanges);
    for (int i = 0; i < options.isoChanges; i++) {
      ids.add("i" + i);
    }
    SplittableRandom random = new SplittableRandom(11);
    Load load =
        preload(
            documents,
            ISO,
            ids,
            i -> pad(random, "{\"id\":\"" + ids.get(i) + "\",\"pad\":\"", options.bodyBytes));
    System.out.printf(
        Locale.ROOT,
        "3. writes beside feed readers: %,d changes of %,d-byte documents preloaded into %s in %.1f s (failed %s);%n"
            + "   writes: Documents.put paced at %,d/s (at most %,d awaiting their answer) of 200-byte documents"
            + " (10,000 ids) into %s, %d s per window;%n"
            + "   readers: %d administrators reading %s's changes from the beginning (again at its end), pages of %,d,"
            + " paced at %,d changes/s in all%n",
        options.isoChanges,
        options.bodyBytes,
        ISO,
        load.seconds(),
        load.failures().isEmpty() ? "0" : new TreeMap<>(load.failures()),
        options.isoWriteRate,
        options.writeInFlight,
        ISO_WRITES,
        options.isoSeconds,
        options.isoReaders,
        ISO,
        options.pageLimit,
        options.isoReadRate);
    Principal admin = new Principal("bench-admin", true);
    List<IsoRun> alone = new ArrayList<>();
    List<IsoRun> beside = new ArrayList<>();
    isoWindow(documents, feeds, admin, false, Math.min(5, options.isoSeconds)); // warm-up
    for (int round = 1; round <= options.rounds; round++) {
      for (boolean readers : new boolean[] {false, true}) {
        IsoRun r = isoWindow(documents, feeds, admin, readers, options.isoSeconds);
        (readers ? beside : alone).add(r);
        System.out.printf(
            Locale.ROOT,
            "   round %d %-14s writes %,6d (%,.0f/s, failed %d): p50 %.2f ms, p99 %.2f ms, max %.1f ms;"
                + " feed read %,.0f changes/s; CPU: this JVM %.2f, PostgreSQL %.2f, machine %.2f cores%n",
            round,
            readers ? "with readers:" : "alone:",
            r.writes(),
            r.writes() / r.seconds(),
            r.failed(),
            ms(r.latency(), 50),
            ms(r.latency(), 99),
            r.latency().getMaxValue() / 1000.0,
            r.changesRead() / r.seconds(),
            r.jvmCpu() / r.seconds(),
            r.pgCpu() / r.seconds(),
            r.machineCpu() / r.seconds());
      }
    }
    double[] p99Alone = alone.stream().mapToDouble(r -> ms(r.latency(), 99)).toArray();
    double[] p99Beside = beside.stream().mapToDouble(r -> ms(r.latency(), 99)).toArray();
    double[] read = beside.stream().mapToDouble(r -> r.changesRead() / r.seconds()).toArray();
    System.out.printf(
        Locale.ROOT,
        "isolation summary: write p99 alone %.2f ms (median of %d; %.2f..%.2f), with readers %.2f ms"
            + " (%.2f..%.2f) while they read %,.0f changes/s (median): with/alone %.2f%n",
        CdcBenchmark.median(p99Alone),
        p99Alone.length,
        min(p99Alone),
        max(p99Alone),
        CdcBenchmark.median(p99Beside),
        min(p99Beside),
        max(p99Beside),
        CdcBenchmark.median(read),
        CdcBenchmark.median(p99Beside) / CdcBenchmark.median(p99Alone));
  }

  /** Paced writes for {@code seconds}, with the paced feed readers running when {@code readers}. */
  private IsoRun isoWindow(
      Documents documents, Feeds feeds, Principal admin, boolean readers, int seconds)
      throws Exception {
    AtomicBoolean reading = new AtomicBoolean(readers);
    AtomicLong changesRead = new AtomicLong();
    List<Thread> threads = new ArrayList<>();
    if (readers) {
      double perReader = (double) options.isoReadRate / options.isoReaders;
      for (int k = 0; k < options.isoReaders; k++) {
        Thread t =
            new Thread(
                () -> {
                  Feeds.Start start = new Feeds.Beginning();
                  long t0 = System.nanoTime();
                  long mine = 0;
                  int failures = 0;
                  while (reading.get()) {
                    try {
                      Feeds.Page page =
                          get(feeds.read(admin, ISO, start, options.pageLimit, maxBytes));
                      failures = 0;
                      mine += page.changes().size();
                      changesRead.addAndGet(page.changes().size());
                      start =
                          page.hasMore()
                              ? new Feeds.FromCursor(page.cursor())
                              : new Feeds.Beginning();
                      long due = (long) (mine / perReader * 1e9);
                      long ahead = due - (System.nanoTime() - t0);
                      if (ahead > 0) {
                        LockSupport.parkNanos(ahead);
                      }
                    } catch (Exception e) {
                      if (++failures > 100) {
                        return;
                      }
                      LockSupport.parkNanos(10_000_000);
                    }
                  }
                },
                "bench-iso-reader-" + k);
        t.setDaemon(true);
        t.start();
        threads.add(t);
      }
      Thread.sleep(2000); // the readers at their pace before the window
    }
    Histogram latency = new Histogram(MAX_MICROS, 3);
    AtomicLong failed = new AtomicLong();
    AtomicInteger inFlight = new AtomicInteger();
    SplittableRandom random = new SplittableRandom(System.nanoTime());
    long read0 = changesRead.get();
    double cpu0 = CpuTimes.now().self();
    double machine0 = CpuTimes.machineBusy();
    Map<Long, Double> pg0 = backendCpu();
    long t0 = System.nanoTime();
    long end = t0 + TimeUnit.SECONDS.toNanos(seconds);
    long issued = 0;
    while (System.nanoTime() < end) {
      long due = (long) ((System.nanoTime() - t0) / 1e9 * options.isoWriteRate);
      while (issued < due && inFlight.get() < options.writeInFlight) {
        String id = "w" + random.nextInt(10_000);
        String body = pad(random, "{\"id\":\"" + id + "\",\"pad\":\"", 200);
        inFlight.incrementAndGet();
        issued++;
        long sent = System.nanoTime();
        documents
            .put(ISO_WRITES, id, body, Optional.empty(), Optional.empty())
            .whenComplete(
                (reply, error) -> {
                  long micros = (System.nanoTime() - sent) / 1000;
                  if (reply instanceof Applied) {
                    synchronized (latency) {
                      latency.recordValue(Math.min(micros, MAX_MICROS));
                    }
                  } else {
                    failed.incrementAndGet();
                  }
                  inFlight.decrementAndGet();
                });
      }
      LockSupport.parkNanos(500_000);
    }
    long deadline = System.nanoTime() + ASK.toNanos();
    while (inFlight.get() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    double secondsTaken = (System.nanoTime() - t0) / 1e9;
    long readInWindow = changesRead.get() - read0;
    double jvm = CpuTimes.now().self() - cpu0;
    double machine = CpuTimes.machineBusy() - machine0;
    double pg = 0;
    for (Map.Entry<Long, Double> backend : backendCpu().entrySet()) {
      pg += backend.getValue() - pg0.getOrDefault(backend.getKey(), 0.0);
    }
    reading.set(false);
    for (Thread t : threads) {
      t.join(ASK.toMillis());
    }
    synchronized (latency) {
      return new IsoRun(
          readers,
          latency.getTotalCount(),
          failed.get(),
          secondsTaken,
          latency.copy(),
          readInWindow,
          jvm,
          pg,
          machine);
    }
  }

  private static <T> T get(CompletionStage<T> stage) throws Exception {
    return stage.toCompletableFuture().get(ASK.toSeconds() + 5, TimeUnit.SECONDS);
  }

  /**
   * A failure's kind: a refusal's code or the class, unwrapped from the future's wrappers (never a
   * message).
   */
  private static String kind(Throwable e) {
    while ((e instanceof ExecutionException || e instanceof CompletionException)
        && e.getCause() != null) {
      e = e.getCause();
    }
    if (e instanceof Feeds.Refused r) {
      return "Refused " + r.code().wire();
    }
    return e.getClass().getSimpleName();
  }

  private static double ms(Histogram h, double percentile) {
    return h.getTotalCount() == 0 ? Double.NaN : h.getValueAtPercentile(percentile) / 1000.0;
  }

  private static double min(double[] values) {
    return Arrays.stream(values).min().orElse(Double.NaN);
  }

  private static double max(double[] values) {
    return Arrays.stream(values).max().orElse(Double.NaN);
  }

  private static ThreadFactory daemon(String name) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, name + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  /**
   * CPU seconds used so far by each PostgreSQL backend connected to the benchmark database (this
   * query's excepted).
   */
  private Map<Long, Double> backendCpu() throws SQLException {
    Map<Long, Double> out = new TreeMap<>();
    try (Connection c = DriverManager.getConnection(benchUrl, options.user, options.password);
        Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    + " AND pid <> pg_backend_pid()")) {
      while (rs.next()) {
        out.put(rs.getLong(1), CpuTimes.process(rs.getLong(1)));
      }
    }
    return out;
  }

  private String show(String setting) throws Exception {
    return PartitionBenchmark.show(benchUrl, options.user, options.password, setting);
  }
}
