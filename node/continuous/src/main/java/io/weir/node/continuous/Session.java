package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.protocol.Lsn;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.LongFunction;
import java.util.function.Predicate;

/**
 * One continuous query's materialised result on this node, its in-memory replay log and its SSE
 * subscribers. Used only from the engine's thread ({@link ContinuousQueries}): not thread-safe.
 *
 * <p>Lifecycle: created without a result, numbering after the replay log's last stored sequence
 * ({@link #continueAfter}); the first successful authoritative read proposes an {@code
 * InitialResult}, each later one the difference ({@link ResultDiff}). A proposal's events are sent
 * to the durable replay log and the proposal becomes the session's state ({@link #apply}); its
 * events reach subscribers ({@link #publish}) only once the log holds them, in the same engine task
 * (a failed append ends the session, which starts again from the log), so sequences are contiguous
 * across restarts and nodes. A read that fails leaves the result as it was and marks a repair
 * pending (counted by reason); the next transaction or refresh tick reads again. Event ids are
 * signed replay tokens ({@code ReplayToken}); the epoch only names this session object (a node run)
 * in events and status.
 */
public final class Session {
  /**
   * One event of the replay log, as sent: {@code data} is its JSON. {@code toString} names no
   * value.
   */
  public record Event(String id, long sequence, String type, String data) {
    @Override
    public String toString() {
      return "Event[" + sequence + " " + type + ", " + data.length() + " chars]";
    }
  }

  /**
   * An SSE client: {@code offer} returns false when the client is gone or too far behind. The
   * engine calls it only through {@link #offered} and {@link #end}, so a client whose stream
   * already ended (its queue completed or cancelled) can never fail a session or the pipeline that
   * maintains it.
   */
  public interface Subscriber {
    boolean offer(Event event);

    void close();

    /** {@code s.offer(e)}; false also when the offer threw (the client is treated as gone). */
    static boolean offered(Subscriber s, Event e) {
      try {
        return s.offer(e);
      } catch (RuntimeException gone) {
        return false;
      }
    }

    /** {@code s.close()}, ignoring a stream that had already ended. */
    static void end(Subscriber s) {
      try {
        s.close();
      } catch (RuntimeException alreadyEnded) {
        // ended by the client or an earlier close: nothing left to end
      }
    }

    /**
     * The principal reading the stream (its access is checked again every refresh); null: not
     * checked.
     */
    default String principal() {
      return null;
    }
  }

  final RegistrationStore.Stored registration;
  final ContinuousSql.Parsed parsed;
  Set<String> tables; // null: unknown, every transaction is relevant

  /**
   * The result's order computed in Java, or null when a column type's order cannot be reproduced.
   */
  final ResultOrder order;

  /**
   * Why this session is maintained by full reads only, or null when the scoped delta (tier 2)
   * applies.
   */
  String fullOnly;

  final String epoch;
  private final int retained;

  /**
   * The SSE event id of a sequence: a signed replay token ("" while the cluster's keys are not
   * loaded).
   */
  private final LongFunction<String> ids;

  private List<ResultRow> current; // null until the first successful read
  private long sequence;
  private final Deque<Event> log = new ArrayDeque<>();
  private final List<Subscriber> subscribers = new ArrayList<>();

  // Counters for GET /status.
  long relevantTransactions;
  long unrelatedTransactions;
  long incrementalTransactions;
  long unreadTransactions; // of those, decided without a read (ScopedDelta.staysOut)
  long duplicateTransactions;

  long evaluatorTransactions; // scoped deltas a custom evaluator computed (merged as any delta)
  long lookupTransactions; // scoped deltas with keys (partly) from a joined table's lookup rule

  /**
   * The impact rules in force: the registered ones, less lookup rules the current plan no longer
   * has.
   */
  Definition.Impact impact;

  /** {@link #fullOnly} as the registration alone decides it. */
  private final String registeredFullOnly;

  /**
   * The query planned again as the scope's login (when the session starts and after each catalog
   * change). With the registered table set and the same key-table rule it keeps its rules, less any
   * lookup the plan no longer shows (a new one is not taken up: the registration did not have it).
   * Otherwise (a policy added since reads another table, or reads a joined one another way, or the
   * key table's rule is gone) it takes the new table set and is maintained by full reads ({@code
   * plan-changed}) until the query is registered anew.
   *
   * @return whether the session now differs from its registration
   */
  boolean planned(Registrar.Replanned now) {
    Definition d = registration.definition();
    Definition.Impact registered = d.impact();
    if (!Objects.equals(d.tables(), now.tables())) {
      return changed(now.tables());
    }
    if (registered == null) {
      restore(null);
      return false;
    }
    Definition.Impact n = now.impact();
    if (n == null
        || !registered.table().equals(n.table())
        || !registered.sourceColumns().equals(n.sourceColumns())
        || !registered.castTypes().equals(n.castTypes())) {
      return changed(now.tables());
    }
    List<Definition.Lookup> kept = new ArrayList<>();
    for (Definition.Lookup l : registered.lookups()) {
      if (n.lookups().contains(l)) {
        kept.add(l);
      }
    }
    // The order's sources are a fact of the plan now, not a rule the registration adopted.
    restore(
        new Definition.Impact(
            registered.table(),
            registered.sourceColumns(),
            registered.castTypes(),
            kept,
            n.orderSources()));
    return kept.size() != registered.lookups().size();
  }

