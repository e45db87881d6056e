package io.weir.bench;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.PostgresTls;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.cdc.CdcPipeline;
import io.weir.persistence.cdc.PipelineSettings;
import io.weir.persistence.cdc.PipelineStatus;
import io.weir.persistence.cdc.sink.CheckpointStore;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.persistence.cdc.source.StartMode;
import io.weir.sharding.cdc.PartitionChannel;
import io.weir.sharding.cdc.PartitionSink;
import io.weir.sharding.partition.Partition;
import io.weir.sharding.partition.PartitionEntity;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.PartitionSettings;
import io.weir.sharding.partition.PartitionSharding;
import io.weir.sharding.partition.PartitionWiring;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.SqlJournalPruner;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.lang.management.ManagementFactory;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * The partition kernel at scale (issue 22, ADR 0032): figures, not assertions. A source table of N
 * rows of about 1 KB on a PostgreSQL of its own is loaded through the CDC partition sink (an
 * initial snapshot) into 64 partitions of one node in this JVM, whose journal and documents table
 * are on the private PostgreSQL. It prints the load rate (to the moment every partition's documents
 * table holds every row), the disk used, the live heap per document (after full collections, minus
 * the same with the 64 partitions empty), the snapshot bytes per document, and the recovery of the
 * largest partition in a new actor system, under load on other partitions: the time until a read of
 * its last acknowledged write answers it and a write is accepted, with the latest snapshot and few
 * events after it, and with 10,000 events after it.
 *
 * <p>Run it with {@code deploy/bin/bench-scale.sh} (it starts the second PostgreSQL). Never prints
 * a document body.
 */
@CommandLine.Command(
    name = "bench-scale.sh",
    mixinStandardHelpOptions = true,
    description = "The partition kernel at scale: load, disk, heap, snapshots and recovery.")
public final class ScaleBenchmark implements Callable<Integer> {
  static final String JOURNAL = "weir_scale";
  static final String SOURCE = "weir_scale_src";
  static final String TABLE = "scale";
  static final String PUBLICATION = "scale_pub";
  private static final String LINE = "-".repeat(118);
  private static final Duration ASK = Duration.ofSeconds(60);

  @Option(names = "--documents", description = "rows of the source table (default 10000000)")
  long documents = 10_000_000;

  @Option(names = "--partitions", description = "partitions (default 64)")
  int partitions = 64;

  @Option(names = "--body-bytes", description = "size of a row's padding (default 1000)")
  int bodyBytes = 1000;

  @Option(names = "--ids", description = "number (7 digits) or uuid (36 characters)")
  String ids = "number";

  @Option(names = "--recoveries", description = "restarts per recovery case (default 3)")
  int recoveries = 3;

  @Option(names = "--events-after", description = "events after the snapshot (default 10000)")
  int eventsAfter = 10_000;

  @Option(names = "--reuse-source", description = "keep a source table of the right size")
  boolean reuseSource;

  @Option(names = "--keep", description = "keep both databases afterwards")
  boolean keep;

  private final String journalAdmin = env("WEIR_PG_URL");
  private final String journalUser = env("WEIR_PG_USER");
  private final String journalPassword = env("WEIR_PG_PASSWORD");
  private final String sourceAdmin = env("WEIR_SOURCE_PG_URL");
  private final String sourceUser = env("WEIR_SOURCE_PG_USER");
  private final String sourcePassword = env("WEIR_SOURCE_PG_PASSWORD");
  private String journalUrl;
  private String sourceUrl;

  public static void main(String[] args) {
    if (System.getProperty("WEIR_LOG_LEVEL") == null && System.getenv("WEIR_LOG_LEVEL") == null) {
      System.setProperty("WEIR_LOG_LEVEL", "WARN");
    }
    System.exit(new CommandLine(new ScaleBenchmark()).execute(args));
  }

  private static String env(String name) {
    String v = System.getenv(name);
    if (v == null || v.isBlank()) {
      throw new IllegalStateException(name + " is not set (run through deploy/bin/bench-scale.sh)");
    }
    return v;
  }

