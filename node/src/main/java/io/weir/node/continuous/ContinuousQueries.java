package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.util.RawValue;
import io.micrometer.core.instrument.MeterRegistry;
import io.weir.node.metrics.ContinuousMetrics;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.token.ReplayToken;
import io.weir.protocol.token.TokenSigner;
import io.weir.sharding.continuous.ContinuousLog;
import io.weir.sharding.continuous.ContinuousSession;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BiPredicate;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.apache.pekko.pattern.AskTimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The continuous-query engine of one node: the sessions it maintains from the continuous pipeline,
 * registration, status and SSE subscriptions.
 *
 * <p>Maintenance: a transaction touching none of a session's tables only counts. Otherwise the
 * session is brought up to date by the scoped delta (tier 2, {@link ScopedDelta}: the base read for
 * the affected keys, merged under rank rules) when its impact plan has a rule and every safety rule
 * holds, and by a full read of its query (tier 3) otherwise. A read counts only when its snapshot
 * includes every transaction delivered so far ({@link ScopeReader#invisible}); otherwise it is
 * taken again.
 *
 * <p>Threads: every session is used from one engine thread, so transactions, registrations,
 * subscriptions and status reads are ordered; registration's checks run on a separate pool. The
 * engine is <em>active</em> while the continuous pipeline's sink is open on this node (the pipeline
 * manager singleton runs here); other nodes register and store queries, and answer 503 for events
 * and status.
 */
public final class ContinuousQueries implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ContinuousQueries.class);

  /**
   * Delivered transactions of a scope whose visibility is checked on that scope's connection once
   * this many wait unchecked.
   */
  private static final int PENDING_PRUNE = 1024;

  /** The most delivered transactions a scope keeps unchecked while its checks keep failing. */
  private static final int PENDING_CAP = 64 * PENDING_PRUNE;

  private final ContinuousSettings settings;
  private final PostgresSettings weir;
  private final DataSource weirDataSource;
  private final RegistrationStore store;

  /** The sessions' replay logs (sharded entities, ADR 0025). */
  private final ContinuousLog replayLog;

  /** The logs' earlier table, read once per session start. */
  private final ReplayStore legacyReplay;

  /**
   * Streams this node serves from the session entities' journals (their sessions run elsewhere).
   */
  private final LogFollowers followers;

  /** The cluster's token signer, once loaded (replay tokens). */
  private volatile Supplier<Optional<TokenSigner>> signer = Optional::empty;

  private final List<String> publications;
  private final ExecutorService engine;
  private final ExecutorService checks;
  private final ScheduledExecutorService ticks;
  private final Map<String, ScopeReader> readers = new HashMap<>();
  private final Map<String, Session> sessions = new LinkedHashMap<>();

  /** Micrometer meters ({@link #bindMetrics}); null while metrics are off. */
  private volatile ContinuousMetrics metrics;

  /**
   * Per scope, the xids of delivered transactions no read of that scope has yet seen visible
   * (engine thread only). Per scope because each scope reads through its own connection, possibly
   * of another server (a standby): a transaction one scope's snapshot includes may not be in
   * another's yet.
   */
  private final Map<String, LinkedHashSet<Long>> pending = new HashMap<>();

  /**
   * Per scope, the pending count past which the next check runs: {@link #PENDING_PRUNE}, doubled
   * after each check that failed (the scope unreachable, or its server lagging), so a broken scope
   * costs a check per doubling, not one per transaction (engine thread only).
   */
  private final Map<String, Integer> pruneAt = new HashMap<>();

  /** Scope -> digest of the access catalogs at the last check (engine thread only). */
  private final Map<String, String> catalogDigests = new HashMap<>();

  private volatile boolean active;

  /** (principal id, scope) -> whether the principal may still read the scope's queries. */
  private volatile BiPredicate<String, String> access = (principal, scope) -> true;

  private boolean repairAllOnActivate;
  private String lastLsn;

  /**
   * @param publications the continuous pipeline's publications: every table a query reads must be
   *     in one
   */
  public ContinuousQueries(
      ContinuousSettings settings,
      PostgresSettings weir,
      DataSource weirDataSource,
      List<String> publications,
      ContinuousLog replayLog) {
    this.settings = settings;
    this.weir = weir;
    this.weirDataSource = weirDataSource;
    this.store = new RegistrationStore(weirDataSource, weir.schema());
    this.replayLog = replayLog;
    this.legacyReplay = new ReplayStore(weirDataSource, weir.schema());
    this.followers =
        new LogFollowers(
            replayLog,
            store,
            settings,
            "f"
                + Long.toHexString(System.currentTimeMillis())
                + Long.toHexString(System.nanoTime() & 0xffff));
    this.publications = List.copyOf(publications);
    this.evaluators = load(ContinuousEvaluator.class, ContinuousEvaluator::name, "evaluators");
    this.projectors = load(ContinuousProjector.class, ContinuousProjector::name, "projectors");
    this.engine = Executors.newSingleThreadExecutor(r -> daemon(r, "weir-continuous"));
    this.checks = Executors.newFixedThreadPool(2, r -> daemon(r, "weir-continuous-register"));
    this.ticks = Executors.newSingleThreadScheduledExecutor(r -> daemon(r, "weir-continuous-tick"));
    long refresh = settings.refresh().toMillis();
    // At most one refresh waits on the engine: a busy engine (full reads) does not pile them up.
    ticks.scheduleWithFixedDelay(
        () -> {
          if (active && refreshQueued.compareAndSet(false, true)) {
            onEngine(
                () -> {
                  refreshQueued.set(false);
                  refresh();
                });
          }
        },
        refresh,
        refresh,
        TimeUnit.MILLISECONDS);
  }

  private final AtomicBoolean refreshQueued = new AtomicBoolean();

  /** Custom evaluators and trusted projectors on the class path, by name. */
  private final Map<String, ContinuousEvaluator> evaluators;

  private final Map<String, ContinuousProjector> projectors;

  /**
   * The {@code type} services on the class path by name; a node refuses to start with two of one
   * name.
   */
  private static <T> Map<String, T> load(Class<T> type, Function<T, String> name, String what) {
    Map<String, T> found = new TreeMap<>();
    for (T e : ServiceLoader.load(type)) {
      String n = name.apply(e);
      if (n == null || !n.matches(ContinuousRequest.EVALUATOR_NAME)) {
        throw new IllegalStateException(
            "continuous "
                + what
                + ": "
                + e.getClass().getName()
                + " has a name of the wrong shape");
      }
      if (found.put(n, e) != null) {
        throw new IllegalStateException("two continuous " + what + " are named " + n);
      }
    }
    if (!found.isEmpty()) {
      log.info("continuous {} installed: {}", what, found.keySet());
    }
    return Collections.unmodifiableMap(found);
  }

  private static Thread daemon(Runnable r, String name) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }

  public ContinuousSettings settings() {
    return settings;
  }

  /** Whether this node maintains the sessions now. */
  public boolean active() {
    return active;
  }

  /**
   * Sets the check that ends SSE streams whose principal was revoked or lost the {@code
   * ContinuousQuery} grant on the scope; applied to every open stream each refresh.
   */
  public void accessCheck(BiPredicate<String, String> check) {
    this.access = check;
    followers.accessCheck(check);
  }

  /** Reports sessions, transactions, fallbacks, full reads and rows read to {@code registry}. */
  public void bindMetrics(MeterRegistry registry) {
    metrics = new ContinuousMetrics(registry, sessions::size);
  }

  private void meter(Consumer<ContinuousMetrics> update) {
    ContinuousMetrics m = metrics;
    if (m != null) {
      update.accept(m);
    }
  }

  /** Sets where replay tokens are signed and verified: the cluster's token keys. */
  public void tokenSigner(Supplier<Optional<TokenSigner>> signer) {
    this.signer = signer;
  }

  /**
   * The SSE id of sequence {@code sequence} of subscription {@code id}: a signed, expiring replay
   * token.
   */
  private String replayId(String id, long sequence) {
    Optional<TokenSigner> s = signer.get();
    return s.isEmpty()
        ? ""
        : new ReplayToken(id, sequence)
            .sign(s.get(), System.currentTimeMillis() + settings.replayTokenTtl().toMillis());
  }

  /** The result of a registration. */
  public record Registered(String id, boolean created, String scope) {}

  /**
   * Validates, stores and (when active) starts a continuous query; fails with {@link
   * ContinuousQueryException}.
   */
  public CompletionStage<Registered> register(ContinuousRequest request, String principal) {
    return CompletableFuture.supplyAsync(
            () -> {
              ScopeReader reader = reader(request.scope());
              Registrar.Compiled compiled =
                  Registrar.compile(request, reader, publications, evaluators, projectors);
              try {
                boolean created =
                    store.insert(compiled, principal, settings.maxRegistrationsPerScope());
                return new Registered(compiled.id(), created, compiled.scope());
              } catch (SQLException e) {
                throw new ContinuousQueryException(
                    ErrorCode.UNAVAILABLE,
                    "the registration could not be stored; retry (" + SafeErrors.describe(e) + ")");
              }
            },
            checks)
        .thenCompose(
            r ->
                !active
                    ? CompletableFuture.completedFuture(r)
                    : CompletableFuture.supplyAsync(
                        () -> {
                          try {
                            refresh();
                          } finally {
                            flushAppends();
                          }
                          return r;
                        },
                        engine));
  }

  /** The stored registration {@code id}, if any. */
  public CompletionStage<Optional<RegistrationStore.Stored>> find(String id) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return store.find(id);
          } catch (SQLException e) {
            throw new ContinuousQueryException(
                ErrorCode.UNAVAILABLE, "the registration could not be read; retry");
          }
        },
        checks);
  }

  /**
   * Deletes a registration and ends its session and streams here (other nodes drop it at their next
   * refresh).
   */
  public CompletionStage<Boolean> unregister(String id) {
    return CompletableFuture.supplyAsync(
            () -> {
              try {
                return store.delete(id);
              } catch (SQLException e) {
                throw new ContinuousQueryException(
                    ErrorCode.UNAVAILABLE, "the registration could not be deleted; retry");
              }
            },
            checks)
        .thenApplyAsync(
            deleted -> {
              Session s = sessions.remove(id);
              if (s != null) {
                s.closeAll();
                cutDeletedLog(s);
              }
              return deleted;
            },
            engine);
  }

  /**
   * The durable materialised result of {@code id} as its session entity holds it (the result after
   * the log's last event): answered on any node. Fails with {@code unavailable} while the log
   * describes no result (never written yet) or the entity does not answer.
   */
  public CompletionStage<ObjectNode> result(String id) {
    return replayLog
        .result(id)
        .handle(
            (r, error) -> {
              if (error != null) {
                throw new ContinuousQueryException(
                    ErrorCode.UNAVAILABLE, "the query's session did not answer; retry");
              }
              if (r.tooLarge()) {
                throw LogFollowers.tooLarge();
              }
              if (r.rows() == null) {
                throw new ContinuousQueryException(
                    ErrorCode.UNAVAILABLE, "the query has no durable result yet; retry");
              }
              ObjectNode out = JsonNodeFactory.instance.objectNode();
              out.put("id", id).put("sequence", r.last());
              if (r.lsn() != null) {
                out.put("lsn", r.lsn());
              }
              ArrayNode rows = out.putArray("rows");
              for (ContinuousSession.Row row : r.rows()) {
                // The key and values exactly as the log's events spell them.
                rows.addObject()
                    .putRawValue("key", new RawValue(row.key()))
                    .putRawValue("row", new RawValue(row.row()));
              }
              return out;
            });
  }

  /**
   * The session's counters, or empty when this node does not maintain it (inactive, or not loaded
   * yet).
   */
  public CompletionStage<Optional<ObjectNode>> status(String id) {
    return CompletableFuture.supplyAsync(
        () -> {
          Session s = sessions.get(id);
          if (s == null || !active) {
            return Optional.<ObjectNode>empty();
          }
          ObjectNode out = s.status(active);
          LinkedHashSet<Long> waiting = pending.get(s.registration.scope());
          out.put("pendingVisibilityChecks", waiting == null ? 0 : waiting.size());
          return Optional.of(out);
        },
        engine);
  }

  /**
   * Where a stream starts: after {@code position} (a verified replay token's sequence), or fresh;
   * {@code reset} says why not resumed.
   */
  private record Resume(Long position, String reset) {}

  /** Verifies a replay token of subscription {@code id} (null or empty: a new stream). */
  private Resume resume(String id, String token) {
    if (token == null || token.isEmpty()) {
      return new Resume(null, null);
    }
    TokenSigner keys =
        signer
            .get()
            .orElseThrow(
                () ->
                    new ContinuousQueryException(
                        ErrorCode.UNAVAILABLE,
                        "the cluster's token keys are not loaded yet; retry"));
    try {
      ReplayToken t = ReplayToken.verify(keys, token, System.currentTimeMillis());
      if (!t.subscription().equals(id)) {
        throw new ContinuousQueryException(
            ErrorCode.TOKEN_MISMATCH, "the replay token belongs to another subscription");
      }
      return new Resume(t.sequence(), null);
    } catch (TokenSigner.InvalidToken e) {
      if (e.failure() == TokenSigner.Failure.EXPIRED) {
        return new Resume(0L, "token-expired");
      } else if (e.failure() == TokenSigner.Failure.INVALIDATED_BY_RESTORE) {
        throw new ContinuousQueryException(
            ErrorCode.TOKEN_INVALIDATED,
            "the replay token was issued before a restore from a backup; subscribe again without it");
      }
      throw new ContinuousQueryException(
          ErrorCode.INVALID_TOKEN, "the Last-Event-ID is not a replay token of this cluster");
    }
  }

  /**
   * Subscribes an SSE client of subscription {@code id} (of security scope {@code scope}). {@code
   * token} (the Last-Event-ID, or null) resumes after the event it names, from memory or from the
   * durable replay log; an expired token or a position no longer retained gets {@code ResultReset}
   * and a fresh result; a token that is not genuine, or names another subscription, is refused. The
   * session's own node serves it from memory; any other node (or this one before the session
   * started) follows the session entity's journal ({@link LogFollowers}).
   */
  public CompletionStage<Void> subscribe(
      String id, String scope, Session.Subscriber subscriber, String token) {
    Resume resume;
    try {
      resume = resume(id, token);
    } catch (ContinuousQueryException e) {
      return CompletableFuture.failedFuture(e);
    }
    return CompletableFuture.supplyAsync(
            () -> {
              Session s = sessions.get(id);
              if (s == null || s.stale || !active) {
                return false;
              }
              Long position = resume.reset() == null ? resume.position() : null;
              List<Session.Event> durable = null;
              if (position != null && position <= s.sequence() && !s.retainedAfter(position)) {
                try {
                  durable = new ArrayList<>();
                  for (ContinuousSession.Entry e :
                      await(
                          replayLog.after(
                              id, s.logOffset, position, settings.replayRetained() + 1))) {
                    durable.add(
                        new Session.Event(
                            replayId(id, e.sequence()), e.sequence(), e.type(), e.data()));
                  }
                } catch (LogUnavailable e) {
                  throw new ContinuousQueryException(
                      ErrorCode.UNAVAILABLE, "the replay log could not be read; retry");
                }
              }
              s.subscribe(subscriber, position, durable, resume.reset());
              return true;
            },
            engine)
        .thenCompose(
            served ->
                served
                    ? CompletableFuture.<Void>completedFuture(null)
                    : followers.follow(
                        id,
                        scope,
                        subscriber,
                        resume.position(),
                        resume.reset(),
                        seq -> replayId(id, seq)));
  }

  public void unsubscribe(String id, Session.Subscriber subscriber) {
    followers.unfollow(subscriber);
    onEngine(
        () -> {
          Session s = sessions.get(id);
          if (s != null) {
            s.unsubscribe(subscriber);
          }
        });
  }

  // ---- the sink side ----

  /**
   * The continuous pipeline's sink opened on this node: load every registration and read what is
   * missing.
   */
  CompletionStage<Void> activate() {
    return CompletableFuture.runAsync(
        () -> {
          try {
            active = true;
            boolean repairAll = repairAllOnActivate;
            repairAllOnActivate = false;
            if (repairAll) {
              // The stream restarted: what it delivers again is read anyway, but a result may have
              // missed nothing only if every session reads once now.
              for (Session s : sessions.values()) {
                read(s, "pipeline-restart");
              }
            }
            refresh();
          } finally {
            flushAppends();
          }
        },
        engine);
  }

  /**
   * The sink closed (pipeline stopped, restarting or moving to another node): sessions stay, but
   * are not maintained until the next activation, so their open streams end now (clients resume
   * with Last-Event-ID wherever the pipeline runs) rather than go on with results nobody maintains.
   */
  void deactivate() {
    active = false;
    onEngine(
        () -> {
          active = false; // also after an activation queued before this
          repairAllOnActivate = true;
          sessions.values().forEach(Session::closeAll);
        });
  }

  /** Runs {@code task} on the engine thread unless the engine is closed (node shutdown). */
  private void onEngine(Runnable task) {
    try {
      engine.execute(
          () -> {
            try {
              task.run();
            } finally {
              flushAppends();
            }
          });
    } catch (RejectedExecutionException closed) {
      // shutting down: nothing left to maintain
    }
  }

  /**
   * Handles one committed transaction of the continuous pipeline; completes once every session has.
   * One pass over the changes collects the touched tables and, for each session the scoped delta
   * may serve, its affected keys (the changes of a spilled transaction can be read only once,
   * during this call); then each relevant session is maintained in turn.
   */
  CompletionStage<Void> onTransaction(Transaction t) {
    return CompletableFuture.runAsync(
        () -> {
          try {
            handle(t);
          } finally {
            flushAppends(); // also when handling failed half way: what was applied is sent or ends
            // stale
          }
        },
        engine);
  }

  /** {@link #onTransaction} on the engine thread. */
  private void handle(Transaction t) {
    Lsn commit = t.commitLsn();
    Map<Session, ScopedDelta.Keys> keys = new HashMap<>();
    Map<Session, long[]> timed = new LinkedHashMap<>();
    List<Session> live = new ArrayList<>();
    for (Session s : sessions.values()) {
      if (s.stale) {
        continue; // started again by the next refresh, with a read that includes this transaction
      }
      if (s.handledThrough != null && commit.compareTo(s.handledThrough) <= 0) {
        s.duplicateTransactions++;
        meter(
            m ->
                m.transaction(
                    "duplicate")); // redelivered after a stream restart: the restart's read covered
        // it
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
    for (String scope : settings.scopes().keySet()) {
      pending.computeIfAbsent(scope, k -> new LinkedHashSet<>()).add(t.xid());
    }
    lastLsn = commit.toString();
    for (Session s : live) {
      if (s.stale) {
        continue;
      }
      s.lastLsn = lastLsn;
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
      // this
      // session must maintain it then rather than count it a duplicate.
      s.handledThrough = commit;
      s.relevantTransactions++;
      timed.put(s, new long[] {started, System.nanoTime()});
    }
    prunePending();
    flushAppends();
    // Maintenance time: the session's own reads and merge, and its append until durable (the
    // appends of all sessions run together, so another session's reads are not counted).
    timed.forEach(
        (s, span) ->
            s.maintenanceMicros.recordValue(
                Math.min(
                    s.maintenanceMicros.getHighestTrackableValue(),
                    Math.max(0, (Math.max(span[1], s.appendDoneNanos) - span[0]) / 1000))));
  }

  /**
   * Brings a session up to date after a relevant transaction: the scoped delta (tier 2) when its
   * rules hold, otherwise, or when a safety rule refuses its outcome, a full read (tier 3).
   */
  private void maintain(Session s, ScopedDelta.Keys keys) {
    if (s.fullOnly != null) {
      read(s, s.fullOnly);
      return;
    }
    if (!s.initialised()) {
      read(s, "initial");
      return;
    }
    if (s.repairPending != null) {
      read(s, "retry-after-" + s.repairPending);
      return;
    }
    if (keys.fallback != null) {
      s.countFallback(keys.fallback);
      String reason = keys.fallback;
      meter(m -> m.fallback(reason));
      read(s, "fallback-" + keys.fallback);
      return;
    }
    if (s.deltasSinceFullRead >= settings.repairEveryTransactions()) {
      read(s, "periodic");
      return;
    }
    if (keys.empty()) {
      s.incrementalTransactions++; // the changes cannot touch any result row (e.g. a no-op batch)
      meter(m -> m.transaction("incremental"));
      return;
    }
    if (s.registration.definition().projector() != null
        && s.projectorOff == null
        && project(s, keys)) {
      return;
    }
    delta(s, keys);
  }

  /**
   * Tier 1: the trusted projector computes the affected rows from the change tuples; the same shape
   * check and merge rule apply. False when tier 2 must run instead (the projector is missing or
   * uncertain, an image was incomplete), each counted as a fallback.
   */
  private boolean project(Session s, ScopedDelta.Keys keys) {
    Definition d = s.registration.definition();
    ContinuousProjector projector = projectors.get(d.projector());
    String gap = projector == null ? "projector-missing" : keys.projectorGap;
    List<ResultRow> rows = null;
    if (gap == null) {
      List<ObjectNode> projected;
      try {
        projected =
            projector.project(
                ContinuousEvaluator.Query.of(d), s.registration.loginRole(), keys.rowChanges);
      } catch (RuntimeException e) {
        log.warn(
            "continuous projector {} failed ({}); using the scoped delta",
            projector.name(),
            e.getClass().getSimpleName());
        projected = null;
      }
      rows = projected == null ? null : checkedRows(d, projected);
      if (rows == null) {
        gap = "projector-uncertain";
      }
    }
    if (gap != null) {
      String reason = gap;
      s.countFallback(reason);
      meter(m -> m.fallback(reason));
      return false;
    }
    // Every affected key (old and new) is spelled as the result spells it only for integer keys
    // without a read; other key types go to the scoped delta, which reads them back.
    Set<String> affectedKeys =
        ScopedDelta.integerKeys(d.impact(), new ArrayList<>(keys.keys.values()));
    if (affectedKeys == null) {
      s.countFallback("projector-key-type");
      meter(m -> m.fallback("projector-key-type"));
      return false;
    }
    ScopedDelta.Outcome outcome =
        ScopedDelta.merge(s.current(), affectedKeys, rows, d.limit(), s.order);
    if (outcome.fallback() != null) {
      s.countFallback(outcome.fallback());
      meter(m -> m.fallback(outcome.fallback()));
      read(s, "fallback-" + outcome.fallback());
      return true;
    }
    if (commit(s, s.propose(outcome.result(), s.lastLsn))) {
      s.incrementalTransactions++;
      s.projectedTransactions++;
      s.deltasSinceFullRead++;
      meter(m -> m.transaction("incremental"));
    }
    return true;
  }

  /**
   * Tier 2: reads the base for the affected keys only and merges, or falls back to a full read. A
   * transaction that changed a joined table with a lookup rule first reads, in the same
   * authoritative transaction, the keys of the key-table rows whose joined column has one of the
   * changed values (integers: lookup rules exist only for integer keys); more keys than the bound
   * cost a full read.
   */
  private void delta(Session s, ScopedDelta.Keys keys) {
    Definition d = s.registration.definition();
    List<List<String>> changed = new ArrayList<>(keys.keys.values());
    List<List<String>> tuples = new ArrayList<>(changed);
    boolean lookups = !keys.lookupValues.isEmpty();
    List<ResultRow>[] affected = new List[1];
    ContinuousEvaluator evaluator = d.evaluator() == null ? null : evaluators.get(d.evaluator());
    if (d.evaluator() != null && evaluator == null) {
      // Registered on a node that had it; this one has not: the query stays correct by full reads.
      s.countFallback("evaluator-missing");
      meter(m -> m.fallback("evaluator-missing"));
      read(s, "fallback-evaluator-missing");
      return;
    }
    String[] failure = new String[1];
    long[] lookedUp = new long[1];
    List<ResultRow> fetched =
        authoritative(
            s,
            c -> {
              failure[0] = null;
              tuples.clear();
              tuples.addAll(changed);
              lookedUp[0] = lookups ? lookupKeys(c, d, keys, tuples) : 0;
              if (lookedUp[0] < 0) {
                failure[0] = lookedUp[0] == -1 ? "budget-exceeded" : "null-key";
                lookedUp[0] = 0;
                return List.of();
              }
              if (tuples.isEmpty()) {
                return List.of(); // no result row can depend on the changed rows
              }
              // The affected keys as the result spells them: integers are parsed (after the read);
              // other
              // types are cast and read back by PostgreSQL here (their text form may depend on
              // settings).
              if (ScopedDelta.integerKeys(d.impact(), tuples) == null) {
                try (PreparedStatement ps = c.prepareStatement(d.keyValues(tuples.size()))) {
                  bindKeys(ps, 1, tuples);
                  affected[0] = ScopeReader.rows(ps, d.keyColumns());
                }
              }
              if (evaluator != null) {
                List<ResultRow> rows = evaluated(evaluator, d, c, tuples);
                if (rows == null) {
                  failure[0] = "evaluator-failed";
                  return List.of();
                }
                return rows;
              }
              try (PreparedStatement ps =
                  c.prepareStatement(d.scoped(s.parsed.jdbcSql(), tuples.size()))) {
                ScopeReader.bind(ps, s.parsed.parameterOrder(), d.parameters());
                bindKeys(ps, s.parsed.parameterOrder().size() + 1, tuples);
                return ScopeReader.rows(ps, d.keyColumns());
              }
            });
    if (fetched == null) {
      return; // failed: repair pending, recorded
    }
    long lookupRows = lookedUp[0];
    s.rowsRead += lookupRows;
    meter(m -> m.rowsRead(lookupRows));
    if (failure[0] != null) {
      s.countFallback(failure[0]);
      meter(m -> m.fallback(failure[0]));
      read(s, "fallback-" + failure[0]);
      return;
    }
    if (evaluator != null) {
      s.evaluatorTransactions++;
    }
    Set<String> affectedKeys = ScopedDelta.integerKeys(d.impact(), tuples);
    if (affectedKeys == null) {
      affectedKeys = new HashSet<>();
      for (ResultRow r : affected[0]) {
        affectedKeys.add(r.keyText());
      }
    }
    ScopedDelta.Outcome outcome =
        ScopedDelta.merge(s.current(), affectedKeys, fetched, d.limit(), s.order);
    s.rowsRead += fetched.size();
    int fetchedRows = fetched.size();
    meter(m -> m.rowsRead(fetchedRows));
    if (outcome.fallback() != null) {
      s.countFallback(outcome.fallback());
      meter(m -> m.fallback(outcome.fallback()));
      read(s, "fallback-" + outcome.fallback());
      return;
    }
    if (commit(s, s.propose(outcome.result(), s.lastLsn))) {
      s.incrementalTransactions++;
      if (lookups) {
        s.lookupTransactions++;
      }
      meter(m -> m.transaction("incremental"));
      s.deltasSinceFullRead++;
    }
  }

  /**
   * Adds to {@code tuples} the keys of the key-table rows that the lookup rules name for the
   * changed values (as the subscriber, in the delta's transaction). Returns the rows read, or -1
   * when the keys exceed the bound, -2 when a key column is null (a result row with a null key,
   * which no {@code IN (...)} reads).
   */
  private long lookupKeys(
      Connection c, Definition d, ScopedDelta.Keys keys, List<List<String>> tuples)
      throws SQLException {
    int bound = settings.affectedKeyLimit();
    Set<String> seen = new HashSet<>(keys.keys.keySet());
    int width = d.impact().sourceColumns().size();
    long read = 0;
    for (Map.Entry<Definition.Lookup, Set<String>> e : keys.lookupValues.entrySet()) {
      List<String> values = new ArrayList<>(e.getValue());
      try (PreparedStatement ps =
          c.prepareStatement(d.lookupSql(e.getKey(), values.size(), bound + 1))) {
        for (int i = 0; i < values.size(); i++) {
          ps.setString(i + 1, values.get(i));
        }
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            read++;
            List<String> key = new ArrayList<>(width);
            for (int j = 1; j <= width; j++) {
              key.add(rs.getString(j));
            }
            if (key.contains(null)) {
              return -2;
            }
            if (seen.add(String.join("\u0000", key))) {
              tuples.add(key);
            }
          }
        }
      }
    }
    return tuples.size() > bound ? -1 : read;
  }

  /**
   * Runs a custom evaluator in the authoritative transaction and checks its rows' shape: exactly
   * the query's columns and a non-null key. Null when it threw or a row has another shape (the
   * caller falls back to a full read); a SQL failure propagates like a scoped delta's.
   */
  private static List<ResultRow> evaluated(
      ContinuousEvaluator evaluator, Definition d, Connection c, List<List<String>> tuples)
      throws SQLException {
    ContinuousEvaluator.Query query = ContinuousEvaluator.Query.of(d);
    List<ObjectNode> rows;
    try {
      rows =
          evaluator.evaluate(
              new ContinuousEvaluator.Context() {
                @Override
                public ContinuousEvaluator.Query query() {
                  return query;
                }

                @Override
                public Connection connection() {
                  return c;
                }

                @Override
                public List<ObjectNode> rows(PreparedStatement statement) throws SQLException {
                  List<ObjectNode> out = new ArrayList<>();
                  for (ResultRow r : ScopeReader.rows(statement, d.keyColumns())) {
                    out.add(r.row());
                  }
                  return out;
                }
              },
              tuples);
    } catch (SQLException e) {
      throw e;
    } catch (RuntimeException e) {
      log.warn(
          "continuous evaluator {} failed ({}); falling back to a full read",
          evaluator.name(),
          e.getClass().getSimpleName());
      return null;
    }
    return rows == null ? null : checkedRows(d, rows);
  }

  /**
   * {@code rows} as result rows when each has exactly the query's columns and a non-null key; else
   * null.
   */
  private static List<ResultRow> checkedRows(Definition d, List<ObjectNode> rows) {
    Set<String> columns = new HashSet<>(d.columns());
    List<ResultRow> out = new ArrayList<>(rows.size());
    for (ObjectNode row : rows) {
      if (row == null || row.size() != columns.size()) {
        return null;
      }
      for (var it = row.fieldNames(); it.hasNext(); ) {
        if (!columns.contains(it.next())) {
          return null;
        }
      }
      ArrayNode key = JsonNodeFactory.instance.arrayNode();
      for (String k : d.keyColumns()) {
        if (row.get(k).isNull()) {
          return null;
        }
        key.add(row.get(k));
      }
      out.add(new ResultRow(key.toString(), key, row));
    }
    return out;
  }

  private static void bindKeys(PreparedStatement ps, int first, List<List<String>> tuples)
      throws SQLException {
    int i = first;
    for (List<String> tuple : tuples) {
      for (String v : tuple) {
        ps.setString(i++, v);
      }
    }
  }

  // ---- engine thread ----

  /** Loads registrations added (or drops ones removed) by any node, and retries pending repairs. */
  private void refresh() {
    if (!active) {
      return;
    }
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
    watchCatalog(stored);
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
                  seq -> replayId(id, seq));
          ContinuousSession.LogState logState = await(replayLog.state(id));
          // A log never written here continues the earlier table's log, if it has one.
          long last = logState.last() > 0 ? logState.last() : legacyReplay.lastSequence(id);
          s.logOffset = logState.last() > 0 ? logState.offset() : last;
          s.continueAfter(last);
          s.prunedThrough = Math.max(0, s.sequence() - settings.replayRetained());
          s.lastLsn = lastLsn;
          sessions.put(r.id(), s);
          replan(
              s); // the catalog may have changed since the registration (or while no node ran it)
          read(s, "initial");
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
        } catch (LogUnavailable e) {
          log.warn(
              "continuous query {}: the replay log could not be read ({}); retrying",
              r.id(),
              e.getMessage());
        }
      }
    }
    closeRevokedStreams();
    for (var it = sessions.entrySet().iterator(); it.hasNext(); ) {
      var e = it.next();
      if (!ids.contains(e.getKey())) {
        e.getValue().closeAll();
        it.remove();
        cutDeletedLog(e.getValue());
      } else if ("replan-pending".equals(e.getValue().fullOnly)) {
        replan(e.getValue());
        if (!"replan-pending".equals(e.getValue().fullOnly)) {
          read(e.getValue(), "replanned");
        }
      } else if (e.getValue().repairPending != null) {
        read(e.getValue(), "retry-after-" + e.getValue().repairPending);
      } else if (e.getValue().deltasSinceFullRead > 0
          && System.nanoTime() - e.getValue().lastFullReadNanos
              >= settings.repairInterval().toNanos()) {
        read(e.getValue(), "periodic");
      }
    }
  }

  /** Ends the streams of principals who no longer hold the grant on their query's scope. */
  private void closeRevokedStreams() {
    BiPredicate<String, String> check = access;
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
   * Access rules and definitions that never reach the WAL ({@link #CATALOG_DIGEST}: policies,
   * privileges, memberships, views, columns, functions, operators, casts, domains). Per scope with
   * registrations, a digest of those catalogs is taken on the scope's login every refresh; when it
   * changes, every session of the scope reads again ({@code catalog-changed}). The first digest of
   * a scope is taken before its sessions' first reads, so a change after it is never missed.
   */
  private void watchCatalog(List<RegistrationStore.Stored> stored) {
    Set<String> scopes = new TreeSet<>();
    stored.forEach(r -> scopes.add(r.scope()));
    for (String scope : scopes) {
      if (!settings.scopes().containsKey(scope)) {
        continue;
      }
      String digest;
      try {
        digest =
            reader(scope)
                .readOnly(
                    c -> {
                      try (var st = c.createStatement();
                          var rs = st.executeQuery(CATALOG_DIGEST)) {
                        rs.next();
                        return rs.getString(1);
                      }
                    });
      } catch (SQLException | RuntimeException e) {
        log.warn(
            "continuous queries of scope {}: the catalog check failed; retrying: {}",
            scope,
            SafeErrors.describe(e));
        continue;
      }
      String previous = catalogDigests.get(scope);
      // No digest yet but sessions running (the first check failed after they started): anything
      // may have changed since they were planned, so it counts as a change.
      boolean changed =
          previous == null
              ? sessions.values().stream().anyMatch(x -> x.registration.scope().equals(scope))
              : !previous.equals(digest);
      if (changed) {
        for (Session s : sessions.values()) {
          if (s.registration.scope().equals(scope)) {
            if (s.registration.definition().projector() != null && s.projectorOff == null) {
              // The projector's conditions (row security, identity) were checked against the old
              // catalog: it is not trusted again until the query is registered anew.
              s.projectorOff = "catalog-changed";
            }
            replan(s);
            read(s, "catalog-changed");
          }
        }
      }
      // After every session of the scope has been planned again and read (a failed plan or read is
      // retried by the session itself: replan-pending, repair pending).
      catalogDigests.put(scope, digest);
    }
    catalogDigests.keySet().retainAll(scopes);
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
          reader(s.registration.scope())
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
   * Digest of what decides a query's rows and plan but never reaches the WAL: policies, user
   * relations' names, schemas, owners, partitioning and inheritance, privileges and RLS flags,
   * schemas' privileges, the superuser, bypass-RLS and inherit flags of the roles the login acts as
   * (only those: roles are shared by every database, and another application creating one must not
   * read every session again), role memberships, view and rule definitions, the columns of user
   * relations (names, types, typmods, collations, column privileges), user functions (source or SQL
   * body, signature, volatility, security, settings, privileges), user operators and casts, and
   * user domains and enums. Temporary relations are left out (any session may create one). A change
   * to any of them, even one that turns out not to matter, reads the scope's sessions again:
   * spurious re-reads cost a read, a missed change a wrong result.
   */
  private static final String CATALOG_DIGEST =
      "SELECT md5(concat_ws('|',"
          + " (SELECT string_agg(concat_ws('/', polrelid::text, polname::text, polcmd::text, polpermissive::text, polroles::text,"
          + "   pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid)), ';' ORDER BY polrelid, polname) FROM pg_policy),"
          + " (SELECT string_agg(concat_ws('/', oid::text, relname::text, relnamespace::text, relowner::text, relkind::text,"
          + "   relispartition::text, relrowsecurity::text, relforcerowsecurity::text, relacl::text), ';' ORDER BY oid)"
          + "   FROM pg_class WHERE relkind IN ('r', 'p', 'v', 'm', 'f') AND relpersistence <> 't' AND oid >= 16384),"
          + " (SELECT string_agg(concat_ws('/', inhrelid::text, inhparent::text), ';' ORDER BY inhrelid, inhparent)"
          + "   FROM pg_inherits),"
          + " (SELECT string_agg(concat_ws('/', oid::text, nspname::text, nspowner::text, nspacl::text), ';' ORDER BY oid)"
          + "   FROM pg_namespace WHERE oid >= 16384 OR nspname = 'public'),"
          + " (SELECT string_agg(concat_ws('/', oid::text, rolsuper::text, rolbypassrls::text, rolinherit::text), ';' ORDER BY oid)"
          + "   FROM pg_roles WHERE pg_has_role(current_user, oid, 'USAGE')),"
          + " (SELECT string_agg(concat_ws('/', roleid::text, member::text, admin_option::text), ';' ORDER BY roleid, member)"
          + "   FROM pg_auth_members),"
          + " (SELECT string_agg(concat_ws('/', r.ev_class::text, r.rulename::text, r.ev_type::text, r.ev_enabled::text,"
          + "   md5(r.ev_action::text), md5(coalesce(r.ev_qual::text, ''))), ';' ORDER BY r.ev_class, r.rulename)"
          + "   FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class WHERE c.relpersistence <> 't' AND r.ev_class >= 16384),"
          + " (SELECT md5(string_agg(concat_ws('/', a.attrelid::text, a.attnum::text, a.attname::text, a.atttypid::text,"
          + "   a.atttypmod::text, a.attcollation::text, a.attisdropped::text, a.attacl::text), ';' ORDER BY a.attrelid, a.attnum))"
          + "   FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
          + "   WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND c.relpersistence <> 't' AND c.oid >= 16384 AND a.attnum > 0),"
          + " (SELECT string_agg(concat_ws('/', oid::text, md5(prosrc), md5(coalesce(prosqlbody::text, '')), proargtypes::text,"
          + "   prorettype::text, proretset::text, provolatile::text, proisstrict::text, prosecdef::text, proconfig::text, proacl::text),"
          + "   ';' ORDER BY oid)"
          + "   FROM pg_proc WHERE oid >= 16384),"
          + " (SELECT string_agg(concat_ws('/', oid::text, oprname::text, oprleft::text, oprright::text, oprresult::text, oprcode::text),"
          + "   ';' ORDER BY oid) FROM pg_operator WHERE oid >= 16384),"
          + " (SELECT string_agg(concat_ws('/', oid::text, castsource::text, casttarget::text, castfunc::text, castcontext::text,"
          + "   castmethod::text), ';' ORDER BY oid) FROM pg_cast WHERE oid >= 16384),"
          + " (SELECT string_agg(concat_ws('/', t.oid::text, t.typbasetype::text, t.typtypmod::text, t.typnotnull::text,"
          + "   (SELECT string_agg(pg_get_constraintdef(k.oid), ',' ORDER BY k.conname) FROM pg_constraint k WHERE k.contypid = t.oid)),"
          + "   ';' ORDER BY t.oid) FROM pg_type t WHERE t.oid >= 16384 AND t.typtype = 'd'),"
          + " (SELECT string_agg(concat_ws('/', enumtypid::text, enumsortorder::text, enumlabel::text), ';'"
          + "   ORDER BY enumtypid, enumsortorder) FROM pg_enum WHERE enumtypid >= 16384)))";

  /**
   * One authoritative read of {@code s}'s full query (tier 3); a failure marks a pending repair
   * instead of changing the result.
   */
  private void read(Session s, String reason) {
    Definition d = s.registration.definition();
    String sql = d.wrapped(s.parsed.jdbcSql());
    boolean recheck = d.projector() != null && s.projectorOff == null && !s.initialised();
    String[] projectorOff = new String[1];
    List<ResultRow> rows =
        authoritative(
            s,
            c -> {
              if (recheck) {
                // A session starting (after a restart or on another node) trusts its projector only
                // if
                // the registration's conditions still hold in today's catalog.
                projectorOff[0] =
                    Registrar.projectorConditions(c, projectors.get(d.projector()), d);
              }
              try (PreparedStatement ps = c.prepareStatement(sql)) {
                ScopeReader.bind(ps, s.parsed.parameterOrder(), d.parameters());
                return ScopeReader.rows(ps, d.keyColumns());
              }
            });
    if (rows == null) {
      return;
    }
    if (projectorOff[0] != null) {
      s.projectorOff = projectorOff[0];
      log.warn(
          "continuous query {}: its projector is no longer used: {}",
          s.registration.id(),
          projectorOff[0]);
    }
    Set<String> seen = new HashSet<>();
    for (ResultRow r : rows) {
      if (!seen.add(r.keyText())) {
        fail(s, "duplicate-key");
        return;
      }
    }
    s.fullReads++;
    s.rowsRead += rows.size();
    meter(
        m -> {
          m.fullRead(reason);
          m.rowsRead(rows.size());
        });
    if (!commit(s, s.propose(rows, s.lastLsn))) {
      return;
    }
    s.countRepair(reason);
    s.repairPending = null;
    s.deltasSinceFullRead = 0;
    s.lastFullReadNanos = System.nanoTime();
  }

  /**
   * Sends a proposal's events to the durable replay log and applies the proposal to the session;
   * the events reach the session's clients when {@link #flushAppends} (at the end of the engine
   * task) has seen them durable. If the append fails or meets another writer's events, the session
   * is marked stale there: its streams end and the next refresh starts it again after the log's
   * last sequence, with a fresh InitialResult (clients resume from the log with their replay
   * tokens). False when nothing was sent (a change larger than {@code max-append-bytes}).
   */
  private boolean commit(Session s, Session.Proposal p) {
    List<ContinuousSession.Entry> entries = new ArrayList<>(p.events().size());
    for (Session.Event e : p.events()) {
      entries.add(new ContinuousSession.Entry(e.sequence(), e.type(), e.data()));
    }
    String id = s.registration.id();
    if (entries.isEmpty()) {
      s.apply(p); // the result did not change: nothing to make durable
      return true;
    }
    long bytes = 0;
    for (ContinuousSession.Entry e : entries) {
      bytes += ContinuousSession.utf8Length(e.data());
    }
    if (bytes > settings.maxAppendBytes()) {
      // Too large to cross the cluster in one message: keep the last result, retry on the next
      // step.
      log.warn(
          "continuous query {}: a result change of {} bytes exceeds weir.continuous.max-append-bytes ({}); not sent",
          id,
          bytes,
          settings.maxAppendBytes());
      fail(s, "event-too-large");
      s.closeAll(); // its clients are not left on a result that no longer follows the data
      return false;
    }
    // A second proposal of the same session in one task waits for the first: it must not be sent
    // before the first is known durable (a refused first would let it continue another writer's
    // log).
    for (Unflushed u : unflushed) {
      if (u.session() == s) {
        flushAppends();
        if (s.stale) {
          return false;
        }
        break;
      }
    }
    // Sent now, waited for with every other append of this engine task (flushAppends): a session's
    // events reach its clients, and the transaction is acknowledged, only once they are durable.
    CompletableFuture<ContinuousSession.AppendReply> reply = send(s, entries);
    s.apply(p);
    unflushed.add(new Unflushed(s, p, entries, reply));
    return true;
  }

  /** An append sent and applied to its session, not yet known durable (engine thread only). */
  private record Unflushed(
      Session session,
      Session.Proposal proposal,
      List<ContinuousSession.Entry> entries,
      CompletableFuture<ContinuousSession.AppendReply> reply) {}

  private final List<Unflushed> unflushed = new ArrayList<>();

  /**
   * Ends every engine task that may append: waits for the task's appends together (one timeout for
   * all, not one per session), asks again once with the same entries where no answer came (the log
   * accepts an identical retry), then sends each session's durable events to its clients in order.
   * A session whose append failed is started again from its log (its events are not sent).
   */
  private void flushAppends() {
    if (unflushed.isEmpty()) {
      return;
    }
    List<Unflushed> batch = new ArrayList<>(unflushed);
    unflushed.clear();
    waitAll(batch.stream().map(Unflushed::reply).toList());
    // Where no answer came, ask once more with the same entries: all together, then wait once.
    Map<Unflushed, CompletableFuture<ContinuousSession.AppendReply>> retries =
        new IdentityHashMap<>();
    for (Unflushed u : batch) {
      String first = outcome(u.reply());
      if (first != null && !"conflict".equals(first)) {
        retries.put(u, send(u.session(), u.entries()));
      }
    }
    if (!retries.isEmpty()) {
      waitAll(List.copyOf(retries.values()));
    }
    for (Unflushed u : batch) {
      Session s = u.session();
      String id = s.registration.id();
      try {
        if (s.stale) {
          continue; // an earlier append of this session failed: these events are not sent either
        }
        String failure = outcome(retries.getOrDefault(u, u.reply()));
        if (failure != null) {
          log.warn(
              "continuous query {}: appending to the replay log failed ({}); the session starts again",
              id,
              "conflict".equals(failure)
                  ? "another event is stored at a sequence being appended"
                  : failure);
          s.stale = true;
          s.closeAll();
          continue;
        }
        s.publish(u.proposal());
        long last =
            u.entries()
                .get(u.entries().size() - 1)
                .sequence(); // durable now, whatever was applied since
        if (last - s.prunedThrough
            >= Math.max(1, settings.replayRetained() / 10) + settings.replayRetained()) {
          long through = last - settings.replayRetained();
          try {
            await(replayLog.prune(id, s.logOffset, through, last));
            s.prunedThrough = through;
          } catch (LogUnavailable e) {
            log.warn(
                "continuous query {}: pruning the replay log failed ({}); retrying later",
                id,
                e.getMessage());
          }
        }
      } catch (RuntimeException e) {
        log.warn(
            "continuous query {}: completing an append failed ({}); the session starts again",
            id,
            e.getClass().getSimpleName());
        s.stale = true;
        s.closeAll();
      }
    }
  }

  /**
   * Sends an append of {@code entries} to {@code s}'s log; its answer time is noted for the
   * maintenance time.
   */
  private CompletableFuture<ContinuousSession.AppendReply> send(
      Session s, List<ContinuousSession.Entry> entries) {
    CompletableFuture<ContinuousSession.AppendReply> reply;
    try {
      reply = replayLog.append(s.registration.id(), entries).toCompletableFuture();
    } catch (RuntimeException e) {
      reply = CompletableFuture.failedFuture(e);
    }
    reply.whenComplete((r, e) -> s.appendDoneNanos = System.nanoTime());
    return reply;
  }

  /**
   * Waits (engine thread) until all of {@code replies} are answered or the log's ask timeout and a
   * second passed.
   */
  private static void waitAll(List<? extends CompletableFuture<?>> replies) {
    try {
      CompletableFuture.allOf(replies.toArray(CompletableFuture[]::new))
          .get(LOG_TIMEOUT.toMillis() + 1000, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      // some failed or did not answer: each is looked at by its caller
    }
  }

  /**
   * Null when an append's reply says it is durable, "conflict" when refused, else why it failed (no
   * value).
   */
  private static String outcome(CompletableFuture<ContinuousSession.AppendReply> reply) {
    if (!reply.isDone()) {
      return "no answer in time";
    }
    try {
      return reply.getNow(null) instanceof ContinuousSession.Appended ? null : "conflict";
    } catch (CompletionException e) {
      Throwable cause = e.getCause();
      return cause instanceof TimeoutException || cause instanceof AskTimeoutException
          ? "no answer in time"
          : cause == null ? "failed" : cause.getClass().getSimpleName();
    } catch (CancellationException e) {
      return "cancelled";
    }
  }

  /**
   * Cuts a deleted registration's replay log to its last entry: a later registration with the same
   * identity continues after it, and an old replay token finds its position pruned rather than
   * resuming into the new log's events.
   */
  private void cutDeletedLog(Session s) {
    flushAppends(); // its last sequence must be durable (or the session stale) before anything is
    // cut
    if (s.stale || s.sequence() == 0) {
      return; // a stale session's last sequence is not known for sure; its log keeps its retained
      // entries
    }
    replayLog
        .cut(s.registration.id(), s.logOffset, s.sequence())
        .whenComplete(
            (rows, error) -> {
              if (error != null) {
                log.warn(
                    "continuous query {}: cutting the deleted registration's replay log failed; its entries stay",
                    s.registration.id());
              }
            });
  }

  /** The replay log did not answer (in time); the message names no value. */
  private static final class LogUnavailable extends Exception {
    LogUnavailable(String message) {
      super(message, null, false, false);
    }
  }

  /**
   * Waits (on the engine thread) for a replay log answer, at most the log's ask timeout and a
   * second.
   */
  private <T> T await(CompletionStage<T> stage) throws LogUnavailable {
    try {
      return stage.toCompletableFuture().get(LOG_TIMEOUT.toMillis() + 1000, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LogUnavailable("interrupted");
    } catch (TimeoutException e) {
      throw new LogUnavailable("no answer in time");
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      throw new LogUnavailable(
          cause instanceof TimeoutException || cause instanceof AskTimeoutException
              ? "no answer in time"
              : cause instanceof SQLException q
                  ? SafeErrors.describe(q)
                  : cause.getClass().getSimpleName());
    }
  }

  /**
   * How long a replay log ask may take (the session's shard may have to start and recover first).
   */
  public static final Duration LOG_TIMEOUT = Duration.ofSeconds(5);

  /**
   * Runs {@code work} on the session's scope login in a read-only transaction whose snapshot
   * includes every transaction delivered so far (taken again while it does not, up to the retry
   * limit). Returns null after recording a failure (the session's repair is then pending).
   */
  private List<ResultRow> authoritative(Session s, ScopeReader.Work<List<ResultRow>> work) {
    LinkedHashSet<Long> waiting =
        pending.computeIfAbsent(s.registration.scope(), k -> new LinkedHashSet<>());
    List<Long> checked = new ArrayList<>(waiting);
    ScopeReader reader;
    try {
      reader = reader(s.registration.scope());
    } catch (ContinuousQueryException e) {
      fail(s, "unknown-scope");
      return null;
    }
    for (int attempt = 0; ; attempt++) {
      List<ResultRow> rows;
      try {
        rows = reader.readOnly(c -> ScopeReader.invisible(c, checked) > 0 ? null : work.run(c));
      } catch (SQLException e) {
        String state = SafeErrors.sqlState(e);
        log.warn(
            "continuous query {}: authoritative read failed ({}); repair pending",
            s.registration.id(),
            SafeErrors.describe(e));
        fail(
            s,
            "57014".equals(state)
                ? "statement-timeout"
                : state == null ? "connection" : "sqlstate-" + state);
        return null;
      } catch (RuntimeException e) {
        log.warn(
            "continuous query {}: authoritative read failed ({}); repair pending",
            s.registration.id(),
            e.getClass().getSimpleName());
        fail(s, "internal");
        return null;
      }
      if (rows == null) {
        s.visibilityRetries++;
        if (attempt + 1 >= settings.visibilityRetries()) {
          fail(s, "visibility");
          return null;
        }
        sleep(settings.visibilityRetryDelay().toMillis());
        continue;
      }
      checked.forEach(waiting::remove);
      return rows;
    }
  }

  private void fail(Session s, String reason) {
    s.repairPending = reason;
    s.countFailure(reason);
  }

  /**
   * Bounds each scope's pending xids: past {@value #PENDING_PRUNE}, checks them on that scope's own
   * connection (the pipeline's source as the scope reads it; visibility does not depend on the
   * role, but xids mean something only on the server that assigned them) and forgets those its
   * snapshot includes.
   */
  private void prunePending() {
    for (Map.Entry<String, LinkedHashSet<Long>> e : pending.entrySet()) {
      String scope = e.getKey();
      int size = e.getValue().size();
      if (size <= pruneAt.getOrDefault(scope, PENDING_PRUNE)) {
        continue;
      }
      List<Long> checked = new ArrayList<>(e.getValue());
      ScopeReader reader;
      try {
        reader = reader(scope);
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

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private ScopeReader reader(String scope) {
    ContinuousSettings.Scope s = settings.scopes().get(scope);
    if (s == null) {
      throw new ContinuousQueryException(
          ErrorCode.UNKNOWN_SCOPE, "no such security scope is configured");
    }
    synchronized (readers) {
      return readers.computeIfAbsent(
          scope, k -> new ScopeReader(s, weir, settings.statementTimeout()));
    }
  }

  @Override
  public void close() {
    ticks.shutdownNow();
    followers.close();
    active = false;
    onEngine(() -> sessions.values().forEach(Session::closeAll));
    engine.shutdown();
    checks.shutdown();
    try {
      engine.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    synchronized (readers) {
      readers.values().forEach(ScopeReader::close);
      readers.clear();
    }
  }
}
