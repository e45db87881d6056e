package io.weir.persistence.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.PostgresTls;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.cdc.sink.CheckpointStore;
import io.weir.persistence.cdc.sink.CheckpointedSink;
import io.weir.persistence.cdc.sink.DeliverySink;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.SlotIncarnation;
import io.weir.protocol.cdc.Transaction;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The library checkpoint store against a real PostgreSQL: skip, store, and fault handling. */
class CheckpointedSinkIT {
  private static final SlotIncarnation INC = new SlotIncarnation(UUID.randomUUID(), 1, 1);
  private TestPostgres.TestDatabase db;
  private Database database;
  private final ExecutorService io = Executors.newFixedThreadPool(2);
  private final List<Long> delivered = new ArrayList<>();
  private final DeliverySink recording =
      t -> {
        synchronized (delivered) {
          delivered.add(t.xid());
        }
        return CompletableFuture.completedFuture(null);
      };

  @BeforeEach
  void setUp() {
    db = TestPostgres.server().freshDatabase("ckpt_it");
    database =
        Database.create(
            PostgresSettings.create(db.config().withFallback(ConfigFactory.load()).resolve()),
            "ckpt-it");
    SchemaMigrator.migrate(database.dataSource(), "weir");
  }

  @AfterEach
  void tearDown() {
    io.shutdownNow();
    database.close();
    db.close();
  }

  private static Transaction txn(long xid) {
    return new Transaction(
        xid, Lsn.of(xid * 100), Lsn.of(xid * 100 + 10), Instant.EPOCH, List.of(), List.of());
  }

  /** Checkpoints by count only (the max delay is an hour). */
  private CheckpointedSink sink(CheckpointStore store, int every) {
    return sink(store, every, Duration.ofHours(1));
  }

  private CheckpointedSink sink(CheckpointStore store, int every, Duration maxDelay) {
    return new CheckpointedSink(recording, store, io, 2, Duration.ofMillis(50), every, maxDelay);
  }

  @Test
  void deliversThenStoresAndSkipsWhatTheStoreHolds() throws Exception {
    CheckpointStore store = new CheckpointStore(database.dataSource(), "weir");
    CheckpointedSink first = sink(store, 1);
    assertThat(first.open(new PipelineContext("p", Optional.of(INC))).toCompletableFuture().get())
        .isEmpty();
    first.apply(List.of(txn(1))).toCompletableFuture().get();
    first.apply(List.of(txn(2))).toCompletableFuture().get();
    assertThat(first.durableThrough(List.of(txn(2))))
        .as("the slot may confirm what is stored")
        .isEqualTo(Lsn.of(210));
    assertThat(first.supportsBatches()).isFalse();

    CheckpointedSink afterCrash = sink(store, 1);
    Optional<SinkCheckpoint> cp =
        afterCrash.open(new PipelineContext("p", Optional.of(INC))).toCompletableFuture().get();
    assertThat(cp).hasValue(new SinkCheckpoint(INC, Lsn.of(200)));
    afterCrash.apply(List.of(txn(1))).toCompletableFuture().get();
    afterCrash.apply(List.of(txn(2))).toCompletableFuture().get();
    afterCrash.apply(List.of(txn(3))).toCompletableFuture().get();
    assertThat(delivered)
        .as("redelivered transactions at or below the checkpoint are skipped")
        .containsExactly(1L, 2L, 3L);
  }

  @Test
  void batchedCheckpointWritesConfirmOnlyWhatIsStored() throws Exception {
    CheckpointStore store = new CheckpointStore(database.dataSource(), "weir");
    CheckpointedSink s = sink(store, 3);
    s.open(new PipelineContext("p", Optional.of(INC))).toCompletableFuture().get();
    s.apply(List.of(txn(1))).toCompletableFuture().get();
    s.apply(List.of(txn(2))).toCompletableFuture().get();
    assertThat(s.durableThrough(List.of(txn(2))))
        .as("nothing stored yet: nothing to confirm")
        .isEqualTo(Lsn.INVALID);
    s.apply(List.of(txn(3))).toCompletableFuture().get();
    assertThat(s.durableThrough(List.of(txn(3)))).isEqualTo(Lsn.of(310));
    assertThat(store.read("p"))
        .hasValueSatisfying(v -> assertThat(v.checkpoint().commitLsn()).isEqualTo(Lsn.of(300)));
  }

