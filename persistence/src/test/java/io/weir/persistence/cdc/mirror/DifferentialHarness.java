package io.weir.persistence.cdc.mirror;

import static org.awaitility.Awaitility.await;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.cdc.CdcPipeline;
import io.weir.persistence.cdc.PipelineSettings;
import io.weir.persistence.cdc.PipelineStatus;
import io.weir.persistence.cdc.StreamingSettings;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.persistence.testing.TestPostgres;
import java.io.IOException;
import java.io.StringWriter;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.postgresql.PGConnection;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * Runs workloads against two subscribers of the same source database and dumps both targets:
 * PostgreSQL's built-in logical replication ({@code CREATE SUBSCRIPTION} in a second database of
 * the test server, on a slot made beforehand with {@code pg_create_logical_replication_slot(...,
 * 'pgoutput')} and {@code create_slot = false}) and a Weir pipeline into {@link PostgresMirrorSink}
 * (a third database). Each run has a schema of its own, of the same name in all three databases,
 * and both targets get the same DDL in it. After the workload a marker row is committed on the
 * source (in a publication of its own that both subscribe to); once both targets show it,
 * everything before it is applied on both, since both apply in commit order (also before a step
 * that writes to the targets). The dumps are {@code COPY ... TO STDOUT} text of every table in the
 * run's schema of each target (the mirror's bookkeeping tables aside), lines sorted, read under the
 * same {@code TimeZone}, {@code DateStyle}, {@code IntervalStyle}, {@code extra_float_digits} and
 * {@code bytea_output} on both sides.
 */
final class DifferentialHarness implements AutoCloseable {
  /** Waits are sized for a machine four times slower than the 2-core one the suite is timed on. */
  static final Duration DEADLINE = Duration.ofSeconds(180);

  private static final String MARKER_TABLE = "weir_diff_marker";
  private static final String MARKER_PUBLICATION = "weir_diff_marker_pub";
  private static final List<String> DUMP_SETTINGS =
      List.of(
          "SET TimeZone = 'UTC'",
          "SET DateStyle = 'ISO, YMD'",
          "SET IntervalStyle = 'postgres'",
          "SET extra_float_digits = 1",
          "SET bytea_output = 'hex'");

  /** One step of a workload. */
  sealed interface Step {}

  /** Statements run in one transaction on the source; rolled back when {@code rollback}. */
  record Source(List<String> statements, boolean rollback) implements Step {}

  /** Statements run on both targets (autocommit), e.g. a column added before the source's. */
  record Targets(List<String> statements) implements Step {}

  /** Statements run on the source outside a transaction block, e.g. COMMIT PREPARED. */
  record SourceAutocommit(List<String> statements) implements Step {}

  /**
   * A workload: DDL for all three databases ({@code tables}), source-only DDL ({@code source}:
   * publications, storage settings), the publications both subscribers follow, and the steps.
   */
  record Scenario(
      String name,
      List<String> tables,
      List<String> source,
      List<String> publications,
      List<Step> steps,
      boolean rewriteBatches,
      int batchTransactions,
      boolean streamed) {
    Scenario {
      tables = List.copyOf(tables);
      source = List.copyOf(source);
      publications = List.copyOf(publications);
      steps = List.copyOf(steps);
    }

    @Override
    public String toString() {
      return name;
    }

    /**
     * The same workload through a pipeline with protocol-2 streaming (64 kB of decoding memory) and
     * spilling (1 KiB in memory), so large transactions arrive in blocks before they commit.
     */
    Scenario streamedWithSpill() {
      return new Scenario(
          name, tables, source, publications, steps, rewriteBatches, batchTransactions, true);
    }
  }

  /** The two dumps, table by table, and the run's figures. */
  record Outcome(
      Map<String, List<String>> builtin,
      Map<String, List<String>> mirror,
      PipelineStatus status,
      long millis,
      long spilledStreams) {

    /** Tables whose dumps differ, with up to 10 lines that only one side has (test data only). */
    List<String> differences() {
      List<String> out = new ArrayList<>();
      for (String table : union()) {
        List<String> b = builtin.getOrDefault(table, List.of());
        List<String> m = mirror.getOrDefault(table, List.of());
        if (b.equals(m)) {
          continue;
        }
        List<String> onlyBuiltin = minus(b, m);
        List<String> onlyMirror = minus(m, b);
        out.add(
            table
                + ": built-in "
                + b.size()
                + " rows, mirror "
                + m.size()
                + "; only built-in "
                + onlyBuiltin.subList(0, Math.min(10, onlyBuiltin.size()))
                + "; only mirror "
                + onlyMirror.subList(0, Math.min(10, onlyMirror.size())));
      }
      return out;
    }

    long rows() {
      return builtin.values().stream().mapToLong(List::size).sum();
    }

    private List<String> union() {
      List<String> all = new ArrayList<>(builtin.keySet());
      for (String t : mirror.keySet()) {
        if (!all.contains(t)) {
          all.add(t);
        }
      }
      return all;
    }

    private static List<String> minus(List<String> a, List<String> b) {
      List<String> rest = new ArrayList<>(b);
      List<String> out = new ArrayList<>();
      for (String line : a) {
        if (!rest.remove(line)) {
          out.add(line);
        }
      }
      return out;
    }
  }

