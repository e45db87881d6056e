package io.weir.persistence.cdc.mirror;

import io.weir.persistence.SafeErrors;
import io.weir.persistence.cdc.PipelineContext;
import io.weir.persistence.cdc.TableVerdict;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.persistence.cdc.sink.SinkException;
import io.weir.persistence.cdc.snapshot.SnapshotChunk;
import io.weir.persistence.cdc.source.PublishedTable;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.SlotIncarnation;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.PgOutputDecodeException;
import io.weir.protocol.pgoutput.TupleData;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The built-in sink that mirrors source tables into tables of a PostgreSQL database (the same
 * server as the source or another), effect-once.
 *
 * <h2>Lifecycle</h2>
 *
 * <ol>
 *   <li>{@link #open} creates, if missing, the checkpoint table ({@link
 *       MirrorSettings#checkpointTable()}) and, when {@link MirrorSettings#appliedLog()} is on, the
 *       applied log, both in the target schema of the target database. It forgets what it knew of
 *       the target tables (they may have changed while the pipeline was down) and returns the
 *       stored checkpoint of the pipeline, if any. Open may be called any number of times; the last
 *       call's pipeline and slot incarnation are the ones {@code apply} uses, and {@code apply}
 *       refuses to run before an open that named an incarnation.
 *   <li>{@link #apply} writes one batch in one database transaction (see below) on the executor
 *       given at construction, never on the caller's thread.
 *   <li>{@link #close} does nothing: the sink holds no connection between calls, and the {@link
 *       DataSource} and executor belong to the caller.
 * </ol>
 *
 * <h2>Effect-once</h2>
 *
 * Each {@code apply} takes a connection, turns autocommit off, and locks the pipeline's checkpoint
 * row {@code FOR UPDATE} (inserting a placeholder first if there is none, so that even the first
 * batch serialises). It skips every transaction whose commit LSN is at or below the checkpoint,
 * applies the rest change by change, moves the checkpoint to the last applied commit LSN, and
 * commits; the returned stage completes only after the commit. Data and checkpoint commit
 * atomically, so a batch is either wholly applied with its checkpoint or not at all, and a
 * redelivered transaction (after a crash, a restart, or a stale second writer that waited on the
 * row lock) is skipped. With the applied log on, each applied transaction adds its row there in the
 * same database transaction. A checkpoint of another slot incarnation is refused permanently: its
 * positions mean nothing in this stream.
 *
 * <h2>Changes and targets</h2>
 *
 * How each change is applied, how a target's key is chosen and how values are bound: {@link
 * MirrorChanges}.
 *
 * <h2>Failures</h2>
 *
 * Every failure rolls the whole batch back and completes the stage with a {@link SinkException}
 * whose message names tables and the SQLState, never a value: permanent for integrity, data,
 * undefined-object and similar refusals, transient for lost connections, serialization failures,
 * deadlocks, resource shortage and unknown SQLStates. The driver's exception is not the cause (its
 * message may quote the row); a {@link ScrubbedSqlException} with only classes and SQLState stands
 * in for it.
 */
public final class PostgresMirrorSink implements ChangeSink {
  private static final Logger LOG = LoggerFactory.getLogger(PostgresMirrorSink.class);

  private final DataSource dataSource;
  private final Executor executor;
  private final MirrorSettings settings;

  private final MirrorCheckpoints checkpoints;

  private final MirrorChanges changes;

  private volatile Opened opened;

  private record Opened(String pipeline, Optional<SlotIncarnation> incarnation) {}

  /**
   * @param dataSource the target database; not owned (not closed by {@link #close})
   * @param executor where blocking JDBC runs: the pipeline's blocking-IO dispatcher
   */
  public PostgresMirrorSink(DataSource dataSource, Executor executor, MirrorSettings settings) {
    this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
    this.executor = Objects.requireNonNull(executor, "executor");
    this.settings = Objects.requireNonNull(settings, "settings");
    this.changes = new MirrorChanges(settings);
    this.checkpoints = new MirrorCheckpoints(settings);
  }

