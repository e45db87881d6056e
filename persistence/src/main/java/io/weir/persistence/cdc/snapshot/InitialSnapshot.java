package io.weir.persistence.cdc.snapshot;

import io.weir.persistence.cdc.PipelineSettings;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.source.PublishedTable;
import io.weir.persistence.cdc.source.SlotManager;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.TupleData;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.function.BooleanSupplier;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyOut;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads every table of the pipeline's publications at a slot's exported snapshot and hands the rows
 * to the sink in batches ({@link SnapshotChunk}, the first of each table flagged {@code
 * firstForTable}). One REPEATABLE READ, READ ONLY transaction on its own connection imports the
 * snapshot; each table is read with {@code COPY (SELECT published columns [WHERE row filter]) TO
 * STDOUT}, the fastest way out of PostgreSQL, and parsed from COPY's text format (the same text
 * pgoutput sends). Reading the next batch overlaps with the sink applying the previous one; sink
 * calls never overlap. Blocking: run on an IO thread.
 */
public final class InitialSnapshot {
  private static final Logger log = LoggerFactory.getLogger(InitialSnapshot.class);

  /** A batch is handed over at this many bytes of row text even below the row count. */
  private static final long MAX_BATCH_BYTES = 8L << 20;

  private final PipelineSettings settings;
  private final SourceSettings source;
  private final ChangeSink sink;
  private final SnapshotTracker tracker;
  private final BooleanSupplier cancelled;

  public InitialSnapshot(
      PipelineSettings settings,
      SourceSettings source,
      ChangeSink sink,
      SnapshotTracker tracker,
      BooleanSupplier cancelled) {
    this.settings = settings;
    this.source = source;
    this.sink = sink;
    this.tracker = tracker;
    this.cancelled = cancelled;
  }

  /**
   * Copies every published table as of {@code snapshot} into the sink.
   *
   * @return the shapes of the tables read
   */
  public List<TableSchema> run(SlotManager.ExportedSnapshot snapshot)
      throws SQLException, InterruptedException {
    try (Connection c = open()) {
      c.setAutoCommit(false);
      try (Statement s = c.createStatement()) {
        s.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
        // The name's shape was checked (hex digits and dashes): it cannot carry SQL.
        s.execute("SET TRANSACTION SNAPSHOT '" + snapshot.name() + "'");
        s.execute("SET LOCAL statement_timeout = 0");
      }
      List<PublishedTable> tables = PublishedTable.list(c, settings.publications());
      long estimate = 0;
      for (PublishedTable t : tables) {
        estimate += t.estimatedRows();
      }
      tracker.planned(tables.size(), estimate);
      tracker.log(log, settings.name());
      List<TableSchema> shapes = new ArrayList<>();
      for (PublishedTable t : tables) {
        copy(c, t);
        shapes.add(t.schema());
      }
      c.commit();
      return shapes;
    }
  }

  private Connection open() throws SQLException {
    return source.connect("weir-snapshot");
  }

  /** Reads one table into the sink; returns once the sink applied all of it. */
  private void copy(Connection c, PublishedTable table) throws SQLException, InterruptedException {
    String name = table.schema().qualifiedName();
    tracker.reading(name);
    String sql =
        "COPY (SELECT "
            + table.quotedColumns()
            + " FROM "
            + table.fromClause()
            + (table.rowFilter() == null ? "" : " WHERE " + table.rowFilter())
            + ") TO STDOUT";
    int columns = table.schema().columns().size();
    CopyOut copy = c.unwrap(PGConnection.class).getCopyAPI().copyOut(sql);
    CompletableFuture<Void> previous = CompletableFuture.completedFuture(null);
    boolean first = true;
    List<TupleData> batch = new ArrayList<>();
    long bytes = 0;
    try {
      byte[] line;
      while ((line = copy.readFromCopy()) != null) {
        batch.add(CopyText.row(line, columns));
        bytes += line.length;
        if (batch.size() >= settings.snapshotBatchRows() || bytes >= MAX_BATCH_BYTES) {
          previous =
              hand(
                  previous,
                  new SnapshotChunk(table.schema(), first, batch, Optional.empty(), false));
          first = false;
          batch = new ArrayList<>();
          bytes = 0;
        }
      }
    } catch (SQLException | RuntimeException | InterruptedException e) {
      // The sink call in flight must end before this attempt does: a late batch must not land
      // after a redo's first chunk cleared the table.
      try {
        previous.handle((v, err) -> null).get();
      } catch (ExecutionException | InterruptedException ignored) {
        // Already failing.
      }
      throw e;
    } finally {
      if (copy.isActive()) {
        copy.cancelCopy();
      }
    }
    if (!batch.isEmpty() || first) {
      // An empty table still gets its first chunk: the sink must empty its copy.
      previous =
          hand(previous, new SnapshotChunk(table.schema(), first, batch, Optional.empty(), false));
    }
    await(previous);
    tracker.tableDone();
    tracker.maybeLog(log, settings.name());
  }

  /** Waits for the previous sink call, then starts this one (calls never overlap). */
  private CompletableFuture<Void> hand(CompletableFuture<Void> previous, SnapshotChunk chunk)
      throws InterruptedException {
    await(previous);
    if (cancelled.getAsBoolean()) {
      throw new CancellationException("pipeline stopped during the snapshot");
    }
    int rows = chunk.rows().size();
    CompletableFuture<Void> next =
        sink.applySnapshot(chunk).toCompletableFuture().thenRun(() -> tracker.applied(rows));
    next.thenRun(() -> tracker.maybeLog(log, settings.name()));
    return next;
  }

  private static void await(CompletableFuture<Void> stage) throws InterruptedException {
    try {
      stage.get();
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException r) {
        throw r;
      }
      throw new CompletionException(cause);
    }
  }
}
