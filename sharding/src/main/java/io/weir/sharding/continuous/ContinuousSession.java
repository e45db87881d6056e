package io.weir.sharding.continuous;

import io.weir.protocol.CborSerializable;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.SnapshotAdapter;
import org.apache.pekko.persistence.typed.javadsl.CommandHandler;
import org.apache.pekko.persistence.typed.javadsl.Effect;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehavior;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;

/**
 * The durable side of one continuous-query session: its replay log, one journal event per replay
 * event ({@link Entry}), persistence id {@code weir-continuous-session|<subscription id>}.
 *
 * <p>The maintaining node computes a transaction's events (the authoritative read, the merge, the
 * difference) and {@link Append appends} them here before it commits them to its in-memory session,
 * sends them to clients or acknowledges the transaction. An append is sequence-checked: it must
 * continue the log exactly ({@code first = last + 1}); events at sequences already stored are
 * accepted only when they are the same (a retried append after a lost reply); anything else is a
 * {@link Conflict}, so two writers can never interleave one subscription's log. The events of one
 * append are written atomically.
 *
 * <p>A log that has never been written may start at any sequence: a subscription whose log was kept
 * in the earlier table (migration V14) continues after that log's last sequence, so sequences are
 * never reused. Journal sequence number and replay sequence then differ by a constant {@link
 * LogState#offset()}; readers use it to read a sequence range by journal sequence numbers.
 */
