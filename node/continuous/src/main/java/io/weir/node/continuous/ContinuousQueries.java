package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.util.RawValue;
import io.micrometer.core.instrument.MeterRegistry;
import io.weir.node.continuous.spi.ContinuousEvaluator;
import io.weir.node.continuous.spi.ContinuousProjector;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.cdc.CdcMessage;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.token.ReplayToken;
import io.weir.protocol.token.TokenSigner;
import io.weir.sharding.continuous.ContinuousLog;
import io.weir.sharding.continuous.ContinuousSession;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BiPredicate;
import java.util.function.Function;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The continuous-query engine of one node: the sessions it maintains from the continuous pipeline,
 * registration, status and SSE subscriptions.
 *
 * <p>Maintenance runs in {@link Maintenance} (the tiers, the visibility gate, the catalog watch and
 * the replay appender); this class owns its thread, activation and the public API.
 *
 * <p>Threads: every session is used from one engine thread, so transactions, registrations,
 * subscriptions and status reads are ordered; registration's checks run on a separate pool. The
 * engine is <em>active</em> while the continuous pipeline's sink is open on this node (the pipeline
 * manager singleton runs here); other nodes register and store queries, and answer 503 for events
 * and status.
 */
public final class ContinuousQueries implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ContinuousQueries.class);

  private final ContinuousSettings settings;
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
  private final EngineTicks ticks;
  private final Map<String, Session> sessions = new LinkedHashMap<>();

  /** Micrometer meters ({@link #bindMetrics}); null while metrics are off. */
  private volatile ContinuousMetrics metrics;

  private final ScopeReaders readers;
  private final Maintenance maintenance;
  private final ReplayAppender appender;

  private volatile boolean active;

  /** (principal id, scope) -> whether the principal may still read the scope's queries. */
  private volatile BiPredicate<String, String> access = (principal, scope) -> true;

  private boolean repairAllOnActivate;

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
    this.readers = new ScopeReaders(settings, weir);
    this.maintenance =
        new Maintenance(
            settings,
            store,
            replayLog,
            legacyReplay,
            this.publications,
            sessions,
            readers,
            evaluators,
            projectors,
            () -> metrics,
            () -> access,
            this::replayId,
            this::fenceSoon);
    this.appender = maintenance.appender;
    this.engine = Executors.newSingleThreadExecutor(r -> daemon(r, "weir-continuous"));
    this.checks = Executors.newFixedThreadPool(2, r -> daemon(r, "weir-continuous-register"));
    this.ticks = new EngineTicks(this::onEngine, r -> daemon(r, "weir-continuous-tick"));
    ticks.refreshEvery(settings.refresh(), () -> active, this::refresh);
  }

  /** A held result waits for its label: a fence follows unless a transaction releases it. */
  private void fenceSoon() {
    ticks.fenceSoon(maintenance::fence);
  }

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
              ScopeReader reader = readers.get(request.scope());
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
                            appender.flush();
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
                appender.cutDeletedLog(s);
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
          out.put("pendingVisibilityChecks", maintenance.gate.waiting(s.registration.scope()));
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
                      ReplayAppender.await(
                          replayLog.after(
                              id, s.logOffset, position, settings.replayRetained() + 1))) {
                    durable.add(
                        new Session.Event(
                            replayId(id, e.sequence()), e.sequence(), e.type(), e.data()));
                  }
                } catch (ReplayAppender.LogUnavailable e) {
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
                maintenance.read(s, FullRead.PIPELINE_RESTART);
              }
            }
            refresh();
          } finally {
            appender.flush();
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

  /** {@link Maintenance#refresh} while this node maintains the sessions (engine thread). */
  private void refresh() {
    if (active) {
      maintenance.refresh();
    }
  }

  /** Runs {@code task} on the engine thread unless the engine is closed (node shutdown). */
  private void onEngine(Runnable task) {
    try {
      engine.execute(
          () -> {
            try {
              task.run();
            } finally {
              appender.flush();
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
            maintenance.transaction(t);
          } finally {
            // Also when handling failed half way: what was applied is sent or ends stale.
            appender.flush();
          }
        },
        engine);
  }

  /**
   * A non-transactional logical message of the continuous pipeline. A fence ({@link
   * ReadPoint#fence}) releases the held results whose limit it passes; any other message is not
   * Weir's and only passes by.
   */
  CompletionStage<Void> onMessage(CdcMessage message) {
    if (!ReadPoint.FENCE_PREFIX.equals(message.prefix())) {
      return CompletableFuture.completedFuture(null);
    }
    return CompletableFuture.runAsync(
        () -> {
          try {
            maintenance.reached(message.lsn());
          } finally {
            appender.flush();
          }
        },
        engine);
  }

  /**
   * How long a replay log ask may take (the session's shard may have to start and recover first).
   */
  public static final Duration LOG_TIMEOUT = Duration.ofSeconds(5);

  @Override
  public void close() {
    ticks.close();
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
    readers.close();
  }
}
