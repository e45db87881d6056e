package io.weir.sharding.partition;

import io.weir.persistence.Identifiers;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import javax.sql.DataSource;
import org.apache.pekko.serialization.Serialization;
import org.postgresql.PGStatement;

/**
 * {@link StateStore} on the JDBC journal's tables in PostgreSQL ({@code <schema>.snapshot}, {@code
 * <schema>.event_journal}): the latest snapshot row and the event rows after it, read in one
 * read-only REPEATABLE READ transaction (so a concurrent prune cannot cut between them), the events
 * streamed {@value #FETCH} rows at a time and handed to a thread of the recovery's own that decodes
 * and applies them while the next rows are fetched. It reads the rows Pekko's replay would read
 * (not deleted, in sequence order), decodes them with the serializers the journal names, and
 * applies them with {@link PartitionState#apply}, the event handler's transition.
 *
 * <p>Snapshots go into the same table as the plugin writes them (serializer {@link
 * PartitionSnapshotSerializer}, no metadata), in a statement that writes nothing unless the journal
 * holds the snapshot's event from the partition's writer that took it.
 *
 * <p>Error messages name the partition and sequence numbers, never a payload's content.
 */
public final class SqlStateStore implements StateStore {
  /** Journal rows fetched per round trip while streaming the events. */
  static final int FETCH = 256;

  /**
   * Seconds any one statement may take before PostgreSQL cancels it: a hung read or save fails
   * rather than holding a partition (or its snapshots) for ever.
   */
  static final int STATEMENT_TIMEOUT_SECONDS = 60;

  /** A whole recovery read, at most: the partition stops after it and starts again later. */
  static final Duration READ_TIMEOUT = Duration.ofMinutes(5);

  /** A snapshot save, at most: after it the partition takes the next one when due. */
  static final Duration SAVE_TIMEOUT = Duration.ofMinutes(2);

  private final DataSource dataSource;
  private final String journal;
  private final String snapshots;
  private final Executor io;
  private final Set<Integer> refuted = ConcurrentHashMap.newKeySet();

  public SqlStateStore(DataSource dataSource, String schema, Executor io) {
    Identifiers.require("schema name", schema);
    this.dataSource = dataSource;
    this.journal = schema + ".event_journal";
    this.snapshots = schema + ".snapshot";
    this.io = io;
  }

  @Override
  public boolean enabled(int partition) {
    return !refuted.contains(partition);
  }

  @Override
  public void refuted(int partition) {
    refuted.add(partition);
  }

  @Override
  public boolean writesSnapshots() {
    return true;
  }

