package io.weir.bench;

import com.typesafe.config.Config;
import io.weir.node.NodeSettings;
import io.weir.node.documents.Documents;
import io.weir.node.projection.Projections;
import io.weir.node.tokens.TokenKeys;
import io.weir.persistence.ClusterIdentityStore;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.protocol.partition.Partitioning;
import io.weir.protocol.token.BatchToken;
import io.weir.sharding.partition.ConsumerProtocol.BatchCommitted;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerConfigured;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefusal;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefused;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerView;
import io.weir.sharding.partition.OutboxReader;
import io.weir.sharding.partition.Partition;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.OutboxPurged;
import io.weir.sharding.partition.PartitionProtocol.PurgeReply;
import io.weir.sharding.partition.PartitionProtocol.QuotaExceeded;
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
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.function.ToLongFunction;
import org.HdrHistogram.Histogram;

/**
 * Projection benchmark: figures, not assertions. The read+commit loop of projection consumers on
 * one partition while document writes go on, on a one-node cluster whose journal is the benchmark
 * database ({@value #DATABASE}, durable, created afresh):
 *
 * <ul>
 *   <li><b>Writers</b> ({@code --writers}, 0 for none) each write one document at a time with
 *       {@link Documents#put} (one {@code ApplyFrame} of one upsert of a JSON body) into collection
 *       {@value #SOURCE}, ids chosen to land in partition {@value #PARTITION}, for the whole run.
 *   <li><b>Warm-up</b>: consumers of their own read along with the writers for {@code
 *       --warmup-seconds} (the JIT compiles the paths); then they are released and the outbox is
 *       purged, so the backlog holds only the writers' entries.
 *   <li>A <b>backlog</b> of {@code --backlog} outbox entries is written by the writers (or, without
 *       writers, by {@value #LOAD_WRITERS} threads that stop then) before the measured consumers
 *       are configured at the retained beginning: they start behind by the whole backlog.
 *   <li><b>Consumers</b> ({@code --consumers}) filtered on collection {@value #SOURCE} each loop
 *       over {@link Projections#read}, {@link Projections#verify} and {@link Projections#commit},
 *       the calls the HTTP API makes: each commit carries one effect, an upsert of the consumer's
 *       aggregate document in collection {@value #AGGREGATES} (same partition) expecting its
 *       current revision; a batch that selected nothing commits without effects. The filter keeps
 *       the consumers from reading each other's effects (they still examine and skip them).
 *   <li>A <b>purger</b> purges the outbox through the lowest consumer checkpoint every {@code
 *       --purge-interval-ms} ({@link Documents#purge}), and purged journal rows are deleted as a
 *       node deletes them ({@link io.weir.sharding.partition.SqlJournalPruner}), so the outbox
 *       stays under its quota.
 * </ul>
 *
 * <p>The measured window lasts {@code --seconds}, or until the first consumer reaches the end of
 * the outbox: while every consumer is behind, the figures are the loop's own, not the writers'
 * rate. Consumer entries/s (entries examined, that is committed through, summed over the
 * consumers), batches/s, read and commit latency (HdrHistogram), the concurrent writes/s, the
 * outbox's movement and the CPU of this JVM and of the database's PostgreSQL backends. With
 * writers, the rest of {@code --seconds} after the consumers caught up is reported too. Run it with
 * {@code deploy/bin/bench-projections.sh}. Prints its report to standard output, by design; never a
 * document body.
 */
public final class ProjectionBenchmark {
  static final String DATABASE = "weir_prbench";

  /** The partition every document and consumer of the run is in. */
  static final int PARTITION = 0;

  /** Partitions that ids are routed over (the default count); only {@value #PARTITION} is used. */
  static final int PARTITIONS = 64;

  static final String SOURCE = "src";
  static final String AGGREGATES = "agg";

  /**
   * Names of the warm-up consumers are this and a number; the measured ones are {@link
   * #consumerName}.
   */
  static final String WARMUP_PREFIX = "bench-w";

  /** Threads that write the backlog when the run has no writers. */
  static final int LOAD_WRITERS = 4;

  /**
   * Entries one purge request reclaims at most (as the HTTP API asks); the purger asks again for
   * more.
   */
  static final long PURGE_ENTRIES = 100_000;

  /** How long a consumer that found nothing to read waits before reading again. */
  static final long IDLE_MILLIS = 5;

  private static final Duration ASK = Duration.ofSeconds(30);
  private static final String LINE = "-".repeat(118);
  private static final long MAX_MICROS = PartitionBenchmark.MAX_MICROS;

  private final ProjectionBenchOptions options;
  private final String benchUrl;

  /** Random hex text that bodies take their padding from (a body is never printed). */
  private final String padding;

  // Shared with the worker threads.
  private volatile Phase phase;

  /** The pool the token keys are read with; closed at the end. */
  private Database keysDatabase;

  private volatile boolean running = true;
  private volatile boolean backlogWritten;

  /** Set when a measured consumer reached the end of the outbox: the window ends. */
  private final AtomicBoolean caughtUp = new AtomicBoolean();

