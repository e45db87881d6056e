package io.weir.node.continuous;

import io.weir.node.continuous.spi.ContinuousEvaluator;
import io.weir.node.continuous.spi.ContinuousProjector;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.sharding.continuous.ContinuousLog;
import io.weir.sharding.continuous.ContinuousSession;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.BiFunction;
import java.util.function.BiPredicate;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Maintains the sessions of one node from the continuous pipeline (engine thread only; {@link
 * ContinuousQueries} owns the thread and the public API). A transaction touching none of a
 * session's tables only counts. Otherwise the session is brought up to date by the first tier whose
 * rules prove the new result: its trusted projector (tier 1, {@link ProjectorTier}), the scoped
 * delta (tier 2, {@link DeltaTier}), or a full read of its query (tier 3, {@link FullReadTier});
 * each tier answers with a {@link TierOutcome}, and every fallback names a {@link FallbackReason}.
 * Reads count only when their snapshot includes every delivered transaction ({@link
 * VisibilityGate}); results reach clients once durable in the replay log ({@link ReplayAppender}).
 */
final class Maintenance {
  private static final Logger log = LoggerFactory.getLogger(Maintenance.class);

  private final ContinuousSettings settings;
  private final RegistrationStore store;
  private final ContinuousLog replayLog;
  private final ReplayStore legacyReplay;
  private final List<String> publications;
  private final Map<String, Session> sessions;
  private final ScopeReaders readers;
  private final Supplier<ContinuousMetrics> metrics;
  private final Supplier<BiPredicate<String, String>> access;
  private final BiFunction<String, Long, String> replayId;
  private final Runnable fenceSoon;
  final VisibilityGate gate;
  final ReplayAppender appender;
  private final CatalogWatch catalog;
  private final ProjectorTier projectorTier;
  private final DeltaTier deltaTier;
  private final FullReadTier fullRead;

  /** The commit LSN of the last transaction delivered. */
  private String lastLsn;

  /** Rotates which session is maintained first: the first read after a commit costs the most. */
  private long rotation;

  /**
   * @param sessions the node's sessions, shared with {@link ContinuousQueries} (engine thread only)
   * @param access (principal id, scope) -> whether the principal may still read the scope's queries
   * @param replayId the SSE id of a subscription's sequence (a signed replay token)
   * @param fenceSoon asks for {@link #fence} on the engine thread shortly, unless asked already
   */
  Maintenance(
      ContinuousSettings settings,
      RegistrationStore store,
      ContinuousLog replayLog,
      ReplayStore legacyReplay,
      List<String> publications,
      Map<String, Session> sessions,
      ScopeReaders readers,
      Map<String, ContinuousEvaluator> evaluators,
      Map<String, ContinuousProjector> projectors,
      Supplier<ContinuousMetrics> metrics,
      Supplier<BiPredicate<String, String>> access,
      BiFunction<String, Long, String> replayId,
      Runnable fenceSoon) {
    this.settings = settings;
    this.fenceSoon = fenceSoon;
    this.store = store;
    this.replayLog = replayLog;
    this.legacyReplay = legacyReplay;
    this.publications = publications;
    this.sessions = sessions;
    this.readers = readers;
    this.metrics = metrics;
    this.access = access;
    this.replayId = replayId;
    this.gate = new VisibilityGate(settings, readers);
    this.appender = new ReplayAppender(settings, replayLog);
    this.catalog = new CatalogWatch(settings, readers);
    this.projectorTier = new ProjectorTier(projectors);
    this.deltaTier = new DeltaTier(settings, evaluators, gate);
    this.fullRead = new FullReadTier(projectors, gate);
  }

  private void meter(Consumer<ContinuousMetrics> update) {
    ContinuousMetrics m = metrics.get();
    if (m != null) {
      update.accept(m);
    }
  }