  @Override
  public CompletionStage<String> journalWriter(int partition, long sequence) {
    return CompletableFuture.supplyAsync(
            () -> {
              try (Connection c = dataSource.getConnection();
                  PreparedStatement ps =
                      c.prepareStatement(
                          "SELECT writer FROM "
                              + journal
                              + " WHERE persistence_id = ? AND sequence_number = ?")) {
                ps.setQueryTimeout(STATEMENT_TIMEOUT_SECONDS);
                ps.setString(1, Partition.persistenceId(partition).id());
                ps.setLong(2, sequence);
                try (ResultSet rs = ps.executeQuery()) {
                  return rs.next() ? rs.getString(1) : null;
                }
              } catch (SQLException e) {
                throw new CompletionException(e);
              }
            },
            io)
        .orTimeout(SAVE_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
  }

  @Override
  public CompletionStage<Boolean> saveSnapshot(
      int partition, long sequence, String writer, PartitionState copy) {
    return CompletableFuture.supplyAsync(
            () -> {
              String pid = Partition.persistenceId(partition).id();
              byte[] payload = PartitionSnapshotSerializer.write(copy);
              try (Connection c = dataSource.getConnection();
                  PreparedStatement ps =
                      c.prepareStatement(
                          "INSERT INTO "
                              + snapshots
                              + " (persistence_id, sequence_number, created, snapshot_ser_id,"
                              + " snapshot_ser_manifest, snapshot_payload)"
                              + " SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM "
                              + journal
                              + " WHERE persistence_id = ? AND sequence_number = ? AND writer = ?)"
                              + " ON CONFLICT (persistence_id, sequence_number) DO NOTHING")) {
                ps.setQueryTimeout(STATEMENT_TIMEOUT_SECONDS);
                ps.setString(1, pid);
                ps.setLong(2, sequence);
                ps.setLong(3, System.currentTimeMillis());
                ps.setInt(4, PartitionSnapshotSerializer.IDENTIFIER);
                ps.setString(5, PartitionSnapshotSerializer.MANIFEST);
                ps.setBytes(6, payload);
                ps.setString(7, pid);
                ps.setLong(8, sequence);
                ps.setString(9, writer);
                return ps.executeUpdate() == 1;
              } catch (SQLException e) {
                throw new CompletionException(e);
              }
            },
            io)
        .orTimeout(SAVE_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
  }

  @Override
  public CompletionStage<Recovered> recover(
      int partition,
      Serialization serialization,
      Supplier<PartitionState> empty,
      UnaryOperator<PartitionState> fromSnapshot) {
    return CompletableFuture.supplyAsync(
            () -> {
              try {
                return read(partition, serialization, empty, fromSnapshot);
              } catch (SQLException e) {
                throw new CompletionException(e);
              }
            },
            io)
        .orTimeout(READ_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
  }

  private Recovered read(
      int partition,
      Serialization serialization,
      Supplier<PartitionState> empty,
      UnaryOperator<PartitionState> fromSnapshot)
      throws SQLException {
    String pid = Partition.persistenceId(partition).id();
    try (Connection c = dataSource.getConnection()) {
      c.setAutoCommit(false);
      c.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
      c.setReadOnly(true);
      try {
        Applier applier =
            new Applier(partition, serialization, empty, fromSnapshot, latestSnapshot(c, pid));
        long from = applier.snapshotSequence;
        Future<PartitionState> applying = APPLIERS.submit(applier);
        PartitionState state;
        long events;
        try {
          events = streamEventsAfter(c, pid, partition, from, applier, applying);
          applier.handOver(END, applying);
          state = applier.await(applying);
        } finally {
          applying.cancel(true);
        }
        // Rows deleted through the snapshot (Pekko then takes the snapshot's sequence as the
        // highest) or marked deleted after the read ones: Pekko's replay knows what to do.
        return highest(c, pid) == state.events ? new Recovered(state, from, events) : null;
      } finally {
        c.rollback();
      }
    }
  }

  /** A snapshot or journal row as read, decoded by the {@link Applier}. */
  private record Row(long sequence, int serializer, String manifest, byte[] payload) {
    static Row of(ResultSet rs) throws SQLException {
      return new Row(rs.getLong(1), rs.getInt(2), rs.getString(3), rs.getBytes(4));
    }
  }

  /** The end of the rows. */
  private static final Row END = new Row(-1, 0, "", new byte[0]);

  /** Rows read and not yet applied, at most: one fetch beside the one pgjdbc holds. */
  static final int QUEUED = FETCH;

  /** Threads that decode and apply what a recovery read fetches. */
  private static final ExecutorService APPLIERS =
      Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "weir-recovery-apply");
            t.setDaemon(true);
            return t;
          });

  /**
   * Decodes the snapshot and applies the events after it, in order, on a thread of its own while
   * the reading thread fetches the next rows: fetching (PostgreSQL and pgjdbc) and decoding
   * overlap.
   */
  private static final class Applier implements Callable<PartitionState> {
    private final BlockingQueue<Row> rows = new ArrayBlockingQueue<>(QUEUED);
    private final int partition;
    private final Serialization serialization;
    private final Supplier<PartitionState> empty;
    private final UnaryOperator<PartitionState> fromSnapshot;

    /** The snapshot's row until it is decoded (null: none, or decoded). */
    private Row snapshot;

    /** The snapshot's sequence number (0: none): the events after it are read. */
    final long snapshotSequence;

    /** When the read gives up waiting for the applier ({@link System#nanoTime}). */
    private final long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();

    Applier(
        int partition,
        Serialization serialization,
        Supplier<PartitionState> empty,
        UnaryOperator<PartitionState> fromSnapshot,
        Row snapshot) {
      this.partition = partition;
      this.serialization = serialization;
      this.empty = empty;
      this.fromSnapshot = fromSnapshot;
      this.snapshot = snapshot;
      this.snapshotSequence = snapshot == null ? 0 : snapshot.sequence();
    }

    @Override
    public PartitionState call() throws InterruptedException {
      PartitionState state = snapshot == null ? empty.get() : fromSnapshot.apply(snapshotState());
      snapshot = null; // its bytes are not needed beside the state
      while (true) {
        Row r = rows.take();
        if (r == END) {
          return state;
        }
        state.apply(
            decode(
                serialization,
                r,
                Partition.Event.class,
                "partition " + partition + "'s event at sequence " + r.sequence()));
      }
    }

    private PartitionState snapshotState() {
      long sequence = snapshot.sequence();
      PartitionState state =
          decode(
              serialization,
              snapshot,
              PartitionState.class,
              "partition " + partition + "'s snapshot at sequence " + sequence);
      if (state.events != sequence) {
        throw new Unreadable(
            "partition "
                + partition
                + "'s snapshot at sequence "
                + sequence
                + " holds "
                + state.events
                + " events");
      }
      return state;
    }