  /**
   * Planning again failed (the database, a timeout): until it succeeds every transaction counts and
   * is a full read ({@code replan-pending}); the engine retries on each refresh.
   */
  void replanFailed() {
    tables = null;
    impact = null;
    fullOnly = "replan-pending";
  }

  private boolean changed(List<String> now) {
    tables = now == null ? null : Set.copyOf(now);
    impact = null;
    fullOnly = "plan-changed";
    return true;
  }

  private void restore(Definition.Impact rules) {
    Definition d = registration.definition();
    tables = d.tables() == null ? null : Set.copyOf(d.tables());
    impact = rules;
    fullOnly = registeredFullOnly;
  }

  /** Transactions the trusted projector (tier 1) decided without a read. */
  long projectedTransactions;

  /** Why the projector is no longer used for this session (a catalog change), or null. */
  String projectorOff;

  long fullReads;
  long rowsRead;
  long visibilityRetries;
  long revokedStreams;
  final Map<String, Long> repairsByReason = new TreeMap<>();
  final Map<String, Long> failuresByReason = new TreeMap<>();

  /** Tier-2 attempts that a safety rule sent to a full read, by rule. */
  final Map<String, Long> fallbacksByReason = new TreeMap<>();

  /**
   * Time to maintain the result for one relevant transaction (reads, merge, events), microseconds.
   */
  final MaintenanceTimes times = new MaintenanceTimes();

  /**
   * Scoped deltas since the last full read, and when that read was (System.nanoTime), for periodic
   * repairs.
   */
  long deltasSinceFullRead;

  long lastFullReadNanos = System.nanoTime();

  /**
   * The highest commit LSN this session has handled; a transaction at or below it is a duplicate.
   */
  Lsn handledThrough;

  String lastLsn;
  String resultLsn; // the commit the current result is the state after (null: unknown)
  String repairPending; // reason, or null

  /** Where the session's last authoritative read stood ({@link VisibilityGate}). */
  ReadPoint lastRead;

  /** A result read and not yet published: its label is not known yet (ADR 0042), or null. */
  HeldResult held;

  /** Reads dropped: their snapshot held a transaction no label could name. */
  long unlabelledReads;

  /**
   * The replay log refused or failed an append: the engine drops this session and starts it again.
   */
  boolean stale;

  long prunedThrough;

  /**
   * When the session's latest append was answered (System.nanoTime; 0: none in this transaction).
   */
  volatile long appendDoneNanos;

  /**
   * The replay log's entry at sequence {@code s} is its journal event {@code s - logOffset} (ADR
   * 0025).
   */
  long logOffset;

  Session(
      RegistrationStore.Stored registration, String epoch, int retained, LongFunction<String> ids) {
    this.ids = ids;
    this.registration = registration;
    this.parsed = ContinuousSql.parse(registration.definition().sql());
    Definition d = registration.definition();
    this.tables = d.tables() == null ? null : Set.copyOf(d.tables());
    this.order = ResultOrder.of(d);
    this.fullOnly =
        tables == null
            ? "unknown-table-set"
            : !d.incremental()
                ? "maintenance-full"
                : d.impact() == null
                    ? "no-impact-plan"
                    : order == null ? "order-not-comparable" : null;
    this.registeredFullOnly = fullOnly;
    this.impact = d.impact();
    this.epoch = epoch;
    this.retained = retained;
  }

  /** Whether a transaction touching {@code touched} (schema.table) may change the result. */
  boolean relevant(Collection<String> touched) {
    if (tables == null) {
      return true;
    }
    for (String t : touched) {
      if (tables.contains(t)) {
        return true;
      }
    }
    return false;
  }

  boolean initialised() {
    return current != null;
  }

  /** The current result (null before the first read). */
  List<ResultRow> current() {
    return current;
  }

  /**
   * A change of the result not yet committed: its events, numbered after the committed sequence. It
   * changes the session only through {@link #apply} (its events sent to the replay log first), and
   * reaches subscribers only through {@link #publish}, after the events are durable; an abandoned
   * proposal leaves the session as it was.
   */
  record Proposal(List<ResultRow> result, List<Event> events, String lsn) {}