  /**
   * One committed transaction of the continuous pipeline. One pass over the changes collects the
   * touched tables and, for each session the scoped delta may serve, its affected keys (the changes
   * of a spilled transaction can be read only once, during this call); then each relevant session
   * is maintained in turn.
   */
  void transaction(Transaction t) {
    Lsn commit = t.commitLsn();
    Map<Session, ScopedDelta.Keys> keys = new HashMap<>();
    Map<Session, long[]> timed = new LinkedHashMap<>();
    List<Session> live = new ArrayList<>();
    for (Session s : sessions.values()) {
      if (s.stale) {
        continue; // started again by the next refresh, with a read that includes this transaction
      }
      if (s.handledThrough != null && commit.compareTo(s.handledThrough) <= 0) {
        // Redelivered after a stream restart: the restart's read covered it.
        s.duplicateTransactions++;
        meter(m -> m.transaction("duplicate"));
        continue;
      }
      live.add(s);
      if (s.fullOnly == null && s.initialised() && s.repairPending == null) {
        ScopedDelta.Keys k = new ScopedDelta.Keys(s.impact, s.tables, settings.affectedKeyLimit());
        keys.put(
            s,
            s.registration.definition().projector() != null && s.projectorOff == null
                ? k.withRowChanges()
                : k);
      }
    }
    Set<String> touched = new HashSet<>();
    for (Change c : t.changes()) {
      TableSchema table = Transaction.rowTable(c);
      if (table != null) {
        touched.add(table.qualifiedName());
        for (ScopedDelta.Keys k : keys.values()) {
          k.change(c, table);
        }
      } else if (c instanceof Change.Truncate tr) {
        tr.tables().forEach(x -> touched.add(x.qualifiedName()));
        for (ScopedDelta.Keys k : keys.values()) {
          k.truncate(tr.tables());
        }
      }
    }
    gate.delivered(t.xid());
    lastLsn = commit.toString();
    if (!live.isEmpty()) {
      Collections.rotate(live, (int) (rotation++ % live.size()));
    }
    for (Session s : live) {
      if (s.stale) {
        continue;
      }
      s.lastLsn = lastLsn;
      if (s.held != null && s.held.releasedBy(commit)) {
        release(s); // every transaction its read may hold is known; a re-read holds again
      }
      if (s.held != null) {
        // Within the held read's window: in its snapshot or not, no tier maintains it.
        if (s.relevant(touched)) {
          s.held.relevant(t.xid(), lastLsn);
          s.relevantTransactions++;
        } else {
          s.unrelatedTransactions++;
          meter(m -> m.transaction("unrelated"));
        }
        s.handledThrough = commit;
        continue;
      }
      if (!s.relevant(touched)) {
        s.handledThrough = commit;
        s.unrelatedTransactions++;
        meter(m -> m.transaction("unrelated"));
        continue;
      }
      long started = System.nanoTime();
      s.appendDoneNanos = 0;
      maintain(s, keys.get(s));
      // Only now: when maintain throws, the delivery fails and the transaction comes again, and
      // this session must maintain it then rather than count it a duplicate.
      s.handledThrough = commit;
      s.relevantTransactions++;
      timed.put(s, new long[] {started, System.nanoTime()});
    }
    gate.prune();
    appender.flush();
    // Maintenance time: the session's own reads and merge, and its append until durable (the
    // appends of all sessions run together, so another session's reads are not counted).
    timed.forEach((s, span) -> s.times.record(span[0], span[1], s.appendDoneNanos));
  }

