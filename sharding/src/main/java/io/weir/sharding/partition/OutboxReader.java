package io.weir.sharding.partition;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.persistence.query.javadsl.CurrentEventsByPersistenceIdQuery;

/**
 * Reads outbox entries from a partition's journal. Entries live only in the journal events that
 * wrote them; the partition's index says which events hold which positions ({@link
 * ConsumerProtocol.ConsumerSpan}, {@link ReadProtocol.ChangesSpan}), and this reads exactly those
 * events by persistence id and sequence number (never by the journal's global ordering). Any node
 * can read any partition's outbox this way: the entries are immutable once written.
 *
 * <p>Decoded events are kept in a bounded cache (by partition incarnation and sequence number, so a
 * partition given a new incarnation after an accepted storage loss, whose numbers start again at
 * its journal's tail, never hits an old entry; a restore keeps the incarnations (ADR 0012) but runs
 * with every node stopped, so no cache outlives it), and concurrent reads of the same events share
 * one journal query: many readers following the same tail (live queries, feed readers, consumers)
 * cost one read of each event, not one per reader.
 */
public final class OutboxReader {
  /**
   * Cached entry bytes at most (as {@link Partition.OutboxEntry#bytes()} counts them), by default.
   */
  public static final long DEFAULT_CACHE_BYTES = 64L << 20;

  private record Key(int partition, String incarnation, long sequence) {}

  /** A cached event in insertion order, with the bytes it counts for. */
  private record Cached(Key key, long bytes) {}

  /** Where reads decode and assemble: {@value #DISPATCHER}, apart from the partitions. */
  public static final String DISPATCHER = "weir.reads-dispatcher";

  private final Executor executor;
  private final JournalEntries journal;
  private final long cacheBytes;
  private final ConcurrentHashMap<Key, CompletableFuture<List<Partition.OutboxEntry>>> cache =
      new ConcurrentHashMap<>();
  private final ConcurrentLinkedQueue<Cached> order = new ConcurrentLinkedQueue<>();
  private final AtomicLong cached = new AtomicLong();

  public OutboxReader(ActorSystem<?> system, JournalEntries journal, long cacheBytes) {
    this.executor = executor(system);
    this.journal = journal;
    this.cacheBytes = cacheBytes;
  }

  public OutboxReader(
      ActorSystem<?> system, CurrentEventsByPersistenceIdQuery journal, long cacheBytes) {
    this(system, JournalEntries.pekko(system, journal), cacheBytes);
  }

  public OutboxReader(ActorSystem<?> system, CurrentEventsByPersistenceIdQuery journal) {
    this(system, journal, DEFAULT_CACHE_BYTES);
  }

  /** The reads dispatcher, {@value #DISPATCHER} (sharding's reference.conf). */
  public static Executor executor(ActorSystem<?> system) {
    return system.dispatchers().lookup(DispatcherSelector.fromConfig(DISPATCHER));
  }

