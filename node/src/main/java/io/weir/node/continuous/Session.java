package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * One continuous query's materialised result on this node, its in-memory replay log and its SSE
 * subscribers. Used only from the engine's thread ({@link ContinuousQueries}): not thread-safe.
 *
 * <p>Lifecycle: created without a result; the first successful authoritative read appends {@code
 * InitialResult} (sequence 1). Each later read appends the difference ({@link ResultDiff}). A read
 * that fails leaves the result as it was and marks a repair pending (counted by reason); the next
 * transaction or refresh tick reads again. The epoch is new for every session object, so an event
 * id from before a restart ({@code <epoch>-<sequence>}) is recognised as not resumable.
 */
public final class Session {
  /** One event of the replay log, as sent: {@code data} is its JSON. */
  public record Event(String id, long sequence, String type, String data) {}

  /** An SSE client: {@code offer} returns false when the client is gone or too far behind. */
  public interface Subscriber {
    boolean offer(Event event);

    void close();

    /** The principal reading the stream (its access is checked again every refresh); null: not checked. */
    default String principal() {
      return null;
    }
  }

  final RegistrationStore.Stored registration;
  final ContinuousSql.Parsed parsed;
  final Set<String> tables; // null: unknown, every transaction is relevant
  /** The result's order computed in Java, or null when a column type's order cannot be reproduced. */
  final ResultOrder order;
  /** Why this session is maintained by full reads only, or null when the scoped delta (tier 2) applies. */
  final String fullOnly;
  final String epoch;
  private final int retained;
  private List<ResultRow> current; // null until the first successful read
  private long sequence;
  private final Deque<Event> log = new ArrayDeque<>();
  private final List<Subscriber> subscribers = new ArrayList<>();

  // Counters for GET /status.
  long relevantTransactions;
  long unrelatedTransactions;
  long incrementalTransactions;
  long duplicateTransactions;
  long fullReads;
  long rowsRead;
  long visibilityRetries;
  long revokedStreams;
  final Map<String, Long> repairsByReason = new TreeMap<>();
  final Map<String, Long> failuresByReason = new TreeMap<>();
  /** Tier-2 attempts that a safety rule sent to a full read, by rule. */
  final Map<String, Long> fallbacksByReason = new TreeMap<>();
  /** Time to maintain the result for one relevant transaction (reads, merge, events), microseconds. */
  final org.HdrHistogram.Histogram maintenanceMicros = new org.HdrHistogram.Histogram(3_600_000_000L, 2);
  /** Scoped deltas since the last full read, and when that read was (System.nanoTime), for periodic repairs. */
  long deltasSinceFullRead;
  long lastFullReadNanos = System.nanoTime();
  /** The highest commit LSN this session has handled; a transaction at or below it is a duplicate. */
  io.weir.protocol.Lsn handledThrough;
  String lastLsn;
  String repairPending; // reason, or null