  private AtomicLongArray checkpoints;

  private ProjectionBenchmark(ProjectionBenchOptions options) {
    this.options = options;
    this.benchUrl = PartitionBenchmark.databaseUrl(options.url(), DATABASE);
    this.padding = PartitionBenchmark.padding(options.bodyBytes());
  }

  public static void main(String[] args) {
    BenchMain.main(
        args,
        ProjectionBenchOptions::parse,
        ProjectionBenchOptions.USAGE,
        options -> new ProjectionBenchmark(options).run());
  }

  private int run() throws Exception {
    BenchMain.header("Weir projection benchmark");
    try {
      PartitionBenchmark.recreateDatabase(
          options.url(), options.user(), options.password(), DATABASE);
      System.out.printf(
          "PostgreSQL:    %s, shared_buffers %s, synchronous_commit %s, fsync %s; database %s%n",
          show("server_version"),
          show("shared_buffers"),
          show("synchronous_commit"),
          show("fsync"),
          DATABASE);
      PartitionSettings limits = PartitionSettings.DEFAULTS;
      try (PartitionBenchmark.Node node =
          new PartitionBenchmark.Node(
              benchUrl, options.user(), options.password(), "weir-prbench", limits, true)) {
        measure(node, limits);
      } finally {
        if (keysDatabase != null) {
          keysDatabase.close();
        }
      }
      System.out.println(
          "load average (1/5/15 min) at the end: "
              + CdcBenchmark.loadAverage()
              + " -- above about 1 means something besides this benchmark competed for the CPUs");
      return 0;
    } finally {
      if (!options.keepDatabase()) {
        PartitionBenchmark.dropDatabase(
            options.url(), options.user(), options.password(), DATABASE);
      }
    }
  }

