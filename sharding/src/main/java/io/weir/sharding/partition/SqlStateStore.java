package io.weir.sharding.partition;

import io.weir.persistence.Identifiers;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import javax.sql.DataSource;
import org.apache.pekko.serialization.Serialization;
import org.postgresql.PGStatement;

/**
 * {@link StateStore} on the JDBC journal's tables in PostgreSQL ({@code <schema>.snapshot}, {@code
 * <schema>.event_journal}): the latest snapshot row and the event rows after it, read in one
 * read-only REPEATABLE READ transaction (so a concurrent prune cannot cut between them), the events
 * streamed {@value #FETCH} rows at a time and applied as they arrive. It reads the rows Pekko's
 * replay would read (not deleted, in sequence order), decodes them with the serializers the journal
 * names, and applies them with {@link PartitionState#apply}, the event handler's transition.
 *
 * <p>Snapshots go into the same table as the plugin writes them (serializer {@link
 * PartitionSnapshotSerializer}, no metadata), in a statement that writes nothing unless the journal
 * holds the snapshot's event.
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
  public CompletionStage<Boolean> saveSnapshot(int partition, long sequence, PartitionState copy) {
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
                              + " WHERE persistence_id = ? AND sequence_number = ?)"
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
        PartitionState snapshot = latestSnapshot(c, pid, partition, serialization);
        PartitionState state = snapshot == null ? empty.get() : fromSnapshot.apply(snapshot);
        long from = state.events;
        long applied = applyEventsAfter(c, pid, partition, serialization, state);
        // Rows deleted through the snapshot (Pekko then takes the snapshot's sequence as the
        // highest) or marked deleted after the read ones: Pekko's replay knows what to do.
        return highest(c, pid) == state.events ? new Recovered(state, from, applied) : null;
      } finally {
        c.rollback();
      }
    }
  }

  /** The latest snapshot's state, or null when there is none. */
  private PartitionState latestSnapshot(
      Connection c, String pid, int partition, Serialization serialization) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT sequence_number, snapshot_ser_id, snapshot_ser_manifest, snapshot_payload"
                + " FROM "
                + snapshots
                + " WHERE persistence_id = ? ORDER BY sequence_number DESC LIMIT 1")) {
      ps.setQueryTimeout(STATEMENT_TIMEOUT_SECONDS);
      ps.setString(1, pid);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          return null;
        }
        long sequence = rs.getLong(1);
        PartitionState state =
            decode(
                serialization,
                rs,
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
    }
  }

  /**
   * Applies the journal's events after {@code state}'s to it, in order, requiring them contiguous.
   *
   * @return how many
   */
  private long applyEventsAfter(
      Connection c, String pid, int partition, Serialization serialization, PartitionState state)
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
      ps.setLong(2, state.events);
      long applied = 0;
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          long seq = rs.getLong(1);
          if (seq != state.events + 1) {
            // A hole: Pekko's replay would apply the next event at the wrong sequence.
            throw new Unreadable(
                "partition "
                    + partition
                    + "'s journal goes from sequence "
                    + state.events
                    + " to "
                    + seq);
          }
          state.apply(
              decode(
                  serialization,
                  rs,
                  Partition.Event.class,
                  "partition " + partition + "'s event at sequence " + seq));
          applied++;
        }
      }
      return applied;
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
   * The row's payload (column 4) decoded with the serializer and manifest it names (columns 2 and
   * 3), which must give a {@code type}; {@code what} names the row, never its content.
   */
  private static <T> T decode(Serialization serialization, ResultSet rs, Class<T> type, String what)
      throws SQLException {
    var decoded = serialization.deserialize(rs.getBytes(4), rs.getInt(2), rs.getString(3));
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