  /**
   * The events that turn the current result into {@code result}; {@code lsn} the last transaction
   * it includes (may be null).
   */
  Proposal propose(List<ResultRow> result, String lsn) {
    List<ObjectNode> changes;
    if (current == null) {
      ObjectNode e = JsonNodeFactory.instance.objectNode().put("type", "InitialResult");
      e.set("rows", rowsJson(result));
      changes = List.of(e);
    } else {
      changes = ResultDiff.diff(current, result);
    }
    List<Event> events = new ArrayList<>(changes.size());
    long next = sequence;
    for (ObjectNode e : changes) {
      next++;
      e.put("sequence", next);
      e.put("epoch", epoch);
      if (lsn != null) {
        e.put("lsn", lsn);
      }
      events.add(new Event(ids.apply(next), next, e.get("type").asText(), e.toString()));
    }
    return new Proposal(List.copyOf(result), events, lsn);
  }

  /** Makes a proposal the session's state (its events are durable) and sends its events. */
  void commit(Proposal p) {
    apply(p);
    publish(p);
  }

  /**
   * Makes a proposal the session's state (result, sequence, the in-memory log); its events go to
   * the subscribers with {@link #publish} once they are durable, before anything else uses the
   * session (the engine does both in one task).
   */
  void apply(Proposal p) {
    if (!p.events().isEmpty() && p.events().get(0).sequence() != sequence + 1) {
      throw new IllegalStateException("a proposal must follow the committed sequence");
    }
    current = p.result();
    resultLsn = p.lsn();
    for (Event event : p.events()) {
      sequence = event.sequence();
      log.addLast(event);
      while (log.size() > retained) {
        log.removeFirst();
      }
    }
  }

  /** Sends an applied proposal's events to the subscribers. */
  void publish(Proposal p) {
    for (Event event : p.events()) {
      subscribers.removeIf(
          s -> {
            if (Subscriber.offered(s, event)) {
              return false;
            }
            Subscriber.end(s);
            return true;
          });
    }
  }

  /** The committed sequence: the last event appended to the replay log. */
  long sequence() {
    return sequence;
  }

  /**
   * Continues numbering after {@code last}, the replay log's highest sequence (a restart or another
   * node's session).
   */
  void continueAfter(long last) {
    if (current != null || sequence != 0) {
      throw new IllegalStateException("only a new session continues a replay log");
    }
    sequence = last;
  }

  /** Whether the in-memory log holds every event after {@code position} (or nothing is missing). */
  boolean retainedAfter(long position) {
    if (position >= sequence) {
      return true;
    }
    return !log.isEmpty() && log.peekFirst().sequence() <= position + 1;
  }

  /**
   * Adds a subscriber. {@code position} is where a verified replay token left it (null: a new
   * stream); {@code durable} holds the stored events after it when the in-memory log does not
   * (null: none were read). A new stream, or one that cannot be resumed ({@code reset} names why:
   * token-expired, replay-pruned, unknown-position), gets a fresh {@code InitialResult} at the
   * current sequence ({@code ResultReset} first when a position was given). Before the session's
   * first read it waits for the log's {@code InitialResult}.
   */
  void subscribe(Subscriber s, Long position, List<Event> durable, String reset) {
    String reason = reset;
    if (reason == null && position != null) {
      if (position > sequence) {
        reason = "unknown-position";
      } else if (retainedAfter(position)) {
        for (Event e : log) {
          if (e.sequence() > position && !Subscriber.offered(s, e)) {
            Subscriber.end(s);
            return;
          }
        }
        subscribers.add(s);
        return;
      } else if (durable != null
          && !durable.isEmpty()
          && durable.get(0).sequence() == position + 1
          && (durable.get(durable.size() - 1).sequence() >= sequence
              || retainedAfter(durable.get(durable.size() - 1).sequence()))) {
        long last = position;
        for (Event e : durable) {
          if (!Subscriber.offered(s, e)) {
            Subscriber.end(s);
            return;
          }
          last = e.sequence();
        }
        for (Event e : log) {
          if (e.sequence() > last && !Subscriber.offered(s, e)) {
            Subscriber.end(s);
            return;
          }
        }
        subscribers.add(s);
        return;
      } else {
        reason = "replay-pruned";
      }
    }
    if (current == null && reason == null) {
      subscribers.add(s);
      return;
    }
    if (reason != null) {
      ObjectNode reset2 =
          JsonNodeFactory.instance
              .objectNode()
              .put("type", "ResultReset")
              .put("reason", reason)
              .put("sequence", sequence)
              .put("epoch", epoch);
      if (!Subscriber.offered(
          s, new Event(ids.apply(sequence), sequence, "ResultReset", reset2.toString()))) {
        Subscriber.end(s);
        return;
      }
      if (current == null) {
        subscribers.add(s); // the InitialResult of the first read follows
        return;
      }
    }
    ObjectNode init = JsonNodeFactory.instance.objectNode().put("type", "InitialResult");
    init.set("rows", rowsJson(current));
    init.put("sequence", sequence).put("epoch", epoch);
    if (resultLsn != null) {
      init.put("lsn", resultLsn);
    }
    if (!Subscriber.offered(
        s, new Event(ids.apply(sequence), sequence, "InitialResult", init.toString()))) {
      Subscriber.end(s);
      return;
    }
    subscribers.add(s);
  }