  Session(RegistrationStore.Stored registration, String epoch, int retained) {
    this.registration = registration;
    this.parsed = ContinuousSql.parse(registration.definition().sql());
    Definition d = registration.definition();
    this.tables = d.tables() == null ? null : Set.copyOf(d.tables());
    this.order = ResultOrder.of(d);
    this.fullOnly = tables == null ? "unknown-table-set"
        : !d.incremental() ? "maintenance-full"
        : d.impact() == null ? "no-impact-plan"
        : order == null ? "order-not-comparable"
        : null;
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

  /** Folds in a new authoritative result and sends its events; {@code lsn} the last transaction it includes (may be null). */
  void accept(List<ResultRow> result, String lsn) {
    if (current == null) {
      current = List.copyOf(result);
      ObjectNode e = JsonNodeFactory.instance.objectNode().put("type", "InitialResult");
      e.set("rows", rowsJson(current));
      append(e, lsn);
      return;
    }
    List<ObjectNode> events = ResultDiff.diff(current, result);
    current = List.copyOf(result);
    for (ObjectNode e : events) {
      append(e, lsn);
    }
  }

  private void append(ObjectNode e, String lsn) {
    sequence++;
    e.put("sequence", sequence);
    e.put("epoch", epoch);
    if (lsn != null) {
      e.put("lsn", lsn);
    }
    Event event = new Event(epoch + "-" + sequence, sequence, e.get("type").asText(), e.toString());
    log.addLast(event);
    while (log.size() > retained) {
      log.removeFirst();
    }
    subscribers.removeIf(s -> {
      if (s.offer(event)) {
        return false;
      }
      s.close();
      return true;
    });
  }

  /**
   * Adds a subscriber: the events after {@code lastEventId} when it names this epoch and the log
   * still holds them; otherwise ({@code ResultReset} first when a non-resumable id was given) a
   * fresh {@code InitialResult} at the current sequence. Before the first read, the subscriber
   * waits for the log's {@code InitialResult}.
   */
  void subscribe(Subscriber s, String lastEventId) {
    if (current == null) {
      subscribers.add(s);
      return;
    }
    String reason = null;
    if (lastEventId != null) {
      int dash = lastEventId.lastIndexOf('-');
      long seq = -1;
      if (dash > 0) {
        try {
          seq = Long.parseLong(lastEventId.substring(dash + 1));
        } catch (NumberFormatException e) {
          seq = -1;
        }
      }
      if (dash <= 0 || seq < 0 || !lastEventId.substring(0, dash).equals(epoch)) {
        reason = "session-restarted";
      } else if (seq > sequence) {
        reason = "unknown-position";
      } else {
        long first = log.isEmpty() ? sequence + 1 : log.peekFirst().sequence();
        if (seq + 1 < first) {
          reason = "replay-pruned";
        } else {
          for (Event e : log) {
            if (e.sequence() > seq && !s.offer(e)) {
              s.close();
              return;
            }
          }
          subscribers.add(s);
          return;
        }
      }
    }
    if (reason != null) {
      ObjectNode reset = JsonNodeFactory.instance.objectNode().put("type", "ResultReset").put("reason", reason)
          .put("sequence", sequence).put("epoch", epoch);
      if (!s.offer(new Event(epoch + "-" + sequence, sequence, "ResultReset", reset.toString()))) {
        s.close();
        return;
      }
    }
    ObjectNode init = JsonNodeFactory.instance.objectNode().put("type", "InitialResult");
    init.set("rows", rowsJson(current));
    init.put("sequence", sequence).put("epoch", epoch);
    if (lastLsn != null) {
      init.put("lsn", lastLsn);
    }
    if (!s.offer(new Event(epoch + "-" + sequence, sequence, "InitialResult", init.toString()))) {
      s.close();
      return;
    }
    subscribers.add(s);
  }

  void unsubscribe(Subscriber s) {
    subscribers.remove(s);
  }

  /** Ends the streams of subscribers that {@code revoked} selects (their principal lost access). */
  int closeWhere(java.util.function.Predicate<Subscriber> revoked) {
    int[] closed = {0};
    subscribers.removeIf(s -> {
      if (revoked.test(s)) {
        s.close();
        closed[0]++;
        return true;
      }
      return false;
    });
    return closed[0];
  }

  /** Ends every SSE stream (unregistered, or this node stops serving the query). */
  void closeAll() {
    subscribers.forEach(Subscriber::close);
    subscribers.clear();
  }

  void countRepair(String reason) {
    repairsByReason.merge(reason, 1L, Long::sum);
  }

  void countFailure(String reason) {
    failuresByReason.merge(reason, 1L, Long::sum);
  }

  void countFallback(String reason) {
    fallbacksByReason.merge(reason, 1L, Long::sum);
  }

  ObjectNode status(boolean active) {
    ObjectNode s = JsonNodeFactory.instance.objectNode();
    s.put("id", registration.id());
    s.put("scope", registration.scope());
    s.put("active", active);
    s.put("state", current == null ? "initialising" : repairPending != null ? "repair-pending" : "current");
    s.put("epoch", epoch);
    s.put("sequence", sequence);
    s.put("rows", current == null ? 0 : current.size());
    s.put("limit", registration.definition().limit());
    if (tables == null) {
      s.putNull("tables");
    } else {
      ArrayNode t = s.putArray("tables");
      new java.util.TreeSet<>(tables).forEach(t::add);
    }
    s.put("relevantTransactions", relevantTransactions);
    s.put("unrelatedTransactions", unrelatedTransactions);
    s.put("incrementalTransactions", incrementalTransactions);
    s.put("duplicateTransactions", duplicateTransactions);
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
    ObjectNode latency = s.putObject("maintenanceMicros");
    latency.put("count", maintenanceMicros.getTotalCount());
    latency.put("p50", maintenanceMicros.getValueAtPercentile(50));
    latency.put("p99", maintenanceMicros.getValueAtPercentile(99));
    latency.put("max", maintenanceMicros.getMaxValue());
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
