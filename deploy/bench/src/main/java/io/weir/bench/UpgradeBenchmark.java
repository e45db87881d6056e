package io.weir.bench;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.sharding.partition.Partition;
import io.weir.sharding.partition.PartitionSettings;
import io.weir.sharding.partition.PartitionSharding;
import io.weir.sharding.partition.PartitionWiring;
import io.weir.sharding.partition.ReadProtocol.Document;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.nio.file.Path;
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
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.Serializer;
import org.apache.pekko.serialization.Serializers;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * Upgrading partitions whose snapshots hold every body (the format before ADR 0032): figures and a
 * check, not assertions. It stores one snapshot of the old format per partition (by default 64 of
 * ~150 MB: 150,000 documents of ~1 KB each, as the old release wrote them), then starts a node
 * process (this jar, {@link Worker}, {@code -Xmx2g}) that hosts the 64 partitions and upgrades
 * them, SIGKILLs it about halfway through the documents and starts it again: every partition must
 * end with an index-only snapshot and the old snapshot's documents in the documents table, the
 * moves cut short resumed. Prints the time, the documents moved per second, the worker's peak heap
 * and each kill's resumptions.
 *
 * <p>Run it with {@code deploy/bin/bench-upgrade.sh}.
 */
@CommandLine.Command(
    name = "bench-upgrade.sh",
    mixinStandardHelpOptions = true,
    description = "Upgrading old snapshots with bodies: 64 partitions, a SIGKILL halfway.")
public final class UpgradeBenchmark implements Callable<Integer> {
  static final String DATABASE = "weir_upgrade";
  private static final String LINE = "-".repeat(118);

  @Option(names = "--partitions", description = "partitions with an old snapshot (default 64)")
  int partitions = 64;

  @Option(names = "--documents", description = "documents per snapshot (default 150000)")
  int documents = 150_000;

  @Option(names = "--body-bytes", description = "size of a document's body (default 1000)")
  int bodyBytes = 1000;

  @Option(names = "--worker-heap", description = "the node process's -Xmx (default 2g)")
  String workerHeap = "2g";

  @Option(names = "--kill-at", description = "share of the documents moved at the kill (0.5)")
  double killAt = 0.5;

  private final String admin = System.getenv("WEIR_PG_URL");
  private final String user = System.getenv("WEIR_PG_USER");
  private final String password = System.getenv("WEIR_PG_PASSWORD");
  private String url;

  public static void main(String[] args) {
    if (System.getProperty("WEIR_LOG_LEVEL") == null && System.getenv("WEIR_LOG_LEVEL") == null) {
      System.setProperty("WEIR_LOG_LEVEL", "WARN");
    }
    System.exit(new CommandLine(new UpgradeBenchmark()).execute(args));
  }

