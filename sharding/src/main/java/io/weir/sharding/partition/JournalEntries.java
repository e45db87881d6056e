package io.weir.sharding.partition;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import javax.sql.DataSource;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.persistence.query.javadsl.CurrentEventsByPersistenceIdQuery;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.stream.ActorAttributes;
import org.apache.pekko.stream.javadsl.Sink;
import org.postgresql.PGStatement;

/**
 * The outbox entries of a partition's journal events {@code from} to {@code to}, by event sequence
 * number, in order ({@link OutboxReader}'s reads): through Pekko's read journal, or with one SQL
 * query on the journal's table (ADR 0058).
 */
@FunctionalInterface
public interface JournalEntries {
  CompletionStage<TreeMap<Long, List<Partition.OutboxEntry>>> between(
      int partition, long from, long to);

  /** Through Pekko's read journal {@code journal} (a stream per read). */
  static JournalEntries pekko(ActorSystem<?> system, CurrentEventsByPersistenceIdQuery journal) {
    return (partition, from, to) ->
        journal
            .currentEventsByPersistenceId(Partition.persistenceId(partition).id(), from, to)
            .addAttributes(ActorAttributes.dispatcher(OutboxReader.DISPATCHER))
            .runWith(
                Sink.fold(
                    new TreeMap<Long, List<Partition.OutboxEntry>>(),
                    (acc, envelope) -> {
                      acc.put(envelope.sequenceNr(), entriesOf(envelope.event()));
                      return acc;
                    }),
                system);
  }

  /** Through the JDBC read journal the partitions write to. */
  static JournalEntries pekko(ActorSystem<?> system) {
    return pekko(
        system,
        PersistenceQuery.get(system)
            .getReadJournalFor(JdbcReadJournal.class, JdbcReadJournal.Identifier()));
  }

  /**
   * One query on {@code schema}'s journal table per read, on {@code blocking} (threads that may
   * wait for a connection of {@code dataSource}), the payloads transferred as bytes and decoded
   * with the serializer each row names. Reads the rows Pekko's read journal reads (not deleted
   * ones).
   */
  static JournalEntries sql(
      ActorSystem<?> system, DataSource dataSource, String schema, Executor blocking) {
    Serialization serialization = SerializationExtension.get(system);
    String sql =
        "SELECT sequence_number, event_ser_id, event_ser_manifest, event_payload FROM "
            + schema
            + ".event_journal WHERE persistence_id = ? AND sequence_number BETWEEN ? AND ?"
            + " AND NOT deleted ORDER BY sequence_number";
    return (partition, from, to) ->
        CompletableFuture.supplyAsync(
            () -> {
              TreeMap<Long, List<Partition.OutboxEntry>> out = new TreeMap<>();
              try (Connection c = dataSource.getConnection();
                  PreparedStatement ps = c.prepareStatement(sql)) {
                // Binary transfer: the payloads as they are, not twice their size in hex first.
                ps.unwrap(PGStatement.class).setPrepareThreshold(-1);
                ps.setQueryTimeout(SqlStateStore.STATEMENT_TIMEOUT_SECONDS);
                ps.setString(1, Partition.persistenceId(partition).id());
                ps.setLong(2, from);
                ps.setLong(3, to);
                try (ResultSet rs = ps.executeQuery()) {
                  while (rs.next()) {
                    long sequence = rs.getLong(1);
                    var event =
                        serialization.deserialize(rs.getBytes(4), rs.getInt(2), rs.getString(3));
                    if (event.isFailure()) {
                      // The serializers' messages say where, not what (see
                      // PartitionEventSerializer).
                      throw new IllegalStateException(
                          "journal event "
                              + sequence
                              + " of partition "
                              + partition
                              + " could not be decoded ("
                              + event.failed().get().getClass().getSimpleName()
                              + ")");
                    }
                    out.put(sequence, entriesOf(event.get()));
                  }
                }
              } catch (SQLException e) {
                throw new CompletionException(e);
              }
              return out;
            },
            blocking);
  }

  /** The outbox entries an event wrote (none for events other than {@link Partition.Written}). */
  private static List<Partition.OutboxEntry> entriesOf(Object event) {
    if (!(event instanceof Partition.Written w)) {
      return List.of();
    }
    if (w.frames().size() == 1) {
      return List.copyOf(w.frames().get(0).entries());
    }
    List<Partition.OutboxEntry> entries = new ArrayList<>();
    for (Partition.FrameApplied f : w.frames()) {
      entries.addAll(f.entries());
    }
    return List.copyOf(entries);
  }
}
