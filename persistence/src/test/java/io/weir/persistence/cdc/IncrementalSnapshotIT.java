package io.weir.persistence.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.weir.persistence.cdc.mirror.MirrorSettings;
import io.weir.persistence.cdc.mirror.PostgresMirrorSink;
import io.weir.persistence.cdc.sink.ChangeSink;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Incremental snapshots against a real PostgreSQL: chunked backfill while streaming, concurrent
 * updates and deletes of rows in open chunks, pipeline crashes between chunks. A trigger on the
 * mirror records every write that would move a row's version backwards.
 */
class IncrementalSnapshotIT extends PipelineITBase {
  @Override
  protected String harnessName() {
    return "incr_it";
  }

  @BeforeEach
  void setUp() throws Exception {
    sql(
        "CREATE TABLE items (id int PRIMARY KEY, v bigint NOT NULL, note text)",
        "CREATE TABLE logs (id int NOT NULL, msg text)",
        "ALTER TABLE logs REPLICA IDENTITY FULL",
        "CREATE PUBLICATION pub FOR TABLE items, logs",
        "CREATE SCHEMA mirror",
        "CREATE TABLE mirror.items (id int PRIMARY KEY, v bigint NOT NULL, note text)",
        "CREATE TABLE mirror.logs (id int PRIMARY KEY, msg text)",
        "CREATE TABLE mirror.regressions (id int, old_v bigint, new_v bigint)",
        "CREATE FUNCTION mirror.no_regress() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            + "IF NEW.v < OLD.v THEN INSERT INTO mirror.regressions VALUES (OLD.id, OLD.v, NEW.v); END IF; RETURN NEW; END $$",
        "CREATE TRIGGER no_regress BEFORE UPDATE ON mirror.items FOR EACH ROW EXECUTE FUNCTION mirror.no_regress()",
        "INSERT INTO items SELECT g, 1, 'seed ' || g FROM generate_series(1, 40000) g",
        "INSERT INTO logs SELECT g, 'log ' || g FROM generate_series(1, 300) g",
        "ANALYZE items");
  }

  private long count(String query) throws SQLException {
    try (Connection c = db.connect();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(query)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  private long differences(String table) throws SQLException {
    return count(
        "SELECT count(*) FROM public."
            + table
            + " s FULL JOIN mirror."
            + table
            + " m ON s.id = m.id "
            + "WHERE s IS DISTINCT FROM m");
  }

  private PipelineSettings settings(boolean atStart) {
    return PipelineSettings.of("p_" + slot, slot, List.of("pub")).toBuilder()
        .statusInterval(Duration.ofSeconds(1))
        .snapshotBatchRows(400)
        .incrementalAtStart(atStart)
        .excludedSchemas(List.of("weir", "mirror"))
        .build();
  }

  private ActorRef<CdcPipeline.Command> start(PipelineSettings settings) {
    ChangeSink sink =
        new PostgresMirrorSink(state.dataSource(), blockingIo, MirrorSettings.of("mirror"));
    ActorRef<CdcPipeline.Command> p =
        kit.spawn(CdcPipeline.create(settings, source, sink, state.dataSource(), "weir"));
    var probe = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Start(probe.ref()));
    probe.receiveMessage();
    return p;
  }

  private void awaitRunning(ActorRef<CdcPipeline.Command> p) {
    await("running")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(100))
        .until(() -> status(p).state().equals("running"));
  }

  private CdcPipeline.SnapshotReply snapshot(ActorRef<CdcPipeline.Command> p, List<String> tables) {
    var probe = kit.<CdcPipeline.SnapshotReply>createTestProbe();
    p.tell(new CdcPipeline.StartIncrementalSnapshot(tables, probe.ref()));
    return probe.receiveMessage(Duration.ofSeconds(30));
  }

  /** Updates (v + 1), deletes and inserts of new ids on items until stopped; v never goes down. */
  private Thread writer(AtomicBoolean stop, AtomicLong writes, AtomicReference<Throwable> error) {
    Thread t =
        new Thread(
            () -> {
              try (Connection c = db.connect();
                  Statement s = c.createStatement()) {
                ThreadLocalRandom r = ThreadLocalRandom.current();
                int nextId = 1_000_000;
                while (!stop.get()) {
                  int id = r.nextInt(1, 40_001);
                  switch (r.nextInt(10)) {
                    case 0 -> s.execute("DELETE FROM public.items WHERE id = " + id);
                    case 1 ->
                        s.execute("INSERT INTO public.items VALUES (" + (nextId++) + ", 1, 'new')");
                    case 2 ->
                        s.execute(
                            "UPDATE public.logs SET msg = msg || '+' WHERE id = "
                                + r.nextInt(1, 301));
                    default ->
                        s.execute(
                            "UPDATE public.items SET v = v + 1, note = 'updated' WHERE id = " + id);
                  }
                  writes.incrementAndGet();
                  Thread.sleep(
                      2); // a busy source the stream keeps up with: chunks wait for the stream
                }
              } catch (Throwable e) {
                error.set(e);
              }
            });
    t.start();
    return t;
  }

