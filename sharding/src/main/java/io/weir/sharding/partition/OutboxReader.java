package io.weir.sharding.partition;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.persistence.query.javadsl.CurrentEventsByPersistenceIdQuery;
import org.apache.pekko.stream.javadsl.Sink;

/**
 * Reads outbox entries from a partition's journal. Entries live only in the journal events that
 * wrote them; the partition's index says which events hold which positions ({@link
 * PartitionProtocol.ConsumerSpan}), and this reads exactly those events by persistence id and
 * sequence number (never by the journal's global ordering). Any node can read any partition's
 * outbox this way: the entries are immutable once written.
 */
public final class OutboxReader {
  private final ActorSystem<?> system;
  private final CurrentEventsByPersistenceIdQuery journal;

  public OutboxReader(ActorSystem<?> system, CurrentEventsByPersistenceIdQuery journal) {
    this.system = system;
    this.journal = journal;
  }

  /** A reader on the JDBC journal the partitions write to. */
  public static OutboxReader jdbc(ActorSystem<?> system) {
    return new OutboxReader(system,
        PersistenceQuery.get(system).getReadJournalFor(JdbcReadJournal.class, JdbcReadJournal.Identifier()));
  }

  /** The entries at positions {@code after + 1} to {@code through} could not all be found. */
  public static final class MissingEntries extends RuntimeException {
    private final long after;

    MissingEntries(String message, long after) {
      super(message, null, false, false);
      this.after = after;
    }

    /** The checkpoint the read started after. */
    public long after() {
      return after;
    }
  }

  /**
   * The entries of partition {@code partition} at positions {@code after + 1} to {@code through},
   * in order, read from the journal events {@code journalSequences} (the span the partition named).
   * Fails with {@link MissingEntries} when any position in that range is not found: the reader never
   * returns a batch with a hole in it.
   */
  public CompletionStage<List<Partition.OutboxEntry>> entries(
      int partition, List<Long> journalSequences, long after, long through) {
    if (through <= after || journalSequences.isEmpty()) {
      if (through > after) {
        return java.util.concurrent.CompletableFuture.failedFuture(
            new MissingEntries("no journal events were named for positions " + (after + 1) + " to " + through, after));
      }
      return java.util.concurrent.CompletableFuture.completedFuture(List.of());
    }
    long from = journalSequences.get(0);
    long to = journalSequences.get(journalSequences.size() - 1);
    return journal.currentEventsByPersistenceId(Partition.persistenceId(partition).id(), from, to)
        .runWith(Sink.fold(new ArrayList<Partition.OutboxEntry>(), (acc, envelope) -> {
          if (envelope.event() instanceof Partition.Written w) {
            for (Partition.FrameApplied f : w.frames()) {
              for (Partition.OutboxEntry e : f.entries()) {
                if (e.sequence() > after && e.sequence() <= through) {
                  acc.add(e);
                }
              }
            }
          }
          return acc;
        }), system)
        // On the system's dispatcher: a plain thenApply would run on the common pool, which starts a
        // thread per task on machines with fewer than three cores.
        .thenApplyAsync(list -> {
          long expected = after + 1;
          for (Partition.OutboxEntry e : list) {
            if (e.sequence() != expected) {
              throw new MissingEntries("outbox position " + expected + " is missing from the journal of partition " + partition, after);
            }
            expected++;
          }
          if (expected != through + 1) {
            throw new MissingEntries("outbox position " + expected + " is missing from the journal of partition " + partition, after);
          }
          return List.copyOf(list);
        }, system.executionContext());
  }
}
