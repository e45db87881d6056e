package io.weir.bench;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.protocol.partition.Partitioning;
import io.weir.sharding.cdc.PartitionChannel;
import io.weir.sharding.partition.Partition;
import io.weir.sharding.partition.PartitionObserver;
import io.weir.sharding.partition.PartitionProtocol;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.Loaded;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.PartitionSettings;
import io.weir.sharding.partition.PartitionSharding;
import io.weir.sharding.partition.PartitionWiring;
import io.weir.sharding.partition.ReadProtocol;
import io.weir.sharding.partition.SqlJournalPruner;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import io.weir.sharding.storage.DistributedMarks;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.nio.file.Files;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.ToDoubleFunction;
import org.HdrHistogram.Histogram;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;

/**
 * Partition benchmark: figures, not assertions. Three measurements on a one-node cluster whose
 * journal is the benchmark database ({@value #DATABASE}, durable, created afresh for each phase):
 *
 * <ol>
 *   <li><b>Document writes</b>: N writers, each asking one {@link ApplyFrame} (one {@link Upsert}
 *       of a JSON body) at a time of the document's partition through Cluster Sharding, over
 *       {@value #PARTITIONS} partitions; throughput, latency percentiles (HdrHistogram, from the
 *       ask to its answer) and journal events per frame (group commit), per round and as medians.
 *   <li><b>Heap</b> of one partition holding D documents (loaded as {@link LoadRows}): used heap
 *       after full GCs, minus the same before, per document; and the size of its snapshot row.
 *   <li><b>Recovery</b> of that partition in a new actor system on the same database: the time from
 *       the first {@link GetStatus} to its answer, with only the snapshot to read and with 999
 *       journal events after it.
 * </ol>
 *
 * <p>Run it with {@code deploy/bin/bench-partitions.sh}. Prints its report to standard output, by
 * design; never a document body.
 */
public final class PartitionBenchmark {
  static final String DATABASE = "weir_pbench";

  /** Partitions of the writes phase (the default partition count). */
  static final int PARTITIONS = 64;

  private static final Duration ASK = Duration.ofSeconds(30);
  private static final String LINE = "-".repeat(118);

  /** Largest latency recorded (microseconds); asks time out well before. */
  static final long MAX_MICROS = TimeUnit.SECONDS.toMicros(120);

  /** The loaded partition of the heap phase. */
  private static final int LOADED = 0;

  private static final String HEX = "0123456789abcdef";

  private final PartitionBenchOptions options;
  private final String adminUrl;
  private final String benchUrl;

  /** Random hex text that bodies take their padding from (a body is never printed). */
  private final String padding;

  private int nodes;

  private PartitionBenchmark(PartitionBenchOptions options) {
    this.options = options;
    this.adminUrl = options.url();
    this.benchUrl = databaseUrl(adminUrl, DATABASE);
    this.padding = padding(options.bodyBytes());
  }

  /**
   * {@code adminUrl} (jdbc:postgresql://host:port/db?params) with database {@code database}
   * instead.
   */
  static String databaseUrl(String adminUrl, String database) {
    URI uri = URI.create(adminUrl.substring("jdbc:".length()));
    String host = uri.getHost() == null ? "127.0.0.1" : uri.getHost();
    int port = uri.getPort() < 0 ? 5432 : uri.getPort();
    String query = uri.getRawQuery() == null ? "" : "?" + uri.getRawQuery();
    return "jdbc:postgresql://" + host + ":" + port + "/" + database + query;
  }

  /**
   * Random hex text, four times {@code bodyBytes} long, for {@link #body(SplittableRandom, String,
   * int, String)}.
   */
  static String padding(int bodyBytes) {
    SplittableRandom random = new SplittableRandom(42);
    StringBuilder b = new StringBuilder(bodyBytes * 4);
    while (b.length() < bodyBytes * 4) {
      b.append(HEX.charAt(random.nextInt(16)));
    }
    return b.toString();
  }

  public static void main(String[] args) {
    BenchMain.main(
        args,
        PartitionBenchOptions::parse,
        PartitionBenchOptions.USAGE,
        options -> new PartitionBenchmark(options).run());
  }

