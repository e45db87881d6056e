package io.weir.node.continuous;

import io.weir.persistence.SafeErrors;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The lower bound of every authoritative read: its snapshot must include every transaction the
 * engine has been delivered ({@link ScopeReader#invisible}), checked on the scope's own connection
 * (the pipeline's source as that scope reads it: xids mean something only on the server that
 * assigned them, and a standby may not show a commit yet). Per scope, the delivered xids no read of
 * that scope has seen visible yet wait in a pending set; a read that finds one invisible is taken
 * again, up to {@code visibility-retries}. Engine thread only.
 */
final class VisibilityGate {
  private static final Logger log = LoggerFactory.getLogger(VisibilityGate.class);

  /**
   * Delivered transactions of a scope whose visibility is checked on that scope's connection once
   * this many wait unchecked.
   */
  static final int PENDING_PRUNE = 1024;

  /** The most delivered transactions a scope keeps unchecked while its checks keep failing. */
  static final int PENDING_CAP = 64 * PENDING_PRUNE;

  private final ContinuousSettings settings;
  private final ScopeReaders readers;

  /** Per scope, the xids of delivered transactions no read of that scope has yet seen visible. */
  private final Map<String, LinkedHashSet<Long>> pending = new HashMap<>();

  /**
   * Per scope, the pending count past which the next check runs: {@link #PENDING_PRUNE}, doubled
   * after each check that failed (the scope unreachable, or its server lagging), so a broken scope
   * costs a check per doubling, not one per transaction.
   */
  private final Map<String, Integer> pruneAt = new HashMap<>();

  VisibilityGate(ContinuousSettings settings, ScopeReaders readers) {
    this.settings = settings;
    this.readers = readers;
  }

  /** A transaction was delivered: every scope's next read must see it. */
  void delivered(long xid) {
    for (String scope : settings.scopes().keySet()) {
      pending.computeIfAbsent(scope, k -> new LinkedHashSet<>()).add(xid);
    }
  }

  /** Delivered transactions {@code scope}'s reads have not yet seen visible. */
  int waiting(String scope) {
    LinkedHashSet<Long> waiting = pending.get(scope);
    return waiting == null ? 0 : waiting.size();
  }

  /**
   * Runs {@code work} on the session's scope login in a read-only transaction whose snapshot
   * includes every transaction delivered so far (taken again while it does not, up to the retry
   * limit). Returns null after recording a failure on the session ({@link Session#failed}: its
   * repair is then pending).
   */
  <T> T read(Session s, ScopeReader.Work<T> work) {
    LinkedHashSet<Long> waiting =
        pending.computeIfAbsent(s.registration.scope(), k -> new LinkedHashSet<>());
    List<Long> checked = new ArrayList<>(waiting);
    ScopeReader reader;
    try {
      reader = readers.get(s.registration.scope());
    } catch (ContinuousQueryException e) {
      s.failed("unknown-scope");
      return null;
    }
    for (int attempt = 0; ; attempt++) {
      Visible<T> read;
      try {
        read =
            reader.readOnly(
                c -> {
                  if (ScopeReader.invisible(c, checked) > 0) {
                    return null;
                  }
                  // Right after the snapshot was taken: its limit is past every commit it holds.
                  ReadPoint at = ReadPoint.of(c);
                  return new Visible<>(work.run(c), at);
                });
      } catch (SQLException e) {
        String state = SafeErrors.sqlState(e);
        log.warn(
            "continuous query {}: authoritative read failed ({}); repair pending",
            s.registration.id(),
            SafeErrors.describe(e));
        s.failed(
            "57014".equals(state)
                ? "statement-timeout"
                : state == null ? "connection" : "sqlstate-" + state);
        return null;
      } catch (RuntimeException e) {
        log.warn(
            "continuous query {}: authoritative read failed ({}); repair pending",
            s.registration.id(),
            e.getClass().getSimpleName());
        s.failed("internal");
        return null;
      }
      if (read == null) {
        s.visibilityRetries++;
        if (attempt + 1 >= settings.visibilityRetries()) {
          s.failed("visibility");
          return null;
        }
        sleep(settings.visibilityRetryDelay().toMillis());
        continue;
      }
      checked.forEach(waiting::remove);
      s.lastRead = read.at();
      return read.value();
    }
  }

  /**
   * What a read returned once its snapshot passed the check (the work itself may return null), and
   * where it stood.
   */
  private record Visible<T>(T value, ReadPoint at) {}

  /**
   * Bounds each scope's pending xids: past {@value #PENDING_PRUNE}, checks them on that scope's own
   * connection and forgets those its snapshot includes; past {@value #PENDING_CAP} (the scope
   * unreachable or lagging all along) the oldest are forgotten with a warning.
   */
  void prune() {
    for (Map.Entry<String, LinkedHashSet<Long>> e : pending.entrySet()) {
      String scope = e.getKey();
      int size = e.getValue().size();
      if (size <= pruneAt.getOrDefault(scope, PENDING_PRUNE)) {
        continue;
      }
      List<Long> checked = new ArrayList<>(e.getValue());
      ScopeReader reader;
      try {
        reader = readers.get(scope);
      } catch (ContinuousQueryException gone) {
        continue; // the scope is no longer configured: nothing reads through it
      }
      for (int attempt = 0; attempt < settings.visibilityRetries(); attempt++) {
        long invisible;
        try {
          invisible = reader.readOnly(c -> ScopeReader.invisible(c, checked));
        } catch (SQLException | RuntimeException x) {
          log.warn(
              "continuous queries of scope {}: checking delivered transactions' visibility failed: {}",
              scope,
              x instanceof SQLException q ? SafeErrors.describe(q) : x.getClass().getSimpleName());
          break;
        }
        if (invisible == 0) {
          checked.forEach(e.getValue()::remove);
          break;
        }
        sleep(settings.visibilityRetryDelay().toMillis());
      }
      if (e.getValue().size() <= PENDING_PRUNE) {
        pruneAt.remove(scope);
        continue;
      }
      if (e.getValue().size() > PENDING_CAP) {
        // Bounded memory while a scope stays unreachable: the oldest go first (thousands of
        // transactions ago, long visible on any server that still answers).
        int drop = e.getValue().size() - PENDING_CAP;
        var it = e.getValue().iterator();
        for (int i = 0; i < drop; i++) {
          it.next();
          it.remove();
        }
        log.warn(
            "continuous queries of scope {}: {} delivered transactions could not be checked for"
                + " visibility and were forgotten (the scope's server is unreachable or lagging)",
            scope,
            drop);
      }
      int now = e.getValue().size();
      pruneAt.put(scope, now >= PENDING_CAP ? now + PENDING_PRUNE : Math.min(PENDING_CAP, 2 * now));
    }
  }

  static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