  /**
   * Brings a session up to date after a relevant transaction: its projector (tier 1) or the scoped
   * delta (tier 2) when their rules hold, otherwise, or when a safety rule refuses their outcome, a
   * full read (tier 3).
   */
  private void maintain(Session s, ScopedDelta.Keys keys) {
    if (s.fullOnly != null) {
      read(s, FullRead.fullReadsOnly(s.fullOnly));
      return;
    }
    if (!s.initialised()) {
      read(s, FullRead.INITIAL);
      return;
    }
    if (s.repairPending != null) {
      read(s, FullRead.retryAfter(s.repairPending));
      return;
    }
    if (keys == null) {
      // Not analysed for this session (its first result was held when the transaction arrived,
      // and this transaction released it): a full read covers it.
      read(s, FullRead.INITIAL);
      return;
    }
    if (keys.fallback != null) {
      fallBack(s, keys.fallback);
      return;
    }
    if (s.deltasSinceFullRead >= settings.repairEveryTransactions()) {
      read(s, FullRead.PERIODIC);
      return;
    }
    if (keys.empty()) {
      s.incrementalTransactions++; // the changes cannot touch any result row (e.g. a no-op batch)
      meter(m -> m.transaction("incremental"));
      return;
    }
    Definition d = s.registration.definition();
    if (ScopedDelta.staysOut(s.current(), d.limit(), d, keys, s.order)) {
      // Every changed row ranks after the result's last one: the result stands, nothing to read.
      s.incrementalTransactions++;
      s.unreadTransactions++;
      s.deltasSinceFullRead++; // the periodic full read checks these decisions too
      meter(m -> m.transaction("incremental"));
      return;
    }
    if (s.registration.definition().projector() != null && s.projectorOff == null) {
      TierOutcome projected = projectorTier.apply(s, keys);
      if (projected instanceof TierOutcome.Applied a) {
        incremental(s, a, true);
        return;
      }
      FallbackReason reason = ((TierOutcome.Fallback) projected).reason();
      countFallback(s, reason);
      if (reason.next() == FallbackReason.Next.FULL_READ) {
        read(s, FullRead.fallback(reason));
        return;
      }
    }
    TierOutcome delta = deltaTier.apply(s, keys);
    long rows = delta.rowsRead();
    s.rowsRead += rows;
    meter(m -> m.rowsRead(rows));
    if (delta instanceof TierOutcome.Applied a) {
      incremental(s, a, false);
    } else if (delta instanceof TierOutcome.Fallback f) {
      fallBack(s, f.reason());
    } // RepairPending: recorded on the session, retried at the next transaction or refresh
  }

  /**
   * Commits a result tier 1 proved (no read: it is the state after this transaction), or holds one
   * tier 2 read until its label is known ({@link #hold}); counts it once appended.
   */
  private void incremental(Session s, TierOutcome.Applied a, boolean projected) {
    Runnable counted =
        () -> {
          s.incrementalTransactions++;
          if (projected) {
            s.projectedTransactions++;
          }
          if (a.lookups()) {
            s.lookupTransactions++;
          }
          s.deltasSinceFullRead++;
          meter(m -> m.transaction("incremental"));
        };
    if (projected) {
      if (appender.append(s, s.propose(a.result(), s.lastLsn))) {
        counted.run();
      }
    } else {
      hold(s, a.result(), true, counted);
    }
  }

  /**
   * Holds a result an authoritative read produced until the pipeline has delivered every commit
   * before its read point's limit ({@link HeldResult}, ADR 0042): a later transaction or a fence
   * message releases it ({@link #release}). A newer read replaces a held one.
   */
  private void hold(Session s, List<ResultRow> result, boolean delta, Runnable published) {
    ReadPoint at = s.lastRead;
    if (at == null) {
      s.failed("no-read-point"); // a read always records one: fail closed if it did not
      return;
    }
    s.held = new HeldResult(result, at, delta, s.lastLsn, published);
    fenceSoon.run();
  }

  /**
   * Every commit before the held result's limit is delivered: appends it, labelled with the last
   * transaction its snapshot holds, or reads again when no transaction can label it.
   */
  private void release(Session s) {
    HeldResult h = s.held;
    s.held = null;
    if (h.exact()) {
      if (appender.append(s, s.propose(h.result, h.label()))) {
        h.published.run();
        if (h.behind() && !s.stale) {
          // Exact at its label; a later transaction of the window is not in it, and its changes
          // are gone: read the query again (a result holds, so the session keeps publishing).
          read(s, FullRead.BEHIND_HELD_READ);
        }
      }
      return;
    }
    s.unlabelledReads++;
    fallBack(s, FallbackReason.UNLABELLED_READ);
  }

