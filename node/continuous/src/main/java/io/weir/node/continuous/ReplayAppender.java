package io.weir.node.continuous;

import io.weir.persistence.SafeErrors;
import io.weir.sharding.continuous.ContinuousLog;
import io.weir.sharding.continuous.ContinuousSession;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.pekko.pattern.AskTimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sessions' durable replay logs seen from the engine (ADR 0025): a proposal's events are sent
 * to the session's log and applied to the session at once ({@link #append}), and reach its clients
 * only when {@link #flush} (at the end of each engine task) has seen them durable. An append that
 * fails or meets another writer's events marks the session stale: its streams end and the next
 * refresh starts it again after the log's last sequence. Engine thread only.
 */
final class ReplayAppender {
  private static final Logger log = LoggerFactory.getLogger(ReplayAppender.class);

  private final ContinuousSettings settings;
  private final ContinuousLog replayLog;

  /** An append sent and applied to its session, not yet known durable. */
  private record Unflushed(
      Session session,
      Session.Proposal proposal,
      List<ContinuousSession.Entry> entries,
      CompletableFuture<ContinuousSession.AppendReply> reply) {}

  private final List<Unflushed> unflushed = new ArrayList<>();

  ReplayAppender(ContinuousSettings settings, ContinuousLog replayLog) {
    this.settings = settings;
    this.replayLog = replayLog;
  }

  /**
   * Sends a proposal's events to the durable replay log and applies the proposal to the session.
   * False when nothing was sent (a change larger than {@code max-append-bytes}: the session's
   * repair is pending and its streams end).
   */
  boolean append(Session s, Session.Proposal p) {
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
      s.failed("event-too-large");
      s.closeAll(); // its clients are not left on a result that no longer follows the data
      return false;
    }
    // A second proposal of the same session in one task waits for the first: it must not be sent
    // before the first is known durable (a refused first would let it continue another writer's
    // log).
    for (Unflushed u : unflushed) {
      if (u.session() == s) {
        flush();
        if (s.stale) {
          return false;
        }
        break;
      }
    }
    // Sent now, waited for with every other append of this engine task (flush): a session's events
    // reach its clients, and the transaction is acknowledged, only once they are durable.
    CompletableFuture<ContinuousSession.AppendReply> reply = send(s, entries);
    s.apply(p);
    unflushed.add(new Unflushed(s, p, entries, reply));
    return true;
  }

  /**
   * Ends every engine task that may append: waits for the task's appends together (one timeout for
   * all, not one per session), asks again once with the same entries where no answer came (the log
   * accepts an identical retry), then sends each session's durable events to its clients in order.
   * A session whose append failed is started again from its log (its events are not sent).
   */
  void flush() {
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
    long sent = System.nanoTime();
    try {
      reply = replayLog.append(s.registration.id(), entries).toCompletableFuture();
    } catch (RuntimeException e) {
      reply = CompletableFuture.failedFuture(e);
    }
    reply.whenComplete(
        (r, e) -> {
          long done = System.nanoTime();
          s.appendDoneNanos = done;
          if (e == null) {
            s.times.append(done - sent);
          }
        });
    return reply;
  }

  /**
   * Waits until all of {@code replies} are answered or the log's ask timeout and a second passed.
   */
  private static void waitAll(List<? extends CompletableFuture<?>> replies) {
    try {
      CompletableFuture.allOf(replies.toArray(CompletableFuture[]::new))
          .get(ContinuousQueries.LOG_TIMEOUT.toMillis() + 1000, TimeUnit.MILLISECONDS);
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
  void cutDeletedLog(Session s) {
    flush(); // its last sequence must be durable (or the session stale) before anything is cut
    if (s.stale || s.sequence() == 0) {
      return; // a stale session's last sequence is not known for sure: its log keeps its entries
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
  static final class LogUnavailable extends Exception {
    LogUnavailable(String message) {
      super(message, null, false, false);
    }
  }

  /** Waits for a replay log answer, at most the log's ask timeout and a second. */
  static <T> T await(CompletionStage<T> stage) throws LogUnavailable {
    try {
      return stage
          .toCompletableFuture()
          .get(ContinuousQueries.LOG_TIMEOUT.toMillis() + 1000, TimeUnit.MILLISECONDS);
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
}