    /**
     * Hands {@code row} over, waiting while the queue is full; false when the applier has ended (it
     * failed: the read stops and {@link #await} reports why).
     */
    boolean handOver(Row row, Future<PartitionState> applying) {
      try {
        if (applying.isDone()) {
          return false;
        }
        while (!rows.offer(row, 100, TimeUnit.MILLISECONDS)) {
          if (applying.isDone()) {
            return false;
          }
          if (System.nanoTime() - deadline > 0) {
            throw new Unreadable("partition " + partition + "'s recovery did not end in time");
          }
        }
        return true;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new Unreadable("partition " + partition + "'s recovery read was interrupted");
      }
    }

    /**
     * The applier's state, or its failure as it is (an {@link Unreadable} names no value), waiting
     * no longer than the read's deadline.
     */
    PartitionState await(Future<PartitionState> applying) {
      try {
        return applying.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (ExecutionException e) {
        if (e.getCause() instanceof RuntimeException r) {
          throw r;
        }
        if (e.getCause() instanceof Error err) {
          throw err;
        }
        throw new Unreadable(
            "partition "
                + partition
                + "'s recovery failed ("
                + e.getCause().getClass().getSimpleName()
                + ")");
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new Unreadable("partition " + partition + "'s recovery read was interrupted");
      } catch (TimeoutException e) {
        throw new Unreadable("partition " + partition + "'s recovery did not end in time");
      }
    }

    /**
     * A hole after the rows handed over: reported once the applier has applied those rows, unless
     * one of them fails first (so the failure named is the earliest in sequence, as when one thread
     * read and applied).
     */
    Unreadable holeAfter(Unreadable hole, Future<PartitionState> applying) {
      handOver(END, applying); // false: the applier failed, and await throws why
      await(applying);
      return hole;
    }
  }

  /** The latest snapshot's row, or null when there is none. */
  private Row latestSnapshot(Connection c, String pid) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT sequence_number, snapshot_ser_id, snapshot_ser_manifest, snapshot_payload"
                + " FROM "
                + snapshots
                + " WHERE persistence_id = ? ORDER BY sequence_number DESC LIMIT 1")) {
      ps.unwrap(PGStatement.class).setPrepareThreshold(-1);
      ps.setQueryTimeout(STATEMENT_TIMEOUT_SECONDS);
      ps.setString(1, pid);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? Row.of(rs) : null;
      }
    }
  }

  /**
   * Hands the journal's events after sequence {@code from} to the applier, in order, requiring them
   * contiguous; stops early when the applier failed.
   *
   * @return how many
   */
  private long streamEventsAfter(
      Connection c,
      String pid,
      int partition,
      long from,
      Applier applier,
      Future<PartitionState> applying)
      throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT sequence_number, event_ser_id, event_ser_manifest, event_payload FROM "
                + journal
                + " WHERE persistence_id = ? AND sequence_number > ? AND NOT deleted"
                + " ORDER BY sequence_number")) {
      // Binary transfer: the payloads as they are, not twice their size in hex first.
      ps.unwrap(PGStatement.class).setPrepareThreshold(-1);
      ps.setFetchSize(FETCH);
      ps.setQueryTimeout(STATEMENT_TIMEOUT_SECONDS);
      ps.setString(1, pid);
      ps.setLong(2, from);
      long expected = from + 1;
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          long seq = rs.getLong(1);
          if (seq != expected) {
            // A hole: Pekko's replay would apply the next event at the wrong sequence.
            throw applier.holeAfter(
                new Unreadable(
                    "partition "
                        + partition
                        + "'s journal goes from sequence "
                        + (expected - 1)
                        + " to "
                        + seq),
                applying);
          }
          if (!applier.handOver(Row.of(rs), applying)) {
            break;
          }
          expected++;
        }
      }
      return expected - from - 1;
    }
  }

  /** The journal's highest sequence number, deleted rows included (as Pekko reads it). */
  private long highest(Connection c, String pid) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT max(sequence_number) FROM " + journal + " WHERE persistence_id = ?")) {
      ps.setQueryTimeout(STATEMENT_TIMEOUT_SECONDS);
      ps.setString(1, pid);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  /**
   * The row's payload decoded with the serializer and manifest it names, which must give a {@code
   * type}; {@code what} names the row, never its content.
   */
  private static <T> T decode(Serialization serialization, Row row, Class<T> type, String what) {
    var decoded = serialization.deserialize(row.payload(), row.serializer(), row.manifest());
    if (decoded.isFailure()) {
      // The serializers' messages say where, not what (see PartitionEventSerializer).
      throw new Unreadable(
          what
              + " could not be decoded ("
              + decoded.failed().get().getClass().getSimpleName()
              + ")");
    }
    Object value = decoded.get();
    if (!type.isInstance(value)) {
      throw new Unreadable(
          what
              + " is not a "
              + type.getSimpleName()
              + " of this version ("
              + value.getClass().getName()
              + ")");
    }
    return type.cast(value);
  }
}