  @Test
  void onAQuietStreamTheLastTransactionsAreStoredAfterTheMaxDelay() throws Exception {
    CheckpointStore store = new CheckpointStore(database.dataSource(), "weir");
    CheckpointedSink s = sink(store, 100, Duration.ofMillis(300));
    s.open(new PipelineContext("p", Optional.of(INC))).toCompletableFuture().get();
    s.apply(List.of(txn(1))).toCompletableFuture().get();
    s.apply(List.of(txn(2))).toCompletableFuture().get();
    await("the timer stores the last delivered transaction")
        .atMost(Duration.ofSeconds(20))
        .until(() -> s.durableNow().equals(Lsn.of(210)));
    assertThat(store.read("p"))
        .hasValueSatisfying(v -> assertThat(v.checkpoint().commitLsn()).isEqualTo(Lsn.of(200)));
    // A second quiet spell: its own timer.
    s.apply(List.of(txn(3))).toCompletableFuture().get();
    await("the next one is stored too")
        .atMost(Duration.ofSeconds(20))
        .until(() -> s.durableNow().equals(Lsn.of(310)));
    CheckpointedSink afterCrash = sink(store, 100);
    assertThat(
            afterCrash.open(new PipelineContext("p", Optional.of(INC))).toCompletableFuture().get())
        .hasValue(new SinkCheckpoint(INC, Lsn.of(300)));
  }

  @Test
  void aTimerOfARunThatStoppedWritesNothing() throws Exception {
    CheckpointStore store = new CheckpointStore(database.dataSource(), "weir");
    CheckpointedSink s = sink(store, 100, Duration.ofMillis(300));
    s.open(new PipelineContext("p", Optional.of(INC))).toCompletableFuture().get();
    s.apply(List.of(txn(1))).toCompletableFuture().get();
    s.streamStopped();
    await("the stopped run's timer stores nothing, for four times its delay")
        .during(Duration.ofMillis(1200))
        .atMost(Duration.ofSeconds(10))
        .until(() -> store.read("p").isEmpty());
    s.forget("p").toCompletableFuture().get();
    s.open(new PipelineContext("p", Optional.of(INC))).toCompletableFuture().get();
    s.apply(List.of(txn(2))).toCompletableFuture().get();
    await("the new run's timer stores its own delivery")
        .atMost(Duration.ofSeconds(20))
        .until(() -> s.durableNow().equals(Lsn.of(210)));
  }

  @Test
  void aStoreFaultOnTheTimerHaltsAtTheNextCall() throws Exception {
    CheckpointStore store = new CheckpointStore(database.dataSource(), "weir");
    CheckpointedSink s = sink(store, 100, Duration.ofMillis(100));
    s.open(new PipelineContext("p", Optional.of(INC))).toCompletableFuture().get();
    try (var c = database.dataSource().getConnection();
        var st = c.createStatement()) {
      st.execute("ALTER TABLE weir.cdc_checkpoint RENAME TO cdc_checkpoint_gone");
    }
    s.apply(List.of(txn(1))).toCompletableFuture().get();
    await("the failed timer write surfaces")
        .atMost(Duration.ofSeconds(20))
        .untilAsserted(
            () ->
                assertThatThrownBy(s::durableNow)
                    .isInstanceOfSatisfying(
                        PipelineHaltException.class,
                        e -> assertThat(e.reason()).isEqualTo(HaltReason.CHECKPOINT_STORE_FAILED))
                    .hasMessageContaining("42P01"));
    assertThatThrownBy(() -> s.apply(List.of(txn(2))).toCompletableFuture().join())
        .cause()
        .isInstanceOf(PipelineHaltException.class);
    assertThat(delivered).as("nothing is delivered after the failed write").containsExactly(1L);
  }

  /**
   * The real database, except that after {@link #breakNext} the next connection handed out has had
   * its server process terminated: its first statement fails as a lost connection does.
   */
  private final class Flaky implements javax.sql.DataSource {
    private final java.util.concurrent.atomic.AtomicBoolean breakNext =
        new java.util.concurrent.atomic.AtomicBoolean();