  @Override
  public Integer call() throws Exception {
    url = PartitionBenchmark.databaseUrl(admin, DATABASE);
    System.out.println(
        "Weir old-snapshot upgrade benchmark, "
            + ZonedDateTime.now(ZoneOffset.UTC)
                .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")));
    System.out.println(LINE);
    CdcBenchmark.machine();
    PartitionBenchmark.recreateDatabase(admin, user, password, DATABASE);
    Config config = config(url, user, password);
    try (Database db = Database.create(PostgresSettings.create(config), "upgrade-migrate")) {
      SchemaMigrator.migrate(db.dataSource(), "weir");
    }
    long written = storeOldSnapshots(config);
    System.out.printf(
        Locale.ROOT,
        "old snapshots: %d partitions x %,d documents of ~%,d bytes: %,.1f MiB of snapshot rows"
            + " (%,.1f MiB each)%n",
        partitions,
        documents,
        bodyBytes,
        written / 1048576.0,
        written / 1048576.0 / partitions);
    System.out.println(LINE);
    long total = (long) partitions * documents;
    long start = System.nanoTime();
    Process first = worker();
    long killedAt = 0;
    while (true) {
      long moved = moved();
      if (moved >= killAt * total) {
        first.destroyForcibly().waitFor(60, TimeUnit.SECONDS);
        killedAt = moved;
        break;
      }
      if (!first.isAlive()) {
        throw new IllegalStateException("the worker ended before the kill: " + first.exitValue());
      }
      Thread.sleep(200);
    }
    long killNanos = System.nanoTime() - start;
    int inProgress = count("SELECT count(*) FROM weir.snapshot_upgrades");
    System.out.printf(
        Locale.ROOT,
        "SIGKILL of the node after %.1f s: %,d of %,d documents moved, %d partitions upgraded, %d"
            + " moves cut short (their progress rows left)%n",
        killNanos / 1e9,
        killedAt,
        total,
        upgraded(),
        inProgress);
    Process second = worker();
    long deadline = System.nanoTime() + TimeUnit.HOURS.toNanos(2);
    while (upgraded() < partitions) {
      if (!second.isAlive()) {
        throw new IllegalStateException("the worker ended early: " + second.exitValue());
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the upgrade did not finish within 2 hours");
      }
      Thread.sleep(500);
    }
    long nanos = System.nanoTime() - start;
    second.getOutputStream().close(); // the worker prints its peak heap and exits
    String peak = new String(second.getInputStream().readAllBytes()).trim();
    second.waitFor(120, TimeUnit.SECONDS);
    long rows = count("SELECT count(*) FROM weir.documents");
    long positions =
        count(
            "SELECT count(*) FROM weir.document_positions p JOIN weir.snapshot s ON"
                + " s.persistence_id = 'weir-partition|' || p.partition_id AND s.sequence_number ="
                + " p.applied_through");
    System.out.printf(
        Locale.ROOT,
        "upgraded: %d of %d partitions in %.1f s (%,.0f documents/s over both runs); %,d rows in"
            + " the documents table (%,d expected); %d positions at their snapshot; old snapshots"
            + " left: %d; the restarted node's heap pools peaked at %s in all%n",
        upgraded(),
        partitions,
        nanos / 1e9,
        total / (nanos / 1e9),
        rows,
        total,
        positions,
        count("SELECT count(*) FROM weir.snapshot WHERE snapshot_ser_id = 33"),
        peak);
    System.out.println(
        "load average (1/5/15 min) at the end: "
            + CdcBenchmark.loadAverage()
            + " -- above about 1 means something besides this benchmark competed for the CPUs");
    boolean complete = rows == total && upgraded() == partitions;
    PartitionBenchmark.dropDatabase(admin, user, password, DATABASE);
    return complete ? 0 : 1;
  }

  /** Stores the old-format snapshots; the bytes written. */
  private long storeOldSnapshots(Config config) throws Exception {
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "upgrade-store", config);
    long bytes = 0;
    try (Connection c = DriverManager.getConnection(url, user, password);
        PreparedStatement ps =
            c.prepareStatement(
                "INSERT INTO weir.snapshot (persistence_id, sequence_number, created,"
                    + " snapshot_ser_id, snapshot_ser_manifest, snapshot_payload)"
                    + " VALUES (?, ?, 0, ?, ?, ?)")) {
      String pad = "x".repeat(Math.max(1, bodyBytes - 30));
      for (int p = 0; p < partitions; p++) {
        HashMap<String, Document> docs = new HashMap<>();
        for (int i = 0; i < documents; i++) {
          String id = Integer.toString(1_000_000 + i);
          docs.put(
              "bench\0" + id,
              new Document(
                  "bench", id, 1, "{\"id\":\"" + id + "\",\"pad\":\"" + pad + "\"}", false));
        }
        Partition.State old =
            new Partition.State(
                docs,
                1,
                1,
                0,
                documents / 1000 + 1,
                new LinkedHashMap<>(),
                new HashMap<>(),
                new HashMap<>(),
                new TreeMap<>(),
                "incarnation-" + p,
                0,
                0,
                new Partition.SnapshotMark(0, 0),
                new HashMap<>(),
                new HashMap<>(),
                new HashMap<>());
        Serializer serializer = SerializationExtension.get(system).findSerializerFor(old);
        byte[] payload = serializer.toBinary(old);
        ps.setString(1, Partition.persistenceId(p).id());
        ps.setLong(2, documents / 1000 + 1);
        ps.setInt(3, serializer.identifier());
        ps.setString(4, Serializers.manifestFor(serializer, old));
        ps.setBytes(5, payload);
        ps.executeUpdate();
        bytes += payload.length;
        if ((p + 1) % 8 == 0) {
          System.out.printf("   stored %d of %d old snapshots%n", p + 1, partitions);
        }
      }
    } finally {
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(60, TimeUnit.SECONDS);
    }
    return bytes;
  }