  private void measure(PartitionBenchmark.Node node, PartitionSettings limits) throws Exception {
    Config c = node.system.settings().config();
    Documents documents = new Documents(node.system, PARTITIONS, List.of(), ASK);
    NodeSettings.Projections readLimits =
        new NodeSettings.Projections(
            c.getInt("weir.projections.read.default-entries"),
            c.getInt("weir.projections.read.max-entries"),
            c.getBytes("weir.projections.read.default-bytes"),
            c.getBytes("weir.projections.read.max-bytes"),
            c.getBytes("weir.projections.max-effect-bytes"));
    if (options.maxEntries() > readLimits.maxReadEntries()) {
      throw new IllegalArgumentException(
          "--max-entries is above weir.projections.read.max-entries ("
              + readLimits.maxReadEntries()
              + ")");
    }
    // The cluster's token keys, as a node loads them (the identity row creates the first key).
    keysDatabase = Database.create(PostgresSettings.create(c), "prbench-keys");
    try (Connection connection = keysDatabase.dataSource().getConnection()) {
      ClusterIdentityStore.loadOrCreate(connection, "weir", PARTITIONS);
    }
    TokenKeys keys =
        new TokenKeys(
            keysDatabase.dataSource(),
            "weir",
            node.system
                .dispatchers()
                .lookup(
                    org.apache.pekko.actor.typed.DispatcherSelector.fromConfig(
                        "weir.blocking-io-dispatcher")),
            Duration.ZERO);
    keys.reload().toCompletableFuture().get(30, TimeUnit.SECONDS);
    Projections projections =
        new Projections(
            documents,
            OutboxReader.jdbc(node.system),
            keys,
            readLimits,
            limits.maxEffects(),
            c.getDuration("weir.tokens.batch-ttl"),
            Clock.systemUTC());
    long maxBytes = readLimits.defaultReadBytes();
    printSettings(c, limits, maxBytes);

    // The partition, the writers, the warm-up and the backlog.
    documents.status(PARTITION).toCompletableFuture().get(ASK.toSeconds(), TimeUnit.SECONDS);
    checkpoints = new AtomicLongArray(options.consumers());
    phase = new Phase(options.consumers());
    List<Thread> writers = startWriters(documents);
    if (options.warmupSeconds() > 0) {
      warmUp(documents, projections, maxBytes);
    }
    writeBacklog(documents, writers);

    // The measured consumers, from the retained beginning: the whole backlog is ahead of them.
    for (int i = 0; i < options.consumers(); i++) {
      checkpoints.set(i, configure(projections, consumerName(i)).checkpoint());
    }
    Thread purger = thread("bench-purger", () -> purge(documents));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(options.seconds());
    PartitionStatus before = status(documents);
    Phase window = new Phase(options.consumers());
    CpuTimes cpu = CpuTimes.now();
    double machine = CpuTimes.machineBusy();
    Map<Long, Double> backends = backendCpu();
    window.start();
    phase = window;
    List<Thread> consumers = new ArrayList<>();
    for (int i = 0; i < options.consumers(); i++) {
      int consumer = i;
      consumers.add(
          thread(
              "bench-consumer-" + (i + 1),
              () ->
                  consume(
                      projections,
                      consumerName(consumer),
                      maxBytes,
                      () -> phase.consumers[consumer],
                      consumer,
                      () -> running)));
    }

    // The measured window: while every consumer is behind.
    boolean reachedEnd = awaitWindow(deadline);
    Phase rest = new Phase(options.consumers());
    rest.start();
    phase = rest;
    window.end();
    double cpuSeconds = CpuTimes.now().self() - cpu.self();
    double machineSeconds = CpuTimes.machineBusy() - machine;
    double backendSeconds = 0;
    for (Map.Entry<Long, Double> backend : backendCpu().entrySet()) {
      backendSeconds += backend.getValue() - backends.getOrDefault(backend.getKey(), 0.0);
    }
    PartitionStatus after = status(documents);
    // With writers, the rest of the duration: the consumers keep up with the writes.
    boolean caughtUpPhase =
        reachedEnd && options.writers() > 0 && deadline - System.nanoTime() > 1_000_000_000L;
    if (caughtUpPhase) {
      while (System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
    }
    phase = new Phase(options.consumers());
    rest.end();
    PartitionStatus end = status(documents);
    running = false;
    for (Thread t : concat(concat(writers, consumers), List.of(purger))) {
      t.join(TimeUnit.SECONDS.toMillis(ASK.toSeconds() + 5));
    }
    report(
        window,
        reachedEnd,
        before,
        after,
        new double[] {cpuSeconds, backendSeconds, machineSeconds});
    if (caughtUpPhase) {
      reportCaughtUp(rest, end);
    }
    summary(window, caughtUpPhase ? rest : null);
  }

  private void printSettings(Config c, PartitionSettings limits, long maxBytes) {
    System.out.printf(
        "partition:     %d (ids routed over %d), one-node cluster (Cluster Sharding, role server), JDBC journal"
            + " and snapshots in schema weir of %s;%n               outbox quota %,d entries / %,d MiB (defaults),"
            + " group commit up to %d frames / %,d mutations per journal event, purged journal rows deleted%n"
            + "               (SqlJournalPruner); journal: %s connections (weir.postgres.journal-pool-size), shared by"
            + " writes and the outbox reader%n",
        PARTITION,
        PARTITIONS,
        DATABASE,
        limits.maxOutboxEntries(),
        limits.maxOutboxBytes() >> 20,
        limits.maxBatchFrames(),
        limits.maxBatchMutations(),
        PartitionBenchmark.setting(c, "weir.postgres.journal-pool-size"));
    System.out.printf(
        Locale.ROOT,
        "writers:       %s;%n               Documents.put (ApplyFrame with one Upsert of a %,d-byte"
            + " JSON body) into collection %s, id uniform over %,d ids of partition %d%n",
        options.writers() == 0
            ? "none while the consumers run; "
                + LOAD_WRITERS
                + " write the warm-up's entries and the backlog, then stop"
            : options.writers()
                + ", each waiting for its answer before the next write, for the whole run",
        options.bodyBytes(),
        SOURCE,
        options.keys(),
        PARTITION);
    System.out.printf(
        "consumers:     %d, filter collection %s (all kinds); each in a loop: Projections.read (maxEntries %d,"
            + " maxBytes %d MiB) -> verify ->%n               commit with one effect (an upsert of its aggregate document"
            + " in collection %s, expected revision = its current one;%n               none when the batch selected"
            + " nothing); a read that finds nothing waits %d ms%n",
        options.consumers(), SOURCE, options.maxEntries(), maxBytes >> 20, AGGREGATES, IDLE_MILLIS);
    System.out.printf(
        "purge:         every %,d ms through the lowest consumer checkpoint (Documents.purge)%n",
        options.purgeIntervalMs());
    System.out.println(LINE);
  }

  /** Starts the writers (without writers in the run, those that write the backlog and stop). */
  private List<Thread> startWriters(Documents documents) {
    List<String> keys = ids(SOURCE, "k", options.keys());
    List<Thread> writers = new ArrayList<>();
    int threads = options.writers() > 0 ? options.writers() : LOAD_WRITERS;
    long seed = System.nanoTime();
    for (int w = 0; w < threads; w++) {
      int writer = w;
      boolean afterBacklog = w < options.writers();
      writers.add(
          thread(
              "bench-writer-" + (w + 1),
              () -> write(documents, keys, seed + writer * 7919L, afterBacklog)));
    }
    return writers;
  }

  /**
   * Consumers of their own read and commit along with the writers for {@code --warmup-seconds};
   * then they are released and the outbox is purged, so that the backlog holds only the writers'
   * entries, in the journal events the writers wrote.
   */
  private void warmUp(Documents documents, Projections projections, long maxBytes)
      throws Exception {
    Phase warmup = new Phase(options.consumers());
    warmup.start();
    phase = warmup;
    AtomicBoolean warming = new AtomicBoolean(true);
    List<Thread> threads = new ArrayList<>();
    for (int i = 0; i < options.consumers(); i++) {
      int consumer = i;
      String name = WARMUP_PREFIX + (i + 1);
      configure(projections, name);
      threads.add(
          thread(
              "bench-warmup-" + (i + 1),
              () ->
                  consume(
                      projections,
                      name,
                      maxBytes,
                      () -> warmup.consumers[consumer],
                      -1,
                      warming::get)));
    }
    Thread.sleep(TimeUnit.SECONDS.toMillis(options.warmupSeconds()));
    warming.set(false);
    for (Thread t : threads) {
      t.join(TimeUnit.SECONDS.toMillis(ASK.toSeconds() + 5));
    }
    warmup.end();
    for (int i = 0; i < options.consumers(); i++) {
      get(projections.release(PARTITION, WARMUP_PREFIX + (i + 1), 1));
    }
    long purged = purgeAll(documents);
    System.out.printf(
        Locale.ROOT,
        "warm-up:       %d consumers of their own read along with the writers for %.1f s (not"
            + " reported: %,.0f entries/s, %,.0f writes/s),%n               then released; the outbox purged (%,d entries)%n",
        options.consumers(),
        warmup.seconds(),
        warmup.sum(ConsumerStats.Snapshot::examined) / warmup.seconds(),
        warmup.writes.snapshot().writes() / warmup.seconds(),
        purged);
  }

  /**
   * Waits until the outbox holds {@code --backlog} entries; without writers in the run, the writers
   * then stop.
   */
  private void writeBacklog(Documents documents, List<Thread> writers) throws Exception {
    PartitionStatus start = status(documents);
    Phase load = new Phase(options.consumers());
    load.start();
    phase = load;
    while (status(documents).outboxEntries() < options.backlog()) {
      Thread.sleep(50);
    }
    backlogWritten = true;
    load.end();
    phase = new Phase(options.consumers());
    if (options.writers() == 0) {
      for (Thread t : writers) {
        t.join(TimeUnit.SECONDS.toMillis(ASK.toSeconds() + 5));
      }
    }
    PartitionStatus end = status(documents);
    WriterStats.Snapshot loaded = load.writes.snapshot();
    long events = end.journalEvents() - start.journalEvents();
    System.out.printf(
        Locale.ROOT,
        "backlog:       %,d outbox entries when the consumers start, written by %d writers in %.1f s"
            + " (%,.0f writes/s, p50 %.2f ms, p99 %.2f ms);%n               %,d journal events (%.2f entries per event)%n",
        end.outboxEntries(),
        writers.size(),
        load.seconds(),
        loaded.writes() / load.seconds(),
        ms(loaded.latency(), 50),
        ms(loaded.latency(), 99),
        events,
        (double) (end.outboxNext() - start.outboxNext()) / Math.max(1, events));
  }

  /**
   * Waits until {@code deadline} ({@link System#nanoTime()}) or until a consumer reached the end of
   * the outbox; returns whether the latter ended the wait.
   */
  private boolean awaitWindow(long deadline) throws InterruptedException {
    while (System.nanoTime() < deadline) {
      if (caughtUp.get()) {
        return true;
      }
      Thread.sleep(20);
    }
    return false;
  }

  // --- the worker threads ---

  /**
   * A writer: one write after the other until the run ends (or, for a backlog writer, the backlog
   * is written).
   */
  private void write(Documents documents, List<String> keys, long seed, boolean afterBacklog) {
    SplittableRandom random = new SplittableRandom(seed);
    while (running && (afterBacklog || !backlogWritten)) {
      String id = keys.get(random.nextInt(keys.size()));
      String body = PartitionBenchmark.body(random, id, options.bodyBytes(), padding);
      long t0 = System.nanoTime();
      try {
        FrameReply reply = get(documents.put(SOURCE, id, body, Optional.empty(), Optional.empty()));
        long micros = (System.nanoTime() - t0) / 1000;
        if (reply instanceof Applied) {
          phase.writes.write(micros);
        } else {
          phase.writes.failure(reply.getClass().getSimpleName());
          if (reply instanceof QuotaExceeded) {
            Thread.sleep(10);
          }
        }
      } catch (InterruptedException e) {
        return;
      } catch (Exception e) {
        phase.writes.failure(kind(e));
      }
    }
  }

  /**
   * A consumer loop: read, then commit the batch with its effect, then again, while {@code
   * keepGoing}. Latencies and counts go to {@code stats} as it is when the commit was answered.
   *
   * @param measured the consumer's index among the measured ones (its checkpoint is published for
   *     the purger, and reaching the outbox's end ends the window); -1 for a warm-up consumer
   */
  private void consume(
      Projections projections,
      String name,
      long maxBytes,
      Supplier<ConsumerStats> stats,
      int measured,
      BooleanSupplier keepGoing) {
    String aggregate = ids(AGGREGATES, "agg-" + name + "-", 1).get(0);
    long revision = 0; // the aggregate document does not exist yet
    long batches = 0;
    long selected = 0;
    long selectedBytes = 0;
    while (keepGoing.getAsBoolean()) {
      try {
        long t0 = System.nanoTime();
        Projections.ReadResult read =
            get(projections.read(PARTITION, name, 1, options.maxEntries(), maxBytes));
        long readMicros = (System.nanoTime() - t0) / 1000;
        if (!(read instanceof Projections.Batch batch)) {
          stats
              .get()
              .failure(
                  read instanceof Projections.Refused r
                      ? "read " + r.refusal().refusal()
                      : "read " + read.getClass().getSimpleName());
          Thread.sleep(10);
          continue;
        }
        long examined = batch.through() - batch.start();
        if (examined == 0) {
          stats.get().emptyRead();
          if (measured >= 0) {
            caughtUp.set(true);
          }
          Thread.sleep(IDLE_MILLIS);
          continue;
        }
        // The aggregate: counts of what the consumer has seen (no row value).
        List<Mutation> effects = List.of();
        long bytes = 0;
        if (!batch.entries().isEmpty()) {
          for (Partition.OutboxEntry e : batch.entries()) {
            bytes += e.after() == null ? 0 : e.after().length();
          }
          String body =
              "{\"consumer\":\""
                  + name
                  + "\",\"batches\":"
                  + (batches + 1)
                  + ",\"entries\":"
                  + (selected + batch.entries().size())
                  + ",\"bytes\":"
                  + (selectedBytes + bytes)
                  + ",\"through\":"
                  + batch.through()
                  + "}";
          effects = List.of(new Upsert(AGGREGATES, aggregate, body, Optional.of(revision)));
        }
        long t1 = System.nanoTime();
        BatchToken token = get(projections.verify(batch.token()));
        ConsumerReply reply = get(projections.commit(token, Optional.empty(), effects));
        long commitMicros = (System.nanoTime() - t1) / 1000;
        if (reply instanceof BatchCommitted committed) {
          if (!effects.isEmpty()) {
            revision = committed.receipt().revisions().get(0);
          }
          batches++;
          selected += batch.entries().size();
          selectedBytes += bytes;
          stats
              .get()
              .batch(
                  examined,
                  batch.entries().size(),
                  examined == options.maxEntries(),
                  readMicros,
                  commitMicros);
          if (measured >= 0) {
            checkpoints.set(measured, committed.checkpoint());
            if (!batch.hasMore()) {
              // This batch reached the outbox's end as the read saw it.
              caughtUp.set(true);
            }
          }
        } else if (reply instanceof ConsumerRefused refused) {
          stats.get().failure("commit " + refused.refusal());
          if (refused.refusal() == ConsumerRefusal.REVISION_CONFLICT) {
            revision = refused.actualRevision();
          } else {
            Thread.sleep(10);
          }
        }
      } catch (InterruptedException e) {
        return;
      } catch (Exception e) {
        stats.get().failure(kind(e));
      }
    }
  }

  /**
   * Configures consumer {@code name} (generation 1, collection {@value #SOURCE}) from the retained
   * beginning.
   */
  private static ConsumerView configure(Projections projections, String name) throws Exception {
    ConsumerReply reply =
        get(
            projections.configure(
                PARTITION, name, 1, List.of(SOURCE), List.of(), Optional.empty()));
    if (!(reply instanceof ConsumerConfigured configured) || !configured.created()) {
      throw new IllegalStateException("configuring a consumer was answered " + describe(reply));
    }
    return configured.consumer();
  }

  /** The purger: every interval, purges through the lowest consumer checkpoint. */
  private void purge(Documents documents) {
    long purgedThrough = 0;
    while (running) {
      try {
        Thread.sleep(options.purgeIntervalMs());
        long lowest = Long.MAX_VALUE;
        for (int i = 0; i < checkpoints.length(); i++) {
          lowest = Math.min(lowest, checkpoints.get(i));
        }
        boolean more = lowest > purgedThrough;
        while (more && running) {
          long t0 = System.nanoTime();
          PurgeReply reply = get(documents.purge(PARTITION, lowest, PURGE_ENTRIES));
          if (reply instanceof OutboxPurged p) {
            purgedThrough = p.outboxFirst() - 1;
            phase.purged(p.purged(), (System.nanoTime() - t0) / 1000);
            more = p.more();
          } else {
            phase.writes.failure("purge " + reply.getClass().getSimpleName());
            more = false;
          }
        }
      } catch (InterruptedException e) {
        return;
      } catch (Exception e) {
        phase.writes.failure("purge " + kind(e));
      }
    }
  }

  /** Purges the whole outbox (nothing pins it: no active consumer); returns the entries purged. */
  private static long purgeAll(Documents documents) throws Exception {
    long purged = 0;
    boolean more = true;
    while (more) {
      PartitionStatus s = get(documents.status(PARTITION));
      if (s.outboxEntries() == 0) {
        break;
      }
      PurgeReply reply = get(documents.purge(PARTITION, s.outboxNext() - 1, PURGE_ENTRIES));
      if (!(reply instanceof OutboxPurged p)) {
        throw new IllegalStateException(
            "purging the outbox was answered " + reply.getClass().getSimpleName());
      }
      purged += p.purged();
      more = p.more();
    }
    return purged;
  }

  // --- the report ---

  /** All consumers' figures of a phase together. */
  private record Totals(
      long batches,
      long examined,
      long selected,
      long full,
      long empty,
      Histogram reads,
      Histogram commits,
      Map<String, Long> failures) {
    static Totals of(Phase p) {
      Histogram reads = new Histogram(MAX_MICROS, 3);
      Histogram commits = new Histogram(MAX_MICROS, 3);
      long batches = 0;
      long examined = 0;
      long selected = 0;
      long full = 0;
      long empty = 0;
      Map<String, Long> failures = new TreeMap<>();
      for (ConsumerStats stats : p.consumers) {
        ConsumerStats.Snapshot c = stats.snapshot();
        reads.add(c.reads());
        commits.add(c.commits());
        batches += c.batches();
        examined += c.examined();
        selected += c.selected();
        full += c.full();
        empty += c.empty();
        c.failures().forEach((k, v) -> failures.merge(k, v, Long::sum));
      }
      return new Totals(batches, examined, selected, full, empty, reads, commits, failures);
    }
  }

  /**
   * The measured window: a line per consumer, their total, the writes, the outbox and the CPU.
   *
   * @param cpu CPU seconds in the window: this JVM, the PostgreSQL backends of the database, the
   *     whole machine
   */
  private void report(
      Phase w, boolean reachedEnd, PartitionStatus before, PartitionStatus after, double[] cpu) {
    double s = w.seconds();
    System.out.printf(
        Locale.ROOT,
        "measured window: %.2f s, %s%n",
        s,
        reachedEnd
            ? "until the first consumer reached the end of the outbox (every consumer was behind until then)"
            : "--seconds; no consumer reached the end of the outbox");
    System.out.printf(
        "%-9s %8s %9s %9s %10s %6s | %8s %8s %8s | %8s %8s %8s | %6s %7s %7s  %s%n",
        "consumer",
        "batches",
        "entries",
        "selected",
        "entries/s",
        "full%",
        "read p50",
        "p99",
        "max",
        "cmt p50",
        "p99",
        "max",
        "empty",
        "lag0",
        "lag1",
        "failed");
    for (int i = 0; i < w.consumers.length; i++) {
      ConsumerStats.Snapshot c = w.consumers[i].snapshot();
      System.out.printf(
          Locale.ROOT,
          "%-9s %,8d %,9d %,9d %,10.0f %5.0f%% | %8.2f %8.2f %8.1f | %8.2f %8.2f %8.1f | %,6d %,7d %,7d  %s%n",
          "c" + (i + 1),
          c.batches(),
          c.examined(),
          c.selected(),
          c.examined() / s,
          100.0 * c.full() / Math.max(1, c.batches()),
          ms(c.reads(), 50),
          ms(c.reads(), 99),
          c.reads().getMaxValue() / 1000.0,
          ms(c.commits(), 50),
          ms(c.commits(), 99),
          c.commits().getMaxValue() / 1000.0,
          c.empty(),
          lag(before, i),
          lag(after, i),
          c.failures().isEmpty() ? "0" : c.failures().toString());
    }
    Totals t = Totals.of(w);
    System.out.printf(
        Locale.ROOT,
        "%-9s %,8d %,9d %,9d %,10.0f %5.0f%% | %8.2f %8.2f %8.1f | %8.2f %8.2f %8.1f | %,6d %7s %7s  %s%n",
        "all",
        t.batches(),
        t.examined(),
        t.selected(),
        t.examined() / s,
        100.0 * t.full() / Math.max(1, t.batches()),
        ms(t.reads(), 50),
        ms(t.reads(), 99),
        t.reads().getMaxValue() / 1000.0,
        ms(t.commits(), 50),
        ms(t.commits(), 99),
        t.commits().getMaxValue() / 1000.0,
        t.empty(),
        "",
        "",
        t.failures().isEmpty() ? "0" : t.failures().toString());
    System.out.println(
        "entries = outbox entries examined (committed through: the checkpoint's movement); selected = entries of"
            + " collection "
            + SOURCE
            + " delivered;\nfull% = batches that examined --max-entries entries; read ="
            + " Projections.read (partition ask, journal read, selection, token);\ncmt = verify + commit (one durable journal"
            + " write, group-committed with the writes); empty = reads that found nothing (then a "
            + IDLE_MILLIS
            + " ms"
            + " pause);\nlag0/lag1 = outbox entries after the consumer's checkpoint at the window's start/end; latencies in ms");
    WriterStats.Snapshot writes = w.writes.snapshot();
    if (options.writers() == 0) {
      System.out.printf(
          "writes:        none (no writers in this run)%s%n",
          writes.failures().isEmpty() ? "" : "; failed " + writes.failures());
    } else {
      System.out.printf(
          Locale.ROOT,
          "writes:        %,d in the window, %,.0f writes/s, p50 %.2f ms, p99 %.2f ms, max %.1f ms;"
              + " failed %s%n",
          writes.writes(),
          writes.writes() / s,
          ms(writes.latency(), 50),
          ms(writes.latency(), 99),
          writes.latency().getMaxValue() / 1000.0,
          writes.failures().isEmpty() ? "0" : writes.failures().toString());
    }
    long written = after.outboxNext() - before.outboxNext();
    long events = after.journalEvents() - before.journalEvents();
    System.out.printf(
        Locale.ROOT,
        "outbox:        %,d entries written in the window (writes and effects), %,d journal events"
            + " (%.2f entries per event);%n               %,d purged in %,d purges (p50 %.1f ms); retained %,d at the start,"
            + " %,d at the end%n",
        written,
        events,
        (double) written / Math.max(1, events),
        after.outboxFirst() - before.outboxFirst(),
        w.purges(),
        w.purgeMillisMedian(),
        before.outboxEntries(),
        after.outboxEntries());
    System.out.printf(
        Locale.ROOT,
        "CPU:           this JVM %.1f s (%.2f of %d cores), PostgreSQL backends of %s %.1f s (%.2f"
            + " cores),%n               the whole machine %.1f s (%.2f cores: these, other PostgreSQL processes and anything"
            + " else running)%n",
        cpu[0],
        cpu[0] / s,
        Runtime.getRuntime().availableProcessors(),
        DATABASE,
        cpu[1],
        cpu[1] / s,
        cpu[2],
        cpu[2] / s);
  }

  /** The rest of the duration after the consumers caught up with the writers. */
  private void reportCaughtUp(Phase p, PartitionStatus after) {
    double s = p.seconds();
    Totals t = Totals.of(p);
    WriterStats.Snapshot writes = p.writes.snapshot();
    long lag = 0;
    for (int i = 0; i < options.consumers(); i++) {
      lag = Math.max(lag, lag(after, i));
    }
    System.out.printf(
        Locale.ROOT,
        "then, caught up with the writers (the remaining %.2f s): %,.0f consumer entries/s (bounded by"
            + " the writes), %,.1f batches/s,%n   %,d empty reads; read p50 %.2f ms, p99 %.2f ms; commit p50 %.2f ms, p99"
            + " %.2f ms; %,.0f writes/s (p50 %.2f ms, p99 %.2f ms);%n   largest lag at the end %,d entries; failed %s%n",
        s,
        t.examined() / s,
        t.batches() / s,
        t.empty(),
        ms(t.reads(), 50),
        ms(t.reads(), 99),
        ms(t.commits(), 50),
        ms(t.commits(), 99),
        writes.writes() / s,
        ms(writes.latency(), 50),
        ms(writes.latency(), 99),
        lag,
        t.failures().isEmpty() && writes.failures().isEmpty()
            ? "0"
            : t.failures() + " " + writes.failures());
  }

  /** The headline figures: the window's, and those after catching up if there were writers. */
  private void summary(Phase window, Phase caughtUp) {
    double s = window.seconds();
    Totals t = Totals.of(window);
    System.out.println(LINE);
    System.out.printf(
        Locale.ROOT,
        "summary: %d consumers, %d writers, maxEntries %d, while behind (%.1f s): %,.0f consumer"
            + " entries/s (%,.0f selected/s),%n         %,.1f batches/s; read p50 %.2f ms, p99 %.2f ms; commit p50 %.2f ms,"
            + " p99 %.2f ms; concurrent writes %,.0f/s%n",
        options.consumers(),
        options.writers(),
        options.maxEntries(),
        s,
        t.examined() / s,
        t.selected() / s,
        t.batches() / s,
        ms(t.reads(), 50),
        ms(t.reads(), 99),
        ms(t.commits(), 50),
        ms(t.commits(), 99),
        window.writes.snapshot().writes() / s);
    if (caughtUp != null) {
      Totals c = Totals.of(caughtUp);
      double cs = caughtUp.seconds();
      System.out.printf(
          Locale.ROOT,
          "         caught up (%.1f s): %,.0f consumer entries/s, %,.0f writes/s%n",
          cs,
          c.examined() / cs,
          caughtUp.writes.snapshot().writes() / cs);
    }
    System.out.println(LINE);
  }

  private static long lag(PartitionStatus status, int consumer) {
    String name = consumerName(consumer);
    long tail = status.outboxNext() - 1;
    for (ConsumerView v : status.consumers()) {
      if (v.name().equals(name) && v.generation() == 1) {
        return tail - v.checkpoint();
      }
    }
    return -1;
  }

  // --- figures of a phase ---

  /**
   * The figures of one phase (backlog, warm-up, the window), recorded by the threads while it is
   * current.
   */
  private static final class Phase {
    final ConsumerStats[] consumers;
    final WriterStats writes = new WriterStats();
    private long start;
    private long end;
    private long purges;
    private long purgedEntries;
    private final Histogram purgeLatency = new Histogram(MAX_MICROS, 3);

    Phase(int consumers) {
      this.consumers = new ConsumerStats[consumers];
      for (int i = 0; i < consumers; i++) {
        this.consumers[i] = new ConsumerStats();
      }
    }

    void start() {
      start = System.nanoTime();
    }

    void end() {
      end = System.nanoTime();
    }

    double seconds() {
      return (end - start) / 1e9;
    }

    synchronized void purged(long entries, long micros) {
      purges++;
      purgedEntries += entries;
      purgeLatency.recordValue(Math.min(micros, MAX_MICROS));
    }

    synchronized long purges() {
      return purges;
    }

    synchronized double purgeMillisMedian() {
      return purgeLatency.getValueAtPercentile(50) / 1000.0;
    }

    long sum(ToLongFunction<ConsumerStats.Snapshot> f) {
      long sum = 0;
      for (ConsumerStats c : consumers) {
        sum += f.applyAsLong(c.snapshot());
      }
      return sum;
    }
  }

  /** One consumer's figures in a phase; written by its thread, read by the main thread. */
  private static final class ConsumerStats {
    private long batches;
    private long examined;
    private long selected;
    private long full;
    private long empty;
    private final Histogram reads = new Histogram(MAX_MICROS, 3);
    private final Histogram commits = new Histogram(MAX_MICROS, 3);
    private final Map<String, Long> failures = new TreeMap<>();

    record Snapshot(
        long batches,
        long examined,
        long selected,
        long full,
        long empty,
        Histogram reads,
        Histogram commits,
        Map<String, Long> failures) {}

    synchronized void batch(
        long examined, long selected, boolean full, long readMicros, long commitMicros) {
      batches++;
      this.examined += examined;
      this.selected += selected;
      if (full) {
        this.full++;
      }
      reads.recordValue(Math.min(readMicros, MAX_MICROS));
      commits.recordValue(Math.min(commitMicros, MAX_MICROS));
    }

    synchronized void emptyRead() {
      empty++;
    }

    synchronized void failure(String kind) {
      failures.merge(kind, 1L, Long::sum);
    }

    synchronized Snapshot snapshot() {
      return new Snapshot(
          batches,
          examined,
          selected,
          full,
          empty,
          reads.copy(),
          commits.copy(),
          new TreeMap<>(failures));
    }
  }

  /**
   * The writers' figures in a phase (failed purges are counted with the failed writes, as "purge
   * ...").
   */
  private static final class WriterStats {
    private long writes;
    private final Histogram latency = new Histogram(MAX_MICROS, 3);
    private final Map<String, Long> failures = new TreeMap<>();

    record Snapshot(long writes, Histogram latency, Map<String, Long> failures) {}

    synchronized void write(long micros) {
      writes++;
      latency.recordValue(Math.min(micros, MAX_MICROS));
    }

    synchronized void failure(String kind) {
      failures.merge(kind, 1L, Long::sum);
    }

    synchronized Snapshot snapshot() {
      return new Snapshot(writes, latency.copy(), new TreeMap<>(failures));
    }
  }

  // --- helpers ---

  static String consumerName(int consumer) {
    return "bench-c" + (consumer + 1);
  }

  /**
   * The first {@code count} ids {@code prefix0, prefix1, ...} of {@code collection} that land in
   * {@link #PARTITION}.
   */
  static List<String> ids(String collection, String prefix, int count) {
    List<String> out = new ArrayList<>(count);
    for (long n = 0; out.size() < count; n++) {
      String id = prefix + n;
      if (Partitioning.partitionOf(collection, id, PARTITIONS) == PARTITION) {
        out.add(id);
      }
    }
    return out;
  }

  private PartitionStatus status(Documents documents) throws Exception {
    return get(documents.status(PARTITION));
  }

  private static <T> T get(CompletionStage<T> stage) throws Exception {
    return stage.toCompletableFuture().get(ASK.toSeconds() + 5, TimeUnit.SECONDS);
  }

  /** A failure's kind: its class, unwrapped from the future's wrappers (never its message). */
  private static String kind(Throwable e) {
    while ((e instanceof ExecutionException || e instanceof CompletionException)
        && e.getCause() != null) {
      e = e.getCause();
    }
    return e.getClass().getSimpleName();
  }

  private static String describe(ConsumerReply reply) {
    return reply instanceof ConsumerRefused r
        ? r.refusal().name()
        : reply.getClass().getSimpleName();
  }

  private static double ms(Histogram h, double percentile) {
    return h.getTotalCount() == 0 ? Double.NaN : h.getValueAtPercentile(percentile) / 1000.0;
  }

  /**
   * CPU seconds used so far by each PostgreSQL backend connected to the benchmark database (this
   * query's excepted).
   */
  private Map<Long, Double> backendCpu() throws SQLException {
    Map<Long, Double> out = new TreeMap<>();
    try (Connection c = DriverManager.getConnection(benchUrl, options.user(), options.password());
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
    return PartitionBenchmark.show(benchUrl, options.user(), options.password(), setting);
  }

  private static Thread thread(String name, Runnable body) {
    Thread t = new Thread(body, name);
    t.setDaemon(true);
    t.start();
    return t;
  }

  private static <T> List<T> concat(List<T> a, List<T> b) {
    List<T> out = new ArrayList<>(a);
    out.addAll(b);
    return out;
  }
}