  private int run() throws Exception {
    BenchMain.header("Weir partition benchmark");
    try {
      recreateDatabase();
      System.out.printf(
          "PostgreSQL:    %s, shared_buffers %s, synchronous_commit %s, fsync %s; database %s%n",
          show("server_version"),
          show("shared_buffers"),
          show("synchronous_commit"),
          show("fsync"),
          DATABASE);
      PartitionSettings s = PartitionSettings.DEFAULTS;
      System.out.printf(
          "partitions:    one-node cluster (Cluster Sharding, role server), JDBC journal and snapshots in"
              + " schema weir of %s;%n               group commit up to %d frames / %,d mutations per journal event,"
              + " snapshots after 1,000 events and a quarter of the state in event bytes%n",
          DATABASE, s.maxBatchFrames(), s.maxBatchMutations());
      System.out.println(LINE);
      if (options.writesPhase()) {
        writes();
      }
      if (options.heapPhase()) {
        if (options.writesPhase()) {
          recreateDatabase();
        }
        heap();
      }
      System.out.println(
          "load average (1/5/15 min) at the end: "
              + CdcBenchmark.loadAverage()
              + " -- above about 1 means something besides this benchmark competed for the CPUs");
      return 0;
    } finally {
      if (!options.keepDatabase()) {
        dropDatabase();
      }
    }
  }

  // --- 1. document writes ---

  /** One round of writes. */
  record Round(
      long writes,
      long failures,
      long nanos,
      Histogram latency,
      long events,
      double cpuSeconds,
      Map<String, Long> failuresByKind,
      long inMemory,
      long read) {
    /** Share of before images found in memory (unapplied changes or the body cache). */
    double hitRate() {
      return inMemory + read == 0 ? 0 : (double) inMemory / (inMemory + read);
    }

    double rate() {
      return writes / (nanos / 1e9);
    }

    double framesPerEvent() {
      return events == 0 ? 0 : (double) writes / events;
    }

    /** Milliseconds at a percentile. */
    double ms(double percentile) {
      return latency.getValueAtPercentile(percentile) / 1000.0;
    }

    double maxMs() {
      return latency.getMaxValue() / 1000.0;
    }

    /** JVM CPU milliseconds per 1,000 writes (all threads: writers, actors, journal, JIT, GC). */
    double cpuPer1k() {
      return cpuSeconds * 1000 * 1000 / Math.max(1, writes);
    }
  }

  private void writes() throws Exception {
    System.out.printf(
        "1. document writes: %d writers, each waiting for its answer before the next write; ApplyFrame with"
            + " one Upsert of a %,d-byte JSON body (%s),%n   id uniform over %,d keys in each of %d collections, to the"
            + " document's partition of %d through Cluster Sharding (ask, %d s timeout)%n",
        options.writers(),
        options.bodyBytes(),
        options.unkeyed() ? "unkeyed: no receipt kept" : "keyed: each keeps a receipt",
        options.keys(),
        options.collections(),
        PARTITIONS,
        ASK.toSeconds());
    System.out.printf(
        "   %s, %d rounds, after a warm-up of %d s (not reported)%n",
        options.seconds() > 0
            ? options.seconds() + " s per round"
            : String.format("%,d writes per round", options.writes()),
        options.rounds(),
        options.warmupSeconds());
    try (Node node = node()) {
      long start = System.nanoTime();
      for (int p = 0; p < PARTITIONS; p++) {
        node.status(p);
      }
      Config c = node.system.settings().config();
      System.out.printf(
          Locale.ROOT,
          "   %d partitions started in %.2f s; journal: %s connections (weir.postgres.journal-pool-size),"
              + " jdbc-journal batchSize %s, parallelism %s%n",
          PARTITIONS,
          (System.nanoTime() - start) / 1e9,
          setting(c, "weir.postgres.journal-pool-size"),
          setting(c, "jdbc-journal.batchSize"),
          setting(c, "jdbc-journal.parallelism"));
      ExecutorService pool =
          Executors.newFixedThreadPool(
              options.writers(),
              r -> {
                Thread t = new Thread(r, "bench-writer");
                t.setDaemon(true);
                return t;
              });
      try {
        if (options.warmupSeconds() > 0) {
          System.out.print("   warm-up ...");
          Round w = round(node, pool, 0, TimeUnit.SECONDS.toNanos(options.warmupSeconds()));
          System.out.printf(Locale.ROOT, " %,d writes, %,.0f writes/s%n", w.writes(), w.rate());
        }
        System.out.printf(
            "%6s %9s %7s %10s | %8s %8s %8s %8s %8s | %8s %8s | %9s %6s %s%n",
            "round",
            "writes",
            "s",
            "writes/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "p99.9 ms",
            "max ms",
            "events",
            "frm/evt",
            "CPU/1k",
            "cache",
            "failed");
        List<Round> rounds = new ArrayList<>();
        for (int r = 1; r <= options.rounds(); r++) {
          Round round =
              round(node, pool, options.writes(), TimeUnit.SECONDS.toNanos(options.seconds()));
          rounds.add(round);
          System.out.printf(
              Locale.ROOT,
              "%6d %,9d %7.2f %,10.0f | %8.2f %8.2f %8.2f %8.2f %8.1f | %,8d %8.2f | %7.0fms %5.1f%% %d%s%n",
              r,
              round.writes(),
              round.nanos() / 1e9,
              round.rate(),
              round.ms(50),
              round.ms(90),
              round.ms(99),
              round.ms(99.9),
              round.maxMs(),
              round.events(),
              round.framesPerEvent(),
              round.cpuPer1k(),
              100 * round.hitRate(),
              round.failures(),
              round.failuresByKind().isEmpty() ? "" : " " + round.failuresByKind());
        }
        Histogram all = new Histogram(MAX_MICROS, 3);
        rounds.forEach(r -> all.add(r.latency()));
        System.out.println(
            "latency = from the ask to its answer (the write is durable in the journal then); events ="
                + " journal events written in the round (sum of GetStatus.journalEvents over the partitions, after - before);"
                + " frm/evt = frames per event (group commit); CPU/1k = this JVM's CPU per 1,000 writes (PostgreSQL's not"
                + " included); cache = before images of existing documents found in memory (unapplied changes or"
                + " the body cache) rather than read from the documents table");
        System.out.println(LINE);
        System.out.printf(
            Locale.ROOT,
            "medians over %d rounds: %,.0f writes/s (%,.0f..%,.0f), p50 %.2f ms, p90 %.2f ms, p99 %.2f ms,"
                + " max %.1f ms, %.2f frames per journal event%n",
            rounds.size(),
            median(rounds, Round::rate),
            min(rounds, Round::rate),
            max(rounds, Round::rate),
            median(rounds, r -> r.ms(50)),
            median(rounds, r -> r.ms(90)),
            median(rounds, r -> r.ms(99)),
            median(rounds, Round::maxMs),
            median(rounds, Round::framesPerEvent));
        System.out.printf(
            Locale.ROOT,
            "all rounds' writes together: %,d, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.1f ms%n",
            all.getTotalCount(),
            all.getValueAtPercentile(50) / 1000.0,
            all.getValueAtPercentile(99) / 1000.0,
            all.getValueAtPercentile(99.9) / 1000.0,
            all.getMaxValue() / 1000.0);
        long documents = 0;
        for (int p = 0; p < PARTITIONS; p++) {
          documents += node.status(p).documents();
        }
        System.out.printf(
            "documents held at the end: %,d over %d partitions (%,d possible)%n",
            documents, PARTITIONS, (long) options.keys() * options.collections());
      } finally {
        pool.shutdownNow();
      }
    }
    System.out.println(LINE);
  }