  /** A node process of this jar hosting the partitions ({@link Worker}). */
  private Process worker() throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    ProcessBuilder pb =
        new ProcessBuilder(
                java,
                "-Xmx" + workerHeap,
                "-cp",
                System.getProperty("java.class.path"),
                Worker.class.getName(),
                Integer.toString(partitions))
            .redirectError(ProcessBuilder.Redirect.INHERIT);
    pb.environment().put("WEIR_UPGRADE_URL", url);
    return pb.start();
  }

  private long moved() throws SQLException {
    long done = count("SELECT coalesce(sum(documents_done), 0) FROM weir.snapshot_upgrades");
    return done + (long) upgraded() * documents;
  }

  private int upgraded() throws SQLException {
    return count("SELECT count(*) FROM weir.snapshot WHERE snapshot_ser_id <> 33");
  }

  private int count(String query) throws SQLException {
    try (Connection c = DriverManager.getConnection(url, user, password);
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(query)) {
      rs.next();
      return (int) rs.getLong(1);
    }
  }

  static Config config(String url, String user, String password) {
    return ConfigFactory.load(
        ConfigFactory.parseMap(
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
                    "WARNING"))
            .withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
  }

  /**
   * The node process: a one-node cluster hosting the partitions as a node does (two upgrades at a
   * time), all started at once; runs until its standard input closes, then prints its peak heap.
   */
  public static final class Worker {
    public static void main(String[] args) throws Exception {
      System.setProperty("WEIR_LOG_LEVEL", "WARN");
      int partitions = Integer.parseInt(args[0]);
      Config config =
          config(
              System.getenv("WEIR_UPGRADE_URL"),
              System.getenv("WEIR_PG_USER"),
              System.getenv("WEIR_PG_PASSWORD"));
      ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "upgrade-worker", config);
      Cluster cluster = Cluster.get(system);
      cluster.manager().tell(Join.create(cluster.selfMember().address()));
      while (cluster.selfMember().status() != MemberStatus.up()) {
        Thread.sleep(20);
      }
      Database documents =
          Database.create(PostgresSettings.create(config).withPoolSize(8), "upgrade-documents");
      ExecutorService io = Executors.newFixedThreadPool(8);
      ExecutorService upgrades = Executors.newFixedThreadPool(2);
      PartitionSharding.init(
          system,
          PartitionWiring.jdbc(
              PartitionSettings.DEFAULTS, documents.dataSource(), "weir", io, upgrades));
      List<CompletionStage<PartitionStatus>> started = new ArrayList<>();
      for (int p = 0; p < partitions; p++) {
        started.add(
            PartitionSharding.partition(system, p)
                .<PartitionStatus>ask(GetStatus::new, Duration.ofMinutes(30)));
      }
      while (System.in.read() >= 0) {
        // Runs until the benchmark closes the pipe (or kills the process).
      }
      long peak = 0;
      for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
        if (pool.getType() == MemoryType.HEAP) {
          peak += pool.getPeakUsage().getUsed();
        }
      }
      System.out.printf(Locale.ROOT, "%,.0f MiB%n", peak / 1048576.0);
      System.out.flush();
      system.terminate();
      io.shutdownNow();
      upgrades.shutdownNow();
      documents.close();
      System.exit(0);
    }
  }
}