public final class ContinuousSession
    extends EventSourcedBehavior<
        ContinuousSession.Command, ContinuousSession.Entry, ContinuousSession.State> {
  public static final EntityTypeKey<Command> TYPE_KEY =
      EntityTypeKey.create(Command.class, "weir-continuous-session");

  /** Data characters of recent entries kept in memory to recognise a retried append. */
  static final long RECENT_CHARS = 1L << 20;

  /** A snapshot every this many events (at most) bounds recovery. */
  static final int SNAPSHOT_EVERY = 1000;

  /** The persistence id of subscription {@code id}. */
  public static PersistenceId persistenceId(String id) {
    return PersistenceId.of(TYPE_KEY.name(), id);
  }

  public static Behavior<Command> create(String id) {
    return create(id, SNAPSHOT_EVERY);
  }

  /**
   * A session snapshotting every {@code snapshotEvery} events. Keep it at most half the events the
   * log retains, so pruning never deletes rows after the latest snapshot (recovery across deleted
   * rows leaves the result unknown).
   */
  public static Behavior<Command> create(String id, int snapshotEvery) {
    return Behaviors.setup(ctx -> new ContinuousSession(ctx, id, snapshotEvery));
  }

  /** A message to the session. */
  public sealed interface Command extends CborSerializable permits Append, GetLog, GetResult {}

  /**
   * One replay event: its sequence, SSE type and JSON data (the journal event). {@code toString}
   * names no value.
   */
  public record Entry(long sequence, String type, String data) {
    public Entry {
      Objects.requireNonNull(type, "type");
      Objects.requireNonNull(data, "data");
    }

    @Override
    public String toString() {
      return "Entry[" + sequence + " " + type + ", " + data.length() + " chars]";
    }
  }

  /**
   * Appends {@code entries} (contiguous, ascending) to the log; replies {@link Appended} or {@link
   * Conflict}.
   */
  public record Append(List<Entry> entries, ActorRef<AppendReply> replyTo) implements Command {
    public Append {
      entries = List.copyOf(entries);
    }
  }

  /** Replies the log's {@link LogState}. */
  public record GetLog(ActorRef<LogState> replyTo) implements Command {}

  /**
   * The largest result (UTF-8 bytes of keys and rows) a {@link Result} carries: a reply crosses the
   * cluster in one message.
   */
  public static final long MAX_RESULT_BYTES = 6L << 20;

  /** Replies the materialised result the log describes, as a {@link Result}. */
  public record GetResult(ActorRef<Result> replyTo) implements Command {}

  /**
   * One row of the materialised result: its key's and its values' JSON, exactly as the log's events
   * spell them. {@code toString} names no value.
   */
  public record Row(String key, String row) {
    public Row {
      Objects.requireNonNull(key, "key");
      Objects.requireNonNull(row, "row");
    }

    @Override
    public String toString() {
      return "Row[" + row.length() + " chars]";
    }
  }

  /**
   * The result after the log's event {@code last} (the commit LSN the last event named, or null),
   * in order; {@code rows} null when the log does not describe it (never written, or an event that
   * did not apply: until the next {@code InitialResult}) or when it is {@code tooLarge} to send in
   * one message (more than {@link #MAX_RESULT_BYTES}). {@code toString} names no value.
   */
  public record Result(long last, String lsn, List<Row> rows, boolean tooLarge)
      implements CborSerializable {
    public Result {
      rows = rows == null ? null : List.copyOf(rows);
    }

    @Override
    public String toString() {
      return "Result[" + last + ", " + (rows == null ? "unknown" : rows.size() + " rows") + "]";
    }
  }

  /** The answer to {@link Append}. */
  public sealed interface AppendReply extends CborSerializable permits Appended, Conflict {}

  /** Every entry is in the log; {@code last} is its last sequence now. */
  public record Appended(long last) implements AppendReply {}

  /** The append does not continue the log (or differs from what is stored); nothing was written. */
  public record Conflict(long last) implements AppendReply {}

  /**
   * The log's last sequence (0: never written) and its offset: the entry at sequence {@code s} is
   * journal event {@code s - offset}.
   */
  public record LogState(long last, long offset) implements CborSerializable {}

  /**
   * The session's state: the last sequence, the materialised result the log describes ({@link
   * MaterialisedResult}; null: not known) with the last commit LSN named, and the newest entries
   * (up to {@link #RECENT_CHARS} of data, at least the last one) for checking retried appends.
   * Mutable, owned by the entity; a snapshot holds everything but the recent entries.
   */
  public static final class State {
    long last;
    String lsn;
    ArrayList<Row> result;
    final ArrayDeque<Entry> recent = new ArrayDeque<>();
    long recentChars;

    State(long last) {
      this.last = last;
    }

    State(long last, String lsn, List<Row> result) {
      this.last = last;
      this.lsn = lsn;
      this.result = result == null ? null : new ArrayList<>(result);
    }

    public long last() {
      return last;
    }

    public String lsn() {
      return lsn;
    }

    /** The result (null: not known); not a copy. */
    public List<Row> result() {
      return result;
    }
  }

  /**
   * What a snapshot holds: the state without its recent entries (an immutable copy, taken on the
   * entity's thread).
   */
  public record Snapshot(long last, String lsn, List<Row> rows) {
    public Snapshot {
      rows = rows == null ? null : List.copyOf(rows);
    }

    @Override
    public String toString() {
      return "Snapshot[" + last + ", " + (rows == null ? "unknown" : rows.size() + " rows") + "]";
    }
  }

  private final ActorContext<Command> ctx;

  private final int snapshotEvery;

  private ContinuousSession(ActorContext<Command> ctx, String id, int snapshotEvery) {
    super(persistenceId(id));
    this.ctx = ctx;
    this.snapshotEvery = Math.max(1, snapshotEvery);
  }

  @Override
  public State emptyState() {
    return new State(0);
  }

  @Override
  public CommandHandler<Command, Entry, State> commandHandler() {
    return newCommandHandlerBuilder()
        .forAnyState()
        .onCommand(Append.class, this::append)
        .onCommand(GetLog.class, (state, get) -> Effect().reply(get.replyTo(), logState(state)))
        .onCommand(GetResult.class, (state, get) -> Effect().reply(get.replyTo(), result(state)))
        .build();
  }

  private static Result result(State state) {
    if (state.last == 0 || state.result == null) {
      return new Result(state.last, state.lsn, null, false);
    }
    long bytes = 0;
    for (Row r : state.result) {
      bytes += utf8Length(r.key()) + utf8Length(r.row());
    }
    return bytes > MAX_RESULT_BYTES
        ? new Result(state.last, state.lsn, null, true)
        : new Result(state.last, state.lsn, state.result, false);
  }

  /** The UTF-8 length of {@code s} in bytes, without encoding it. */
  public static long utf8Length(String s) {
    long n = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      n += c < 0x80 ? 1 : c < 0x800 ? 2 : Character.isSurrogate(c) ? 2 : 3;
    }
    return n;
  }

  private LogState logState(State state) {
    return new LogState(state.last, state.last == 0 ? 0 : state.last - lastSequenceNumber(ctx));
  }

  private Effect<Entry, State> append(State state, Append a) {
    List<Entry> entries = a.entries();
    for (int i = 1; i < entries.size(); i++) {
      if (entries.get(i).sequence() != entries.get(0).sequence() + i) {
        return Effect().reply(a.replyTo(), new Conflict(state.last));
      }
    }
    if (entries.isEmpty()) {
      return Effect().reply(a.replyTo(), new Appended(state.last));
    }
    long first = entries.get(0).sequence();
    if (first < 1 || (state.last > 0 && first > state.last + 1)) {
      return Effect().reply(a.replyTo(), new Conflict(state.last));
    }
    List<Entry> fresh = new ArrayList<>(entries.size());
    for (Entry e : entries) {
      if (e.sequence() > state.last) {
        fresh.add(e);
      } else if (!e.equals(stored(state, e.sequence()))) {
        return Effect().reply(a.replyTo(), new Conflict(state.last));
      }
    }
    if (fresh.isEmpty()) {
      return Effect().reply(a.replyTo(), new Appended(state.last));
    }
    return Effect().persist(fresh).thenReply(a.replyTo(), s -> new Appended(s.last));
  }

  /** The stored entry at {@code sequence} if it is still among the recent ones, else null. */
  private static Entry stored(State state, long sequence) {
    for (var it = state.recent.descendingIterator(); it.hasNext(); ) {
      Entry e = it.next();
      if (e.sequence() == sequence) {
        return e;
      }
      if (e.sequence() < sequence) {
        return null;
      }
    }
    return null;
  }

  @Override
  public EventHandler<State, Entry> eventHandler() {
    return newEventHandlerBuilder()
        .forAnyState()
        .onAnyEvent(
            (state, e) -> {
              if (state.last > 0 && e.sequence() != state.last + 1) {
                // Recovery across deleted rows (pruned past the snapshot, or a deleted
                // registration's log cut
                // to its last entry): the result before this entry is not known, and neither is it
                // after.
                state.result = null;
              }
              state.last = e.sequence();
              MaterialisedResult.apply(state, e.type(), e.data());
              state.recent.addLast(e);
              state.recentChars += e.data().length();
              while (state.recent.size() > 1 && state.recentChars > RECENT_CHARS) {
                state.recentChars -= state.recent.removeFirst().data().length();
              }
              return state;
            });
  }

  @Override
  public SnapshotAdapter<State> snapshotAdapter() {
    return new SnapshotAdapter<>() {
      @Override
      public Object toJournal(State state) {
        return new Snapshot(state.last, state.lsn, state.result);
      }

      @Override
      public State fromJournal(Object from) {
        Snapshot snapshot = (Snapshot) from;
        return new State(snapshot.last(), snapshot.lsn(), snapshot.rows());
      }
    };
  }

  @Override
  public RetentionCriteria retentionCriteria() {
    return RetentionCriteria.snapshotEvery(snapshotEvery, 2);
  }
}