  /** A reader on the JDBC journal the partitions write to, through Pekko's read journal. */
  public static OutboxReader jdbc(ActorSystem<?> system) {
    return new OutboxReader(system, JournalEntries.pekko(system), DEFAULT_CACHE_BYTES);
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

  /** Like {@link #entries(int, String, List, long, long)} without the cache. */
  public CompletionStage<List<Partition.OutboxEntry>> entries(
      int partition, List<Long> journalSequences, long after, long through) {
    return entries(partition, null, journalSequences, after, through);
  }

  /**
   * The entries of partition {@code partition} at positions {@code after + 1} to {@code through},
   * in order, read from the journal events {@code journalSequences} (the span the partition named).
   * Fails with {@link MissingEntries} when any position in that range is not found: the reader
   * never returns a batch with a hole in it.
   *
   * @param incarnation the partition's incarnation the span came from; null reads past the cache
   */
  public CompletionStage<List<Partition.OutboxEntry>> entries(
      int partition, String incarnation, List<Long> journalSequences, long after, long through) {
    if (through <= after || journalSequences.isEmpty()) {
      if (through > after) {
        return CompletableFuture.failedFuture(
            new MissingEntries(
                "no journal events were named for positions " + (after + 1) + " to " + through,
                after));
      }
      return CompletableFuture.completedFuture(List.of());
    }
    CompletionStage<List<List<Partition.OutboxEntry>>> events =
        incarnation == null
            ? query(
                    partition,
                    journalSequences.get(0),
                    journalSequences.get(journalSequences.size() - 1))
                .thenApply(
                    byEvent -> List.of(byEvent.values().stream().flatMap(List::stream).toList()))
            : cached(partition, incarnation, journalSequences);
    // On the reads dispatcher: a plain thenApply would run on the common pool, which starts a
    // thread per task on machines with fewer than three cores.
    return events.thenApplyAsync(
        lists -> {
          List<Partition.OutboxEntry> list = new ArrayList<>();
          long expected = after + 1;
          for (List<Partition.OutboxEntry> event : lists) {
            for (Partition.OutboxEntry e : event) {
              if (e.sequence() <= after || e.sequence() > through) {
                continue;
              }
              if (e.sequence() != expected) {
                throw new MissingEntries(
                    "outbox position "
                        + expected
                        + " is missing from the journal of partition "
                        + partition,
                    after);
              }
              list.add(e);
              expected++;
            }
          }
          if (expected != through + 1) {
            throw new MissingEntries(
                "outbox position "
                    + expected
                    + " is missing from the journal of partition "
                    + partition,
                after);
          }
          return List.copyOf(list);
        },
        executor);
  }

  /**
   * The events' entries, in the order named; missing ones read with one journal query shared by
   * concurrent readers.
   */
  private CompletionStage<List<List<Partition.OutboxEntry>>> cached(
      int partition, String incarnation, List<Long> sequences) {
    List<CompletableFuture<List<Partition.OutboxEntry>>> parts = new ArrayList<>(sequences.size());
    Map<Long, CompletableFuture<List<Partition.OutboxEntry>>> mine = new HashMap<>();
    for (long s : sequences) {
      Key key = new Key(partition, incarnation, s);
      CompletableFuture<List<Partition.OutboxEntry>> fresh = new CompletableFuture<>();
      CompletableFuture<List<Partition.OutboxEntry>> existing = cache.putIfAbsent(key, fresh);
      if (existing == null) {
        mine.put(s, fresh);
        parts.add(fresh);
      } else {
        parts.add(existing);
      }
    }
    if (!mine.isEmpty()) {
      long from = mine.keySet().stream().mapToLong(Long::longValue).min().getAsLong();
      long to = mine.keySet().stream().mapToLong(Long::longValue).max().getAsLong();
      query(partition, from, to)
          .whenComplete(
              (byEvent, error) -> {
                if (error != null) {
                  mine.forEach(
                      (s, future) -> {
                        cache.remove(
                            new Key(partition, incarnation, s),
                            future); // not cached: the next read asks again
                        future.completeExceptionally(error);
                      });
                  return;
                }
                // Accounted and evicted before anyone sees the entries, so the bound holds at every
                // answer.
                mine.forEach(
                    (s, future) -> {
                      long size = bytes(byEvent.getOrDefault(s, List.of()));
                      order.add(new Cached(new Key(partition, incarnation, s), size));
                      cached.addAndGet(size);
                    });
                evict();
                mine.forEach((s, future) -> future.complete(byEvent.getOrDefault(s, List.of())));
              });
    }
    return CompletableFuture.allOf(parts.toArray(CompletableFuture[]::new))
        .thenApply(done -> parts.stream().map(CompletableFuture::join).toList());
  }

  private void evict() {
    while (cached.get() > cacheBytes) {
      Cached oldest = order.poll();
      if (oldest == null) {
        return;
      }
      cache.remove(oldest.key());
      cached.addAndGet(-oldest.bytes());
    }
  }

  private static long bytes(List<Partition.OutboxEntry> entries) {
    long n = 0;
    for (Partition.OutboxEntry e : entries) {
      n += e.bytes();
    }
    return n;
  }

  /**
   * Outbox entries of the journal events {@code from} to {@code to}, by event sequence number (in
   * order).
   */
  private CompletionStage<TreeMap<Long, List<Partition.OutboxEntry>>> query(
      int partition, long from, long to) {
    return journal.between(partition, from, to);
  }
}
