package io.weir.sharding.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.cdc.CdcPipeline;
import io.weir.persistence.cdc.PipelineSettings;
import io.weir.persistence.cdc.PipelineStatus;
import io.weir.persistence.cdc.sink.CheckpointStore;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.persistence.cdc.source.StartMode;
import io.weir.persistence.testing.TestPorts;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.partition.Partitioning;
import io.weir.sharding.partition.Partition;
import io.weir.sharding.partition.PartitionProtocol.Write;
import io.weir.sharding.partition.PartitionSettings;
import io.weir.sharding.partition.PartitionSharding;
import io.weir.sharding.partition.PartitionWiring;
import io.weir.sharding.partition.ReadProtocol.Document;
import io.weir.sharding.partition.ReadProtocol.DocumentsReply;
import io.weir.sharding.partition.ReadProtocol.GetDocuments;
import io.weir.sharding.partition.SqlDocumentTable;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import java.util.function.IntPredicate;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.EventEnvelope;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.stream.javadsl.Sink;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A PostgreSQL table streamed into partitions on a one-node cluster (Cluster Sharding, the JDBC
 * journal in PostgreSQL): an initial snapshot, then inserts, updates, key changes, deletes and a
 * truncate. Afterwards the documents equal the table, and every committed row change is in its
 * partition's outbox exactly once, in commit order.
 */
class PartitionSinkIT {
  private static final int PARTITIONS = 8;
  private static final ObjectMapper JSON = new ObjectMapper();

  private TestPostgres.TestDatabase db;
  private Database state;
  private ActorTestKit kit;
  private String slot;