  /** Prepares the checkpoint table (and applied log) and returns the pipeline's checkpoint. */
  @Override
  public CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context) {
    Objects.requireNonNull(context, "context");
    Opened next =
        new Opened(Objects.requireNonNull(context.pipeline(), "pipeline"), context.incarnation());
    return onExecutor(
        () -> {
          changes.forgetTargets();
          Optional<SinkCheckpoint> checkpoint = openBlocking(next.pipeline());
          opened = next;
          LOG.debug("mirror opened; checkpoint present: {}", checkpoint.isPresent());
          return checkpoint;
        });
  }

  /**
   * Deletes the pipeline's checkpoint row (with its incremental snapshot progress) from the
   * checkpoint table; the mirror tables and the applied log stay. Nothing to do when the table does
   * not exist.
   */
  @Override
  public CompletionStage<Void> forget(String pipeline) {
    Objects.requireNonNull(pipeline, "pipeline");
    return onExecutor(
        () -> {
          try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(true);
            if (checkpoints.tableExists(c, settings.checkpointTable())) {
              try (PreparedStatement ps =
                  c.prepareStatement(
                      "DELETE FROM " + checkpoints.qualified() + " WHERE pipeline = ?")) {
                ps.setString(1, pipeline);
                ps.executeUpdate();
              }
            }
          }
          opened = null;
          return null;
        });
  }

  /** Applies the batch and moves the checkpoint in one database transaction; see class docs. */
  @Override
  public CompletionStage<Void> apply(List<Transaction> transactions) {
    Opened current = opened;
    if (current == null) {
      return CompletableFuture.failedFuture(
          SinkException.permanent("mirror received transactions before it was opened", null));
    }
    if (current.incarnation().isEmpty()) {
      return CompletableFuture.failedFuture(
          SinkException.permanent(
              "mirror was opened without a slot incarnation; open it again once the slot exists",
              null));
    }
    List<Transaction> batch = List.copyOf(transactions);
    if (batch.isEmpty()) {
      return CompletableFuture.completedFuture(null);
    }
    return onExecutor(
        () -> {
          applyBlocking(current.pipeline(), current.incarnation().get(), batch);
          return null;
        });
  }

  @Override
  public boolean supportsSnapshots() {
    return true;
  }

  @Override
  public boolean storesSnapshotProgress() {
    return true;
  }

  /**
   * Upserts snapshot rows in one database transaction; a first chunk truncates the target first (in
   * the same transaction), and an incremental chunk's progress is stored in the checkpoint row in
   * that transaction too.
   */
  @Override
  public CompletionStage<Void> applySnapshot(SnapshotChunk chunk) {
    return whenOpened(
        "received snapshot rows",
        (run, current) -> {
          TablePlan plan = changes.plan(run, chunk.table());
          if (chunk.firstForTable()) {
            run.context = "the clearing of " + plan.what();
            try (Statement s = run.connection.createStatement()) {
              s.execute(
                  MirrorSql.truncate(
                      List.of(
                          MirrorSql.qualified(
                              settings.targetSchema(), settings.targetTable(chunk.table()))),
                      false));
            }
          }
          for (TupleData row : chunk.rows()) {
            changes.upsertRow(run, plan, row);
          }
          run.flush();
          if (chunk.progress().isPresent()) {
            run.context = checkpoints.what();
            checkpoints.lock(run.connection, current.pipeline(), current.incarnation().get());
            checkpoints.writeProgress(run.connection, current.pipeline(), chunk.progress());
          }
        });
  }

  /** Moves the checkpoint to the hand-off position (never backwards). */
  @Override
  public CompletionStage<Void> completeSnapshot(Lsn handOff) {
    return whenOpened(
        "completed a snapshot",
        (run, current) -> {
          run.context = checkpoints.what();
          Lsn watermark =
              checkpoints.lock(run.connection, current.pipeline(), current.incarnation().get());
          if (handOff.isAfter(watermark)) {
            checkpoints.write(
                run.connection, current.pipeline(), current.incarnation().get(), handOff);
          }
        });
  }

  @Override
  public CompletionStage<Optional<String>> snapshotProgress() {
    Opened current = opened;
    if (current == null) {
      return CompletableFuture.completedFuture(Optional.empty());
    }
    return onExecutor(
        () -> {
          try (Connection c = dataSource.getConnection();
              PreparedStatement ps =
                  c.prepareStatement(
                      "SELECT snapshot_progress FROM "
                          + checkpoints.qualified()
                          + " WHERE pipeline = ?")) {
            ps.setString(1, current.pipeline());
            try (ResultSet rs = ps.executeQuery()) {
              return rs.next() ? Optional.ofNullable(rs.getString(1)) : Optional.<String>empty();
            }
          } catch (SQLException e) {
            throw MirrorFailures.fromSql(e, checkpoints.what());
          }
        });
  }

  private interface OpenedBody {
    void run(MirrorRun run, Opened opened) throws SQLException;
  }

  /**
   * Runs {@code body} in one durable transaction once opened with an incarnation; else a permanent
   * failure.
   */
  private CompletionStage<Void> whenOpened(String what, OpenedBody body) {
    Opened current = opened;
    if (current == null || current.incarnation().isEmpty()) {
      return CompletableFuture.failedFuture(
          SinkException.permanent(
              "mirror " + what + " before it was opened with a slot incarnation", null));
    }
    return onExecutor(
        () -> {
          inTransaction(
              run -> {
                body.run(run, current);
                run.flush();
                run.context = "a commit";
                return true;
              });
          return null;
        });
  }

  private interface RunBody {
    /** Does the transaction's work; returns whether to commit it (false rolls it back). */
    boolean run(MirrorRun run) throws SQLException;
  }

  /**
   * One database transaction on a pooled connection, committed durably when {@code body} says so;
   * failures roll back and are scrubbed. Returns whether it committed.
   */
  private boolean inTransaction(RunBody body) {
    MirrorRun run = new MirrorRun();
    run.context = "a connection to the target database";
    try (Connection c = dataSource.getConnection()) {
      run.connection = c;
      boolean autoCommit = c.getAutoCommit();
      try {
        c.setAutoCommit(false);
        // The slot may be acknowledged once this commit returns, so the commit must be durable
        // even where the target runs with synchronous_commit off.
        try (Statement durable = c.createStatement()) {
          durable.execute("SET LOCAL synchronous_commit = on");
        }
        if (!body.run(run)) {
          c.rollback();
          return false;
        }
        run.flush();
        c.commit();
        return true;
      } catch (Throwable t) {
        rollbackQuietly(c);
        throw t;
      } finally {
        run.close();
        restoreAutoCommit(c, autoCommit);
      }
    } catch (SQLException e) {
      throw MirrorFailures.fromSql(e, run.context);
    } catch (PgOutputDecodeException e) {
      throw MirrorFailures.refused(
          run.context, MirrorFailures.MALFORMED_ROW, e.reason().description());
    }
  }

  /**
   * Nothing to release: connections are taken per call, the DataSource and executor are the
   * caller's.
   */
  @Override
  public void close() {}

  // ---------------------------------------------------------------------------------------------
  // open

  private Optional<SinkCheckpoint> openBlocking(String pipeline) {
    try (Connection c = dataSource.getConnection()) {
      boolean autoCommit = c.getAutoCommit();
      try {
        // Each statement on its own: a lost creation race must not abort the ones after it.
        c.setAutoCommit(true);
        if (!checkpoints.schemaExists(c)) {
          throw MirrorFailures.refused(
              checkpoints.what(),
              MirrorFailures.TARGET_MISSING,
              "the target schema does not exist: create it");
        }
        checkpoints.ensureTable(c, settings.checkpointTable(), checkpoints.createCheckpoint());
        checkpoints.ensureProgressColumn(c);
        if (settings.appliedLog()) {
          checkpoints.ensureTable(
              c, MirrorSettings.APPLIED_LOG_TABLE, checkpoints.createAppliedLog());
        }
        return checkpoints.read(c, pipeline, false);
      } finally {
        restoreAutoCommit(c, autoCommit);
      }
    } catch (SQLException e) {
      throw MirrorFailures.fromSql(e, checkpoints.what());
    }
  }

  // ---------------------------------------------------------------------------------------------
  // apply

  private void applyBlocking(
      String pipeline, SlotIncarnation incarnation, List<Transaction> batch) {
    int[] applied = {0};
    Lsn[] through = {Lsn.INVALID};
    boolean committed =
        inTransaction(
            run -> {
              run.context = checkpoints.what();
              Lsn watermark = checkpoints.lock(run.connection, pipeline, incarnation);
              for (Transaction t : batch) {
                // Redelivered (or out of order): its effects are already in, with its checkpoint.
                if (!t.commitLsn().isAfter(watermark)) {
                  continue;
                }
                for (Change change : t.changes()) {
                  changes.apply(run, change);
                }
                if (settings.appliedLog()) {
                  run.logApplied(checkpoints.insertApplied(), pipeline, t);
                }
                watermark = t.commitLsn();
                applied[0]++;
              }
              run.flush();
              if (applied[0] == 0) {
                return false; // nothing new: roll back, which also drops a placeholder row and the
                // lock
              }
              run.context = checkpoints.what();
              run.flushLog();
              checkpoints.write(run.connection, pipeline, incarnation, watermark);
              through[0] = watermark;
              run.context = "the commit of a batch";
              return true;
            });
    if (committed) {
      LOG.debug(
          "mirror applied {} of {} transactions up to {}", applied[0], batch.size(), through[0]);
    } else {
      LOG.debug("mirror skipped a batch of {} already applied transactions", batch.size());
    }
  }

  /**
   * For every published table: its target read from the catalog and planned as the first change
   * would plan it, then checked for the kinds of change the publications send. Writes nothing.
   */
  @Override
  public CompletionStage<List<TableVerdict>> check(List<PublishedTable> tables) {
    return CompletableFuture.supplyAsync(
        () -> {
          try (Connection c = dataSource.getConnection()) {
            List<TableVerdict> out = new ArrayList<>();
            for (PublishedTable t : tables) {
              out.add(changes.check(c, t));
            }
            return out;
          } catch (SQLException e) {
            throw new CompletionException(
                SinkException.transientFailure(
                    "the mirror's target database could not be read: " + SafeErrors.describe(e),
                    null));
          }
        },
        executor);
  }

  @FunctionalInterface
  private interface Blocking<T> {
    T call() throws Exception;
  }

  private <T> CompletionStage<T> onExecutor(Blocking<T> work) {
    CompletableFuture<T> result = new CompletableFuture<>();
    try {
      executor.execute(
          () -> {
            try {
              result.complete(work.call());
            } catch (Throwable t) {
              result.completeExceptionally(toSinkFailure(t));
            }
          });
    } catch (RejectedExecutionException e) {
      result.completeExceptionally(
          SinkException.transientFailure("mirror's blocking executor refused the work", null));
    }
    return result;
  }

  /** SinkExceptions pass; anything else becomes a value-free one with a scrubbed cause. */
  private static Throwable toSinkFailure(Throwable t) {
    if (t instanceof SinkException || t instanceof Error) {
      return t;
    }
    if (t instanceof SQLException e) {
      return MirrorFailures.fromSql(e, "the target database");
    }
    if (t instanceof PgOutputDecodeException e) {
      return SinkException.permanent("mirror refused a row: " + e.reason().description(), null);
    }
    return SinkException.transientFailure(
        "mirror failed unexpectedly: " + SafeErrors.describe(t), ScrubbedException.of(t));
  }

  private static void rollbackQuietly(Connection c) {
    try {
      c.rollback();
    } catch (SQLException e) {
      // The connection is likely gone; the server aborts the transaction with it.
      LOG.debug("mirror rollback failed: {}", SafeErrors.describe(e));
    }
  }

  private static void restoreAutoCommit(Connection c, boolean autoCommit) {
    try {
      if (!c.isClosed() && c.getAutoCommit() != autoCommit) {
        c.setAutoCommit(autoCommit);
      }
    } catch (SQLException e) {
      LOG.debug("mirror could not restore autocommit: {}", SafeErrors.describe(e));
    }
  }
}