  /**
   * One round: {@code writes} writes over all writers, or (when 0) as many as the writers do in
   * {@code nanos}. Timed from releasing the writers to the last one's last answer.
   */
  private Round round(Node node, ExecutorService pool, long writes, long nanos) throws Exception {
    long eventsBefore = journalEvents(node);
    long inMemoryBefore = node.beforeImagesInMemory.get();
    long readBefore = node.beforeImagesRead.get();
    AtomicLong claimed = new AtomicLong();
    Map<String, Long> failures = new ConcurrentHashMap<>();
    CountDownLatch go = new CountDownLatch(1);
    List<Future<Histogram>> writers = new ArrayList<>();
    long seed = System.nanoTime();
    for (int w = 0; w < options.writers(); w++) {
      int writer = w;
      writers.add(
          pool.submit(
              () -> {
                SplittableRandom random = new SplittableRandom(seed + writer * 7919L);
                Histogram h = new Histogram(MAX_MICROS, 3);
                go.await();
                long deadline = System.nanoTime() + nanos;
                long n = 0;
                while (writes > 0
                    ? claimed.incrementAndGet() <= writes
                    : System.nanoTime() < deadline) {
                  String collection = "docs" + random.nextInt(options.collections());
                  String id = "k" + random.nextInt(options.keys());
                  String body = body(random, id);
                  String commandId =
                      (options.unkeyed() ? PartitionProtocol.UNKEYED_COMMAND_PREFIX : "bench-")
                          + seed
                          + "-"
                          + writer
                          + "-"
                          + (n++);
                  int partition = Partitioning.partitionOf(collection, id, PARTITIONS);
                  long t0 = System.nanoTime();
                  try {
                    FrameReply reply =
                        node.<FrameReply>ask(
                            partition,
                            replyTo ->
                                new ApplyFrame(
                                    commandId,
                                    List.<Mutation>of(
                                        new Upsert(collection, id, body, Optional.empty())),
                                    Optional.empty(),
                                    replyTo));
                    long micros = (System.nanoTime() - t0) / 1000;
                    if (reply instanceof Applied) {
                      h.recordValue(Math.min(micros, MAX_MICROS));
                    } else {
                      failures.merge(reply.getClass().getSimpleName(), 1L, Long::sum);
                    }
                  } catch (Exception e) {
                    failures.merge(e.getClass().getSimpleName(), 1L, Long::sum);
                  }
                }
                return h;
              }));
    }
    CpuTimes cpu = CpuTimes.now();
    long start = System.nanoTime();
    go.countDown();
    Histogram latency = new Histogram(MAX_MICROS, 3);
    for (Future<Histogram> f : writers) {
      latency.add(f.get());
    }
    long elapsed = System.nanoTime() - start;
    double cpuSeconds = CpuTimes.now().self() - cpu.self();
    long events = journalEvents(node) - eventsBefore;
    long failed = failures.values().stream().mapToLong(Long::longValue).sum();
    return new Round(
        latency.getTotalCount(),
        failed,
        elapsed,
        latency,
        events,
        cpuSeconds,
        new TreeMap<>(failures),
        node.beforeImagesInMemory.get() - inMemoryBefore,
        node.beforeImagesRead.get() - readBefore);
  }