    @Override
    public java.sql.Connection getConnection() throws java.sql.SQLException {
      java.sql.Connection c = database.dataSource().getConnection();
      if (breakNext.compareAndSet(true, false)) {
        int pid;
        try (var st = c.createStatement();
            var rs = st.executeQuery("SELECT pg_backend_pid()")) {
          rs.next();
          pid = rs.getInt(1);
        }
        try (var other = db.connect();
            var st = other.createStatement()) {
          st.execute("SELECT pg_terminate_backend(" + pid + ", 10000)");
        }
      }
      return c;
    }

    @Override
    public java.sql.Connection getConnection(String user, String password) {
      throw new UnsupportedOperationException();
    }

    @Override
    public java.io.PrintWriter getLogWriter() {
      return null;
    }

    @Override
    public void setLogWriter(java.io.PrintWriter out) {}

    @Override
    public void setLoginTimeout(int seconds) {}

    @Override
    public int getLoginTimeout() {
      return 0;
    }

    @Override
    public java.util.logging.Logger getParentLogger() {
      throw new UnsupportedOperationException();
    }

    @Override
    public <T> T unwrap(Class<T> iface) {
      throw new UnsupportedOperationException();
    }

    @Override
    public boolean isWrapperFor(Class<?> iface) {
      return false;
    }
  }

  @Test
  void aLostConnectionDuringACheckpointWriteIsRetriedAndCounted() throws Exception {
    Flaky flaky = new Flaky();
    CheckpointStore store = new CheckpointStore(flaky, "weir");
    CheckpointedSink s = sink(store, 1);
    s.open(new PipelineContext("p", Optional.of(INC))).toCompletableFuture().get();
    flaky.breakNext.set(true);
    s.apply(List.of(txn(1))).toCompletableFuture().get();
    assertThat(s.storeRetries()).as("the write on the dead connection, retried once").isEqualTo(1);
    assertThat(s.durableThrough(List.of(txn(1)))).isEqualTo(Lsn.of(110));
    assertThat(new CheckpointStore(database.dataSource(), "weir").read("p"))
        .hasValueSatisfying(v -> assertThat(v.checkpoint().commitLsn()).isEqualTo(Lsn.of(100)));
  }

  @Test
  void permanentStoreFaultsHaltAtOnceAndTransientOnesAfterRetries() throws Exception {
    CheckpointedSink missingTable =
        sink(new CheckpointStore(database.dataSource(), "no_such_schema"), 1);
    assertThatThrownBy(
            () ->
                missingTable
                    .open(new PipelineContext("p", Optional.of(INC)))
                    .toCompletableFuture()
                    .join())
        .isInstanceOf(CompletionException.class)
        .cause()
        .isInstanceOfSatisfying(
            PipelineHaltException.class,
            e -> assertThat(e.reason()).isEqualTo(HaltReason.CHECKPOINT_STORE_FAILED))
        .hasMessageContaining("42P01");

    PostgresSettings down =
        new PostgresSettings(
            "jdbc:postgresql://127.0.0.1:1/weir",
            "weir",
            "",
            "weir",
            1,
            Duration.ofSeconds(1),
            Duration.ofSeconds(1),
            Duration.ofSeconds(1),
            Duration.ofSeconds(1),
            PostgresTls.NONE);
    try (Database unreachable = Database.create(down, "ckpt-down")) {
      CheckpointedSink s = sink(new CheckpointStore(unreachable.dataSource(), "weir"), 1);
      assertThatThrownBy(
              () -> s.open(new PipelineContext("p", Optional.of(INC))).toCompletableFuture().join())
          .cause()
          .isInstanceOfSatisfying(
              PipelineHaltException.class,
              e -> assertThat(e.reason()).isEqualTo(HaltReason.CHECKPOINT_STORE_FAILED))
          .hasMessageContaining("failed 3 times");
      assertThat(s.storeRetries()).as("two retries, counted for the metric").isEqualTo(2);
      CheckpointedSink noRetries =
          new CheckpointedSink(
              recording,
              new CheckpointStore(unreachable.dataSource(), "weir"),
              io,
              0,
              Duration.ofMillis(50),
              1,
              Duration.ofHours(1));
      assertThatThrownBy(
              () ->
                  noRetries
                      .open(new PipelineContext("p", Optional.of(INC)))
                      .toCompletableFuture()
                      .join())
          .as("max-retries 0 halts on the first fault")
          .cause()
          .hasMessageContaining("failed 1 times");
      assertThat(noRetries.storeRetries()).isZero();
    }
  }
}
