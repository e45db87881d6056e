package io.weir.persistence.cdc.snapshot;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.SafeErrors;
import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.persistence.cdc.PipelineSettings;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.source.PublishedTable;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.SnapshotWatermark;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.TupleData;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.function.Consumer;
import org.postgresql.PGProperty;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A resumable, chunked backfill of tables while the pipeline streams (watermark-bracketed chunks).
 *
 * <p>Each chunk: write a low watermark into the WAL (a transaction holding only a logical message
 * with {@link SnapshotWatermark#PREFIX}); read the next {@code chunkRows} rows of the table in
 * primary key order after the last key read, in a REPEATABLE READ transaction that also records
 * {@code pg_current_snapshot()}; write a high watermark. The stream then brings, in commit order:
 * the transactions before the low watermark, the low watermark, the transactions between the two,
 * the high watermark. At the low watermark the chunk counts only if its snapshot sees every
 * transaction delivered so far (see {@link XidHistory}); otherwise it is read again. Between the
 * watermarks, every row the stream changes is struck from the chunk: the live change is newer. At
 * the high watermark the rest of the chunk goes to the sink ({@link ChangeSink#applySnapshot}) with
 * the progress token, which the sink stores atomically with the rows; a restart resumes after the
 * last applied chunk. The rows written are as of the high watermark, so no row moves back to an
 * older value. A table without a primary key (or replica identity index) is read whole in one chunk
 * of at most {@code maxUnkeyedRows} rows, and read again if the stream touches it between the
 * watermarks.
 *
 * <p>The stream's sink stage calls {@link #onTransactions} and {@link #onWatermark} in stream
 * order; {@link #begin} may come from the pipeline actor. Chunk reads run on {@code io}; a failed
 * read fails the stream (which restarts and resumes from the stored progress).
 */
public final class IncrementalSnapshot implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(IncrementalSnapshot.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int MAX_ATTEMPTS_PER_CHUNK = 50;

  /** The persisted progress: the plan and how far it got. */
  public record Progress(
      String id, List<String> tables, int table, List<String> after, boolean done) {
    /** Value-free: {@code after} holds primary key values. */
    @Override
    public String toString() {
      return "Progress[table " + table + " of " + tables.size() + (done ? ", done" : "") + "]";
    }

    String encode() {
      try {
        return JSON.writeValueAsString(this);
      } catch (JsonProcessingException e) {
        throw new IllegalStateException("progress cannot be encoded");
      }
    }

    public static Optional<Progress> decode(Optional<String> token) {
      if (token.isEmpty()) {
        return Optional.empty();
      }
      try {
        return Optional.of(JSON.readValue(token.get(), Progress.class));
      } catch (JsonProcessingException e) {
        throw new PipelineHaltException(
            HaltReason.SNAPSHOT_FAILED, "the stored incremental snapshot progress cannot be read");
      }
    }
  }

  private final class Chunk {
    final long seq;
    final PublishedTable table;
    final List<String> after;
    final CompletableFuture<ChunkRead.Read> read = new CompletableFuture<>();
    boolean open;
    boolean valid = true;
    Map<Object, TupleData> rows;
    ChunkRead.Read result;

    Chunk(long seq, PublishedTable table, List<String> after) {
      this.seq = seq;
      this.table = table;
      this.after = after;
    }
  }

  private final PipelineSettings settings;
  private final SourceSettings source;
  private final ChangeSink sink;
  private final Executor io;
  private final Consumer<Throwable> failStream;
  private final String run = UUID.randomUUID().toString();
  private final XidHistory history = new XidHistory(1 << 16);

  private Connection connection;
  private Progress progress;
  private Map<String, PublishedTable> tables = Map.of();
  private Chunk pending;
  private long seq;
  private int attempts;
  private SnapshotTracker tracker;
  private volatile boolean closed;

  public IncrementalSnapshot(
      PipelineSettings settings,
      SourceSettings source,
      ChangeSink sink,
      Executor io,
      Consumer<Throwable> failStream) {
    this.settings = settings;
    this.source = source;
    this.sink = sink;
    this.io = io;
    this.failStream = failStream;
  }

  /** The progress shown in the status, null before any incremental snapshot ran in this process. */
  synchronized SnapshotTracker tracker() {
    return tracker;
  }

  public synchronized boolean running() {
    return progress != null && !progress.done();
  }

  /**
   * Starts a new snapshot of {@code qualifiedTables} (all published tables when empty), or resumes
   * {@code stored}. Resolves the tables against the publications first.
   *
   * @throws PipelineHaltException {@link HaltReason#SNAPSHOT_FAILED} when a table is not published
   */
  public synchronized void begin(Progress plan, SnapshotTracker progressView) throws SQLException {
    Map<String, PublishedTable> published = new LinkedHashMap<>();
    for (PublishedTable t : PublishedTable.list(connection(), settings.publications())) {
      published.put(t.schema().qualifiedName(), t);
    }
    List<String> wanted = plan.tables().isEmpty() ? List.copyOf(published.keySet()) : plan.tables();
    long estimate = 0;
    for (String name : wanted) {
      PublishedTable t = published.get(name);
      if (t == null) {
        throw new PipelineHaltException(
            HaltReason.SNAPSHOT_FAILED, "table " + name + " is not in the pipeline's publications");
      }
      estimate += t.estimatedRows();
    }
    tables = published;
    progress = new Progress(plan.id(), wanted, plan.table(), plan.after(), plan.done());
    tracker = progressView;
    tracker.planned(wanted.size(), estimate);
    for (int i = 0; i < plan.table(); i++) {
      tracker.tableDone();
    }
    tracker.log(log, settings.name());
    if (progress.done() || progress.table() >= wanted.size()) {
      finish();
      return;
    }
    nextChunk();
  }

  /** Transactions in stream order, before the sink applies them. */
  public synchronized void onTransactions(List<Transaction> transactions) {
    for (Transaction t : transactions) {
      history.add(t.xid());
      Chunk c = pending;
      if (c == null || !c.open || !c.valid) {
        continue;
      }
      long relation = c.table.schema().relationId();
      if (!t.changes().repeatable()) {
        // A large streamed transaction can be read once only, by the sink: void the chunk rather
        // than read it here (it is read again after the high watermark).
        c.valid = false;
        continue;
      }
      for (Change change : t.changes()) {
        strike(c, relation, change);
        if (!c.valid) {
          break;
        }
      }
    }
  }

  private void strike(Chunk c, long relation, Change change) {
    if (change instanceof Change.Truncate tr) {
      if (tr.tables().stream().anyMatch(s -> s.relationId() == relation)) {
        c.valid = false;
      }
      return;
    }
    TableSchema table;
    List<TupleData> images = new ArrayList<>(2);
    if (change instanceof Change.Insert i) {
      table = i.table();
      images.add(i.newRow());
    } else if (change instanceof Change.Update u) {
      table = u.table();
      images.add(u.newRow());
      if (u.oldRow() != null) {
        images.add(u.oldRow());
      }
    } else if (change instanceof Change.Delete d) {
      table = d.table();
      images.add(d.oldRow());
    } else {
      return;
    }
    if (table.relationId() != relation) {
      return;
    }
    if (c.table.primaryKey().isEmpty()) {
      c.valid = false; // an unkeyed table is read again whole
      return;
    }
    if (images.get(0).hasUnchangedToast()) {
      // The sink gets this row without its untouched TOAST values (its copy may be gone: the first
      // chunk cleared the table); only a fresh read of the chunk brings them.
      c.valid = false;
      return;
    }
    for (TupleData image : images) {
      Object key = keyOf(c.table.primaryKey(), image);
      if (key == null) {
        c.valid = false; // the image lacks the key (should not happen with a key identity): be safe
        return;
      }
      c.rows.remove(key);
    }
  }

  static Object keyOf(List<Integer> key, TupleData row) {
    List<String> values = new ArrayList<>(key.size());
    for (int column : key) {
      if (column >= row.size() || row.isNull(column) || row.isUnchangedToast(column)) {
        return null;
      }
      values.add(row.text(column));
    }
    return values;
  }

  /**
   * A watermark of this pipeline, in stream order. Completes when its work is done (a high
   * watermark's rows are durably in the sink).
   */
  public CompletionStage<Void> onWatermark(SnapshotWatermark watermark) {
    String[] parts = watermark.content().split("/", -1);
    Chunk c;
    synchronized (this) {
      c = pending;
      if (parts.length != 3
          || c == null
          || !parts[0].equals(run)
          || Long.parseLong(parts[1]) != c.seq) {
        return CompletableFuture.completedFuture(null); // another run's, or an abandoned chunk's
      }
    }
    if (parts[2].equals("low")) {
      return c.read.thenCompose(
          read -> {
            synchronized (this) {
              c.result = read;
              c.rows = new LinkedHashMap<>();
              for (int i = 0; i < read.rows().size(); i++) {
                c.rows.put(read.keys().get(i), read.rows().get(i));
              }
              if (!history.allVisibleIn(read.snapshot())) {
                c.valid = false;
                log.debug(
                    "pipeline {}: chunk read missed a delivered transaction; reading it again",
                    settings.name());
              }
              c.open = true;
            }
            if (c.after != null) {
              return CompletableFuture.completedFuture(null);
            }
            // The table's first chunk: the sink empties its copy here, at the low watermark, before
            // any transaction between the watermarks is applied, so none of those is wiped out.
            return sink.applySnapshot(
                new SnapshotChunk(c.table.schema(), true, List.of(), Optional.empty(), true));
          });
    }
    return high(c);
  }

  private CompletionStage<Void> high(Chunk c) {
    SnapshotChunk out;
    Progress next;
    synchronized (this) {
      if (!c.open || !c.valid) {
        if (++attempts > MAX_ATTEMPTS_PER_CHUNK) {
          return CompletableFuture.failedFuture(
              new PipelineHaltException(
                  HaltReason.SNAPSHOT_FAILED,
                  "a chunk of "
                      + c.table.schema().qualifiedName()
                      + " was invalidated by concurrent changes "
                      + MAX_ATTEMPTS_PER_CHUNK
                      + " times in a row"));
        }
        pending = null;
        retry(c);
        return CompletableFuture.completedFuture(null);
      }
      attempts = 0;
      ChunkRead.Read read = c.result;
      List<String> last =
          read.rows().isEmpty()
              ? c.after
              : lastKey(c.table, read.rows().get(read.rows().size() - 1));
      next =
          read.complete()
              ? new Progress(
                  progress.id(),
                  progress.tables(),
                  progress.table() + 1,
                  null,
                  progress.table() + 1 >= progress.tables().size())
              : new Progress(progress.id(), progress.tables(), progress.table(), last, false);
      // Never firstForTable: the first chunk's clearing happened at its low watermark.
      out =
          new SnapshotChunk(
              c.table.schema(),
              false,
              List.copyOf(c.rows.values()),
              Optional.of(next.encode()),
              true);
    }
    int rows = out.rows().size();
    return sink.applySnapshot(out)
        .thenRun(
            () -> {
              synchronized (this) {
                tracker.applied(rows);
                boolean tableDone = next.table() != progress.table();
                progress = next;
                pending = null;
                if (tableDone) {
                  tracker.tableDone();
                }
                tracker.maybeLog(log, settings.name());
                if (next.done()) {
                  finish();
                } else {
                  nextChunk();
                }
              }
            });
  }

  private static List<String> lastKey(PublishedTable table, TupleData row) {
    List<String> key = new ArrayList<>();
    for (int column : table.primaryKey()) {
      key.add(row.text(column));
    }
    return key;
  }

  private void finish() {
    pending = null;
    tracker.finished("done");
    tracker.log(log, settings.name());
  }

  private void retry(Chunk c) {
    startChunk(c.table, c.after);
  }

  private void nextChunk() {
    PublishedTable t = tables.get(progress.tables().get(progress.table()));
    if (t == null) {
      failStream.accept(
          new PipelineHaltException(
              HaltReason.SNAPSHOT_FAILED, "a table of the snapshot is no longer published"));
      return;
    }
    startChunk(t, progress.after());
  }

  /** Writes the low watermark, reads the chunk, writes the high watermark; off the stream. */
  private void startChunk(PublishedTable table, List<String> after) {
    if (closed) {
      return; // the run ended while a chunk was being applied
    }
    Chunk c = new Chunk(++seq, table, after);
    pending = c;
    tracker.reading(table.schema().qualifiedName());
    CompletableFuture.runAsync(
        () -> {
          try {
            watermark(c, "low");
            ChunkRead.Read read = read(c);
            watermark(c, "high");
            c.read.complete(read);
          } catch (Exception e) {
            c.read.completeExceptionally(e);
            if (!closed) {
              log.warn(
                  "pipeline {}: incremental snapshot chunk failed ({}); the stream restarts and resumes",
                  settings.name(),
                  e instanceof PipelineHaltException h ? h.getMessage() : SafeErrors.describe(e));
              failStream.accept(e);
            }
          }
        },
        io);
  }

  private void watermark(Chunk c, String mark) throws SQLException {
    try (PreparedStatement ps =
        connection().prepareStatement("SELECT pg_logical_emit_message(true, ?, ?)")) {
      ps.setString(1, SnapshotWatermark.PREFIX);
      ps.setString(2, run + "/" + c.seq + "/" + mark);
      ps.execute();
    }
  }

  private ChunkRead.Read read(Chunk c) throws SQLException {
    Connection conn = connection();
    try {
      return ChunkRead.read(conn, c.table, c.after, settings);
    } catch (SQLException | RuntimeException e) {
      try {
        conn.rollback();
      } catch (SQLException ignored) {
        // The connection is replaced below.
      }
      closeConnection();
      throw e;
    } finally {
      if (connection != null) {
        connection.setAutoCommit(true);
      }
    }
  }

  private synchronized Connection connection() throws SQLException {
    if (closed) {
      throw new SQLException("the incremental snapshot of this run is closed", "08003");
    }
    if (connection == null) {
      Properties props = source.properties("weir-incremental-snapshot");
      // Text results only: values must be the type output functions' text, as pgoutput sends them.
      PGProperty.BINARY_TRANSFER.set(props, "false");
      connection = DriverManager.getConnection(source.url(), props);
    }
    return connection;
  }

  private void closeConnection() {
    if (connection != null) {
      try {
        connection.close();
      } catch (SQLException ignored) {
        // Going away anyway.
      }
      connection = null;
    }
  }

  @Override
  public void close() {
    closed = true;
    io.execute(this::closeNow);
  }

  private synchronized void closeNow() {
    closeConnection();
  }
}