  private long journalEvents(Node node) throws Exception {
    long sum = 0;
    for (int p = 0; p < PARTITIONS; p++) {
      sum += node.status(p).journalEvents();
    }
    return sum;
  }

  private String body(SplittableRandom random, String id) {
    return body(random, id, options.bodyBytes(), padding);
  }

  /** A JSON object of exactly {@code bodyBytes} characters (ASCII), padded from {@code padding}. */
  static String body(SplittableRandom random, String id, int bodyBytes, String padding) {
    String head = "{\"id\":\"" + id + "\",\"n\":" + random.nextInt(1_000_000) + ",\"pad\":\"";
    int pad = Math.max(0, bodyBytes - head.length() - 2);
    int from = random.nextInt(padding.length() - pad + 1);
    return head + padding.substring(from, from + pad) + "\"}";
  }

  // --- 2. heap, 3. recovery ---

  private void heap() throws Exception {
    int documents = options.documents();
    int perEvent = 1_000;
    System.out.printf(
        "2. heap: %,d documents of %,d bytes (JSON bodies, ids k0.., one collection) loaded into partition %d"
            + " as LoadRows of %,d rows,%n   one at a time (one journal event each), then single upserts until a"
            + " snapshot covers them all (ADR 0032: a snapshot holds the index, never a body)%n",
        documents, options.bodyBytes(), LOADED, perEvent);
    System.out.println(
        "   heap = used heap after System.gc() x4 (the lowest reading), in this JVM, minus the same"
            + " before the partition started (the node, sharding and an empty partition already up);"
            + " the body cache and the changes not yet in the documents table included");
    String collection = "docs";
    try (Node node = node()) {
      int warm = node.sameShard(LOADED);
      node.status(warm);
      long baseline = usedHeapAfterGc();
      SplittableRandom random = new SplittableRandom(7);
      long start = System.nanoTime();
      long events = node.status(LOADED).journalEvents();
      for (int next = 0; next < documents; next += perEvent) {
        List<Upsert> rows = new ArrayList<>(perEvent);
        for (int i = next; i < Math.min(documents, next + perEvent); i++) {
          String id = "k" + i;
          rows.add(new Upsert(collection, id, body(random, id), Optional.empty()));
        }
        FrameReply reply =
            node.<FrameReply>ask(LOADED, replyTo -> new LoadRows(List.of(), rows, false, replyTo));
        if (!(reply instanceof Loaded)) {
          throw new IllegalStateException(
              "loading rows was answered " + reply.getClass().getSimpleName());
        }
        events++;
      }
      long loadNanos = System.nanoTime() - start;
      long loadEvents = events;
      for (int pad = 0; snapshotRow()[0] < loadEvents; pad++) {
        if (pad > 5_000) {
          throw new IllegalStateException("no snapshot after the load within 5,000 more events");
        }
        upsert(node, collection, "k0", random, "pad-" + pad);
      }
      long snapshotAt = awaitSnapshot(loadEvents);
      awaitTableCaughtUp(node, LOADED);
      PartitionStatus status = node.status(LOADED);
      long loaded = usedHeapAfterGc();
      long perDocument = (loaded - baseline) / documents;
      System.out.printf(
          Locale.ROOT,
          "   loaded in %.2f s (%,.0f documents/s, durable); partition %d holds %,d documents,"
              + " %,d journal events, snapshot at event %,d%n",
          loadNanos / 1e9,
          documents / (loadNanos / 1e9),
          LOADED,
          status.documents(),
          status.journalEvents(),
          snapshotAt);
      System.out.printf(
          Locale.ROOT,
          "   heap: %,.1f MiB before, %,.1f MiB after -> %,.1f MiB for %,d documents = %,d bytes"
              + " per document (%.3fx its body), %,.1f MiB per 100,000%n",
          mib(baseline),
          mib(loaded),
          mib(loaded - baseline),
          documents,
          perDocument,
          (double) perDocument / options.bodyBytes(),
          mib(perDocument * 100_000));
      long[] row = snapshotRow();
      long[] journal = journalBytes();
      System.out.printf(
          Locale.ROOT,
          "   snapshot row: %,d bytes (%,.1f MiB, %.1f bytes per document); journal of partition"
              + " %d: %,d events, %,.1f MiB of event payloads%n",
          row[1],
          mib(row[1]),
          (double) row[1] / documents,
          LOADED,
          journal[0],
          mib(journal[1]));
    }
    System.out.println(LINE);
    System.out.printf(
        "3. recovery of partition %d in a new actor system on the same database (%d restarts per case),"
            + " under load: %d writers on the other partitions%n   time from the first message to the"
            + " partition until a GET of its last acknowledged write answered it and a write was"
            + " accepted; an empty partition of the same shard answered first (sharding, the shard"
            + " and the pools are up); heap as above%n",
        LOADED, options.rounds(), RECOVERY_LOAD_WRITERS);
    List<double[]> plain = recoveries("snapshot, few events after it", Long.MAX_VALUE);
    long snapshotAt = snapshotRow()[0];
    try (Node node = node()) {
      node.status(LOADED);
      SplittableRandom random = new SplittableRandom(11);
      for (int i = 0; i < AFTER_SNAPSHOT; i++) {
        upsert(node, collection, "k" + random.nextInt(documents), random, "after-" + i);
      }
      awaitTableCaughtUp(node, LOADED);
    }
    // The snapshots taken meanwhile go, before every restart (a recovered partition snapshots at
    // its first write after it): recovery replays every one of those events.
    List<double[]> replay =
        recoveries(
            String.format(Locale.ROOT, "snapshot + %,d events after it", AFTER_SNAPSHOT),
            snapshotAt);
    System.out.println(LINE);
    System.out.printf(
        Locale.ROOT,
        "medians: recovery %.2f s with the snapshot and few events, %.2f s with %,d events to"
            + " replay; heap after recovery %,.0f bytes per document (%,.1f MiB per 100,000)%n",
        medianOf(plain, 0),
        medianOf(replay, 0),
        AFTER_SNAPSHOT,
        medianOf(plain, 1),
        medianOf(plain, 1) * 100_000 / (1 << 20));
    System.out.println(LINE);
  }