  @Override
  public Integer call() throws Exception {
    journalUrl = PartitionBenchmark.databaseUrl(journalAdmin, JOURNAL);
    sourceUrl = PartitionBenchmark.databaseUrl(sourceAdmin, SOURCE);
    System.out.println(
        "Weir scale benchmark, "
            + ZonedDateTime.now(ZoneOffset.UTC)
                .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")));
    System.out.println(LINE);
    CdcBenchmark.machine();
    System.out.printf(
        Locale.ROOT,
        "documents:     %,d rows of ~%,d bytes (%s ids) in %d partitions of one node%n",
        documents,
        bodyBytes,
        ids,
        partitions);
    System.out.println(LINE);
    prepareSource();
    PartitionBenchmark.recreateDatabase(journalAdmin, journalUser, journalPassword, JOURNAL);
    Config config = config("weir-scale", true);
    try (Database state = Database.create(PostgresSettings.create(config), "scale-state")) {
      SchemaMigrator.migrate(state.dataSource(), "weir");
    }
    String largestId;
    long largestSeq;
    int largest;
    try (Node node = new Node(config, true)) {
      long baseline = usedHeapAfterGc();
      System.out.printf(
          Locale.ROOT,
          "heap with the %d partitions running and empty: %,.1f MiB%n",
          partitions,
          mib(baseline));
      long loadNanos = load(node);
      long heap = usedHeapAfterGc();
      System.out.println(LINE);
      System.out.printf(
          Locale.ROOT,
          "load: %,d rows in %.1f s = %,.0f rows/s (initial snapshot through the partition sink, to"
              + " every partition's documents table holding every row)%n",
          documents,
          loadNanos / 1e9,
          documents / (loadNanos / 1e9));
      long[] cache = node.cacheHeap();
      System.out.printf(
          Locale.ROOT,
          "heap: %,.1f MiB loaded - %,.1f MiB empty = %,.1f MiB for %,d documents: %.1f bytes per"
              + " document (the body caches included, at most %,.1f MiB of it = %.1f bytes per"
              + " document); max heap %,d MiB%n",
          mib(heap),
          mib(baseline),
          mib(heap - baseline),
          documents,
          (double) (heap - baseline) / documents,
          mib(cache[0]),
          (double) cache[0] / documents,
          Runtime.getRuntime().maxMemory() >> 20);
      long[] snapshots = snapshotBytes();
      System.out.printf(
          Locale.ROOT,
          "snapshots: the latest of each partition hold %,d bytes in all: %.1f bytes per document%n",
          snapshots[0],
          (double) snapshots[0] / documents);
      disk();
      int[] biggest = node.largestPartition();
      largest = biggest[0];
      System.out.printf(
          Locale.ROOT, "largest partition: %d with %,d documents%n", largest, biggest[1]);
      String[] last = node.lastWrite(largest);
      largestId = last[0];
      largestSeq = Long.parseLong(last[1]);
    }
    System.out.println(LINE);
    System.out.printf(
        "recovery of partition %d in a new actor system (%d times per case), 8 writers on other"
            + " partitions meanwhile: from the first message to it until a read of its last"
            + " acknowledged write answered it and a write was accepted%n",
        largest, recoveries);
    Last acknowledged = new Last(largestId, largestSeq);
    List<Double> plain = new ArrayList<>();
    for (int r = 1; r <= recoveries; r++) {
      plain.add(recover(largest, acknowledged, "latest snapshot", r));
    }
    long snapshotAt = latestSnapshot(largest);
    try (Node node = new Node(config("weir-scale-after", true), false, false)) {
      SplittableRandom random = new SplittableRandom(3);
      for (int i = 0; i < eventsAfter; i++) {
        String id = "after-" + (i % 1_000);
        FrameReply reply = node.write(largest, id, random);
        acknowledged = new Last(id, ((Applied) reply).revisions().get(0));
      }
      node.awaitTable(largest);
    }
    List<Double> replay = new ArrayList<>();
    for (int r = 1; r <= recoveries; r++) {
      // Before every restart: a recovered partition snapshots at its first write after it.
      deleteSnapshotsAfter(largest, snapshotAt);
      replay.add(
          recover(
              largest,
              acknowledged,
              String.format(Locale.ROOT, "snapshot + %,d events", eventsAfter),
              r));
    }
    System.out.println(LINE);
    System.out.printf(
        Locale.ROOT,
        "recovery medians: %.3f s from the latest snapshot, %.3f s with %,d events after it%n",
        median(plain),
        median(replay),
        eventsAfter);
    System.out.println(
        "load average (1/5/15 min) at the end: "
            + CdcBenchmark.loadAverage()
            + " -- above about 1 means something besides this benchmark competed for the CPUs");
    if (!keep) {
      PartitionBenchmark.dropDatabase(journalAdmin, journalUser, journalPassword, JOURNAL);
    }
    return 0;
  }

  /** The last acknowledged write of the measured partition: its id and revision. */
  private record Last(String id, long revision) {}

  // --- the source ---

  private void prepareSource() throws SQLException {
    if (reuseSource && sourceRows() == documents) {
      System.out.printf(
          Locale.ROOT, "source: reusing %s.%s of %,d rows%n", SOURCE, TABLE, documents);
      dropSlots();
      return;
    }
    PartitionBenchmark.recreateDatabase(sourceAdmin, sourceUser, sourcePassword, SOURCE);
    long start = System.nanoTime();
    try (Connection c = DriverManager.getConnection(sourceUrl, sourceUser, sourcePassword);
        Statement s = c.createStatement()) {
      s.execute(
          "CREATE TABLE public."
              + TABLE
              + " (id text PRIMARY KEY, n bigint NOT NULL, pad text NOT NULL)");
      long chunk = 500_000;
      for (long from = 0; from < documents; from += chunk) {
        long to = Math.min(documents, from + chunk) - 1;
        String id =
            ids.equals("uuid")
                ? "md5(g::text)::uuid::text"
                : "(1000000 + g)::text"; // 7 digits up to 8,999,999, 8 after
        s.execute(
            "INSERT INTO public."
                + TABLE
                + " SELECT "
                + id
                + ", g, repeat(md5(g::text), "
                + Math.max(1, bodyBytes / 32)
                + ") FROM generate_series("
                + from
                + ", "
                + to
                + ") g");
        System.out.printf(
            Locale.ROOT,
            "source: %,d of %,d rows (%.0f s)%n",
            to + 1,
            documents,
            (System.nanoTime() - start) / 1e9);
      }
      s.execute("CREATE PUBLICATION " + PUBLICATION + " FOR TABLE public." + TABLE);
      s.execute("VACUUM ANALYZE public." + TABLE);
    }
  }

  private long sourceRows() {
    try (Connection c = DriverManager.getConnection(sourceUrl, sourceUser, sourcePassword);
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT count(*) FROM public." + TABLE)) {
      rs.next();
      return rs.getLong(1);
    } catch (SQLException e) {
      return -1;
    }
  }

  private void dropSlots() throws SQLException {
    try (Connection c = DriverManager.getConnection(sourceUrl, sourceUser, sourcePassword);
        Statement s = c.createStatement()) {
      s.execute(
          "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
              + " WHERE database = current_database()");
    }
  }

  // --- the load ---

  private long load(Node node) throws Exception {
    String slot = "weir_scale_" + System.nanoTime() % 100_000;
    PipelineSettings settings =
        PipelineSettings.of("scale", slot, List.of(PUBLICATION)).toBuilder()
            .startMode(StartMode.SNAPSHOT)
            .statusInterval(Duration.ofSeconds(10))
            .build();
    ActorRef<CdcPipeline.Command> pipeline =
        node.system.systemActorOf(
            CdcPipeline.create(
                settings,
                new SourceSettings(sourceUrl, sourceUser, sourcePassword, PostgresTls.NONE),
                new PartitionSink(
                    PartitionChannel.sharded(node.system),
                    PartitionSink.Settings.defaults(partitions),
                    new CheckpointStore(node.state.dataSource(), "weir")),
                node.state.dataSource(),
                "weir"),
            "scale-pipeline",
            Props.empty());
    long start = System.nanoTime();
    ask(node.system, pipeline, CdcPipeline.Start::new);
    long nextReport = start;
    try {
      while (true) {
        long[] held = node.held();
        PipelineStatus status = ask(node.system, pipeline, CdcPipeline.GetStatus::new);
        if (status.state().equals("halted")) {
          throw new IllegalStateException(
              "the pipeline halted (" + status.reason() + "): " + status.detail());
        }
        long now = System.nanoTime();
        if (held[0] == documents && held[1] == 0) {
          return now - start;
        }
        if (now >= nextReport) {
          System.out.printf(
              Locale.ROOT,
              "   %4.0f s: %,d documents in the partitions (%,.0f/s), %,d events not yet in the"
                  + " table, pipeline %s, heap %,.0f MiB%n",
              (now - start) / 1e9,
              held[0],
              held[0] / ((now - start) / 1e9),
              held[1],
              status.state(),
              mib(ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed()));
          nextReport = now + TimeUnit.SECONDS.toNanos(30);
        }
        if (now - start > TimeUnit.HOURS.toNanos(3)) {
          throw new IllegalStateException("the load did not finish within 3 hours");
        }
        Thread.sleep(1_000);
      }
    } finally {
      ask(node.system, pipeline, CdcPipeline.Stop::new);
    }
  }

  // --- figures read from PostgreSQL ---

  /** {bytes of the latest snapshot of every partition}. */
  private long[] snapshotBytes() throws SQLException {
    try (Connection c = DriverManager.getConnection(journalUrl, journalUser, journalPassword);
        Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT coalesce(sum(octet_length(snapshot_payload)), 0) FROM weir.snapshot s"
                    + " WHERE sequence_number = (SELECT max(sequence_number) FROM weir.snapshot"
                    + " t WHERE t.persistence_id = s.persistence_id)")) {
      rs.next();
      return new long[] {rs.getLong(1)};
    }
  }