  /** The mirror halted (or kept failing) before the marker arrived; value-free detail. */
  static final class MirrorHalted extends AssertionError {
    final PipelineStatus status;

    MirrorHalted(String scenario, PipelineStatus status) {
      super(
          scenario
              + ": the mirror pipeline is "
              + status.state()
              + " ("
              + status.reason()
              + "): "
              + status.detail());
      this.status = status;
    }
  }

  private final TestPostgres server = TestPostgres.server();
  private final TestPostgres.TestDatabase source;
  private final TestPostgres.TestDatabase builtin;
  private final TestPostgres.TestDatabase mirror;
  private final Database state;
  private final ActorTestKit kit;
  private final ExecutorService blockingIo = Executors.newFixedThreadPool(2);
  private final String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 10);

  /**
   * The three databases (source with Weir's state schema, built-in target, mirror target) and an
   * actor system, shared by every scenario run through this harness: each run works in a schema of
   * its own (the same name in all three) with slots, publications, subscription and pipeline of its
   * own, and drops those when it ends.
   */
  DifferentialHarness() {
    source = server.freshDatabase("diff_src");
    TestPostgres.TestDatabase b = null;
    TestPostgres.TestDatabase m = null;
    Database st = null;
    ActorTestKit k = null;
    try {
      b = server.freshDatabase("diff_builtin");
      m = server.freshDatabase("diff_mirror");
      Config config =
          ConfigFactory.load(
              source.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
      st = Database.create(PostgresSettings.create(config), "diff-" + suffix);
      SchemaMigrator.migrate(st.dataSource(), "weir");
      k = ActorTestKit.create("diff-" + suffix, config);
    } catch (RuntimeException e) {
      closeAll(k, st, m, b, source);
      throw e;
    }
    builtin = b;
    mirror = m;
    state = st;
    kit = k;
  }

  /** Whether the test server lets this login create subscriptions (PostgreSQL 15: superuser). */
  static boolean subscriptionsPossible() {
    try (Connection c = TestPostgres.server().connect("postgres");
        Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT r.rolsuper AND current_setting('wal_level') = 'logical'"
                    + " AND current_setting('max_logical_replication_workers')::int > 0"
                    + " FROM pg_roles r WHERE r.rolname = current_user")) {
      return rs.next() && rs.getBoolean(1);
    } catch (SQLException e) {
      return false;
    }
  }

  /** A prepared scenario's names: its schema (in all three databases) and marker publication. */
  private record Prepared(int index, String schema, String marker) {}

  private final Map<Scenario, Prepared> prepared = new java.util.IdentityHashMap<>();
  private final String builtinSlot = "weir_diff_b_" + suffix;
  private final String subscription = "weir_diff_s_" + suffix;
  private boolean subscribed;
  private boolean slotMade;
  private final Map<String, Connection> connections = new java.util.HashMap<>();

  /**
   * Creates every scenario's schema, tables and publications, the built-in subscriber's slot and
   * one subscription to all of their publications. One subscription for all: PostgreSQL 15's
   * launcher starts at most one apply worker per {@code wal_retrieve_retry_interval} (5 s), so a
   * subscription per scenario would cost that much each. Each table is in one publication only, so
   * the publications' options (publish, row filters, column lists, via the root) apply as if each
   * had a subscription of its own.
   */
  void prepare(List<Scenario> scenarios) throws SQLException {
    java.util.Set<String> publications = new java.util.HashSet<>();
    for (Scenario scenario : scenarios) {
      for (String pub : scenario.publications()) {
        if (!publications.add(pub)) {
          throw new IllegalArgumentException(
              scenario.name() + ": publication " + pub + " is another scenario's too");
        }
      }
    }
    // All DDL of a database in one transaction: one commit (and WAL flush) instead of hundreds.
    List<String> all = new ArrayList<>();
    Map<String, List<String>> ddl = new LinkedHashMap<>();
    for (TestPostgres.TestDatabase db : List.of(source, builtin, mirror)) {
      ddl.put(db.name(), new ArrayList<>());
    }
    for (Scenario scenario : scenarios) {
      int n = prepared.size() + 1;
      Prepared p = new Prepared(n, "diff_" + n, "weir_diff_marker_" + n);
      all.addAll(scenario.publications());
      all.add(p.marker());
      for (List<String> statements : ddl.values()) {
        statements.add("CREATE SCHEMA " + p.schema());
        statements.add("SET search_path = " + p.schema());
        statements.addAll(scenario.tables());
        statements.add("CREATE TABLE " + MARKER_TABLE + " (n int PRIMARY KEY)");
      }
      List<String> onSource = ddl.get(source.name());
      onSource.addAll(scenario.source());
      onSource.add("CREATE PUBLICATION " + p.marker() + " FOR TABLE " + MARKER_TABLE);
      prepared.put(scenario, p);
    }
    for (TestPostgres.TestDatabase db : List.of(source, builtin, mirror)) {
      transaction(db, "public", ddl.get(db.name()), false);
    }
    exec(
        source,
        "public",
        List.of("SELECT pg_create_logical_replication_slot('" + builtinSlot + "', 'pgoutput')"));
    slotMade = true;
    exec(
        builtin,
        "public",
        List.of(
            "CREATE SUBSCRIPTION "
                + subscription
                + " CONNECTION "
                + literal(conninfo())
                + " PUBLICATION "
                + String.join(", ", all)
                + " WITH (create_slot = false, slot_name = '"
                + builtinSlot
                + "', copy_data = false)"));
    subscribed = true;
  }

  /** Runs a {@link #prepare prepared} scenario: a pipeline of its own, the workload, the dumps. */
  Outcome run(Scenario scenario) throws Exception {
    Prepared prep = prepared.get(scenario);
    if (prep == null) {
      throw new IllegalArgumentException(scenario.name() + " was not prepared");
    }
    long started = System.nanoTime();
    String schema = prep.schema();
    String id = suffix + "_" + prep.index();
    String weirSlot = "weir_diff_w_" + id;
    List<String> publications = new ArrayList<>(scenario.publications());
    publications.add(prep.marker());
    ActorRef<CdcPipeline.Command> pipeline = null;
    try {
      // The mirror's pipeline creates its slot (go-forward) before it reports running.
      PGSimpleDataSource targetDs = new PGSimpleDataSource();
      targetDs.setURL(mirror.url());
      targetDs.setUser(server.user());
      targetDs.setPassword(server.password());
      targetDs.setReWriteBatchedInserts(scenario.rewriteBatches());
      PostgresMirrorSink sink =
          new PostgresMirrorSink(targetDs, blockingIo, MirrorSettings.of(schema));
      PipelineSettings settings =
          PipelineSettings.of("diff_" + id, weirSlot, publications).toBuilder()
              .statusInterval(Duration.ofSeconds(1))
              .batchMaxTransactions(scenario.batchTransactions())
              .batchMaxDelay(Duration.ofMillis(20))
              .maxCommandRetries(3)
              .streaming(
                  scenario.streamed()
                      ? StreamingSettings.on()
                          .withDecodingWorkMemKb(64)
                          .withSpill(spillDirectory(), 1024, 256L << 20)
                      : StreamingSettings.OFF)
              .build();
      SourceSettings from = new SourceSettings(source.url(), server.user(), server.password());
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      pipeline =
          kit.spawn(
              CdcPipeline.builder(settings, from, sink, state.dataSource(), "weir")
                  .metrics(registry)
                  .build(),
              "diff-" + prep.index());
      ActorRef<CdcPipeline.Command> p = pipeline;
      var probe = kit.<PipelineStatus>createTestProbe();
      p.tell(new CdcPipeline.Start(probe.ref()));
      probe.receiveMessage(Duration.ofSeconds(30));
      await("the mirror pipeline runs")
          .atMost(DEADLINE)
          .pollInterval(Duration.ofMillis(50))
          .until(
              () -> {
                PipelineStatus st = status(p);
                if (st.state().equals("halted")) {
                  throw new MirrorHalted(scenario.name(), st);
                }
                return st.state().equals("running");
              });

      int markers = 0;
      for (Step step : scenario.steps()) {
        if (step instanceof Source s) {
          transaction(source, schema, s.statements(), s.rollback());
        } else if (step instanceof SourceAutocommit a) {
          exec(source, schema, a.statements());
        } else if (step instanceof Targets t) {
          // Target DML must see what came before it on both targets: catch up first.
          catchUp(scenario, schema, p, ++markers);
          exec(builtin, schema, t.statements());
          exec(mirror, schema, t.statements());
        }
      }
      catchUp(scenario, schema, p, ++markers);
      PipelineStatus last = status(p);
      return new Outcome(
          dump(builtin, schema),
          dump(mirror, schema),
          last,
          (System.nanoTime() - started) / 1_000_000,
          (long)
              registry
                  .find("weir.cdc.streamed.transactions")
                  .tag("spilled", "true")
                  .counters()
                  .stream()
                  .mapToDouble(io.micrometer.core.instrument.Counter::count)
                  .sum());
    } finally {
      if (pipeline != null) {
        kit.stop(pipeline, Duration.ofSeconds(60));
        dropSlot(weirSlot);
      }
    }
  }

  /**
   * Commits marker row {@code n} on the source and waits until both targets have it: both apply in
   * commit order, so they have everything before it too. Fails at once when the mirror's pipeline
   * halts (or keeps restarting) or the built-in subscriber reports an apply error.
   */
  private void catchUp(
      Scenario scenario, String schema, ActorRef<CdcPipeline.Command> pipeline, int n)
      throws SQLException {
    exec(source, schema, List.of("INSERT INTO " + MARKER_TABLE + " VALUES (" + n + ")"));
    String marker = "SELECT count(*) FROM " + schema + "." + MARKER_TABLE + " WHERE n = " + n;
    await("both targets caught up with the source")
        .atMost(DEADLINE)
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              PipelineStatus st = status(pipeline);
              if (st.state().equals("halted") || st.restarts() > 3) {
                throw new MirrorHalted(scenario.name(), st);
              }
              long errors =
                  count(
                      builtin,
                      "SELECT coalesce(sum(apply_error_count), 0) FROM pg_stat_subscription_stats"
                          + " WHERE subname = '"
                          + subscription
                          + "'");
              if (errors > 0) {
                throw new AssertionError(
                    scenario.name()
                        + ": the built-in subscriber failed to apply (see the server log): a"
                        + " workload is outside what PostgreSQL replicates");
              }
              return count(mirror, marker) == 1 && count(builtin, marker) == 1;
            });
  }

  /** Drops a slot once its walsender has gone (a moment after its client went away). */
  private void dropSlot(String slot) throws SQLException {
    await("slot " + slot + " is released")
        .atMost(DEADLINE)
        .pollInterval(Duration.ofMillis(50))
        .until(
            () ->
                count(
                        source,
                        "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"
                            + slot
                            + "' AND active")
                    == 0);
    exec(
        source,
        "public",
        List.of(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                + " WHERE slot_name = '"
                + slot
                + "'"));
  }

  /** Disable, wait for the apply worker to go, detach the slot, drop; then drop the slot. */
  private void dropSubscription() throws SQLException {
    exec(builtin, "public", List.of("ALTER SUBSCRIPTION " + subscription + " DISABLE"));
    await("the built-in apply worker stops")
        .atMost(DEADLINE)
        .pollInterval(Duration.ofMillis(50))
        .until(
            () ->
                count(
                        builtin,
                        "SELECT count(*) FROM pg_stat_subscription WHERE subname = '"
                            + subscription
                            + "' AND pid IS NOT NULL")
                    == 0);
    exec(
        builtin,
        "public",
        List.of(
            "ALTER SUBSCRIPTION " + subscription + " SET (slot_name = NONE)",
            "DROP SUBSCRIPTION " + subscription));
  }

  private String conninfo() {
    String hostPort = server.hostAndPort();
    int colon = hostPort.lastIndexOf(':');
    return "host="
        + conninfoValue(hostPort.substring(0, colon))
        + " port="
        + conninfoValue(hostPort.substring(colon + 1))
        + " dbname="
        + conninfoValue(source.name())
        + " user="
        + conninfoValue(server.user())
        + " password="
        + conninfoValue(server.password());
  }

  private static String conninfoValue(String v) {
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'";
  }

  private static String literal(String v) {
    return "'" + v.replace("'", "''") + "'";
  }

  private PipelineStatus status(ActorRef<CdcPipeline.Command> p) {
    var probe = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.GetStatus(probe.ref()));
    return probe.receiveMessage(Duration.ofSeconds(30));
  }

  private void transaction(
      TestPostgres.TestDatabase db, String schema, List<String> statements, boolean rollback)
      throws SQLException {
    Connection c = connection(db);
    try (Statement s = c.createStatement()) {
      s.execute("SET search_path = " + schema);
      c.setAutoCommit(false);
      for (String q : statements) {
        s.execute(q);
      }
      if (rollback) {
        c.rollback();
      } else {
        c.commit();
      }
    } catch (SQLException e) {
      c.rollback();
      throw e;
    } finally {
      c.setAutoCommit(true);
    }
  }

  /**
   * The harness's own connection to a database (autocommit), opened on first use and kept: a new
   * login per statement costs more than the statements. Used by one thread at a time (the test's,
   * or Awaitility's while the test waits).
   */
  private synchronized Connection connection(TestPostgres.TestDatabase db) throws SQLException {
    Connection c = connections.get(db.name());
    if (c == null || c.isClosed()) {
      c = db.connect();
      connections.put(db.name(), c);
    }
    return c;
  }

  /** Runs statements (autocommit) with {@code search_path} set to {@code schema} alone. */
  private void exec(TestPostgres.TestDatabase db, String schema, List<String> statements)
      throws SQLException {
    try (Statement s = connection(db).createStatement()) {
      s.execute("SET search_path = " + schema);
      for (String q : statements) {
        s.execute(q);
      }
    }
  }

  private long count(TestPostgres.TestDatabase db, String query) throws SQLException {
    try (Statement s = connection(db).createStatement();
        ResultSet rs = s.executeQuery(query)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  /** Every table of the schema but the mirror's bookkeeping: sorted COPY text lines. */
  private Map<String, List<String>> dump(TestPostgres.TestDatabase db, String schema)
      throws SQLException, IOException {
    Map<String, List<String>> out = new LinkedHashMap<>();
    Connection c = connection(db);
    try (Statement s = c.createStatement()) {
      for (String q : DUMP_SETTINGS) {
        s.execute(q);
      }
      List<String> tables = new ArrayList<>();
      try (ResultSet rs =
          s.executeQuery(
              "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                  + " WHERE n.nspname = '"
                  + schema
                  + "' AND c.relkind IN ('r', 'p')"
                  + " AND c.relname NOT LIKE 'weir\\_mirror\\_%' ORDER BY c.relname")) {
        while (rs.next()) {
          tables.add(rs.getString(1));
        }
      }
      PGConnection pg = c.unwrap(PGConnection.class);
      for (String table : tables) {
        StringWriter text = new StringWriter();
        pg.getCopyAPI()
            .copyOut(
                "COPY (SELECT * FROM ONLY " + MirrorSql.qualified(schema, table) + ") TO STDOUT",
                text);
        List<String> lines = new ArrayList<>();
        for (String line : text.toString().split("\n", -1)) {
          if (!line.isEmpty()) {
            lines.add(line);
          }
        }
        lines.sort(null);
        out.put(table, lines);
      }
    }
    return out;
  }

  @Override
  public void close() throws Exception {
    Exception first = null;
    try {
      kit.shutdownTestKit();
      if (subscribed) {
        dropSubscription();
      }
      if (slotMade) {
        dropSlot(builtinSlot);
      }
    } catch (Exception e) {
      first = e;
    }
    for (Connection c : connections.values()) {
      try {
        c.close();
      } catch (SQLException e) {
        // Going away with its database.
      }
    }
    blockingIo.shutdownNow();
    blockingIo.awaitTermination(10, TimeUnit.SECONDS);
    closeAll(null, state, mirror, builtin, source);
    if (first != null) {
      throw first;
    }
  }

  private static void closeAll(ActorTestKit kit, Database state, AutoCloseable... dbs) {
    if (kit != null) {
      kit.shutdownTestKit();
    }
    if (state != null) {
      state.close();
    }
    for (AutoCloseable db : dbs) {
      if (db != null) {
        try {
          db.close();
        } catch (Exception e) {
          // Best effort: the next run's databases have names of their own.
        }
      }
    }
  }

  static Source source(String... statements) {
    return new Source(List.of(statements), false);
  }

  static Source rolledBack(String... statements) {
    return new Source(List.of(statements), true);
  }

  static SourceAutocommit sourceAutocommit(String... statements) {
    return new SourceAutocommit(List.of(statements));
  }

  /** A fresh directory for one run's spill files (deleted with the JVM's temporary files). */
  private static java.nio.file.Path spillDirectory() {
    try {
      java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("weir-diff-spill");
      dir.toFile().deleteOnExit();
      return dir;
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  static Targets targets(String... statements) {
    return new Targets(List.of(statements));
  }

  static Scenario scenario(
      String name, List<String> tables, List<String> source, List<String> pubs, Step... steps) {
    return new Scenario(
        Objects.requireNonNull(name), tables, source, pubs, List.of(steps), true, 1, false);
  }
}
