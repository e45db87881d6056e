package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.util.RawValue;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import io.weir.sharding.continuous.ContinuousLog;
import io.weir.sharding.continuous.ContinuousSession;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.BiPredicate;
import java.util.function.LongFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * SSE streams served by a node that does not maintain their session (the continuous pipeline runs
 * on another node): each stream starts from the session entity (its durable result, or the journal
 * after the client's replay token) and then reads the session's journal every {@code
 * follow-interval} for the events after the last one it sent. The journal is the replay log, so a
 * follower sends exactly the events, sequences and order any other stream of the subscription sees,
 * also while the pipeline moves between nodes.
 *
 * <p>A stream ends when its client falls more than {@code subscriber-buffer} events behind, when
 * the events after it are pruned before it read them, when the registration is deleted, or when its
 * principal loses the grant (checked every {@code refresh}); the client then resumes with its last
 * id.
 */
final class LogFollowers implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(LogFollowers.class);

  private final ContinuousLog replayLog;
  private final RegistrationStore store;
  private final ContinuousSettings settings;
  private final String epoch;
  private final ScheduledExecutorService ticks;
  private final Map<Session.Subscriber, Follower> followers = new ConcurrentHashMap<>();
  private volatile BiPredicate<String, String> access = (principal, scope) -> true;

  /**
   * When the registrations were last read for the followed streams (System.nanoTime; null: never).
   */
  private Long lastRegistrationCheck;

  private volatile boolean closed;

  /**
   * Journal reads of one stream that may fail in a row before the stream ends (the client resumes
   * elsewhere or later).
   */
  static final int MAX_FAILURES = 20;

  /**
   * One stream: where it is in the log. {@code cursor} and {@code reading} are guarded by the
   * follower.
   */
  private static final class Follower {
    final String id;
    final String scope;
    final Session.Subscriber subscriber;
    final LongFunction<String> ids;
    final long offset;
    long cursor;
    boolean reading;
    boolean closed;
    int failures;

    Follower(
        String id,
        String scope,
        Session.Subscriber subscriber,
        LongFunction<String> ids,
        long offset,
        long cursor) {
      this.id = id;
      this.scope = scope;
      this.subscriber = subscriber;
      this.ids = ids;
      this.offset = offset;
      this.cursor = cursor;
    }
  }

  LogFollowers(
      ContinuousLog replayLog, RegistrationStore store, ContinuousSettings settings, String epoch) {
    this.replayLog = replayLog;
    this.store = store;
    this.settings = settings;
    this.epoch = epoch;
    this.ticks =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "weir-continuous-follow");
              t.setDaemon(true);
              return t;
            });
    long every = Math.max(1, settings.followInterval().toMillis());
    ticks.scheduleWithFixedDelay(this::tick, every, every, TimeUnit.MILLISECONDS);
  }

  void accessCheck(BiPredicate<String, String> check) {
    this.access = check;
  }

  /** Streams being followed on this node. */
  int size() {
    return followers.size();
  }

  /**
   * Starts following subscription {@code id} for {@code subscriber}: after {@code position} (a
   * verified replay token's sequence) when the journal still holds what follows it, else with a
   * {@code ResultReset} ({@code reset}, or why the position cannot be resumed) and the entity's
   * durable result as a fresh {@code InitialResult}. Fails with {@code unavailable} while the log
   * describes no result yet or the entity does not answer.
   */
  CompletionStage<Void> follow(
      String id,
      String scope,
      Session.Subscriber subscriber,
      Long position,
      String reset,
      LongFunction<String> ids) {
    return replayLog
        .state(id)
        .thenCompose(
            state -> {
              if (state.last() == 0) {
                throw noResult();
              }
              if (position != null && reset == null) {
                if (position > state.last()) {
                  return initial(id, scope, subscriber, "unknown-position", ids, state.offset());
                }
                return replayLog
                    .after(id, state.offset(), position, settings.replayRetained() + 1)
                    .thenCompose(
                        entries -> {
                          if (entries.isEmpty()
                              ? position < state.last()
                              : entries.get(0).sequence() != position + 1) {
                            return initial(
                                id, scope, subscriber, "replay-pruned", ids, state.offset());
                          }
                          Follower f =
                              new Follower(id, scope, subscriber, ids, state.offset(), position);
                          synchronized (f) {
                            if (send(f, entries)) {
                              register(f);
                            }
                          }
                          return CompletableFuture.<Void>completedFuture(null);
                        });
              }
              return initial(
                  id, scope, subscriber, position != null ? reset : null, ids, state.offset());
            })
        .exceptionally(
            e -> {
              Throwable cause =
                  e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
              if (cause instanceof ContinuousQueryException q) {
                throw q;
              }
              throw new ContinuousQueryException(
                  ErrorCode.UNAVAILABLE, "the query's session did not answer; retry");
            });
  }

  static ContinuousQueryException tooLarge() {
    return new ContinuousQueryException(
        ErrorCode.RESULT_TOO_LARGE,
        "the durable result is too large to send in one message;"
            + " its event stream is served by the node that runs the continuous pipeline");
  }

  private static ContinuousQueryException noResult() {
    return new ContinuousQueryException(
        ErrorCode.UNAVAILABLE, "the query has no durable result yet; retry");
  }

  /**
   * A fresh stream from the entity's durable result ({@code ResultReset} first when {@code reason}
   * is set).
   */
  private CompletionStage<Void> initial(
      String id,
      String scope,
      Session.Subscriber subscriber,
      String reason,
      LongFunction<String> ids,
      long offset) {
    return replayLog
        .result(id)
        .thenApply(
            r -> {
              if (r.tooLarge()) {
                throw tooLarge();
              }
              if (r.rows() == null) {
                throw noResult();
              }
              Follower f = new Follower(id, scope, subscriber, ids, offset, r.last());
              synchronized (f) {
                if (reason != null) {
                  ObjectNode reset =
                      JsonNodeFactory.instance
                          .objectNode()
                          .put("type", "ResultReset")
                          .put("reason", reason)
                          .put("sequence", r.last())
                          .put("epoch", epoch);
                  if (!Session.Subscriber.offered(
                      subscriber,
                      new Session.Event(
                          ids.apply(r.last()), r.last(), "ResultReset", reset.toString()))) {
                    Session.Subscriber.end(subscriber);
                    return null;
                  }
                }
                ObjectNode init =
                    JsonNodeFactory.instance.objectNode().put("type", "InitialResult");
                ArrayNode rows = init.putArray("rows");
                for (ContinuousSession.Row row : r.rows()) {
                  rows.addObject()
                      .putRawValue("key", new RawValue(row.key()))
                      .putRawValue("row", new RawValue(row.row()));
                }
                init.put("sequence", r.last()).put("epoch", epoch);
                if (r.lsn() != null) {
                  init.put("lsn", r.lsn());
                }
                if (!Session.Subscriber.offered(
                    subscriber,
                    new Session.Event(
                        ids.apply(r.last()), r.last(), "InitialResult", init.toString()))) {
                  Session.Subscriber.end(subscriber);
                  return null;
                }
                register(f);
              }
              return null;
            });
  }

  /**
   * Adds a started stream to those polled; a stream started after {@link #close} is ended at once.
   */
  private void register(Follower f) {
    followers.put(f.subscriber, f);
    if (closed) {
      end(f);
    }
  }

  void unfollow(Session.Subscriber subscriber) {
    Follower f = followers.remove(subscriber);
    if (f != null) {
      synchronized (f) {
        f.closed = true;
      }
    }
  }

  /**
   * Sends {@code entries} after the follower's cursor; false (and the stream ended) when they do
   * not continue it or the client is behind.
   */
  private boolean send(Follower f, List<ContinuousSession.Entry> entries) {
    for (ContinuousSession.Entry e : entries) {
      if (e.sequence() <= f.cursor) {
        continue;
      }
      if (e.sequence() != f.cursor + 1
          || !Session.Subscriber.offered(
              f.subscriber,
              new Session.Event(f.ids.apply(e.sequence()), e.sequence(), e.type(), e.data()))) {
        end(f); // pruned past it, or the client is too far behind: it resumes with its last id
        return false;
      }
      f.cursor = e.sequence();
    }
    return true;
  }

  private void end(Follower f) {
    f.closed = true;
    followers.remove(f.subscriber, f);
    Session.Subscriber.end(f.subscriber);
  }

  private void tick() {
    try {
      checkAccess();
    } catch (Throwable e) {
      log.warn(
          "checking followed continuous query streams failed; retrying: {}",
          e.getClass().getSimpleName());
    }
    try {
      for (Follower f : followers.values()) {
        long cursor;
        synchronized (f) {
          if (f.reading || f.closed) {
            continue;
          }
          f.reading = true;
          cursor = f.cursor;
        }
        CompletionStage<List<ContinuousSession.Entry>> read;
        try {
          read = replayLog.after(f.id, f.offset, cursor, settings.subscriberBuffer());
        } catch (RuntimeException e) {
          read = CompletableFuture.failedFuture(e);
        }
        read.whenComplete(
            (entries, error) -> {
              synchronized (f) {
                f.reading = false;
                if (f.closed) {
                  return;
                }
                if (error != null) {
                  if (++f.failures >= MAX_FAILURES) {
                    log.warn(
                        "continuous query {}: reading the journal for a stream failed {} times in a row; the stream ends",
                        f.id,
                        f.failures);
                    end(f);
                  }
                  return;
                }
                f.failures = 0;
                send(f, entries);
              }
            });
      }
    } catch (Throwable e) {
      log.warn(
          "following continuous query journals failed; retrying: {}", e.getClass().getSimpleName());
    }
  }

  /**
   * Every {@code refresh}: ends streams whose registration is gone or whose principal lost the
   * grant.
   */
  private void checkAccess() {
    if (followers.isEmpty()
        || (lastRegistrationCheck != null
            && System.nanoTime() - lastRegistrationCheck < settings.refresh().toNanos())) {
      return;
    }
    lastRegistrationCheck = System.nanoTime();
    Map<String, String> registered;
    try {
      registered = store.scopes();
    } catch (SQLException e) {
      log.warn(
          "reading continuous query registrations for followed streams failed; retrying: {}",
          SafeErrors.describe(e));
      registered = null; // the principals are checked all the same
    }
    BiPredicate<String, String> check = access;
    for (Follower f : followers.values()) {
      String principal = f.subscriber.principal();
      boolean deleted = registered != null && !f.scope.equals(registered.get(f.id));
      if (deleted || (principal != null && !check.test(principal, f.scope))) {
        synchronized (f) {
          end(f);
        }
      }
    }
  }

  @Override
  public void close() {
    closed = true;
    ticks.shutdownNow();
    for (Follower f : followers.values()) {
      synchronized (f) {
        end(f);
      }
    }
  }
}