  /**
   * Writes a fence message ({@link ReadPoint#fence}) on every scope with a held result: the
   * pipeline delivering it releases them when no transaction does. A scope whose server refuses it
   * (a standby) waits for the next transaction; warned once until a fence succeeds again, and tried
   * again every refresh.
   */
  void fence() {
    Set<String> scopes = new TreeSet<>();
    for (Session s : sessions.values()) {
      if (!s.stale && s.held != null) {
        scopes.add(s.registration.scope());
      }
    }
    for (String scope : scopes) {
      try {
        readers.get(scope).fence();
        fenceless.remove(scope);
      } catch (SQLException | RuntimeException e) {
        if (fenceless.add(scope)) {
          log.warn(
              "continuous queries of scope {}: writing a fence message failed ({}); their results"
                  + " are published once the next transaction is delivered",
              scope,
              e instanceof SQLException q ? SafeErrors.describe(q) : e.getClass().getSimpleName());
        }
      }
    }
  }

  /** Scopes whose fence message failed (warned once each). */
  private final Set<String> fenceless = new HashSet<>();

  /**
   * The pipeline delivered a fence message at {@code position} ({@link ReadPoint#fence}): every
   * commit before it is delivered, so held results whose limit it passes are released.
   */
  void reached(Lsn position) {
    for (Session s : sessions.values()) {
      if (!s.stale && s.held != null && s.held.releasedBy(position)) {
        release(s);
      }
    }
  }

  /** Counts a fallback for {@code reason} and answers it with a full read. */
  private void fallBack(Session s, FallbackReason reason) {
    countFallback(s, reason);
    read(s, FullRead.fallback(reason));
  }

  private void countFallback(Session s, FallbackReason reason) {
    s.countFallback(reason);
    meter(m -> m.fallback(reason));
  }

  /**
   * Loads registrations added (or drops ones removed) by any node, retries pending repairs, reads
   * sessions whose catalog changed or whose periodic repair is due, and ends revoked streams.
   */
  void refresh() {
    List<RegistrationStore.Stored> stored;
    try {
      stored = store.all();
    } catch (SQLException e) {
      log.warn(
          "reading continuous query registrations failed; retrying: {}", SafeErrors.describe(e));
      closeRevokedStreams(); // whatever else fails, a principal who lost access is not served
      return;
    }
    sessions.values().removeIf(s -> s.stale);
    catalog.check(
        stored.stream().map(RegistrationStore.Stored::scope).toList(),
        sessions.values(),
        s -> {
          replan(s);
          read(s, FullRead.CATALOG_CHANGED);
        });
    Set<String> ids = new HashSet<>();
    for (RegistrationStore.Stored r : stored) {
      ids.add(r.id());
      if (!sessions.containsKey(r.id())) {
        if (!settings.scopes().containsKey(r.scope())) {
          continue; // a scope this node has no login for: not maintained here (status says so)
        }
        // One registration that cannot be started (e.g. stored by another version) must not stop
        // the others, nor the revocation checks below.
        try {
          String id = r.id();
          Session s =
              new Session(
                  r,
                  Long.toHexString(System.currentTimeMillis())
                      + Long.toHexString(System.nanoTime() & 0xffff),
                  settings.replayRetained(),
                  seq -> replayId.apply(id, seq));
          ContinuousSession.LogState logState = ReplayAppender.await(replayLog.state(id));
          // A log never written here continues the earlier table's log, if it has one.
          long last = logState.last() > 0 ? logState.last() : legacyReplay.lastSequence(id);
          s.logOffset = logState.last() > 0 ? logState.offset() : last;
          s.continueAfter(last);
          s.prunedThrough = Math.max(0, s.sequence() - settings.replayRetained());
          s.lastLsn = lastLsn;
          sessions.put(r.id(), s);
          replan(
              s); // the catalog may have changed since the registration (or while no node ran it)
          read(s, FullRead.INITIAL);
        } catch (RuntimeException e) {
          log.warn(
              "continuous query {} could not be started; skipped: {}",
              r.id(),
              SafeErrors.describe(e));
        } catch (SQLException e) {
          log.warn(
              "continuous query {}: the replay log could not be read; retrying: {}",
              r.id(),
              SafeErrors.describe(e));
        } catch (ReplayAppender.LogUnavailable e) {
          log.warn(
              "continuous query {}: the replay log could not be read ({}); retrying",
              r.id(),
              e.getMessage());
        }
      }
    }
    closeRevokedStreams();
    if (sessions.values().stream().anyMatch(s -> !s.stale && s.held != null)) {
      fenceSoon.run(); // a fence that failed, or one overtaken by nothing: try again each refresh
    }
    for (var it = sessions.entrySet().iterator(); it.hasNext(); ) {
      var e = it.next();
      if (!ids.contains(e.getKey())) {
        e.getValue().closeAll();
        it.remove();
        appender.cutDeletedLog(e.getValue());
      } else if ("replan-pending".equals(e.getValue().fullOnly)) {
        replan(e.getValue());
        if (!"replan-pending".equals(e.getValue().fullOnly)) {
          read(e.getValue(), FullRead.REPLANNED);
        }
      } else if (e.getValue().repairPending != null) {
        read(e.getValue(), FullRead.retryAfter(e.getValue().repairPending));
      } else if (e.getValue().deltasSinceFullRead > 0
          && System.nanoTime() - e.getValue().lastFullReadNanos
              >= settings.repairInterval().toNanos()) {
        read(e.getValue(), FullRead.PERIODIC);
      }
    }
  }

