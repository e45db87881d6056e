package io.weir.sharding.partition;

import io.weir.persistence.SafeErrors;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.function.LongConsumer;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.persistence.query.javadsl.CurrentEventsByPersistenceIdQuery;
import org.apache.pekko.stream.javadsl.Sink;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps one partition's rows in the {@link DocumentTable} equal to its journal: every persisted
 * event is handed over after its persist ({@link #persisted}) and applied in journal order, several
 * at a time, each transaction moving the table's position with the rows. At recovery ({@link
 * #start}) it reads the table's position T and applies the journal's events T+1 to the recovered
 * tail by reading them from the journal (they may lie before the snapshot Pekko recovered from);
 * only then is the partition ready to serve (it reads documents from the table). A failed apply is
 * retried with backoff, never skipped; the partition's writes wait while more than {@link
 * #MAX_LAG_EVENTS} events or {@link #MAX_LAG_BYTES} bytes are unapplied ({@link #behind}).
 *
 * <p>A writer claims the partition's rows when it starts ({@link DocumentTable#claim}) and every
 * apply names its claim: once a newer writer claimed them, or when the journal on the storage lacks
 * what it would apply, the table refuses it ({@link DocumentTable.Fenced}) and this writer stops
 * for good and tells its partition, which recovers again (ADR 0060). It also stops when its
 * partition stops ({@link #stop}): no retry of a gone incarnation runs on. Both need a journal
 * query to catch up with; on Pekko's in-memory journals (tests, tools) nothing is claimed.
 *
 * <p>Methods are called from the entity's thread and from completion callbacks; they synchronize on
 * this writer.
 */
final class TableWriter {
  private static final Logger log = LoggerFactory.getLogger(TableWriter.class);

  /** Unapplied events past which the partition's writes wait. */
  static final int MAX_LAG_EVENTS = 1_000;

  /** Unapplied event bytes (outbox entries' images) past which the partition's writes wait. */
  static final long MAX_LAG_BYTES = 64L << 20;

  /** Events applied in one transaction at most. */
  static final int MAX_EVENTS_PER_APPLY = 256;

  /**
   * How long an apply waits after an idle writer's first new event, so that the events persisted
   * meanwhile share its transaction (reads and before images come from the unapplied events).
   */
  static final Duration APPLY_DELAY = Duration.ofMillis(200);

  /** Pending bytes that are applied at once, without waiting for {@link #APPLY_DELAY}. */
  static final long APPLY_NOW_BYTES = 4L << 20;

  /** Document changes applied in one transaction at most (a larger single event goes alone). */
  static final int MAX_CHANGES_PER_APPLY = 5_000;

  /** Events read from the journal at a time while catching up. */
  static final int CATCH_UP_CHUNK = 256;

  private static final Duration FIRST_RETRY = Duration.ofMillis(100);
  private static final Duration LAST_RETRY = Duration.ofSeconds(5);

  /** Where the writer is. */
  enum Phase {
    /** Reading the table's position and catching up from the journal. */
    STARTING,
    /** Applying events as they are persisted. */
    RUNNING,
    /**
     * The table's position is past the journal's tail: the journal lost events the table holds.
     * Nothing is applied; the partition's writes wait (fail closed).
     */
    STORAGE_BEHIND
  }

  /**
   * An event to apply.
   *
   * @param changes its document changes as the partition derived them when it persisted the event
   *     (the same list the partition keeps unapplied), or null for an event read from the journal
   *     (derived here)
   */
  private record Pending(
      long sequence, Partition.Event event, long bytes, List<DocumentChange> changes) {}

  private final int partition;
  private final String persistenceId;
  private final DocumentTable table;
  private final CurrentEventsByPersistenceIdQuery journal;
  private final ActorSystem<?> system;

  /** Called with the new position after each apply: the entity lets waiting writes go. */
  private final LongConsumer applied;

  /** Called once the table holds every event of the recovered journal: the partition may serve. */
  private final Runnable ready;

  /**
   * Called once with {@link #id} when the table refused this writer ({@link DocumentTable.Fenced}).
   */
  private final LongConsumer fenced;

  /**
   * Called after each failed apply (it only sends a message): the partition then refuses the writes
   * that wait for the table if it is at its lag bound ({@link #refusing}).
   */
  private final Runnable failing;

  private static final java.util.concurrent.atomic.AtomicLong IDS =
      new java.util.concurrent.atomic.AtomicLong();

  /** This writer among the node's (an incarnation's partition ignores another one's refusal). */
  private final long id = IDS.incrementAndGet();

  /**
   * The epoch this writer claimed the partition's rows with ({@link DocumentTable#UNFENCED} yet).
   */
  private long epoch = DocumentTable.UNFENCED;

  /** Set when the partition stopped or the table refused this writer: nothing more is done. */
  private boolean stopped;

  private final PartitionObserver observer;

  /** How long receipts are kept: older ones are deleted from the table now and then. */
  private final long receiptTtlMillis;

  /** When expired receipts were last deleted (0: never by this writer). */
  private long receiptsExpiredAt;

  /** How often expired receipts are deleted at most. */
  static final long RECEIPT_EXPIRY_INTERVAL_MILLIS = 60_000;

  private final ArrayDeque<Pending> pending = new ArrayDeque<>();
  private Phase phase = Phase.STARTING;
  private boolean busy;

  /**
   * An apply is scheduled for the tick after the first event persisted since the last ({@link
   * #alignedDelay}).
   */
  private boolean delayed;

  private long appliedThrough;
  private long pendingBytes;

  /** The recovered journal's tail a start catches the table up to. */
  private long startTail;

  private Map<String, String> ruleFields = Map.of();

  /** The partition's next outbox sequence as of {@link #appliedThrough} (0: not known yet). */
  private long outboxNext;

  private int failures;
  private String lastError;

  /**
   * @param journal reads the partition's events to catch up at start; null on a journal without
   *     queries (then a table behind the journal at start is an apply failure, retried)
   */
  TableWriter(
      int partition,
      DocumentTable table,
      CurrentEventsByPersistenceIdQuery journal,
      ActorSystem<?> system,
      LongConsumer applied,
      Runnable ready,
      LongConsumer fenced,
      Runnable failing,
      PartitionObserver observer,
      long receiptTtlMillis) {
    this.partition = partition;
    this.persistenceId = Partition.persistenceId(partition).id();
    this.table = table;
    this.journal = journal;
    this.system = system;
    this.applied = applied;
    this.ready = ready;
    this.fenced = fenced;
    this.failing = failing;
    this.observer = observer;
    this.receiptTtlMillis = receiptTtlMillis;
  }

  /** Reports the lag and whether the writer is halted (called holding this writer's lock). */
  private void report() {
    observer.table(partition, lagEvents(), pendingBytes, halted());
  }

  private boolean halted() {
    return phase == Phase.STORAGE_BEHIND || failures > 0;
  }

  /**
   * The recovered partition's journal ends at {@code tail}, where its next outbox sequence is
   * {@code outboxNextAtTail}: catch the table up to it, then call the ready callback.
   */
  synchronized void start(long tail, long outboxNextAtTail) {
    if (stopped) {
      return;
    }
    phase = Phase.STARTING;
    startTail = tail;
    busy = true;
    // Without a journal query (Pekko's in-memory journals: tests, tools) a writer cannot catch the
    // table up by itself: the previous incarnation's writer, in the same process, drains what it
    // holds, and nothing is claimed or fenced.
    (journal == null ? table.position(partition) : table.claim(partition))
        .whenComplete(
            (position, error) -> {
              if (error != null) {
                retryLater(error, () -> start(tail, outboxNextAtTail));
                return;
              }
              catchUp(position, tail, outboxNextAtTail);
            });
  }

  private void catchUp(DocumentTable.Position position, long tail, long outboxNextAtTail) {
    synchronized (this) {
      // Only a claim fences (see start): a position merely read names no writer of this one.
      epoch = journal == null ? DocumentTable.UNFENCED : position.writerEpoch();
      appliedThrough = position.appliedThrough();
      ruleFields = position.ruleFields();
      outboxNext = position.outboxNext();
      if (position.appliedThrough() > tail) {
        phase = Phase.STORAGE_BEHIND;
        busy = false;
        log.error(
            "partition {}: its documents table is applied through journal sequence {}, past the"
                + " journal's last event {}: the journal lost events the table holds; it serves"
                + " nothing until storage is repaired (storage-behind)",
            partition,
            position.appliedThrough(),
            tail);
        report();
        return;
      }
    }
    replay(position.appliedThrough() + 1, tail, outboxNextAtTail);
  }

  /**
   * Applies the journal's events {@code from..tail} chunk by chunk, then records the outbox
   * sequence at the tail and runs.
   */
  private void replay(long from, long tail, long outboxNextAtTail) {
    if (from > tail) {
      table
          .apply(partition, List.of(), Map.of(), outboxNextAtTail, tail, 0, claimed())
          .whenComplete(
              (position, error) -> {
                if (error != null) {
                  retryLater(error, () -> start(tail, outboxNextAtTail));
                  return;
                }
                synchronized (this) {
                  outboxNext = outboxNextAtTail;
                  running();
                }
                ready.run();
              });
      return;
    }
    if (journal == null) {
      retryLater(
          new IllegalStateException("no journal query to catch the documents table up with"),
          () -> start(tail, outboxNextAtTail));
      return;
    }
    long to = Math.min(tail, from + CATCH_UP_CHUNK - 1);
    applyFromJournal(from, to)
        .whenComplete(
            (through, error) -> {
              if (error != null) {
                retryLater(error, () -> start(tail, outboxNextAtTail));
              } else {
                replay(to + 1, tail, outboxNextAtTail);
              }
            });
  }

  private void running() {
    phase = Phase.RUNNING;
    busy = false;
    failures = 0;
    lastError = null;
    pump();
    report();
  }

  /**
   * The event at {@code sequence} is persisted: apply it after the ones before it.
   *
   * @param changes the event's document changes, derived by the partition with the rules as of the
   *     event before it (which are the writer's rules when it reaches the event)
   */
  synchronized void persisted(
      long sequence, Partition.Event event, long bytes, List<DocumentChange> changes) {
    if (stopped) {
      return;
    }
    pending.addLast(new Pending(sequence, event, bytes, changes));
    pendingBytes += bytes;
    applySoon();
    report();
  }

  /**
   * Applies the pending events now when they fill an apply, else at the node's next {@link
   * #APPLY_DELAY} tick at least half of it after the first of them, so that the events persisted
   * meanwhile share one apply and the node's partitions' applies share transactions.
   */
  private void applySoon() {
    if (pending.size() >= MAX_EVENTS_PER_APPLY || pendingBytes >= APPLY_NOW_BYTES) {
      pump();
    } else if (!delayed && !pending.isEmpty()) {
      delayed = true;
      system
          .scheduler()
          .scheduleOnce(
              alignedDelay(table.applyDelay(), System.currentTimeMillis()),
              () -> {
                synchronized (this) {
                  delayed = false;
                  pump();
                }
              },
              system.executionContext());
    }
  }

  /**
   * How long to wait from {@code nowMillis} for the next apply: until a multiple of {@code delay}
   * on the clock at least half a delay away (so between 0.5 and 1.5 delays, 1 on average). Every
   * partition of the node applies at the same ticks, so their applies share transactions (ADR
   * 0056).
   */
  static Duration alignedDelay(Duration delay, long nowMillis) {
    long d = delay.toMillis();
    if (d <= 1) {
      return delay;
    }
    long wait = d - nowMillis % d;
    return Duration.ofMillis(wait < d / 2 ? wait + d : wait);
  }

  /**
   * The refusal for the partition's writes while the unapplied events are past the bound and the
   * last apply failed (waiting would last as long as the failure: they are refused, typed, and
   * their senders retry), or null.
   */
  synchronized PartitionProtocol.TableApplyFailed refusing() {
    boolean atBound = pending.size() > MAX_LAG_EVENTS || pendingBytes > MAX_LAG_BYTES;
    if (phase == Phase.RUNNING && failures > 0 && atBound) {
      return new PartitionProtocol.TableApplyFailed(pending.size(), failures);
    }
    if (phase == Phase.STARTING && failures >= STARTING_FAILURES_REFUSED) {
      // Catching up at a start keeps failing: the partition is not ready, and its writes would
      // wait for as long as the failure lasts.
      return new PartitionProtocol.TableApplyFailed(lagEvents(), failures);
    }
    return null;
  }

  /**
   * Failed attempts in a row to catch the table up at a start after which the partition's writes
   * are refused rather than left waiting (0.1 + 0.2 + 0.4 s of backoff).
   */
  static final int STARTING_FAILURES_REFUSED = 3;

  /**
   * Events not in the table: the pending ones, or while starting the journal's rest to catch up.
   */
  private long lagEvents() {
    return phase == Phase.STARTING
        ? Math.max(pending.size(), startTail - appliedThrough)
        : pending.size();
  }

  /** Whether the unapplied events are past the bound: the partition's writes wait. */
  synchronized boolean behind() {
    return phase == Phase.STORAGE_BEHIND
        || pending.size() > MAX_LAG_EVENTS
        || pendingBytes > MAX_LAG_BYTES;
  }

  /**
   * The writer's state for the partition's status: {@code starting}, {@code running}, {@code
   * storage-behind}, or {@code table-apply-failed} while the last attempt failed (it is retried;
   * the partition's writes wait once the lag bound is reached).
   */
  synchronized StatusProtocol.TableStatus status() {
    return new StatusProtocol.TableStatus(
        phase != Phase.STORAGE_BEHIND && failures > 0
            ? "table-apply-failed"
            : phase.name().toLowerCase(Locale.ROOT).replace('_', '-'),
        appliedThrough,
        lagEvents(),
        failures,
        lastError,
        0,
        0,
        pendingBytes);
  }

  /**
   * The journal sequence through which the table holds the events (the journal keeps later ones).
   */
  synchronized long appliedThrough() {
    return appliedThrough;
  }

  private void pump() {
    if (stopped || busy || phase != Phase.RUNNING || pending.isEmpty()) {
      return;
    }
    // Events already in the table (applied by the catch-up or another writer) are dropped.
    while (!pending.isEmpty() && pending.peekFirst().sequence() <= appliedThrough) {
      pendingBytes -= pending.pollFirst().bytes();
    }
    if (pending.isEmpty()) {
      return;
    }
    busy = true;
    List<Pending> batch = new ArrayList<>();
    int changes = 0;
    for (Pending p : pending) {
      if (batch.size() >= MAX_EVENTS_PER_APPLY) {
        break;
      }
      int n =
          p.changes() != null
              ? p.changes().size()
              : p.event() instanceof Partition.Written w ? size(w) : 0;
      if (!batch.isEmpty() && changes + n > MAX_CHANGES_PER_APPLY) {
        break;
      }
      batch.add(p);
      changes += n;
    }
    applyNow(batch)
        .whenComplete(
            (through, error) -> {
              synchronized (this) {
                busy = false;
                if (error != null) {
                  Throwable cause = unwrap(error);
                  if (cause instanceof DocumentTable.TableGap gap) {
                    // Another writer's position is behind ours (or the table was rewound): the
                    // events between are read from the journal first.
                    log.warn(
                        "partition {}: documents table applied through {}, expected {}; catching"
                            + " up from the journal",
                        partition,
                        gap.appliedThrough(),
                        batch.get(0).sequence() - 1);
                    busy = true;
                    long to = batch.get(0).sequence() - 1;
                    retryLater(error, () -> fillGap(to));
                    return;
                  }
                  busy = true;
                  retryLater(error, this::resume);
                  return;
                }
                while (!pending.isEmpty() && pending.peekFirst().sequence() <= through) {
                  pendingBytes -= pending.pollFirst().bytes();
                }
                applySoon();
                report();
              }
              applied.accept(through);
            });
  }

  /**
   * Applies the journal's events after the table's position through {@code to} (missing from the
   * table), then goes on. The writer starts again from that position: its journal sequence, the row
   * rules as of it (the events are derived with those, as when they were first applied) and the
   * outbox sequence there.
   */
  private void fillGap(long to) {
    if (journal == null) {
      retryLater(new IllegalStateException("no journal query to fill a gap with"), this::resume);
      return;
    }
    table
        .position(partition)
        .thenCompose(
            position -> {
              long from = position.appliedThrough() + 1;
              synchronized (this) {
                if (position.writerEpoch() != epoch && epoch != DocumentTable.UNFENCED) {
                  throw new DocumentTable.Fenced("a newer writer claimed the partition's rows");
                }
                appliedThrough = position.appliedThrough();
                ruleFields = position.ruleFields();
                outboxNext = position.outboxNext();
              }
              return applyGap(from, to);
            })
        .whenComplete(
            (through, error) -> {
              if (error != null) {
                // The journal lacks events the table needs while this writer runs: the storage
                // changed under it (a failover to a copy without them). Nothing is retried here;
                // the partition recovers from what the storage holds.
                retryLater(
                    unwrap(error) instanceof JournalShort
                        ? new DocumentTable.Fenced("the journal lacks events the table needs")
                        : error,
                    () -> fillGap(to));
                return;
              }
              long now;
              synchronized (this) {
                now = appliedThrough;
              }
              resume();
              // The partition hears how far the table is (another writer may have moved it past
              // events it holds unapplied).
              applied.accept(now);
            });
  }

  /**
   * Applies the journal's events {@code from..to}, {@link #CATCH_UP_CHUNK} at a time (as the
   * catch-up at a start does): a gap as wide as the lag bound is not read or written whole.
   */
  private CompletionStage<Long> applyGap(long from, long to) {
    if (from > to) {
      return CompletableFuture.completedFuture(to);
    }
    long end = Math.min(to, from + CATCH_UP_CHUNK - 1);
    return applyFromJournal(from, end).thenCompose(through -> applyGap(end + 1, to));
  }

  /** Reads the journal's events {@code from..to} (every one of them) and applies them. */
  private CompletionStage<Long> applyFromJournal(long from, long to) {
    return read(from, to)
        .thenCompose(
            events -> {
              if (events.size() != to - from + 1 || events.get(0).sequence() != from) {
                // Pruning never passes the table's position: the journal was changed behind it.
                throw new JournalShort(
                    "the journal holds "
                        + events.size()
                        + " of the events "
                        + from
                        + ".."
                        + to
                        + " the documents table needs");
              }
              return applyNow(events);
            });
  }

  /** The journal holds fewer of the events than the table needs. */
  private static final class JournalShort extends IllegalStateException {
    JournalShort(String message) {
      super(message);
    }
  }

  /** The journal's events {@code from..to}, their changes to be derived when they are applied. */
  private CompletionStage<List<Pending>> read(long from, long to) {
    return journal
        .currentEventsByPersistenceId(persistenceId, from, to)
        .runWith(Sink.seq(), system)
        .thenApply(
            envelopes -> {
              List<Pending> events = new ArrayList<>(envelopes.size());
              for (var e : envelopes) {
                events.add(new Pending(e.sequenceNr(), (Partition.Event) e.event(), 0, null));
              }
              return events;
            });
  }

  /** When {@link #verify} last read the table's position (milliseconds; 0: never). */
  private long verifiedAt;

  /**
   * A read found a row older than the index says: the table lost applies the writer counted (an
   * apply commits without waiting for its flush, so a crash of PostgreSQL can drop the last ones).
   * Reads the table's position, at most once a second, and replays the journal's events between it
   * and the writer's from the journal; an apply in flight finds such a gap by itself.
   */
  synchronized void verify() {
    long now = System.currentTimeMillis();
    if (stopped || busy || phase != Phase.RUNNING || now - verifiedAt < 1_000) {
      return;
    }
    verifiedAt = now;
    busy = true;
    long expected = appliedThrough;
    table
        .position(partition)
        .whenComplete(
            (position, error) -> {
              if (error == null && position.appliedThrough() < expected) {
                log.warn(
                    "partition {}: documents table applied through {}, the writer through {};"
                        + " replaying the events between from the journal",
                    partition,
                    position.appliedThrough(),
                    expected);
                fillGap(expected);
              } else {
                resume();
              }
            });
  }

  private synchronized void resume() {
    busy = false;
    pump();
    report();
  }

  /**
   * Derives the changes of consecutive events from the rules as of the one before the first, and
   * applies them: on success the writer's position, rules and outbox sequence move past them.
   */
  private CompletionStage<Long> applyNow(List<Pending> events) {
    Map<String, String> fields;
    long next;
    synchronized (this) {
      fields = new HashMap<>(ruleFields);
      next = outboxNext;
    }
    DocumentChange.RuleFields rules = DocumentChange.RuleFields.over(fields);
    List<DocumentTable.Applying> applying = new ArrayList<>(events.size());
    for (Pending p : events) {
      applying.add(
          new DocumentTable.Applying(
              p.sequence(),
              p.changes() == null
                  ? DocumentChange.of(p.event(), rules)
                  : DocumentChange.ruled(p.event(), rules, p.changes()),
              p.event() instanceof Partition.Written w ? Receipt.of(w, next, 0) : List.of()));
      next = outboxNextAfter(p.event(), next);
    }
    long last = events.get(events.size() - 1).sequence();
    long nextAfter = next;
    long now = System.currentTimeMillis();
    long receiptsBefore = 0;
    synchronized (this) {
      if (now - receiptsExpiredAt
          >= Math.min(RECEIPT_EXPIRY_INTERVAL_MILLIS, receiptTtlMillis / 2)) {
        receiptsExpiredAt = now;
        receiptsBefore = now - receiptTtlMillis;
      }
    }
    return table
        .apply(partition, applying, fields, nextAfter, last, receiptsBefore, claimed())
        .thenApply(
            position -> {
              synchronized (this) {
                if (last > appliedThrough) {
                  appliedThrough = last;
                  ruleFields = Map.copyOf(fields);
                  outboxNext = nextAfter;
                }
                failures = 0;
                lastError = null;
              }
              return last;
            });
  }

  /** The next outbox sequence after {@code event}, given the one before it. */
  static long outboxNextAfter(Partition.Event event, long before) {
    long next = before;
    if (event instanceof Partition.Written w) {
      for (Partition.FrameApplied f : w.frames()) {
        if (!f.entries().isEmpty()) {
          next = f.entries().get(f.entries().size() - 1).sequence() + 1;
        }
      }
    }
    return next;
  }

  private synchronized long claimed() {
    return epoch;
  }

  /**
   * The partition stopped: nothing more is applied or retried for this incarnation (unless there is
   * no journal query: then the next incarnation relies on this writer to drain, see {@link
   * #start}).
   */
  synchronized void stop() {
    if (journal != null) {
      stopped = true;
    }
  }

  /**
   * The table refused this writer (a newer one claimed the partition, or the storage's journal
   * lacks what it would apply): it stops, and its partition hears it once and recovers again.
   */
  private void fence(DocumentTable.Fenced refused) {
    synchronized (this) {
      if (stopped) {
        return;
      }
      stopped = true;
      lastError = SafeErrors.describe(refused);
    }
    log.warn(
        "partition {}: the documents table refused this incarnation's writer ({}); it stops and"
            + " the partition recovers again",
        partition,
        refused.getMessage());
    fenced.accept(id);
  }

  long id() {
    return id;
  }

  private void retryLater(Throwable error, Runnable again) {
    if (unwrap(error) instanceof DocumentTable.Fenced refused) {
      fence(refused);
      return;
    }
    Duration delay;
    synchronized (this) {
      if (stopped) {
        return;
      }
      failures++;
      lastError = SafeErrors.describe(unwrap(error));
      long millis =
          Math.min(LAST_RETRY.toMillis(), FIRST_RETRY.toMillis() << Math.min(failures - 1, 10));
      delay = Duration.ofMillis(millis);
      if (failures == 1 || failures % 20 == 0) {
        log.warn(
            "partition {}: applying to the documents table failed ({}; {} failures in a row);"
                + " tried again in {} ms, nothing skipped",
            partition,
            lastError,
            failures,
            millis);
      }
      report();
    }
    failing.run();
    system
        .scheduler()
        .scheduleOnce(
            delay,
            () -> {
              synchronized (this) {
                if (stopped) {
                  return;
                }
              }
              again.run();
            },
            system.executionContext());
  }

  private static Throwable unwrap(Throwable t) {
    while (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  private static int size(Partition.Written w) {
    int n = 0;
    for (Partition.FrameApplied f : w.frames()) {
      n += f.entries().size() + f.loaded().size() + f.reset().size() + 1;
    }
    return n;
  }
}