  @BeforeEach
  void start() throws Exception {
    db = TestPostgres.server().freshDatabase("partition_sink_it");
    Config config =
        ConfigFactory.parseString(
                """
            pekko.actor.provider = cluster
            pekko.cluster.roles = [server]
            pekko.cluster.jmx.multi-mbeans-in-same-jvm = on
            pekko.cluster.sharding.passivation.strategy = none
            """)
            .withFallback(db.config())
            .withFallback(ConfigFactory.parseResources("weir-persistence.conf"));
    config = ConfigFactory.load(config);
    state = Database.create(PostgresSettings.create(config), "partition-sink-it");
    SchemaMigrator.migrate(state.dataSource(), "weir");
    kit = TestPorts.kit("partition-sink-it", config);
    Cluster.get(kit.system())
        .manager()
        .tell(Join.create(Cluster.get(kit.system()).selfMember().address()));
    slot = "weir_it_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    sql(
        "CREATE TABLE public.orders (id int PRIMARY KEY, tenant text NOT NULL, note text, amount numeric(12,2), doc jsonb)",
        "CREATE TABLE public.lines (order_id int, line int, qty int, PRIMARY KEY (order_id, line))",
        "CREATE PUBLICATION weir_pub FOR TABLE public.orders, public.lines");
  }

  @AfterEach
  void stop() {
    kit.shutdownTestKit();
    documents.shutdownNow();
    state.close();
    db.close();
  }

  private final java.util.concurrent.ExecutorService documents =
      java.util.concurrent.Executors.newFixedThreadPool(4);

  /** The partitions as the node builds them: documents in the table, read from it. */
  private PartitionWiring wiring(PartitionSettings settings) {
    return PartitionWiring.inMemory(settings)
        .withTable(new SqlDocumentTable(state.dataSource(), "weir", documents))
        .withQueryJournal(
            org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal.Identifier());
  }

  private void sql(String... statements) throws Exception {
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      for (String q : statements) {
        s.execute(q);
      }
    }
  }

  private ActorRef<CdcPipeline.Command> pipeline(PartitionSink sink, StartMode mode) {
    PipelineSettings settings =
        PipelineSettings.of("orders_feed", slot, List.of("weir_pub")).toBuilder()
            .startMode(mode)
            .minBackoff(Duration.ofMillis(200))
            .maxBackoff(Duration.ofSeconds(1))
            .batchMaxTransactions(50)
            .batchMaxDelay(Duration.ofMillis(5))
            .excludedSchemas(List.of("weir"))
            .build();
    SourceSettings source =
        new SourceSettings(db.url(), db.server().user(), db.server().password());
    ActorRef<CdcPipeline.Command> p =
        kit.spawn(CdcPipeline.create(settings, source, sink, state.dataSource(), "weir"));
    var probe = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Start(probe.ref()));
    probe.receiveMessage(Duration.ofSeconds(30));
    return p;
  }

  private PipelineStatus status(ActorRef<CdcPipeline.Command> p) {
    var probe = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.GetStatus(probe.ref()));
    return probe.receiveMessage(Duration.ofSeconds(10));
  }

  private PartitionSink sink(PartitionChannel channel) {
    PartitionSink.Settings settings =
        new PartitionSink.Settings(
            PARTITIONS,
            Map.of("public.lines", "lines"),
            Map.of("public.lines", List.of("order_id")),
            Map.of("public.big", List.of("id")),
            2,
            1 << 20,
            64,
            Duration.ofSeconds(5));
    return new PartitionSink(channel, settings, new CheckpointStore(state.dataSource(), "weir"));
  }

  /** A workload of {@code transactions} random transactions; returns the row changes it made. */
  private int workload(int transactions, long seed) throws Exception {
    Random random = new Random(seed);
    int changes = 0;
    try (Connection c = db.connect()) {
      c.setAutoCommit(false);
      Statement s = c.createStatement();
      for (int t = 0; t < transactions; t++) {
        int statements = 1 + random.nextInt(4);
        for (int i = 0; i < statements; i++) {
          int id = random.nextInt(60);
          int op = random.nextInt(6);
          if (op <= 1) {
            changes +=
                s.executeUpdate(
                    "INSERT INTO public.orders VALUES ("
                        + id
                        + ", 't"
                        + (id % 5)
                        + "', 'n"
                        + t
                        + "-"
                        + i
                        + "', "
                        + (id * 1.5)
                        + ", '{\"k\": ["
                        + t
                        + "]}') ON CONFLICT (id) DO NOTHING");
          } else if (op == 2) {
            changes +=
                s.executeUpdate(
                    "UPDATE public.orders SET note = 'u"
                        + t
                        + "-"
                        + i
                        + "', amount = amount + 1 WHERE id = "
                        + id);
          } else if (op == 3) {
            changes += s.executeUpdate("DELETE FROM public.orders WHERE id = " + id);
          } else if (op == 4) {
            changes +=
                s.executeUpdate(
                    "INSERT INTO public.lines VALUES ("
                        + id
                        + ", "
                        + t
                        + ", "
                        + i
                        + ") ON CONFLICT DO NOTHING");
          } else {
            // A key change: the document moves (delete + insert), possibly to another partition.
            changes +=
                2
                    * s.executeUpdate(
                        "UPDATE public.lines SET order_id = order_id + 100 WHERE order_id = " + id);
          }
        }
        c.commit();
      }
    }
    return changes;
  }

  private Map<String, String> tableAsDocuments() throws Exception {
    Map<String, String> out = new TreeMap<>();
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT 'public.orders', id::text, json_build_object('id', id, 'tenant', tenant, 'note', note, 'amount', amount, 'doc', doc)::text FROM public.orders "
                        + "UNION ALL SELECT 'lines', json_build_array(order_id::text, line::text)::text, "
                        + "json_build_object('order_id', order_id, 'line', line, 'qty', qty)::text FROM public.lines")) {
      while (rs.next()) {
        out.put(
            rs.getString(1) + "|" + canonicalId(rs.getString(2)),
            JSON.readTree(rs.getString(3)).toString());
      }
    }
    return out;
  }

  private static String canonicalId(String id) throws Exception {
    return id.startsWith("[") ? JSON.readTree(id).toString() : id;
  }

  private Map<String, String> liveDocuments() throws Exception {
    return liveDocuments(p -> true);
  }

  /** The live documents of the partitions {@code which} accepts. */
  private Map<String, String> liveDocuments(IntPredicate which) throws Exception {
    Map<String, String> out = new TreeMap<>();
    for (String collection : List.of("public.orders", "lines")) {
      for (int p = 0; p < PARTITIONS; p++) {
        if (!which.test(p)) {
          continue;
        }
        String after = null;
        while (true) {
          String from = after;
          int n = p;
          DocumentsReply reply =
              PartitionSharding.partition(kit.system(), n)
                  .<DocumentsReply>ask(
                      r -> new GetDocuments(collection, from, 1000, r), Duration.ofSeconds(10))
                  .toCompletableFuture()
                  .get();
          for (Document d : reply.documents()) {
            if (!d.deleted()) {
              out.put(collection + "|" + d.id(), JSON.readTree(d.body()).toString());
            }
            after = d.id();
          }
          if (!reply.more()) {
            break;
          }
        }
      }
    }
    return out;
  }

  private List<Partition.OutboxEntry> outbox(int partition) throws Exception {
    JdbcReadJournal journal =
        PersistenceQuery.get(kit.system())
            .getReadJournalFor(JdbcReadJournal.class, JdbcReadJournal.Identifier());
    List<EventEnvelope> events =
        journal
            .currentEventsByPersistenceId(
                Partition.persistenceId(partition).id(), 0, Long.MAX_VALUE)
            .runWith(Sink.seq(), kit.system())
            .toCompletableFuture()
            .get();
    List<Partition.OutboxEntry> out = new ArrayList<>();
    for (EventEnvelope e : events) {
      if (e.event() instanceof Partition.Written w) {
        for (Partition.FrameApplied f : w.frames()) {
          out.addAll(f.entries());
        }
      }
    }
    return out;
  }

  /**
   * Checks the outbox of every partition; returns the number of CDC entries (snapshot loads write
   * none).
   */
  private int checkOutbox() throws Exception {
    int total = 0;
    Set<String> revisions = new HashSet<>();
    for (int p = 0; p < PARTITIONS; p++) {
      List<Partition.OutboxEntry> entries = outbox(p);
      long previousCommit = 0;
      for (int i = 0; i < entries.size(); i++) {
        Partition.OutboxEntry e = entries.get(i);
        assertThat(e.sequence()).as("outbox sequences are contiguous").isEqualTo(i + 1);
        if (!e.kind().equals("snapshot")) {
          // Snapshot rows have no commit of their own (commit LSN 0); their place is their
          // sequence.
          assertThat(Long.compareUnsigned(e.commitLsn(), previousCommit))
              .as("commit order within a partition")
              .isGreaterThanOrEqualTo(0);
          previousCommit = e.commitLsn();
        }
        assertThat(revisions.add(e.collection() + "|" + e.id() + "|" + e.revision()))
            .as("a revision appears once")
            .isTrue();
      }
      total += entries.size();
    }
    return total;
  }

  @Test
  void aTableStreamedIntoPartitionsEqualsItsDocumentsAndEachChangeIsInTheOutboxOnce()
      throws Exception {
    sql(
        "INSERT INTO public.orders SELECT g, 't' || (g % 5), 'initial', g, '{\"a\": 1}' FROM generate_series(0, 39) g",
        "INSERT INTO public.lines SELECT g, 1, 1 FROM generate_series(0, 19) g");
    PartitionSharding.init(kit.system(), wiring(PartitionSettings.DEFAULTS));
    PartitionSink sink = sink(PartitionChannel.sharded(kit.system()));
    ActorRef<CdcPipeline.Command> p = pipeline(sink, StartMode.SNAPSHOT);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    assertThat(liveDocuments()).as("the initial snapshot").isEqualTo(tableAsDocuments());
    assertThat(checkOutbox()).as("snapshot rows have no outbox history").isZero();

    int changes = workload(300, 42);
    Map<String, String> expected = awaitDocumentsEqualTheTable();
    int entries = checkOutbox();
    System.out.println(
        "partition sink: row-changes="
            + changes
            + " outbox-entries="
            + entries
            + " frames="
            + sink.framesSent()
            + " loss="
            + Math.max(0, changes - entries)
            + " dup="
            + Math.max(0, entries - changes));
    assertThat(entries).as("every row change once").isEqualTo(changes);

    // A truncate deletes every document of the collection, each with an outbox entry.
    long liveLines = expected.keySet().stream().filter(k -> k.startsWith("lines|")).count();
    sql("TRUNCATE public.lines");
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> liveDocuments().keySet().stream().noneMatch(k -> k.startsWith("lines|")));
    assertThat(checkOutbox()).isEqualTo(changes + liveLines);
    assertThat(status(p).state()).isEqualTo("running");
    sink.shutdown();
  }

  @Test
  void aSliceLostOnTheWayIsNoticedByTheNextOneAndDeliveredAgain() throws Exception {
    PartitionSharding.init(kit.system(), wiring(PartitionSettings.DEFAULTS));
    PartitionChannel real = PartitionChannel.sharded(kit.system());
    AtomicInteger sent = new AtomicInteger();
    AtomicBoolean dropped = new AtomicBoolean();
    AtomicBoolean armed = new AtomicBoolean();
    // A message to partition 3 (the 4th or a later one) is held back. If another message to that
    // partition follows while it is held, the held one is lost for good (nobody answers it) and
    // the follower must report the gap. If none follows within a moment (it was the last of its
    // sink call), it is sent after all and the next one is held instead: so the loss always has a
    // successor, whatever the batching did.
    AtomicReference<Runnable> held = new AtomicReference<>();
    java.util.concurrent.ScheduledExecutorService timer =
        java.util.concurrent.Executors.newSingleThreadScheduledExecutor();
    PartitionChannel lossy =
        new PartitionChannel() {
          @Override
          public <R> CompletionStage<R> ask(
              int partition, Function<ActorRef<R>, Write> make, Duration timeout) {
            if (armed.get() && partition == 3 && !dropped.get()) {
              int n = sent.incrementAndGet();
              if (held.getAndSet(null) != null) {
                // Lost on the way (as a message to a sharded entity can be): the held one is
                // never sent, and this one, its successor, goes.
                dropped.set(true);
                return real.ask(partition, make, timeout);
              }
              if (n >= 4) {
                CompletableFuture<R> answer = new CompletableFuture<>();
                Runnable send =
                    () ->
                        real.ask(partition, make, timeout)
                            .whenComplete(
                                (r, e) -> {
                                  if (e != null) {
                                    answer.completeExceptionally(e);
                                  } else {
                                    answer.complete(r);
                                  }
                                });
                held.set(send);
                timer.schedule(
                    () -> {
                      if (held.compareAndSet(send, null)) {
                        send.run();
                      }
                    },
                    300,
                    java.util.concurrent.TimeUnit.MILLISECONDS);
                return answer.orTimeout(
                    timeout.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
              }
            }
            return real.ask(partition, make, timeout);
          }

          @Override
          public CompletionStage<PartitionStatus> status(int partition, Duration timeout) {
            return real.status(partition, timeout);
          }
        };
    PartitionSink sink = sink(lossy);
    ActorRef<CdcPipeline.Command> p = pipeline(sink, StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    // A backlog, so that each sink call carries many transactions and several messages per
    // partition.
    var stopped = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Stop(stopped.ref()));
    stopped.receiveMessage(Duration.ofSeconds(30));
    int changes = workload(300, 7);
    armed.set(true);
    var started = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Start(started.ref()));
    started.receiveMessage(Duration.ofSeconds(30));
    Map<String, String> expected = tableAsDocuments();
    await()
        .atMost(Duration.ofSeconds(90))
        .pollInterval(Duration.ofMillis(250))
        .until(() -> liveDocuments().equals(expected));
    int entries = checkOutbox();
    System.out.println(
        "dropped slice: gaps="
            + sink.gaps()
            + " restarts="
            + status(p).restarts()
            + " skipped="
            + sink.framesSkipped()
            + " loss="
            + Math.max(0, changes - entries)
            + " dup="
            + Math.max(0, entries - changes));
    assertThat(dropped).isTrue();
    assertThat(sink.gaps())
        .as("the next slice to that partition reported the gap")
        .isGreaterThanOrEqualTo(1);
    assertThat(status(p).restarts()).isGreaterThanOrEqualTo(1);
    assertThat(entries).as("nothing lost, nothing twice").isEqualTo(changes);
    sink.shutdown();
    timer.shutdownNow();
  }

  @Test
  void aLostStatusAskIsAskedAgainSoThePipelineStartsWithoutARestart() throws Exception {
    PartitionSharding.init(kit.system(), wiring(PartitionSettings.DEFAULTS));
    PartitionChannel real = PartitionChannel.sharded(kit.system());
    java.util.Set<Integer> lostOnce = java.util.concurrent.ConcurrentHashMap.newKeySet();
    // The first status ask to every partition is lost (as a shard handed off drops what it
    // buffered): nobody answers it, it times out.
    PartitionChannel lossy =
        withStatus(
            real,
            (partition, timeout) ->
                lostOnce.add(partition)
                    ? new CompletableFuture<PartitionStatus>()
                        .orTimeout(timeout.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS)
                    : real.status(partition, timeout));
    ActorRef<CdcPipeline.Command> p = pipeline(sink(lossy), StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    assertThat(lostOnce).hasSize(PARTITIONS);
    // Asked again within the start: no restart after the 5 s ask timeout.
    assertThat(status(p).restarts()).isZero();
    int changes = workload(20, 11);
    awaitDocumentsEqualTheTable();
    assertThat(checkOutbox()).isEqualTo(changes);
  }

  @Test
  void aStatusAskThatFailsAtOnceFailsTheStartWithoutAskingAgainInALoop() throws Exception {
    PartitionSharding.init(kit.system(), wiring(PartitionSettings.DEFAULTS));
    PartitionChannel real = PartitionChannel.sharded(kit.system());
    AtomicInteger asked = new AtomicInteger();
    // Every status ask fails at once (as an ask to a region that is shutting down does).
    PartitionChannel refusing =
        withStatus(
            real,
            (partition, timeout) -> {
              asked.incrementAndGet();
              return CompletableFuture.failedFuture(new IllegalStateException("region stopped"));
            });
    ActorRef<CdcPipeline.Command> p = pipeline(sink(refusing), StartMode.GO_FORWARD);
    // The start does not wait for the answers: the first transaction that needs one fails.
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    workload(5, 3);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).restarts() >= 2);
    var stopped = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Stop(stopped.ref()));
    stopped.receiveMessage(Duration.ofSeconds(30));
    // Each start asked each partition once: no re-asking of a failure that came at once.
    assertThat(asked.get()).isLessThanOrEqualTo(PARTITIONS * (status(p).restarts() + 1));
  }

  @Test
  void thePipelineStreamsBeforeThePartitionsAnswerAndEachTransactionWaitsOnlyForItsOwn()
      throws Exception {
    PartitionSharding.init(kit.system(), wiring(PartitionSettings.DEFAULTS));
    PartitionChannel real = PartitionChannel.sharded(kit.system());
    CompletableFuture<Void> released = new CompletableFuture<>();
    // No partition answers its status until released (as a removed member's partitions that are
    // still recovering on the survivors do not).
    PartitionChannel held =
        withStatus(
            real,
            (partition, timeout) -> released.thenCompose(x -> real.status(partition, timeout)));
    ActorRef<CdcPipeline.Command> p = pipeline(sink(held), StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    int changes = workload(20, 5);
    await("nothing is applied before the partitions answer")
        .during(Duration.ofSeconds(1))
        .atMost(Duration.ofSeconds(30))
        .until(() -> liveDocuments().isEmpty());
    released.complete(null);
    awaitDocumentsEqualTheTable();
    assertThat(checkOutbox()).isEqualTo(changes);
    assertThat(status(p).restarts()).isZero();
  }

  @Test
  void aStatusStillUnansweredAtTheAskTimeoutFailsTheFirstTransactionThatNeedsItTransiently()
      throws Exception {
    PartitionSharding.init(kit.system(), wiring(PartitionSettings.DEFAULTS));
    PartitionChannel real = PartitionChannel.sharded(kit.system());
    AtomicBoolean answering = new AtomicBoolean();
    AtomicInteger unanswered = new AtomicInteger();
    java.util.concurrent.atomic.AtomicLong firstAsk = new java.util.concurrent.atomic.AtomicLong();
    // Every status ask goes unanswered (each attempt times out) until the test lets them through,
    // as partitions that stay away for longer than the ask timeout.
    PartitionChannel silent =
        withStatus(
            real,
            (partition, timeout) -> {
              if (answering.get()) {
                return real.status(partition, timeout);
              }
              unanswered.incrementAndGet();
              firstAsk.compareAndSet(0, System.nanoTime());
              return new CompletableFuture<PartitionStatus>()
                  .orTimeout(timeout.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
            });
    ActorRef<CdcPipeline.Command> p = pipeline(sink(silent), StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    int changes = workload(20, 7);
    // Asked again while the ask timeout (5 s) lasts, then the transaction fails and the pipeline
    // restarts from what the slot confirmed: nothing was applied meanwhile.
    await("a restart after the ask timeout")
        .atMost(Duration.ofSeconds(60))
        .until(() -> status(p).restarts() >= 1);
    assertThat(Duration.ofNanos(System.nanoTime() - firstAsk.get()))
        .as("the transaction failed at the ask timeout (5 s), not at the first unanswered attempt")
        .isGreaterThanOrEqualTo(Duration.ofSeconds(4));
    assertThat(liveDocuments()).isEmpty();
    assertThat(unanswered.get())
        .as("unanswered asks asked again (about 6 attempts each within the ask timeout)")
        .isGreaterThanOrEqualTo(3 * PARTITIONS);
    assertThat(status(p).state()).isNotEqualTo("halted");
    answering.set(true);
    awaitDocumentsEqualTheTable();
    assertThat(checkOutbox()).as("nothing lost, nothing twice").isEqualTo(changes);
  }

  @Test
  void aPartitionWhoseStatusHasNotComeHoldsBackOnlyItsOwnSlices() throws Exception {
    PartitionSharding.init(kit.system(), wiring(PartitionSettings.DEFAULTS));
    PartitionChannel real = PartitionChannel.sharded(kit.system());
    int held = Partitioning.partitionOf("public.orders", "1000", PARTITIONS);
    AtomicBoolean holding = new AtomicBoolean();
    CompletableFuture<Void> release = new CompletableFuture<>();
    PartitionChannel starting = startingUntil(real, held, holding::get, release);
    ActorRef<CdcPipeline.Command> p = pipeline(sink(starting), StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    List<Integer> heldIds = ids(held, true, 1000, 4);
    List<Integer> otherIds = ids(held, false, 2000, 31);
    // A first run leaves the held partition a watermark of this source, so the slices held below
    // must chain to it (a wrong one is refused as a gap and restarts the pipeline).
    insertOrders(List.of(heldIds.get(0)));
    await("the first row")
        .atMost(Duration.ofSeconds(60))
        .until(() -> liveDocuments(n -> n == held).size() == 1);
    var stopped = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Stop(stopped.ref()));
    stopped.receiveMessage(Duration.ofSeconds(30));
    // Two transactions waiting for the next run, so one call carries both. The first: two rows of
    // the held partition (a full part of 2 rows, sent before the transaction's other rows are even
    // routed), then rows of the other partitions; the second: one more of each.
    insertOrders(List.of(heldIds.get(1), heldIds.get(2)), otherIds.subList(0, 30));
    insertOrders(List.of(heldIds.get(3)), otherIds.subList(30, 31));
    holding.set(true);
    var started = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Start(started.ref()));
    long restarts = started.receiveMessage(Duration.ofSeconds(30)).restarts();
    try {
      await("the other partitions' documents, while the held partition's status is awaited")
          .atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(100))
          .until(() -> liveDocuments(n -> n != held).size() == 31);
      assertThat(liveDocuments(n -> n == held)).as("only the first run's row").hasSize(1);
    } finally {
      release.complete(null);
    }
    awaitDocumentsEqualTheTable();
    assertThat(status(p).restarts()).as("held, not refused as a gap").isEqualTo(restarts);
    assertThat(checkOutbox()).as("nothing lost, nothing twice").isEqualTo(35);
  }

  @Test
  void heldSlicesAreBoundedAndTheCallWaitsForTheirPartitionBeyondTheBound() throws Exception {
    PartitionSharding.init(kit.system(), wiring(PartitionSettings.DEFAULTS));
    PartitionChannel real = PartitionChannel.sharded(kit.system());
    int held = Partitioning.partitionOf("public.orders", "1000", PARTITIONS);
    CompletableFuture<Void> release = new CompletableFuture<>();
    PartitionChannel starting = startingUntil(real, held, () -> true, release);
    ActorRef<CdcPipeline.Command> p = pipeline(sink(starting), StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    // One transaction: more than the bound of bodies for the held partition, then rows of the
    // others. Past the bound the call stops holding and waits for the held partition, so the
    // others' rows, routed after that point, are not sent before it answers.
    int bodyBytes = 200_000;
    int heldRows = (int) (PartitionSink.HELD_MAX_BYTES / bodyBytes) + 4;
    List<Integer> heldIds = ids(held, true, 1000, heldRows);
    List<Integer> otherIds = ids(held, false, 100_000, 10);
    try (Connection c = db.connect()) {
      c.setAutoCommit(false);
      try (var insert =
          c.prepareStatement("INSERT INTO public.orders VALUES (?, 't', ?, 1.5, '{\"k\": 1}')")) {
        for (int id : heldIds) {
          insert.setInt(1, id);
          insert.setString(2, "x".repeat(bodyBytes));
          insert.executeUpdate();
        }
        for (int id : otherIds) {
          insert.setInt(1, id);
          insert.setString(2, "n");
          insert.executeUpdate();
        }
      }
      c.commit();
    }
    String end;
    try (Connection c = db.connect();
        ResultSet rs = c.createStatement().executeQuery("SELECT pg_current_wal_lsn()::text")) {
      rs.next();
      end = rs.getString(1);
    }
    await("PostgreSQL sent the transaction to the pipeline")
        .atMost(Duration.ofSeconds(60))
        .until(() -> sentThrough(end));
    try {
      await("nothing of the others while the held partition is awaited past the bound")
          .during(Duration.ofSeconds(3))
          .atMost(Duration.ofSeconds(10))
          .until(() -> liveDocuments(n -> n != held).isEmpty());
    } finally {
      release.complete(null);
    }
    awaitDocumentsEqualTheTable();
    assertThat(status(p).restarts()).isZero();
  }

  /**
   * {@code real}, but while {@code holding}, partition {@code held} answers its status only once
   * {@code release} completes, as one still starting on a survivor after a failover (then with time
   * to spare: the test's delay must not use up the attempt's timeout).
   */
  private static PartitionChannel startingUntil(
      PartitionChannel real,
      int held,
      java.util.function.BooleanSupplier holding,
      CompletableFuture<Void> release) {
    return withStatus(
        real,
        (partition, timeout) ->
            holding.getAsBoolean() && partition == held
                ? release.thenCompose(v -> real.status(partition, Duration.ofSeconds(30)))
                : real.status(partition, timeout));
  }

  /** Whether the slot's walsender has sent the WAL up to {@code lsn}. */
  private boolean sentThrough(String lsn) throws Exception {
    try (Connection c = db.connect();
        var q =
            c.prepareStatement(
                "SELECT r.sent_lsn >= ?::pg_lsn FROM pg_replication_slots s"
                    + " JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = ?")) {
      q.setString(1, lsn);
      q.setString(2, slot);
      try (ResultSet rs = q.executeQuery()) {
        return rs.next() && rs.getBoolean(1);
      }
    }
  }

  /** {@code n} ids from {@code from} on whose orders row is ({@code in}) or is not in {@code p}. */
  private static List<Integer> ids(int p, boolean in, int from, int n) {
    List<Integer> ids = new ArrayList<>();
    for (int id = from; ids.size() < n; id++) {
      if ((Partitioning.partitionOf("public.orders", Integer.toString(id), PARTITIONS) == p)
          == in) {
        ids.add(id);
      }
    }
    return ids;
  }

  /** One transaction inserting the orders rows of {@code groups}, in order. */
  @SafeVarargs
  private void insertOrders(List<Integer>... groups) throws Exception {
    try (Connection c = db.connect()) {
      c.setAutoCommit(false);
      Statement s = c.createStatement();
      for (List<Integer> ids : groups) {
        for (int id : ids) {
          s.executeUpdate(
              "INSERT INTO public.orders VALUES (" + id + ", 't', 'n', 1.5, '{\"k\": 1}')");
        }
      }
      c.commit();
    }
  }

  /** Waits until the live documents equal the source table as documents; returns the latter. */
  private Map<String, String> awaitDocumentsEqualTheTable() throws Exception {
    Map<String, String> expected = tableAsDocuments();
    await()
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(250))
        .until(() -> liveDocuments().equals(expected));
    return expected;
  }

  /** {@code real}, but with status asks answered by {@code status}. */
  private static PartitionChannel withStatus(
      PartitionChannel real,
      java.util.function.BiFunction<Integer, Duration, CompletionStage<PartitionStatus>> status) {
    return new PartitionChannel() {
      @Override
      public <R> CompletionStage<R> ask(
          int partition, Function<ActorRef<R>, Write> make, Duration timeout) {
        return real.ask(partition, make, timeout);
      }

      @Override
      public CompletionStage<PartitionStatus> status(int partition, Duration timeout) {
        return status.apply(partition, timeout);
      }
    };
  }

  @Test
  void aFullOutboxPausesThePipelineWhichGoesOnOnceEntriesArePurgedLosingNothing() throws Exception {
    PartitionSharding.init(kit.system(), wiring(new PartitionSettings(40, 1L << 30, 256, 20_000)));
    PartitionSink sink = sink(PartitionChannel.sharded(kit.system()));
    ActorRef<CdcPipeline.Command> p = pipeline(sink, StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    int changes = workload(300, 11);
    Map<String, String> expected = tableAsDocuments();
    await("the pipeline pauses on a full outbox")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              PipelineStatus s = status(p);
              return s.state().equals("backoff")
                  && "quota-exceeded".equals(s.reason())
                  && s.detail() != null
                  && s.detail().contains("outbox is full");
            });
    String detail = status(p).detail();
    // An operator (or, later, retention) purges; the pipeline goes on where it stopped.
    await("documents catch up while the outboxes are purged")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(500))
        .until(
            () -> {
              for (int n = 0; n < PARTITIONS; n++) {
                int partition = n;
                PartitionStatus st =
                    PartitionSharding.partition(kit.system(), n)
                        .<PartitionStatus>ask(
                            io.weir.sharding.partition.StatusProtocol.GetStatus::new,
                            Duration.ofSeconds(10))
                        .toCompletableFuture()
                        .get();
                if (st.outboxEntries() > 0) {
                  PartitionSharding.partition(kit.system(), partition)
                      .<io.weir.sharding.partition.PartitionProtocol.PurgeReply>ask(
                          r ->
                              new io.weir.sharding.partition.PartitionProtocol.PurgeOutbox(
                                  st.outboxNext() - 1, 1_000_000, r),
                          Duration.ofSeconds(10))
                      .toCompletableFuture()
                      .get();
                }
              }
              return liveDocuments().equals(expected);
            });
    int entries = checkOutbox();
    System.out.println(
        "full outbox: detail=["
            + detail
            + "] restarts="
            + status(p).restarts()
            + " loss="
            + Math.max(0, changes - entries)
            + " dup="
            + Math.max(0, entries - changes));
    assertThat(entries).as("paused, never dropped: every change once").isEqualTo(changes);
    sink.shutdown();
  }

  /** Outbox entries of kind {@code snapshot} across all partitions. */
  private int snapshotEntries() throws Exception {
    int n = 0;
    for (int p = 0; p < PARTITIONS; p++) {
      n += (int) outbox(p).stream().filter(e -> e.kind().equals("snapshot")).count();
    }
    return n;
  }

  private void incremental(ActorRef<CdcPipeline.Command> p) {
    var reply = kit.<CdcPipeline.SnapshotReply>createTestProbe();
    p.tell(new CdcPipeline.StartIncrementalSnapshot(List.of(), reply.ref()));
    assertThat(reply.receiveMessage(Duration.ofSeconds(30)).error()).isNull();
    await("the incremental snapshot finishes")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(200))
        .until(() -> status(p).snapshot() == null || status(p).snapshot().state().equals("done"));
  }

  /**
   * A TRUNCATE of more rows than a journal row holds (ADR 0033): each partition deletes its
   * documents in parts of at most 100 entries; with a quota of 300 the parts fill it, the pipeline
   * pauses ({@code quota-exceeded} in its status), and once entries are purged it goes on after the
   * parts already written: every document deleted exactly once.
   */
  @Test
  void aTruncateOfALargeTableGoesInPartsThatPauseOnTheQuotaAndResumeLosingNothing()
      throws Exception {
    PartitionSharding.init(
        kit.system(),
        wiring(new PartitionSettings(300, 1L << 30, 256, 20_000).withFrames(100, 1L << 20)));
    PartitionSink sink = sink(PartitionChannel.sharded(kit.system()));
    ActorRef<CdcPipeline.Command> p = pipeline(sink, StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    int rows = 1_600;
    sql(
        "INSERT INTO public.orders SELECT g, 't' || (g % 5), 'n', g * 1.5, '{}'"
            + " FROM generate_series(1, "
            + rows
            + ") g");
    await("every row a document")
        .atMost(Duration.ofSeconds(60))
        .until(() -> liveDocuments().size() == rows);
    sql("TRUNCATE public.orders");
    await("the pipeline pauses on a full outbox")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              PipelineStatus st = status(p);
              return "quota-exceeded".equals(st.reason())
                  && st.detail() != null
                  && st.detail().contains("outbox is full");
            });
    String detail = status(p).detail();
    List<List<Partition.OutboxEntry>> purged = new ArrayList<>();
    for (int n = 0; n < PARTITIONS; n++) {
      purged.add(new ArrayList<>());
    }
    await("the truncate goes on while the outboxes are purged")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(500))
        .until(
            () -> {
              for (int n = 0; n < PARTITIONS; n++) {
                PartitionStatus st =
                    PartitionSharding.partition(kit.system(), n)
                        .<PartitionStatus>ask(
                            io.weir.sharding.partition.StatusProtocol.GetStatus::new,
                            Duration.ofSeconds(10))
                        .toCompletableFuture()
                        .get();
                if (st.outboxEntries() > 300 - 100) { // a part of 100 no longer fits
                  int partition = n;
                  PartitionSharding.partition(kit.system(), partition)
                      .<io.weir.sharding.partition.PartitionProtocol.PurgeReply>ask(
                          r ->
                              new io.weir.sharding.partition.PartitionProtocol.PurgeOutbox(
                                  st.outboxNext() - 1, 1_000_000, r),
                          Duration.ofSeconds(10))
                      .toCompletableFuture()
                      .get();
                }
              }
              return liveDocuments().isEmpty();
            });
    int deletes = 0;
    for (int n = 0; n < PARTITIONS; n++) {
      List<Partition.OutboxEntry> entries = outbox(n);
      long partDeletes = entries.stream().filter(e -> e.kind().equals("delete")).count();
      deletes += (int) partDeletes;
    }
    int entries = checkOutbox();
    System.out.println(
        "truncate in parts: rows="
            + rows
            + " deletes="
            + deletes
            + " detail=["
            + detail
            + "] loss="
            + Math.max(0, rows - deletes)
            + " dup="
            + Math.max(0, deletes - rows));
    assertThat(deletes).as("every document deleted exactly once").isEqualTo(rows);
    assertThat(entries).isEqualTo(2 * rows);
    assertThat(maxEntriesPerRow()).as("no journal row over the bound").isLessThanOrEqualTo(100);
    sink.shutdown();
  }

  /** The most outbox entries one journal row of any partition holds. */
  private long maxEntriesPerRow() throws Exception {
    long max = 0;
    JdbcReadJournal journal =
        PersistenceQuery.get(kit.system())
            .getReadJournalFor(JdbcReadJournal.class, JdbcReadJournal.Identifier());
    for (int n = 0; n < PARTITIONS; n++) {
      for (EventEnvelope e :
          journal
              .currentEventsByPersistenceId(Partition.persistenceId(n).id(), 0, Long.MAX_VALUE)
              .runWith(Sink.seq(), kit.system())
              .toCompletableFuture()
              .get()) {
        if (e.event() instanceof Partition.Written w) {
          max = Math.max(max, w.frames().stream().mapToLong(f -> f.entries().size()).sum());
        }
      }
    }
    return max;
  }

  @Test
  void anIncrementalSnapshotRecordsRowsThatChangeADocumentAndNothingForEqualRows()
      throws Exception {
    PartitionSharding.init(kit.system(), wiring(PartitionSettings.DEFAULTS));
    // Rows that exist before the pipeline: go-forward does not see them.
    sql(
        "INSERT INTO public.orders SELECT g, 't' || (g % 5), 'before', g, '{\"b\": 2}' FROM generate_series(0, 29) g");
    PartitionSink sink = sink(PartitionChannel.sharded(kit.system()));
    ActorRef<CdcPipeline.Command> p = pipeline(sink, StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    sql("UPDATE public.orders SET note = 'streamed' WHERE id < 5");
    await().atMost(Duration.ofSeconds(30)).until(() -> liveDocuments().size() == 5);
    int streamed = checkOutbox();

    incremental(p);
    Map<String, String> expected = tableAsDocuments();
    await().atMost(Duration.ofSeconds(30)).until(() -> liveDocuments().equals(expected));
    int recorded = snapshotEntries();
    assertThat(recorded).as("the 25 rows the partitions lacked, not the 5 they had").isEqualTo(25);
    assertThat(checkOutbox()).isEqualTo(streamed + 25);

    incremental(p);
    assertThat(snapshotEntries())
        .as("a second snapshot finds every document equal")
        .isEqualTo(recorded);
    System.out.println(
        "incremental snapshot into partitions: recorded="
            + recorded
            + " second="
            + (snapshotEntries() - recorded));
    sink.shutdown();
  }

  @Test
  void tablesWhoseRowsCannotBecomeDocumentsAreReportedAndHaltThePipelineAtStart() throws Exception {
    sql(
        "CREATE TABLE public.nokey (a int, b text)",
        "CREATE TABLE public.fullnoid (a int, b text)",
        "ALTER TABLE public.fullnoid REPLICA IDENTITY FULL",
        "CREATE TABLE public.big (id int PRIMARY KEY, v text)",
        "ALTER TABLE public.big REPLICA IDENTITY FULL",
        "ALTER PUBLICATION weir_pub ADD TABLE public.nokey, public.fullnoid, public.big");
    PartitionSink sink = sink(PartitionChannel.sharded(kit.system()));
    ActorRef<CdcPipeline.Command> p = pipeline(sink, StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("halted"));
    PipelineStatus halted = status(p);
    assertThat(halted.reason()).isEqualTo("sink-rejected");
    assertThat(halted.detail()).contains("2 published table(s)").contains("/check");
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'")) {
      rs.next();
      assertThat(rs.getInt(1)).as("halted before the slot was created").isZero();
    }
    var probe = kit.<CdcPipeline.CheckReply>createTestProbe();
    p.tell(new CdcPipeline.CheckTables(probe.ref()));
    Map<String, io.weir.persistence.cdc.TableVerdict> verdicts = new TreeMap<>();
    for (var v : probe.receiveMessage(Duration.ofSeconds(30)).tables()) {
      verdicts.put(v.table(), v);
    }
    assertThat(verdicts.keySet())
        .containsExactly(
            "public.big", "public.fullnoid", "public.lines", "public.nokey", "public.orders");
    assertThat(verdicts.get("public.orders").handling()).isEqualTo("by-document-id");
    assertThat(verdicts.get("public.lines").detail())
        .contains("collection lines")
        .contains("[order_id, line]");
    assertThat(verdicts.get("public.big").detail()).contains("[id]");
    assertThat(verdicts.get("public.nokey").reason()).isEqualTo("no-document-id");
    assertThat(verdicts.get("public.fullnoid").reason()).isEqualTo("id-columns-required");
    sink.shutdown();
  }

  @Test
  void aKeyStoredOutOfLineIdentifiesItsDocumentWhenItArrivesAsUnchangedToast() throws Exception {
    PartitionSharding.init(kit.system(), wiring(PartitionSettings.DEFAULTS));
    // A text key of 2,400 incompressible bytes stored out of line (EXTERNAL): an update that leaves
    // it alone sends it as unchanged TOAST in the new row and in full in the old key.
    String key =
        "(SELECT string_agg(md5(g::text || 'toast-key'), '') FROM generate_series(1, 75) g)";
    sql(
        "CREATE TABLE public.tk (id text PRIMARY KEY, n int)",
        "ALTER TABLE public.tk ALTER COLUMN id SET STORAGE EXTERNAL",
        "ALTER PUBLICATION weir_pub ADD TABLE public.tk");
    PartitionSink sink = sink(PartitionChannel.sharded(kit.system()));
    ActorRef<CdcPipeline.Command> p = pipeline(sink, StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    sql(
        "INSERT INTO public.tk VALUES (" + key + ", 0)",
        "INSERT INTO public.tk VALUES ('short', 0)",
        "UPDATE public.tk SET n = n + 1",
        "UPDATE public.tk SET n = n + 1 WHERE id <> 'short'",
        "UPDATE public.tk SET id = id || 'x', n = 10 WHERE id <> 'short'");
    await()
        .atMost(Duration.ofSeconds(60))
        .until(
            () ->
                status(p).state().equals("halted")
                    || documents("public.tk").equals(rows("public.tk", "true")));
    assertThat(status(p).state()).as(status(p).detail()).isEqualTo("running");
    assertThat(documents("public.tk")).hasSize(2).isEqualTo(rows("public.tk", "true"));
    sink.shutdown();
  }

  @Test
  void unchangedToastValuesComeFromTheFullOldImageOrTheDocumentAndAreNeverInvented()
      throws Exception {
    PartitionSharding.init(kit.system(), wiring(PartitionSettings.DEFAULTS));
    // Values large and random enough to be stored out of line (TOAST). public.big has a full old
    // image; public.big2 the default identity. Rows 1-3 of each exist before the pipeline.
    String payload =
        "(SELECT string_agg(md5(random()::text || g || i), '') FROM generate_series(1, 300) i)";
    sql(
        "CREATE TABLE public.big (id int PRIMARY KEY, n int, payload text)",
        "ALTER TABLE public.big REPLICA IDENTITY FULL",
        "CREATE TABLE public.big2 (id int PRIMARY KEY, n int, payload text)",
        "INSERT INTO public.big SELECT g, 0, " + payload + " FROM generate_series(1, 3) g",
        "INSERT INTO public.big2 SELECT g, 0, " + payload + " FROM generate_series(1, 3) g",
        "ALTER PUBLICATION weir_pub ADD TABLE public.big, public.big2");
    PartitionSink sink = sink(PartitionChannel.sharded(kit.system()));
    ActorRef<CdcPipeline.Command> p = pipeline(sink, StartMode.GO_FORWARD);
    await().atMost(Duration.ofSeconds(60)).until(() -> status(p).state().equals("running"));
    // The partitions never saw these rows: only the full old image can fill the unchanged payload.
    sql("UPDATE public.big SET n = n + 1");
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> documents("public.big").equals(rows("public.big", "true")));
    // A row the partitions hold keeps its unchanged payload from the document.
    sql(
        "INSERT INTO public.big2 SELECT 10, 0, " + payload.replace("|| g ||", "||") + "",
        "UPDATE public.big2 SET n = 5 WHERE id = 10");
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> documents("public.big2").equals(rows("public.big2", "id = 10")));
    // Without a full old image, a row the partitions never saw cannot be completed: the pipeline
    // halts.
    sql("UPDATE public.big2 SET n = 1 WHERE id = 1");
    await().atMost(Duration.ofSeconds(30)).until(() -> status(p).state().equals("halted"));
    PipelineStatus halted = status(p);
    assertThat(halted.reason()).isEqualTo("sink-rejected");
    assertThat(halted.detail()).contains("REPLICA IDENTITY FULL");
    System.out.println(
        "toast: 3 unseen rows filled from full old images, 1 kept from its document; unseen row without a full image: "
            + halted.detail());
    sink.shutdown();
  }

  /** Rows of {@code table} matching {@code where}: id -> row as JSON. */
  private Map<String, String> rows(String table, String where) throws Exception {
    Map<String, String> out = new TreeMap<>();
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT id::text, row_to_json(b)::text FROM " + table + " b WHERE " + where)) {
      while (rs.next()) {
        out.put(rs.getString(1), JSON.readTree(rs.getString(2)).toString());
      }
    }
    return out;
  }

  /** Live documents of one collection: id -> body. */
  private Map<String, String> documents(String collection) throws Exception {
    Map<String, String> out = new TreeMap<>();
    for (int p = 0; p < PARTITIONS; p++) {
      int n = p;
      DocumentsReply reply =
          PartitionSharding.partition(kit.system(), n)
              .<DocumentsReply>ask(
                  r -> new GetDocuments(collection, null, 1000, r), Duration.ofSeconds(10))
              .toCompletableFuture()
              .get();
      for (Document d : reply.documents()) {
        if (!d.deleted()) {
          out.put(d.id(), JSON.readTree(d.body()).toString());
        }
      }
    }
    return out;
  }
}