  /** Ends the streams of principals who no longer hold the grant on their query's scope. */
  private void closeRevokedStreams() {
    BiPredicate<String, String> check = access.get();
    for (Session s : sessions.values()) {
      String scope = s.registration.scope();
      int closed =
          s.closeWhere(sub -> sub.principal() != null && !check.test(sub.principal(), scope));
      if (closed > 0) {
        s.revokedStreams += closed;
      }
    }
  }

  /**
   * Plans a session's query again as its scope's login and tells the session ({@link
   * Session#planned}); a failure leaves it reading in full on every transaction until a later
   * refresh plans it.
   */
  private void replan(Session s) {
    Registrar.Replanned now;
    try {
      now =
          readers
              .get(s.registration.scope())
              .readOnly(c -> Registrar.replan(c, s.registration.definition(), publications));
    } catch (SQLException | RuntimeException e) {
      log.warn(
          "continuous query {}: planning it again failed; full reads until it succeeds: {}",
          s.registration.id(),
          e instanceof SQLException q ? SafeErrors.describe(q) : e.getClass().getSimpleName());
      s.replanFailed();
      return;
    }
    if (s.planned(now)) {
      log.info(
          "continuous query {}: its plan differs from the registration's under the current catalog ({})",
          s.registration.id(),
          s.fullOnly == null ? "a lookup rule is gone" : s.fullOnly);
    }
  }

  /**
   * One authoritative read of {@code s}'s full query (tier 3); a failure marks a pending repair
   * instead of changing the result.
   */
  void read(Session s, FullRead reason) {
    if (!(fullRead.read(s) instanceof TierOutcome.Applied a)) {
      return; // repair pending, recorded
    }
    s.fullReads++;
    s.rowsRead += a.rowsRead();
    meter(
        m -> {
          m.fullRead(reason.cause());
          m.rowsRead(a.rowsRead());
        });
    s.repairPending = null; // the read succeeded; what it found waits for its label
    hold(
        s,
        a.result(),
        false,
        () -> {
          s.countRepair(reason.key());
          s.deltasSinceFullRead = 0;
          s.lastFullReadNanos = System.nanoTime();
        });
  }
}
