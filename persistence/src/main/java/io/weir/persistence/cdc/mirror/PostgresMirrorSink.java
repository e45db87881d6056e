package io.weir.persistence.cdc.mirror;

import io.weir.persistence.SafeErrors;
import io.weir.persistence.cdc.ChangeSink;
import io.weir.persistence.cdc.PipelineContext;
import io.weir.persistence.cdc.PublishedTable;
import io.weir.persistence.cdc.SinkCheckpoint;
import io.weir.persistence.cdc.SinkException;
import io.weir.persistence.cdc.SnapshotChunk;
import io.weir.persistence.cdc.TableHandling;
import io.weir.persistence.cdc.TableVerdict;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.SlotIncarnation;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.ColumnKind;
import io.weir.protocol.pgoutput.OldTupleKind;
import io.weir.protocol.pgoutput.PgOutputDecodeException;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import io.weir.protocol.pgoutput.TupleData;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
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
 * <h2>Changes</h2>
 *
 * The mirror applies what PostgreSQL's apply worker applies, finding rows the way it does (see
 * Targets), except that it upserts where the apply worker would fail on a row that is already there
 * (an insert) or skip an update whose row is missing.
 *
 * <ul>
 *   <li>Insert: {@code INSERT ... ON CONFLICT (key) DO UPDATE} of every non-key column, so a row
 *       that is already there (from a snapshot or a diverged target) is overwritten, not refused. A
 *       target without a key takes a plain {@code INSERT}.
 *   <li>Update: the same upsert of the new row. If the old image (REPLICA IDENTITY key or FULL)
 *       shows the target's key changed, the row under the old key is updated to the new values
 *       ({@code UPDATE ... WHERE old key}, one statement on its own), so that target columns the
 *       source does not send (a publication's column list) keep their values, as with the apply
 *       worker; without such a row the new row is upserted; a diverged target that already holds
 *       the new key refuses it (SQLState 23505). A target without a key updates one row equal to
 *       the FULL old image ({@code WHERE (tableoid, ctid) = (SELECT ... LIMIT 1)}: of equal
 *       duplicates any one is the row), or inserts the new row if none is.
 *   <li>Unchanged TOAST: a column the source update left untouched carries no value. Where the old
 *       image carries it (every column of a FULL image; a key column stored out of line, for which
 *       PostgreSQL sends the old key) the value is taken from there. Otherwise it is neither
 *       inserted nor set, so the stored value stays (a key-changing update moves the stored row);
 *       if no old row is there, the new row is upserted without those columns. An upsert that
 *       inserts a row the target lacked (the mirror started after the row was written) leaves them
 *       at their defaults: seed the target first if that matters.
 *   <li>GENERATED ALWAYS identity columns: inserted with {@code OVERRIDING SYSTEM VALUE} and never
 *       set by an UPDATE (PostgreSQL allows none to): a new value (the source ran {@code SET id =
 *       DEFAULT}) replaces the row in one statement ({@code WITH old AS (DELETE ... RETURNING ...)
 *       INSERT ... SELECT ... FROM old}), keeping its unchanged TOAST values. Outside the key, the
 *       upsert is guarded ({@code DO UPDATE ... WHERE target.id IS NOT DISTINCT FROM EXCLUDED.id})
 *       and runs alone, so its count shows a changed value; a FULL old image shows it directly.
 *   <li>Delete: by the target's key, with values from the old image; without a key, one row equal
 *       to the FULL old image.
 *   <li>Truncate: {@code TRUNCATE} of the mapped targets ({@code RESTART IDENTITY} if the source
 *       said so), never {@code CASCADE}: tables that reference a target are not the mirror's to
 *       empty, so such a truncate is refused (SQLState 0A000).
 *   <li>Transactional logical messages: ignored; a mirror has nowhere to put them.
 *   <li>Schema changes: the mirror never alters a target. Add a column to the target before the
 *       source, or changes that write it are refused ({@code target-column-missing}).
 * </ul>
 *
 * <h2>Targets</h2>
 *
 * A target table must exist. Its key is chosen as the apply worker chooses it: the replica identity
 * index if the target has {@code REPLICA IDENTITY USING INDEX}, else the primary key. Every key
 * column must be a source column; updates and deletes also need every key column in the source's
 * replica identity (or the source's replica identity FULL), since that is what they identify rows
 * by. A target with neither index takes inserts (an insert-only table) and, when the source is
 * REPLICA IDENTITY FULL, updates and deletes matched on every column of the old image: {@code c =
 * ?} with the column's default equality, {@code c IS NULL} for a NULL (for composites {@code IS NOT
 * DISTINCT FROM NULL}, since {@code IS NULL} is true of a composite of NULLs), json and xml as
 * text; a column without a default B-tree or hash equality refuses such updates and deletes. What
 * each kind of change needs is checked when it first comes (typed reasons, {@link MirrorFailures}).
 * The target is read from the catalog once per source table shape and cached until the next open.
 * Values are bound as untyped text (the pipeline decodes pgoutput in text mode; binary columns are
 * refused) and cast in the statement to the target column's type, named by schema and type name
 * from the catalog, quoted, without type modifier ({@code ?::"public"."pair"}): operators such as
 * {@code =} on composite keys resolve, and the column's own assignment applies the modifier.
 * Changes are read once, in order, and written as they come: a transaction read from a spill file
 * is never held in memory. Consecutive changes with the same statement shape go to the server as a
 * JDBC batch of at most 1000 statements or 2 MiB of values, which keeps their order; a repeated key
 * starts a new batch, so pgjdbc's {@code reWriteBatchedInserts} (multi-row INSERTs, markedly
 * faster) is safe to turn on for the target DataSource. Table, column and type names come from the
 * catalogs and are quoted; the configured names pass the identifier allow-list.
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

  private static final String SCHEMA_EXISTS_SQL =
      "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = ?";
  private static final String TABLE_EXISTS_SQL =
      "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
          + " WHERE n.nspname = ? AND c.relname = ?";

  private final DataSource dataSource;
  private final Executor executor;
  private final MirrorSettings settings;

  private final String checkpointWhat;
  private final String createCheckpoint;
  private final String createAppliedLog;
  private final String selectCheckpoint;
  private final String lockCheckpoint;
  private final String insertPlaceholder;
  private final String updateCheckpoint;
  private final String insertApplied;
  private final String checkpointQualified;

  /** Plans per source table shape; a new shape (added column) gets a new plan. */
  private final Map<TableSchema, TablePlan> plans = new ConcurrentHashMap<>();

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
    String checkpoint = MirrorSql.qualified(settings.targetSchema(), settings.checkpointTable());
    String applied = MirrorSql.qualified(settings.targetSchema(), MirrorSettings.APPLIED_LOG_TABLE);
    this.checkpointWhat =
        "its checkpoint in " + settings.targetSchema() + "." + settings.checkpointTable();
    this.createCheckpoint = MirrorSql.createCheckpointTable(checkpoint);
    this.createAppliedLog = MirrorSql.createAppliedLog(applied);
    this.selectCheckpoint =
        "SELECT incarnation, commit_lsn::text FROM " + checkpoint + " WHERE pipeline = ?";
    this.lockCheckpoint = selectCheckpoint + " FOR UPDATE";
    // 0/0 is below every commit LSN; the row only exists so that FOR UPDATE has a row to lock.
    this.insertPlaceholder =
        "INSERT INTO "
            + checkpoint
            + " (pipeline, incarnation, commit_lsn) VALUES (?, ?, '0/0')"
            + " ON CONFLICT (pipeline) DO NOTHING";
    this.updateCheckpoint =
        "UPDATE "
            + checkpoint
            + " SET incarnation = ?, commit_lsn = ?, updated_at = now() WHERE pipeline = ?";
    this.checkpointQualified = checkpoint;
    this.insertApplied = "INSERT INTO " + applied + " (pipeline, xid, commit_lsn) VALUES (?, ?, ?)";
  }

  /** Prepares the checkpoint table (and applied log) and returns the pipeline's checkpoint. */
  @Override
  public CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context) {
    Objects.requireNonNull(context, "context");
    Opened next =
        new Opened(Objects.requireNonNull(context.pipeline(), "pipeline"), context.incarnation());
    return onExecutor(
        () -> {
          plans.clear();
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
            if (exists(c, TABLE_EXISTS_SQL, settings.targetSchema(), settings.checkpointTable())) {
              try (PreparedStatement ps =
                  c.prepareStatement(
                      "DELETE FROM " + checkpointQualified + " WHERE pipeline = ?")) {
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
          TablePlan plan = plan(run, chunk.table());
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
            requireWidth(plan, row);
            upsert(run, plan, RowImage.of(row), null);
          }
          run.flush();
          if (chunk.progress().isPresent()) {
            run.context = checkpointWhat;
            lockCheckpoint(run.connection, current.pipeline(), current.incarnation().get());
            writeProgress(run.connection, current.pipeline(), chunk.progress());
          }
        });
  }

  /** Moves the checkpoint to the hand-off position (never backwards). */
  @Override
  public CompletionStage<Void> completeSnapshot(Lsn handOff) {
    return whenOpened(
        "completed a snapshot",
        (run, current) -> {
          run.context = checkpointWhat;
          Lsn watermark =
              lockCheckpoint(run.connection, current.pipeline(), current.incarnation().get());
          if (handOff.isAfter(watermark)) {
            writeCheckpoint(
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
                          + checkpointQualified
                          + " WHERE pipeline = ?")) {
            ps.setString(1, current.pipeline());
            try (ResultSet rs = ps.executeQuery()) {
              return rs.next() ? Optional.ofNullable(rs.getString(1)) : Optional.<String>empty();
            }
          } catch (SQLException e) {
            throw MirrorFailures.fromSql(e, checkpointWhat);
          }
        });
  }

  private void writeProgress(Connection c, String pipeline, Optional<String> progress)
      throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "UPDATE "
                + checkpointQualified
                + " SET snapshot_progress = ?, updated_at = now() WHERE pipeline = ?")) {
      ps.setString(1, progress.orElse(null));
      ps.setString(2, pipeline);
      ps.executeUpdate();
    }
  }

  /** Checkpoint tables created before snapshots existed lack the progress column: add it. */
  private void ensureProgressColumn(Connection c) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT 1 FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class t ON t.oid = a.attrelid "
                + "JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace "
                + "WHERE n.nspname = ? AND t.relname = ? AND a.attname = 'snapshot_progress' AND NOT a.attisdropped")) {
      ps.setString(1, settings.targetSchema());
      ps.setString(2, settings.checkpointTable());
      try (ResultSet rs = ps.executeQuery()) {
        if (rs.next()) {
          return;
        }
      }
    }
    try (Statement s = c.createStatement()) {
      s.execute(
          "ALTER TABLE "
              + checkpointQualified
              + " ADD COLUMN IF NOT EXISTS snapshot_progress text");
    }
  }

  private interface OpenedBody {
    void run(Run run, Opened opened) throws SQLException;
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
    boolean run(Run run) throws SQLException;
  }

  /**
   * One database transaction on a pooled connection, committed durably when {@code body} says so;
   * failures roll back and are scrubbed. Returns whether it committed.
   */
  private boolean inTransaction(RunBody body) {
    Run run = new Run();
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
        if (!exists(c, SCHEMA_EXISTS_SQL, settings.targetSchema(), null)) {
          throw MirrorFailures.refused(
              checkpointWhat,
              MirrorFailures.TARGET_MISSING,
              "the target schema does not exist: create it");
        }
        ensureTable(c, settings.checkpointTable(), createCheckpoint);
        ensureProgressColumn(c);
        if (settings.appliedLog()) {
          ensureTable(c, MirrorSettings.APPLIED_LOG_TABLE, createAppliedLog);
        }
        return readCheckpoint(c, pipeline, false);
      } finally {
        restoreAutoCommit(c, autoCommit);
      }
    } catch (SQLException e) {
      throw MirrorFailures.fromSql(e, checkpointWhat);
    }
  }

  /**
   * Creates a bookkeeping table unless it exists. The check comes first because CREATE ... IF NOT
   * EXISTS still needs the CREATE privilege, which a sink that only writes may lack.
   */
  private void ensureTable(Connection c, String table, String ddl) throws SQLException {
    if (exists(c, TABLE_EXISTS_SQL, settings.targetSchema(), table)) {
      return;
    }
    try (Statement s = c.createStatement()) {
      s.execute(ddl);
    } catch (SQLException e) {
      // Two sinks creating it at once: the loser sees a duplicate catalog entry.
      String state = MirrorFailures.sqlState(e);
      if (("23505".equals(state) || "42P07".equals(state))
          && exists(c, TABLE_EXISTS_SQL, settings.targetSchema(), table)) {
        return;
      }
      throw e;
    }
  }

  private static boolean exists(Connection c, String sql, String first, String second)
      throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, first);
      if (second != null) {
        ps.setString(2, second);
      }
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next();
      }
    }
  }

  private Optional<SinkCheckpoint> readCheckpoint(Connection c, String pipeline, boolean forUpdate)
      throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(forUpdate ? lockCheckpoint : selectCheckpoint)) {
      ps.setString(1, pipeline);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          return Optional.empty();
        }
        try {
          return Optional.of(
              new SinkCheckpoint(
                  SlotIncarnation.parse(rs.getString(1)), Lsn.parse(rs.getString(2))));
        } catch (IllegalArgumentException e) {
          throw MirrorFailures.refused(
              checkpointWhat, MirrorFailures.CHECKPOINT, "the stored checkpoint is malformed");
        }
      }
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
              run.context = checkpointWhat;
              Lsn watermark = lockCheckpoint(run.connection, pipeline, incarnation);
              for (Transaction t : batch) {
                // Redelivered (or out of order): its effects are already in, with its checkpoint.
                if (!t.commitLsn().isAfter(watermark)) {
                  continue;
                }
                for (Change change : t.changes()) {
                  applyChange(run, change);
                }
                if (settings.appliedLog()) {
                  run.logApplied(insertApplied, pipeline, t);
                }
                watermark = t.commitLsn();
                applied[0]++;
              }
              run.flush();
              if (applied[0] == 0) {
                return false; // nothing new: roll back, which also drops a placeholder row and the
                // lock
              }
              run.context = checkpointWhat;
              run.flushLog();
              writeCheckpoint(run.connection, pipeline, incarnation, watermark);
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

  /** Locks the pipeline's checkpoint row (creating a placeholder) and returns its commit LSN. */
  private Lsn lockCheckpoint(Connection c, String pipeline, SlotIncarnation incarnation)
      throws SQLException {
    Optional<SinkCheckpoint> checkpoint = readCheckpoint(c, pipeline, true);
    if (checkpoint.isEmpty()) {
      // Nothing to lock yet: insert a row (waiting out a concurrent first writer) and lock that.
      try (PreparedStatement ps = c.prepareStatement(insertPlaceholder)) {
        ps.setString(1, pipeline);
        ps.setString(2, incarnation.key());
        ps.executeUpdate();
      }
      checkpoint = readCheckpoint(c, pipeline, true);
      if (checkpoint.isEmpty()) {
        throw SinkException.transientFailure("mirror could not lock its checkpoint row", null);
      }
    }
    if (!checkpoint.get().incarnation().equals(incarnation)) {
      throw MirrorFailures.refused(
          checkpointWhat,
          MirrorFailures.CHECKPOINT,
          "it belongs to another slot incarnation: drop the pipeline (or delete its checkpoint"
              + " row) and start it again");
    }
    return checkpoint.get().commitLsn();
  }

  private void writeCheckpoint(Connection c, String pipeline, SlotIncarnation incarnation, Lsn lsn)
      throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(updateCheckpoint)) {
      ps.setString(1, incarnation.key());
      ps.setObject(2, lsn.toString(), Types.OTHER);
      ps.setString(3, pipeline);
      if (ps.executeUpdate() != 1) {
        throw SinkException.transientFailure("mirror lost its locked checkpoint row", null);
      }
    }
  }

  private void applyChange(Run run, Change change) throws SQLException {
    if (change instanceof Change.Insert insert) {
      TablePlan plan = plan(run, insert.table());
      requireWidth(plan, insert.newRow());
      upsert(run, plan, RowImage.of(insert.newRow()), null);
    } else if (change instanceof Change.Update update) {
      update(run, update);
    } else if (change instanceof Change.Delete delete) {
      delete(run, delete);
    } else if (change instanceof Change.Truncate truncate) {
      truncate(run, truncate);
    }
    // Change.Message: a mirror has no place for logical decoding messages; ignored.
  }

  private void update(Run run, Change.Update update) throws SQLException {
    TablePlan plan = plan(run, update.table());
    run.context = plan.what();
    TupleData oldRow = update.oldKind() == OldTupleKind.NONE ? null : update.oldRow();
    requireWidth(plan, update.newRow());
    if (oldRow != null) {
      requireWidth(plan, oldRow);
    }
    // Unchanged TOAST columns whose value the old image carries (a FULL image, or a key column
    // stored out of line in a key image) are written from it.
    RowImage newRow = RowImage.filled(plan.source(), update.newRow(), update.oldKind(), oldRow);
    TupleData fullOld = update.oldKind() == OldTupleKind.FULL ? oldRow : null;
    if (plan.keyless()) {
      updateKeyless(run, plan, fullOld, newRow);
      return;
    }
    // Which target row: by its key, which the change only names if the key lies within the
    // source's replica identity.
    plan.requireKeyIsIdentity();
    if (oldRow != null) {
      RowImage old = RowImage.of(oldRow);
      if (keyChanged(plan, old, newRow)) {
        // As the apply worker does: the row found by its old key takes the new values, so that
        // target columns the source does not send (a publication's column list) and unchanged
        // TOAST values stay. A GENERATED ALWAYS identity column cannot be set by an UPDATE: such
        // rows are replaced, carrying those columns over. No row under the old key: upsert.
        requireKeyValues(plan, old, "the old row image");
        BitSet present = present(plan, newRow);
        boolean replace = plan.hasIdentityAlways();
        int moved =
            run.executeNow(
                replace ? plan.replaceByKey(present) : plan.updateByKey(present),
                plan.what(),
                ps -> {
                  if (replace) {
                    int next = bindKey(plan, ps, 1, old);
                    bindPresent(plan, ps, next, newRow, present);
                  } else {
                    int next = bindPresent(plan, ps, 1, newRow, present);
                    bindKey(plan, ps, next, old);
                  }
                });
        if (moved == 0) {
          upsert(run, plan, newRow, null);
        }
        return;
      }
    }
    upsert(run, plan, newRow, fullOld);
  }

  /**
   * An update of a target without a key: one row equal to the FULL old image takes the new values
   * (duplicates are equal: any one of them is the row); if none is there, the new row is inserted,
   * as an upsert would.
   */
  private void updateKeyless(Run run, TablePlan plan, TupleData fullOld, RowImage newRow)
      throws SQLException {
    plan.requireFindableByOldImage(fullOld != null);
    RowImage old = RowImage.of(fullOld);
    BitSet nulls = nullsOf(plan, old);
    BitSet present = present(plan, newRow);
    int g = plan.guardedIdentity();
    int changed;
    if (g >= 0 && present.get(g) && !sameValue(old, newRow, g)) {
      // A new GENERATED ALWAYS identity value: no UPDATE may write it, so replace the row.
      changed =
          run.executeNow(
              plan.replaceOne(present, nulls),
              plan.what(),
              ps -> {
                int next = bindMatch(plan, ps, 1, old);
                bindPresent(plan, ps, next, newRow, present);
              });
    } else {
      BitSet set = (BitSet) present.clone();
      if (g >= 0) {
        set.clear(g); // unchanged: not written (UPDATE may not set it)
      }
      if (set.isEmpty()) {
        return; // nothing the target could change
      }
      changed =
          run.executeNow(
              plan.updateOne(set, nulls),
              plan.what(),
              ps -> {
                int next = bindPresent(plan, ps, 1, newRow, set);
                bindMatch(plan, ps, next, old);
              });
    }
    if (changed == 0) {
      upsert(run, plan, newRow, null);
    }
  }

  private void delete(Run run, Change.Delete delete) throws SQLException {
    TablePlan plan = plan(run, delete.table());
    run.context = plan.what();
    requireWidth(plan, delete.oldRow());
    RowImage old = RowImage.of(delete.oldRow());
    if (!plan.keyless()) {
      deleteByKey(run, plan, old);
      return;
    }
    plan.requireFindableByOldImage(delete.oldKind() == OldTupleKind.FULL);
    BitSet nulls = nullsOf(plan, old);
    run.batch(
        plan.deleteOne(nulls), plan.what(), null, rowBytes(old), ps -> bindMatch(plan, ps, 1, old));
  }

  /**
   * Writes a new row: an upsert by the target key (a plain insert for a keyless target). With a
   * GENERATED ALWAYS identity column outside the key, the upsert runs alone and guarded (see {@link
   * TablePlan#upsert}) unless {@code fullOld} shows the column unchanged; a stored row with another
   * identity value is then replaced.
   */
  private void upsert(Run run, TablePlan plan, RowImage row, TupleData fullOld)
      throws SQLException {
    run.context = plan.what();
    BitSet present = present(plan, row);
    Object key = plan.keyless() ? null : keyOf(plan, row);
    int g = plan.guardedIdentity();
    if (g < 0 || !present.get(g)) {
      run.batch(
          plan.upsert(present),
          plan.what(),
          key,
          rowBytes(row),
          ps -> bindPresent(plan, ps, 1, row, present));
      return;
    }
    if (fullOld != null && sameValue(RowImage.of(fullOld), row, g)) {
      run.batch(
          plan.upsertKeepingIdentity(present),
          plan.what(),
          key,
          rowBytes(row),
          ps -> bindPresent(plan, ps, 1, row, present));
      return;
    }
    int written =
        run.executeNow(
            plan.upsert(present), plan.what(), ps -> bindPresent(plan, ps, 1, row, present));
    if (written == 0) {
      int replaced =
          run.executeNow(
              plan.replaceByKey(present),
              plan.what(),
              ps -> {
                int next = bindKey(plan, ps, 1, row);
                bindPresent(plan, ps, next, row, present);
              });
      if (replaced != 1) {
        throw SinkException.transientFailure(
            "mirror lost a row it was replacing in " + plan.what(), null);
      }
    }
  }

  private void deleteByKey(Run run, TablePlan plan, RowImage oldRow) throws SQLException {
    String sql = plan.deleteByKey();
    requireKeyValues(plan, oldRow, "the old row image");
    run.batch(sql, plan.what(), null, rowBytes(oldRow), ps -> bindKey(plan, ps, 1, oldRow));
  }

  private void truncate(Run run, Change.Truncate truncate) throws SQLException {
    Set<String> targets = new LinkedHashSet<>();
    List<String> names = new ArrayList<>();
    for (TableSchema table : truncate.tables()) {
      String target = settings.targetTable(table);
      if (targets.add(MirrorSql.qualified(settings.targetSchema(), target))) {
        names.add(settings.targetSchema() + "." + target);
      }
    }
    if (targets.isEmpty()) {
      return;
    }
    run.flush();
    run.context = "a truncate of " + String.join(", ", names);
    try (Statement s = run.connection.createStatement()) {
      s.execute(MirrorSql.truncate(List.copyOf(targets), truncate.restartIdentity()));
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
              out.add(check(c, t));
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

  private TableVerdict check(Connection c, PublishedTable published) throws SQLException {
    TableSchema source = published.schema();
    String target = settings.targetTable(source);
    try {
      TablePlan plan = newPlan(c, source, target, what(source, target));
      // Without a replica identity PostgreSQL refuses the table's updates and deletes at the
      // source while they are published: only inserts can come.
      boolean identity =
          source.replicaIdentity() == ReplicaIdentity.FULL || source.keyIndexes().length > 0;
      TableHandling handling = plan.handling(published.findsRows() && identity);
      String into = "into " + settings.targetSchema() + "." + target;
      String detail =
          switch (handling) {
            case BY_PRIMARY_KEY -> into + ", rows found by its primary key " + plan.keys();
            case BY_IDENTITY_INDEX ->
                into + ", rows found by its replica identity index " + plan.keys();
            case BY_FULL_IMAGE ->
                into + " (no key), rows found by their whole old image (REPLICA IDENTITY FULL)";
            case INSERTS_ONLY ->
                into
                    + " (no key): plain inserts, as only inserts can come (only inserts are"
                    + " published, or the source has no replica identity)";
            default -> into;
          };
      return TableVerdict.handled(source.qualifiedName(), handling, detail);
    } catch (SinkException refused) {
      return TableVerdict.refused(
          source.qualifiedName(), MirrorFailures.code(refused), refused.getMessage());
    }
  }

  /**
   * The plan for a source table shape, reading the target from the catalog on first use (a new
   * shape, such as one with an added column, reads it again: the column was added to the target
   * first).
   */
  private TablePlan plan(Run run, TableSchema source) throws SQLException {
    TablePlan plan = plans.get(source);
    if (plan != null) {
      return plan;
    }
    String target = settings.targetTable(source);
    String what = what(source, target);
    run.context = what;
    plan = newPlan(run.connection, source, target, what);
    plans.put(source, plan);
    return plan;
  }

  /** {@code "a change to s.t (target m.t)"}: what refusals name. */
  private String what(TableSchema source, String target) {
    return "a change to "
        + source.qualifiedName()
        + " (target "
        + settings.targetSchema()
        + "."
        + target
        + ")";
  }

  /** Reads the target from the catalog and plans {@code source} onto it (refusals thrown). */
  private TablePlan newPlan(Connection c, TableSchema source, String target, String what)
      throws SQLException {
    TargetTable table =
        TargetTable.read(c, settings.targetSchema(), target, what)
            .orElseThrow(
                () ->
                    MirrorFailures.refused(
                        what,
                        MirrorFailures.TARGET_MISSING,
                        "the target table does not exist: create it (the mirror never creates or"
                            + " changes target tables)"));
    return TablePlan.plan(source, settings.targetSchema(), target, table, what);
  }

  // ---------------------------------------------------------------------------------------------
  // row images

  private static void requireWidth(TablePlan plan, TupleData row) {
    if (row.size() != plan.source().columns().size()) {
      throw MirrorFailures.refused(
          plan.what(),
          MirrorFailures.MALFORMED_ROW,
          "a row image and the table schema disagree on the column count");
    }
  }

  private static void requireKeyValues(TablePlan plan, RowImage row, String image) {
    for (int k : plan.keyIndexes()) {
      if (row.isNull(k) || row.isUnchangedToast(k)) {
        throw MirrorFailures.refused(
            plan.what(),
            MirrorFailures.MISSING_VALUE,
            image + " carries no value for a key column of the target");
      }
    }
  }

  /** The value bytes of a row image: what binding it adds to a pending batch, roughly. */
  private static long rowBytes(RowImage row) {
    long n = 0;
    for (int i = 0; i < row.size(); i++) {
      n += row.length(i);
    }
    return n;
  }

  /** The target key of a row image, for telling whether a pending upsert batch already has it. */
  private static Object keyOf(TablePlan plan, RowImage row) {
    int[] keys = plan.keyIndexes();
    if (keys.length == 1) {
      return keyPart(row, keys[0]);
    }
    List<Object> values = new ArrayList<>(keys.length);
    for (int k : keys) {
      values.add(keyPart(row, k));
    }
    return values;
  }

  /** The column's bytes, compared by content; an empty list for a column without bytes. */
  private static Object keyPart(RowImage row, int column) {
    return row.kind(column).hasData() ? ByteBuffer.wrap(row.bytes(column)) : List.of();
  }

  /** Whether the target key differs between the images; unchanged TOAST counts as unchanged. */
  private static boolean keyChanged(TablePlan plan, RowImage oldRow, RowImage newRow) {
    for (int k : plan.keyIndexes()) {
      if (!sameValue(oldRow, newRow, k)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Same kind and bytes in both images; an unchanged TOAST marker on either side counts as same.
   */
  private static boolean sameValue(RowImage a, RowImage b, int column) {
    ColumnKind before = a.kind(column);
    ColumnKind after = b.kind(column);
    if (before == ColumnKind.UNCHANGED_TOAST || after == ColumnKind.UNCHANGED_TOAST) {
      return true;
    }
    return before == after
        && (!before.hasData() || Arrays.equals(a.bytes(column), b.bytes(column)));
  }

  /**
   * Columns that carry a value (all but unchanged TOAST the old image could not fill); every key
   * column must be among them.
   */
  private static BitSet present(TablePlan plan, RowImage row) {
    BitSet present = new BitSet(row.size());
    for (int i = 0; i < row.size(); i++) {
      if (!row.isUnchangedToast(i)) {
        present.set(i);
      }
    }
    for (int k : plan.keyIndexes()) {
      if (!present.get(k)) {
        throw MirrorFailures.refused(
            plan.what(),
            MirrorFailures.MISSING_VALUE,
            "a key column of the target arrived as unchanged TOAST, and no old key image carries"
                + " its value");
      }
    }
    return present;
  }

  /** The NULL columns of an old image used to find a row of a keyless target. */
  private static BitSet nullsOf(TablePlan plan, RowImage old) {
    BitSet nulls = new BitSet(old.size());
    for (int i = 0; i < old.size(); i++) {
      if (old.isUnchangedToast(i)) {
        throw MirrorFailures.refused(
            plan.what(),
            MirrorFailures.MISSING_VALUE,
            "the old row image lacks a column's value (unchanged TOAST), so the row cannot be"
                + " found by it: give the target table a primary key or a replica identity index");
      }
      if (old.isNull(i)) {
        nulls.set(i);
      }
    }
    return nulls;
  }

  private static int bindPresent(
      TablePlan plan, PreparedStatement ps, int first, RowImage row, BitSet present)
      throws SQLException {
    int param = first;
    for (int i = present.nextSetBit(0); i >= 0; i = present.nextSetBit(i + 1)) {
      bind(plan, ps, param++, row, i);
    }
    return param;
  }

  private static int bindKey(TablePlan plan, PreparedStatement ps, int first, RowImage row)
      throws SQLException {
    int param = first;
    for (int k : plan.keyIndexes()) {
      bind(plan, ps, param++, row, k);
    }
    return param;
  }

  /** Binds the non-NULL columns of an old image, as {@link MirrorSql#match} expects them. */
  private static int bindMatch(TablePlan plan, PreparedStatement ps, int first, RowImage old)
      throws SQLException {
    int param = first;
    for (int i = 0; i < old.size(); i++) {
      if (!old.isNull(i)) {
        bind(plan, ps, param++, old, i);
      }
    }
    return param;
  }

  /** Binds one column as untyped text: the statement casts it to the target column's type. */
  private static void bind(
      TablePlan plan, PreparedStatement ps, int param, RowImage row, int column)
      throws SQLException {
    switch (row.kind(column)) {
      case NULL -> ps.setNull(param, Types.OTHER);
      case TEXT -> ps.setObject(param, row.text(column), Types.OTHER);
      case BINARY ->
          throw MirrorFailures.refused(
              plan.what(),
              MirrorFailures.MALFORMED_ROW,
              "a column arrived in binary format; the mirror needs the pipeline's text format");
      case UNCHANGED_TOAST ->
          throw MirrorFailures.refused(
              plan.what(),
              MirrorFailures.MISSING_VALUE,
              "an unchanged TOAST column has no value to write");
    }
  }

  // ---------------------------------------------------------------------------------------------
  // plumbing

  @FunctionalInterface
  private interface Binder {
    void bind(PreparedStatement ps) throws SQLException;
  }

  @FunctionalInterface
  private interface Blocking<T> {
    T call() throws Exception;
  }

  /**
   * The statements of one apply: consecutive changes of one statement shape accumulate in a JDBC
   * batch, which goes out when the shape changes, when it reaches {@link #MAX_BATCH_STATEMENTS}
   * statements or {@link #MAX_BATCH_BYTES} bytes of values, or when the apply ends. Statements run
   * in the order the changes came, so batching never reorders them; the bounds keep the memory of a
   * pending batch (the driver holds every bound value, {@link #pendingKeys} every key) small
   * however large the transaction, which matters when its changes are read from a spill file as
   * they are applied. A second upsert of a key already in the pending batch starts a new batch:
   * with pgjdbc's {@code reWriteBatchedInserts} a batch becomes one multi-row INSERT, and
   * PostgreSQL refuses an ON CONFLICT DO UPDATE that touches a row twice (SQLState 21000). {@link
   * #context} names what the statement that may fail next works on, for the error message.
   */
  private static final class Run implements AutoCloseable {
    /** A few round trips per thousand rows cost little; larger batches buy nothing measurable. */
    static final int MAX_BATCH_STATEMENTS = 1000;

    /**
     * Wide rows flush sooner: the driver keeps each bound value (as a String) until it executes.
     */
    static final long MAX_BATCH_BYTES = 2L << 20;

    Connection connection;
    String context;
    private final Map<String, PreparedStatement> statements = new HashMap<>();
    private final Set<Object> pendingKeys = new HashSet<>();
    private PreparedStatement pending;
    private String pendingSql;
    private String pendingWhat;
    private int pendingStatements;
    private long pendingBytes;
    private PreparedStatement log;
    private int logged;

    /**
     * @param key the row's target key for upserts, null for statements that are never rewritten
     * @param bytes the value bytes the statement binds
     */
    void batch(String sql, String what, Object key, long bytes, Binder binder) throws SQLException {
      if (pending != null && !sql.equals(pendingSql)) {
        flush();
      }
      if (key != null && !pendingKeys.add(key)) {
        flush();
        pendingKeys.add(key);
      }
      if (pending == null) {
        pending = statement(sql);
        pendingSql = sql;
        pendingWhat = what;
      }
      context = what;
      binder.bind(pending);
      pending.addBatch();
      pendingStatements++;
      pendingBytes += bytes;
      if (pendingStatements >= MAX_BATCH_STATEMENTS || pendingBytes >= MAX_BATCH_BYTES) {
        flush();
      }
    }

    /** Runs one statement now (after what is pending) and returns its update count. */
    int executeNow(String sql, String what, Binder binder) throws SQLException {
      flush();
      context = what;
      PreparedStatement ps = statement(sql);
      binder.bind(ps);
      return ps.executeUpdate();
    }

    void flush() throws SQLException {
      if (pending != null) {
        PreparedStatement ps = pending;
        context = pendingWhat;
        pending = null;
        pendingSql = null;
        pendingKeys.clear();
        pendingStatements = 0;
        pendingBytes = 0;
        ps.executeBatch();
      }
    }

    void logApplied(String sql, String pipeline, Transaction t) throws SQLException {
      if (log == null) {
        log = connection.prepareStatement(sql);
      }
      log.setString(1, pipeline);
      log.setLong(2, t.xid());
      log.setObject(3, t.commitLsn().toString(), Types.OTHER);
      log.addBatch();
      logged++;
    }

    void flushLog() throws SQLException {
      if (logged > 0) {
        log.executeBatch();
        logged = 0;
      }
    }

    private PreparedStatement statement(String sql) throws SQLException {
      PreparedStatement ps = statements.get(sql);
      if (ps == null) {
        ps = connection.prepareStatement(sql);
        statements.put(sql, ps);
      }
      return ps;
    }

    @Override
    public void close() {
      for (PreparedStatement ps : statements.values()) {
        closeQuietly(ps);
      }
      statements.clear();
      if (log != null) {
        closeQuietly(log);
      }
    }

    private static void closeQuietly(Statement s) {
      try {
        s.close();
      } catch (SQLException e) {
        // The connection is going back to the pool or away; nothing to act on.
      }
    }
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