  void unsubscribe(Subscriber s) {
    subscribers.remove(s);
  }

  /** Ends the streams of subscribers that {@code revoked} selects (their principal lost access). */
  int closeWhere(Predicate<Subscriber> revoked) {
    int[] closed = {0};
    subscribers.removeIf(
        s -> {
          if (revoked.test(s)) {
            Subscriber.end(s);
            closed[0]++;
            return true;
          }
          return false;
        });
    return closed[0];
  }

  /** Ends every SSE stream (unregistered, or this node stops serving the query). */
  void closeAll() {
    subscribers.forEach(Subscriber::end);
    subscribers.clear();
  }

  void countRepair(String reason) {
    repairsByReason.merge(reason, 1L, Long::sum);
  }

  void countFailure(String reason) {
    failuresByReason.merge(reason, 1L, Long::sum);
  }

  void countFallback(FallbackReason reason) {
    fallbacksByReason.merge(reason.wireName(), 1L, Long::sum);
  }

  /** An authoritative read or append failed: the result stays, a repair is pending. */
  void failed(String reason) {
    repairPending = reason;
    countFailure(reason);
  }

  ObjectNode status(boolean active) {
    ObjectNode s = JsonNodeFactory.instance.objectNode();
    s.put("id", registration.id());
    s.put("scope", registration.scope());
    s.put("active", active);
    s.put(
        "state",
        current == null ? "initialising" : repairPending != null ? "repair-pending" : "current");
    s.put("settling", held != null);
    s.put("unlabelledReads", unlabelledReads);
    s.put("epoch", epoch);
    s.put("sequence", sequence);
    s.put("rows", current == null ? 0 : current.size());
    s.put("limit", registration.definition().limit());
    if (tables == null) {
      s.putNull("tables");
    } else {
      ArrayNode t = s.putArray("tables");
      new TreeSet<>(tables).forEach(t::add);
    }
    s.put("relevantTransactions", relevantTransactions);
    s.put("unrelatedTransactions", unrelatedTransactions);
    s.put("incrementalTransactions", incrementalTransactions);
    s.put("unreadTransactions", unreadTransactions);
    s.put("duplicateTransactions", duplicateTransactions);
    if (registration.definition().projector() != null) {
      s.put("projector", registration.definition().projector());
      s.put("projectedTransactions", projectedTransactions);
      if (projectorOff == null) {
        s.putNull("projectorOff");
      } else {
        s.put("projectorOff", projectorOff);
      }
    }
    if (registration.definition().planFingerprint() != null) {
      s.put("planFingerprint", registration.definition().planFingerprint());
    }
    if (impact != null && !impact.lookups().isEmpty()) {
      ArrayNode tables = s.putArray("lookupTables");
      impact.lookups().forEach(l -> tables.add(l.table()));
      s.put("lookupTransactions", lookupTransactions);
    }
    if (registration.definition().evaluator() != null) {
      s.put("evaluator", registration.definition().evaluator());
      s.put("evaluatorTransactions", evaluatorTransactions);
    }
    if (fullOnly == null) {
      s.putNull("fullReadsOnly");
    } else {
      s.put("fullReadsOnly", fullOnly);
    }
    s.put("authoritativeReads", fullReads);
    s.put("rowsRead", rowsRead);
    s.put("visibilityRetries", visibilityRetries);
    ObjectNode repairs = s.putObject("fullRepairsByReason");
    repairsByReason.forEach(repairs::put);
    ObjectNode fallbacks = s.putObject("fallbacksByReason");
    fallbacksByReason.forEach(fallbacks::put);
    times.put(s);
    ObjectNode failures = s.putObject("failedReadsByReason");
    failuresByReason.forEach(failures::put);
    if (repairPending == null) {
      s.putNull("repairPending");
    } else {
      s.put("repairPending", repairPending);
    }
    if (lastLsn == null) {
      s.putNull("lastLsn");
    } else {
      s.put("lastLsn", lastLsn);
    }
    s.put("subscribers", subscribers.size());
    s.put("streamsClosedOnRevocation", revokedStreams);
    return s;
  }

  private static ArrayNode rowsJson(List<ResultRow> rows) {
    ArrayNode out = JsonNodeFactory.instance.arrayNode();
    for (ResultRow r : rows) {
      ObjectNode o = out.addObject();
      o.set("key", r.key());
      o.set("row", r.row());
    }
    return out;
  }
}