  private void deleteSnapshotsAfter(long sequence) throws SQLException {
    deleteSnapshotsAfter(benchUrl, options.user(), options.password(), LOADED, sequence);
  }

  /**
   * Deletes partition {@code partition}'s snapshots after {@code sequence} (shared with others).
   */
  static void deleteSnapshotsAfter(
      String url, String user, String password, int partition, long sequence) throws SQLException {
    try (Connection c = DriverManager.getConnection(url, user, password);
        PreparedStatement ps =
            c.prepareStatement(
                "DELETE FROM weir.snapshot WHERE persistence_id = ? AND sequence_number > ?")) {
      ps.setString(1, Partition.persistenceId(partition).id());
      ps.setLong(2, sequence);
      ps.executeUpdate();
    }
  }

  /** Writers on other partitions while a partition recovers. */
  static final int RECOVERY_LOAD_WRITERS = 8;

  /** Events after the last snapshot in the second recovery case. */
  static final int AFTER_SNAPSHOT = 10_000;

  /** Waits until partition {@code n}'s documents table holds every event it persisted. */
  private static void awaitTableCaughtUp(Node node, int n) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(5);
    while (true) {
      PartitionStatus s = node.status(n);
      if (s.table() != null
          && s.table().state().equals("running")
          && s.table().appliedThrough() == s.journalEvents()) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the documents table did not catch up within 5 minutes");
      }
      Thread.sleep(50);
    }
  }

  /**
   * Restarts {@code rounds} times; per restart {seconds, heap bytes per document}.
   *
   * @param keepSnapshotsThrough snapshots of the loaded partition after this sequence are deleted
   *     before each restart
   */
  private List<double[]> recoveries(String label, long keepSnapshotsThrough) throws Exception {
    List<double[]> out = new ArrayList<>();
    for (int r = 1; r <= options.rounds(); r++) {
      deleteSnapshotsAfter(keepSnapshotsThrough);
      long[] row = snapshotRow();
      try (Node node = node()) {
        node.status(node.sameShard(LOADED));
        // The last write acknowledged before the restart: the padding or the replayed upserts
        // wrote k0 and random ids; a GET of the document the index names last is checked below.
        long baseline = usedHeapAfterGc();
        AtomicBoolean loading = new AtomicBoolean(true);
        List<Thread> load = new ArrayList<>();
        for (int w = 0; w < RECOVERY_LOAD_WRITERS; w++) {
          int writer = w;
          Thread t =
              new Thread(
                  () -> {
                    SplittableRandom random = new SplittableRandom(writer);
                    long n = 0;
                    while (loading.get()) {
                      String id = "l" + writer + "-" + (n++ % 1_000);
                      int p = Partitioning.partitionOf("load", id, PARTITIONS);
                      if (p == LOADED) {
                        continue;
                      }
                      try {
                        node.<FrameReply>ask(
                            p,
                            replyTo ->
                                new ApplyFrame(
                                    "once:load-" + System.nanoTime(),
                                    List.<Mutation>of(
                                        new Upsert("load", id, body(random, id), Optional.empty())),
                                    Optional.empty(),
                                    replyTo));
                      } catch (Exception e) {
                        // The load goes on; only the recovery is measured.
                      }
                    }
                  },
                  "recovery-load-" + w);
          t.setDaemon(true);
          t.start();
          load.add(t);
        }
        long start = System.nanoTime();
        ReadProtocol.DocumentReply got =
            node.<ReadProtocol.DocumentReply>ask(
                LOADED, replyTo -> new ReadProtocol.GetDocument("docs", lastId, replyTo));
        if (got.document().isEmpty() || got.document().get().revision() != lastRevision) {
          throw new IllegalStateException("the last acknowledged write was not read back");
        }
        FrameReply accepted =
            node.<FrameReply>ask(
                LOADED,
                replyTo ->
                    new ApplyFrame(
                        "once:after-recovery-" + System.nanoTime(),
                        List.<Mutation>of(new Upsert("docs", "recovered", "{}", Optional.empty())),
                        Optional.empty(),
                        replyTo));
        long nanos = System.nanoTime() - start;
        if (!(accepted instanceof Applied a)) {
          throw new IllegalStateException("a write after recovery was answered " + accepted);
        }
        lastId = "recovered";
        lastRevision = a.revisions().get(0);
        loading.set(false);
        for (Thread t : load) {
          t.join(TimeUnit.SECONDS.toMillis(40));
        }
        PartitionStatus status = node.status(LOADED);
        long heap = usedHeapAfterGc() - baseline;
        double perDocument = (double) heap / status.documents();
        out.add(new double[] {nanos / 1e9, perDocument});
        System.out.printf(
            Locale.ROOT,
            "   %-30s restart %d: %.3f s, %,d documents, %,d events after the snapshot"
                + " (at %,d), heap %,.1f MiB (%,.0f bytes per document)%n",
            label,
            r,
            nanos / 1e9,
            status.documents(),
            status.journalEvents() - row[0],
            row[0],
            mib(heap),
            perDocument);
      }
    }
    return out;
  }

  /** The last document written to the loaded partition before a restart, and its revision. */
  private String lastId = "k0";

  private long lastRevision;

  private void upsert(
      Node node, String collection, String id, SplittableRandom random, String commandId)
      throws Exception {
    String body = body(random, id);
    FrameReply reply =
        node.<FrameReply>ask(
            LOADED,
            replyTo ->
                new ApplyFrame(
                    "bench-" + commandId,
                    List.<Mutation>of(new Upsert(collection, id, body, Optional.empty())),
                    Optional.empty(),
                    replyTo));
    if (!(reply instanceof Applied a)) {
      throw new IllegalStateException("an upsert was answered " + reply.getClass().getSimpleName());
    }
    lastId = id;
    lastRevision = a.revisions().get(0);
  }

  /**
   * Waits for the loaded partition's snapshot at {@code sequence} (snapshots are saved
   * asynchronously).
   */
  private long awaitSnapshot(long sequence) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(5);
    while (true) {
      long[] row = snapshotRow();
      if (row[0] >= sequence) {
        return row[0];
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("no snapshot at event " + sequence + " after 5 minutes");
      }
      Thread.sleep(100);
    }
  }

  /** The loaded partition's latest snapshot: {sequence number, payload bytes}; {0, 0} if none. */
  private long[] snapshotRow() throws SQLException {
    try (Connection c = DriverManager.getConnection(benchUrl, options.user(), options.password());
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT sequence_number, octet_length(snapshot_payload) FROM weir.snapshot"
                    + " WHERE persistence_id = ? ORDER BY sequence_number DESC LIMIT 1")) {
      ps.setString(1, Partition.persistenceId(LOADED).id());
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? new long[] {rs.getLong(1), rs.getLong(2)} : new long[] {0, 0};
      }
    }
  }

  /**
   * Seconds to read the loaded partition's latest snapshot row's bytes over JDBC: the best of 3.
   */
  private double snapshotReadSeconds() throws SQLException {
    long best = Long.MAX_VALUE;
    for (int i = 0; i < 3; i++) {
      try (Connection c =
              DriverManager.getConnection(benchUrl, options.user(), options.password());
          PreparedStatement ps =
              c.prepareStatement(
                  "SELECT snapshot_payload FROM weir.snapshot"
                      + " WHERE persistence_id = ? ORDER BY sequence_number DESC LIMIT 1")) {
        ps.setString(1, Partition.persistenceId(LOADED).id());
        long start = System.nanoTime();
        try (ResultSet rs = ps.executeQuery()) {
          if (rs.next() && rs.getBytes(1).length > 0) {
            best = Math.min(best, System.nanoTime() - start);
          }
        }
      }
    }
    return best / 1e9;
  }

  /** The loaded partition's journal: {events, payload bytes}. */
  private long[] journalBytes() throws SQLException {
    try (Connection c = DriverManager.getConnection(benchUrl, options.user(), options.password());
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT count(*), coalesce(sum(octet_length(event_payload)), 0)"
                    + " FROM weir.event_journal WHERE persistence_id = ?")) {
      ps.setString(1, Partition.persistenceId(LOADED).id());
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return new long[] {rs.getLong(1), rs.getLong(2)};
      }
    }
  }

  /** Used heap after full collections: the lowest of several readings. */
  private static long usedHeapAfterGc() throws InterruptedException {
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 4; i++) {
      System.gc();
      Thread.sleep(200);
      used = Math.min(used, ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed());
    }
    return used;
  }

  static String setting(Config config, String path) {
    return config.hasPath(path) ? config.getValue(path).unwrapped().toString() : "?";
  }

  private static double mib(long bytes) {
    return bytes / 1024.0 / 1024.0;
  }

  // --- the database and the node ---

  private void recreateDatabase() throws SQLException {
    recreateDatabase(adminUrl, options.user(), options.password(), DATABASE);
  }

  private void dropDatabase() throws SQLException {
    dropDatabase(adminUrl, options.user(), options.password(), DATABASE);
  }

  private String show(String setting) throws SQLException {
    return show(benchUrl, options.user(), options.password(), setting);
  }

  /** Drops {@code database} (ending its sessions) and creates it again, empty. */
  static void recreateDatabase(String adminUrl, String user, String password, String database)
      throws SQLException {
    try (Connection c = DriverManager.getConnection(adminUrl, user, password);
        Statement s = c.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS " + database + " WITH (FORCE)");
      s.execute("CREATE DATABASE " + database);
    }
  }

  static void dropDatabase(String adminUrl, String user, String password, String database)
      throws SQLException {
    try (Connection c = DriverManager.getConnection(adminUrl, user, password);
        Statement s = c.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS " + database + " WITH (FORCE)");
    }
  }

  /** A server setting as text: SHOW {@code setting} on {@code url}. */
  static String show(String url, String user, String password, String setting) throws SQLException {
    try (Connection c = DriverManager.getConnection(url, user, password);
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SHOW " + setting)) {
      rs.next();
      return rs.getString(1);
    }
  }

  /** A node of this benchmark: default partition settings, no journal pruning. */
  private Node node() throws Exception {
    return new Node(
        benchUrl,
        options.user(),
        options.password(),
        "weir-pbench-" + (++nodes),
        PartitionSettings.DEFAULTS,
        false);
  }

  /**
   * A one-node cluster (self-joined, role server) hosting partitions with {@code limits}, its
   * journal and snapshots in schema weir of the database at {@code url} (migrated first).
   */
  static final class Node implements AutoCloseable {
    final ActorSystem<Void> system;

    /** Before images the node's partitions found in memory, and read from the documents table. */
    final AtomicLong beforeImagesInMemory = new AtomicLong();

    final AtomicLong beforeImagesRead = new AtomicLong();

    /** Outboxes that grew, as a node's pushed live queries learn of them. */
    final io.weir.node.feed.TailSignals tails = new io.weir.node.feed.TailSignals();

    /** The pool the journal pruner deletes with; null without pruning. */
    private final Database pruning;

    /** The documents table's pool and threads. */
    private final Database documents;

    private final ExecutorService documentsIo;

    /**
     * @param name the actor system's name (each node of a run has its own)
     * @param pruneJournal delete purged journal rows and old snapshots as a node does ({@link
     *     SqlJournalPruner}); otherwise nothing is ever deleted
     */
    Node(
        String url,
        String user,
        String password,
        String name,
        PartitionSettings limits,
        boolean pruneJournal)
        throws Exception {
      Map<String, Object> settings =
          new HashMap<>(
              Map.of(
                  "weir.postgres.url",
                  url,
                  "weir.postgres.user",
                  user,
                  "weir.postgres.password",
                  password,
                  "pekko.actor.provider",
                  "cluster",
                  "pekko.remote.artery.canonical.hostname",
                  "127.0.0.1",
                  "pekko.remote.artery.canonical.port",
                  0,
                  "pekko.cluster.roles",
                  List.of(PartitionSharding.ROLE),
                  "pekko.cluster.sharding.passivation.strategy",
                  "none",
                  "pekko.cluster.jmx.enabled",
                  "off",
                  "pekko.loglevel",
                  "WARNING"));
      // -Dweir.bench.marks=on: the partitions keep acknowledged marks as a node does (ADR 0036),
      // durable in a temporary LMDB directory, to measure what they cost.
      boolean marks = Boolean.getBoolean("weir.bench.marks");
      if (marks) {
        settings.put("pekko.cluster.distributed-data.durable.keys", List.of("weir-ack-*"));
        settings.put(
            "pekko.cluster.distributed-data.durable.lmdb.dir",
            Files.createTempDirectory("weir-bench-marks").resolve("lmdb").toString());
        settings.put(
            "pekko.cluster.distributed-data.durable.lmdb.write-behind-interval",
            System.getProperty("weir.bench.marks-write-behind", "10ms"));
      }
      Config overrides = ConfigFactory.parseMap(settings);
      Config config =
          ConfigFactory.load(
              overrides.withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
      try (Database state = Database.create(PostgresSettings.create(config), "pbench-migrate")) {
        SchemaMigrator.migrate(state.dataSource(), "weir");
      }
      this.system = ActorSystem.create(Behaviors.empty(), name, config);
      Cluster cluster = Cluster.get(system);
      cluster.manager().tell(Join.create(cluster.selfMember().address()));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (cluster.selfMember().status() != MemberStatus.up()) {
        if (System.nanoTime() > deadline) {
          close();
          throw new IllegalStateException("the one-node cluster did not come up within 30 s");
        }
        Thread.sleep(20);
      }
      // The documents table as the node keeps it: its own pool and threads.
      this.documents =
          Database.create(PostgresSettings.create(config).withPoolSize(8), name + "-documents");
      this.documentsIo = Executors.newFixedThreadPool(8);
      PartitionWiring wiring =
          PartitionWiring.jdbc(limits, documents.dataSource(), "weir", documentsIo, documentsIo)
              .withObserver(
                  PartitionObserver.both(
                      new PartitionObserver() {
                        @Override
                        public void beforeImages(int partition, int inMemory, int read) {
                          beforeImagesInMemory.addAndGet(inMemory);
                          beforeImagesRead.addAndGet(read);
                        }
                      },
                      tails));
      if (marks) {
        wiring =
            wiring.withMarks(new DistributedMarks(system, () -> "bench", Duration.ofSeconds(5)));
      }
      if (pruneJournal) {
        this.pruning = Database.create(PostgresSettings.create(config), name + "-pruner");
        wiring =
            wiring.withPruner(
                new SqlJournalPruner(
                    pruning.dataSource(),
                    "weir",
                    system
                        .dispatchers()
                        .lookup(DispatcherSelector.fromConfig("weir.blocking-io-dispatcher"))));
      } else {
        this.pruning = null;
      }
      PartitionSharding.init(system, wiring);
    }

    /** Asks partition {@code n} and waits for the answer (completed on the answering thread). */
    <R> R ask(int n, Function<ActorRef<R>, Command> make) throws Exception {
      return PartitionChannel.direct(
              PartitionSharding.partition(system, n).<R>ask(make::apply, ASK))
          .get(ASK.toSeconds() + 5, TimeUnit.SECONDS);
    }

    PartitionStatus status(int n) throws Exception {
      return this.<PartitionStatus>ask(n, GetStatus::new);
    }

    /**
     * An entity id above the partition count whose shard is partition {@code n}'s (the default
     * extractor: |hashCode mod number-of-shards|): answering it allocates and starts that shard.
     */
    int sameShard(int n) {
      int shards = system.settings().config().getInt("pekko.cluster.sharding.number-of-shards");
      int target = Math.abs(Integer.toString(n).hashCode() % shards);
      for (int id = 1000; ; id++) {
        if (Math.abs(Integer.toString(id).hashCode() % shards) == target) {
          return id;
        }
      }
    }

    @Override
    public void close() {
      system.terminate();
      try {
        system.getWhenTerminated().toCompletableFuture().get(60, TimeUnit.SECONDS);
      } catch (Exception e) {
        // Going on: the next node has a name of its own.
      }
      documentsIo.shutdownNow();
      documents.close();
      if (pruning != null) {
        pruning.close();
      }
    }
  }

  // --- medians ---

  private static double median(List<Round> rounds, ToDoubleFunction<Round> f) {
    return median(rounds.stream().mapToDouble(f).toArray());
  }

  private static double min(List<Round> rounds, ToDoubleFunction<Round> f) {
    return rounds.stream().mapToDouble(f).min().orElse(Double.NaN);
  }

  private static double max(List<Round> rounds, ToDoubleFunction<Round> f) {
    return rounds.stream().mapToDouble(f).max().orElse(Double.NaN);
  }

  private static double medianOf(List<double[]> values, int index) {
    return median(values.stream().mapToDouble(v -> v[index]).toArray());
  }

  private static double median(double[] values) {
    return CdcBenchmark.median(values);
  }
}