  @Test
  void backfillsWhileStreamingThroughCrashesWithoutRegressingARow() throws Exception {
    ActorRef<CdcPipeline.Command> p = start(settings(false));
    awaitRunning(p);
    AtomicBoolean stop = new AtomicBoolean();
    AtomicLong writes = new AtomicLong();
    AtomicReference<Throwable> error = new AtomicReference<>();
    Thread w = writer(stop, writes, error);
    CdcPipeline.SnapshotReply started = snapshot(p, List.of("public.items", "public.logs"));
    assertThat(started.error()).isNull();
    assertThat(snapshot(p, List.of("public.items")).error())
        .as("one snapshot at a time")
        .isEqualTo("snapshot-in-progress");

    // Crash the pipeline between chunks a few times: stop the actor (its connections go away) and
    // start a new one, which resumes from the progress stored with the last applied chunk.
    List<Long> rowsAtCrash = new ArrayList<>();
    for (int crash = 0; crash < 3; crash++) {
      ActorRef<CdcPipeline.Command> current = p;
      long target = 6_000L * (crash + 1);
      await("chunks applied")
          .atMost(Duration.ofSeconds(120))
          .pollInterval(Duration.ofMillis(50))
          .until(
              () -> {
                SnapshotStatus s = status(current).snapshot();
                return s != null && (s.rowsDone() >= target || !s.state().equals("running"));
              });
      rowsAtCrash.add(status(current).snapshot().rowsDone());
      kit.stop(current, Duration.ofSeconds(30));
      p = start(settings(false));
      awaitRunning(p);
    }
    ActorRef<CdcPipeline.Command> last = p;
    await("the snapshot completes")
        .atMost(Duration.ofSeconds(180))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> {
              SnapshotStatus s = status(last).snapshot();
              return s != null && s.state().equals("done");
            });
    SnapshotStatus done = status(last).snapshot();
    stop.set(true);
    w.join();
    assertThat(error.get()).isNull();
    await("the mirror equals the source")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(500))
        .until(() -> differences("items") == 0 && differences("logs") == 0);
    long regressions = count("SELECT count(*) FROM mirror.regressions");
    System.out.println(
        "incremental-snapshot: rows-at-crashes="
            + rowsAtCrash
            + " rows-after-last-restart="
            + done.rowsDone()
            + " tables="
            + done.tablesDone()
            + "/"
            + done.tablesTotal()
            + " writes="
            + writes.get()
            + " regressions="
            + regressions
            + " mirror-diff=0");
    assertThat(regressions).as("no row moves back to an older version").isZero();
    assertThat(done.tablesDone()).isEqualTo(2);
    assertThat(done.rowsDone())
        .as("the last run resumed, it did not start over")
        .isLessThan(40_000);
    assertThat(count("SELECT count(*) FROM weir.cdc_slot")).isEqualTo(1);
  }

  @Test
  void startModeIncrementalBackfillsOnceAndRequestsAreChecked() throws Exception {
    ActorRef<CdcPipeline.Command> p = start(settings(true));
    await("the start-up snapshot completes")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> {
              SnapshotStatus s = status(p).snapshot();
              return s != null && s.state().equals("done");
            });
    assertThat(differences("items")).isZero();
    assertThat(differences("logs")).isZero();
    kit.stop(p, Duration.ofSeconds(30));

    ActorRef<CdcPipeline.Command> again = start(settings(true));
    awaitRunning(again);
    assertThat(status(again).snapshot())
        .as("a completed start-up snapshot is not run again")
        .isNull();
    CdcPipeline.SnapshotReply unknown = snapshot(again, List.of("public.not_there"));
    assertThat(unknown.error()).isEqualTo("unknown-table");
    assertThat(unknown.message()).contains("not in the pipeline's publications");
    assertThat(status(again).state())
        .as("a bad request does not disturb streaming")
        .isEqualTo("running");
    kit.stop(again, Duration.ofSeconds(30));
    ActorRef<CdcPipeline.Command> stopped =
        kit.spawn(
            CdcPipeline.create(
                settings(false),
                source,
                new PostgresMirrorSink(state.dataSource(), blockingIo, MirrorSettings.of("mirror")),
                state.dataSource(),
                "weir"));
    assertThat(snapshot(stopped, List.of()).error()).isEqualTo("not-running");
    ActorRef<CdcPipeline.Command> noSnapshots =
        kit.spawn(
            CdcPipeline.create(
                settings(false), source, new RecordingSink(), state.dataSource(), "weir"));
    assertThat(snapshot(noSnapshots, List.of()).error())
        .as("a sink that cannot be seeded from a snapshot")
        .isEqualTo("unsupported");
  }

  /**
   * Forces a change between the first chunk's watermarks: the test holds an ACCESS EXCLUSIVE lock
   * on the table, so the chunk's read (its snapshot already taken) waits; meanwhile it updates a
   * row of that chunk and deletes another, then commits, which releases the read. The chunk's stale
   * copies must lose to those changes, and the first chunk's clearing of the mirror must not wipe
   * them out.
   */
  @Test
  void changesBetweenTheFirstChunksWatermarksWin() throws Exception {
    ActorRef<CdcPipeline.Command> p = start(settings(false));
    awaitRunning(p);
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      c.setAutoCommit(false);
      s.execute("LOCK TABLE public.items IN ACCESS EXCLUSIVE MODE");
      assertThat(snapshot(p, List.of("public.items")).error()).isNull();
      await("the chunk read waits for the lock")
          .atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(50))
          .until(
              () ->
                  count(
                          "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'weir-incremental-snapshot'"
                              + " AND wait_event_type = 'Lock'")
                      == 1);
      s.execute("UPDATE public.items SET v = 100, note = 'changed in the window' WHERE id = 5");
      s.execute("DELETE FROM public.items WHERE id = 6");
      c.commit();
    }
    await("the snapshot completes")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> {
              SnapshotStatus st = status(p).snapshot();
              return st != null && st.state().equals("done");
            });
    await("the mirror equals the source")
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(200))
        .until(() -> differences("items") == 0);
    assertThat(count("SELECT v FROM mirror.items WHERE id = 5"))
        .as("the live update, not the chunk's copy")
        .isEqualTo(100);
    assertThat(count("SELECT count(*) FROM mirror.items WHERE id = 6"))
        .as("the live delete")
        .isZero();
    assertThat(count("SELECT count(*) FROM mirror.regressions")).isZero();
  }
}