  private void disk() throws SQLException {
    try (Connection c = DriverManager.getConnection(journalUrl, journalUser, journalPassword);
        Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT pg_database_size(current_database()),"
                    + " pg_total_relation_size('weir.event_journal'),"
                    + " pg_total_relation_size('weir.documents'),"
                    + " pg_total_relation_size('weir.snapshot'),"
                    + " (SELECT coalesce(sum(size), 0) FROM pg_ls_waldir())")) {
      rs.next();
      System.out.printf(
          Locale.ROOT,
          "disk, Weir's PostgreSQL: database %,.2f GiB (journal %,.2f GiB after pruning, documents"
              + " table %,.2f GiB, snapshots %,.1f MiB), WAL directory %,.2f GiB%n",
          gib(rs.getLong(1)),
          gib(rs.getLong(2)),
          gib(rs.getLong(3)),
          mib(rs.getLong(4)),
          gib(rs.getLong(5)));
    }
    try (Connection c = DriverManager.getConnection(sourceUrl, sourceUser, sourcePassword);
        Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT pg_database_size(current_database()),"
                    + " (SELECT coalesce(sum(size), 0) FROM pg_ls_waldir())")) {
      rs.next();
      System.out.printf(
          Locale.ROOT,
          "disk, the source's PostgreSQL: database %,.2f GiB, WAL directory %,.2f GiB (the slot's"
              + " retained WAL included)%n",
          gib(rs.getLong(1)),
          gib(rs.getLong(2)));
    }
  }

  private long latestSnapshot(int partition) throws SQLException {
    try (Connection c = DriverManager.getConnection(journalUrl, journalUser, journalPassword);
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT coalesce(max(sequence_number), 0) FROM weir.snapshot"
                    + " WHERE persistence_id = ?")) {
      ps.setString(1, Partition.persistenceId(partition).id());
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  private void deleteSnapshotsAfter(int partition, long sequence) throws SQLException {
    PartitionBenchmark.deleteSnapshotsAfter(
        journalUrl, journalUser, journalPassword, partition, sequence);
  }

  // --- recovery ---

  /**
   * Starts partition {@code n} (and 8 writers on other partitions) in a new actor system; seconds
   * from its first message until {@code last} is read back and a write is accepted.
   */
  private double recover(int n, Last last, String label, int round) throws Exception {
    try (Node node = new Node(config("weir-scale-recovery-" + round, false), false)) {
      int other = (n + 1) % partitions;
      node.status(other); // the pools and the journal's connections are up
      AtomicBoolean loading = new AtomicBoolean(true);
      ExecutorService load = Executors.newFixedThreadPool(8);
      for (int w = 0; w < 8; w++) {
        int writer = w;
        load.submit(
            () -> {
              SplittableRandom random = new SplittableRandom(writer);
              long i = 0;
              while (loading.get()) {
                int p = (n + 1 + (int) (i++ % (partitions - 1))) % partitions;
                try {
                  node.write(p, "load-" + writer + "-" + (i % 100), random);
                } catch (Exception e) {
                  // The load goes on; only the recovery is measured.
                }
              }
              return null;
            });
      }
      Thread.sleep(2_000); // the load is running
      long start = System.nanoTime();
      DocumentReply read = node.ask(n, r -> new GetDocument("public." + TABLE, last.id(), r));
      if (read.document().isEmpty() || read.document().get().revision() != last.revision()) {
        throw new IllegalStateException("the last acknowledged write was not read back");
      }
      FrameReply write = node.write(n, "recovered", new SplittableRandom(round));
      long nanos = System.nanoTime() - start;
      if (!(write instanceof Applied)) {
        throw new IllegalStateException("a write after recovery was answered " + write);
      }
      loading.set(false);
      load.shutdown();
      load.awaitTermination(60, TimeUnit.SECONDS);
      PartitionStatus s = node.status(n);
      System.out.printf(
          Locale.ROOT,
          "   %-26s restart %d: %.3f s (%,d documents, %,d journal events)%n",
          label,
          round,
          nanos / 1e9,
          s.documents(),
          s.journalEvents());
      return nanos / 1e9;
    }
  }

  // --- the node ---

  private Config config(String name, boolean cluster) {
    return ConfigFactory.load(
        ConfigFactory.parseMap(
                Map.of(
                    "weir.postgres.url",
                    journalUrl,
                    "weir.postgres.user",
                    journalUser,
                    "weir.postgres.password",
                    journalPassword,
                    "pekko.actor.provider",
                    cluster ? "cluster" : "local",
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
                    "WARNING"))
            .withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
  }

  /**
   * A node: one-node cluster with sharded partitions (the load), or a plain actor system whose
   * partitions are spawned directly (the recoveries: nothing but the partitions, no cluster).
   */
  final class Node implements AutoCloseable {
    final ActorSystem<Void> system;
    final Database state;
    private final Database documentsPool;
    private final ExecutorService documentsIo = Executors.newFixedThreadPool(8);
    private final PartitionWiring wiring;
    private final boolean sharded;
    private final Map<Integer, ActorRef<Command>> spawned = new HashMap<>();

    Node(Config config, boolean sharded) throws Exception {
      this(config, sharded, true);
    }

    /**
     * @param prune delete purged journal rows and old snapshots as a node does; off while writing
     *     the events that recovery is to replay (their snapshots are deleted afterwards, so the
     *     journal must keep every event after the snapshot kept)
     */
    Node(Config config, boolean sharded, boolean prune) throws Exception {
      this.sharded = sharded;
      this.system = ActorSystem.create(Behaviors.empty(), "weir-scale", config);
      this.state = Database.create(PostgresSettings.create(config), "scale-state");
      this.documentsPool =
          Database.create(PostgresSettings.create(config).withPoolSize(8), "scale-documents");
      PartitionWiring jdbc =
          PartitionWiring.jdbc(
              PartitionSettings.DEFAULTS,
              documentsPool.dataSource(),
              "weir",
              documentsIo,
              documentsIo);
      this.wiring =
          prune
              ? jdbc.withPruner(new SqlJournalPruner(state.dataSource(), "weir", documentsIo))
              : jdbc;
      if (sharded) {
        Cluster cluster = Cluster.get(system);
        cluster.manager().tell(Join.create(cluster.selfMember().address()));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (cluster.selfMember().status() != MemberStatus.up()) {
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException("the one-node cluster did not come up within 30 s");
          }
          Thread.sleep(20);
        }
        PartitionSharding.init(system, wiring);
        for (int p = 0; p < partitions; p++) {
          status(p);
        }
      }
    }

    <R> R ask(int n, Function<ActorRef<R>, Command> make) throws Exception {
      if (sharded) {
        return PartitionChannel.direct(
                PartitionSharding.partition(system, n).<R>ask(make::apply, ASK))
            .get(ASK.toSeconds() + 5, TimeUnit.SECONDS);
      }
      ActorRef<Command> ref;
      synchronized (spawned) {
        ref =
            spawned.computeIfAbsent(
                n,
                k ->
                    system.systemActorOf(
                        PartitionEntity.create(k, wiring), "partition-" + k, Props.empty()));
      }
      CompletionStage<R> reply = AskPattern.ask(ref, make::apply, ASK, system.scheduler());
      return reply.toCompletableFuture().get(ASK.toSeconds() + 5, TimeUnit.SECONDS);
    }

    PartitionStatus status(int n) throws Exception {
      return this.<PartitionStatus>ask(n, GetStatus::new);
    }

    FrameReply write(int n, String id, SplittableRandom random) throws Exception {
      String body = "{\"id\":\"" + id + "\",\"n\":" + random.nextInt(1_000_000) + "}";
      return this.<FrameReply>ask(
          n,
          r ->
              new ApplyFrame(
                  "once:scale-" + System.nanoTime(),
                  List.<Mutation>of(new Upsert("public." + TABLE, id, body, Optional.empty())),
                  Optional.empty(),
                  r));
    }

    /** {documents held over the partitions, events not yet in their documents tables}. */
    long[] held() throws Exception {
      long docs = 0;
      long lag = 0;
      for (int p = 0; p < partitions; p++) {
        PartitionStatus s = status(p);
        docs += s.documents();
        lag +=
            s.table() == null || !s.table().state().equals("running")
                ? 1
                : s.journalEvents() - s.table().appliedThrough();
      }
      return new long[] {docs, lag};
    }

    /** {the partition with the most documents, its documents}. */
    int[] largestPartition() throws Exception {
      int best = 0;
      long most = -1;
      for (int p = 0; p < partitions; p++) {
        long d = status(p).documents();
        if (d > most) {
          most = d;
          best = p;
        }
      }
      return new int[] {best, (int) most};
    }

    /** A document of partition {@code n} and its revision, written now: the last acknowledged. */
    String[] lastWrite(int n) throws Exception {
      FrameReply reply = write(n, "last", new SplittableRandom(1));
      awaitTable(n);
      return new String[] {"last", Long.toString(((Applied) reply).revisions().get(0))};
    }

    void awaitTable(int n) throws Exception {
      long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(5);
      while (true) {
        PartitionStatus s = status(n);
        if (s.table() != null && s.table().appliedThrough() == s.journalEvents()) {
          return;
        }
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("the documents table did not catch up");
        }
        Thread.sleep(50);
      }
    }

    /** The body caches' configured bound over the partitions: their heap at most. */
    long[] cacheHeap() {
      return new long[] {wiring.settings().bodyCacheBytes() * partitions};
    }

    @Override
    public void close() throws Exception {
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(60, TimeUnit.SECONDS);
      documentsIo.shutdownNow();
      documentsPool.close();
      state.close();
    }
  }

  private static <T> T ask(
      ActorSystem<?> system,
      ActorRef<CdcPipeline.Command> target,
      Function<ActorRef<T>, CdcPipeline.Command> make)
      throws Exception {
    CompletionStage<T> reply = AskPattern.ask(target, make::apply, ASK, system.scheduler());
    return reply.toCompletableFuture().get(ASK.toSeconds(), TimeUnit.SECONDS);
  }

  /** Used heap after full collections: the lowest of several readings. */
  static long usedHeapAfterGc() throws InterruptedException {
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 4; i++) {
      System.gc();
      Thread.sleep(200);
      used = Math.min(used, ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed());
    }
    return used;
  }

  private static double median(List<Double> values) {
    List<Double> v = new ArrayList<>(values);
    v.sort(Double::compare);
    int m = v.size() / 2;
    return v.size() % 2 == 1 ? v.get(m) : (v.get(m - 1) + v.get(m)) / 2;
  }

  private static double mib(long bytes) {
    return bytes / 1024.0 / 1024.0;
  }

  private static double gib(long bytes) {
    return bytes / 1024.0 / 1024.0 / 1024.0;
  }
}
