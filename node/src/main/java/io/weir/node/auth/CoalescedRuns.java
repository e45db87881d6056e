package io.weir.node.auth;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * Runs of one asynchronous task (a reload, a check against PostgreSQL) shared by every caller that
 * needs one: at most one run is under way at a time, runs start at least {@code gap} apart, and all
 * callers waiting meanwhile share the next run. So however many requests arrive (unknown bearer
 * tokens, forged key ids, a crowd of requests on a stale view) they cost at most one run per gap;
 * they only wait up to that long. Used by {@link Principals} (reloads after an unknown token, the
 * freshness check) and {@link io.weir.node.tokens.TokenKeys} (reloads after an unknown key id).
 *
 * <p>Each caller gets a stage of its own: completing or timing it out does not touch the others.
 */
public final class CoalescedRuns<T> {
  private final Supplier<? extends CompletionStage<T>> task;
  private final long gapNanos;
  private final LongSupplier nanoTime;

  // Guarded by this.
  private CompletableFuture<T> running;
  private long runningStart;
  private CompletableFuture<T> next;
  private boolean startScheduled;
  private long lastStart;

  /**
   * @param task starts one run (called when a run starts, never while another is under way)
   * @param gap the least time between the starts of two runs
   */
  public CoalescedRuns(Supplier<? extends CompletionStage<T>> task, Duration gap) {
    this(task, gap, System::nanoTime);
  }

  CoalescedRuns(Supplier<? extends CompletionStage<T>> task, Duration gap, LongSupplier nanoTime) {
    this.task = task;
    this.gapNanos = gap.toNanos();
    this.nanoTime = nanoTime;
    this.lastStart = nanoTime.getAsLong() - gapNanos;
  }

  /** The result of a run that starts after this call (the next one). */
  public CompletionStage<T> next() {
    CompletableFuture<T> mine;
    synchronized (this) {
      mine = queued();
    }
    startIfDue();
    return mine.minimalCompletionStage();
  }

  /**
   * The result of a run that started at or after {@code notBefore} (a {@link System#nanoTime}
   * reading): the one under way if it started then or later, else the next one.
   */
  public CompletionStage<T> startedSince(long notBefore) {
    CompletableFuture<T> mine;
    synchronized (this) {
      if (running != null && runningStart - notBefore >= 0) {
        return running.minimalCompletionStage();
      }
      mine = queued();
    }
    startIfDue();
    return mine.minimalCompletionStage();
  }

  private CompletableFuture<T> queued() {
    if (next == null) {
      next = new CompletableFuture<>();
    }
    return next;
  }

  private void startIfDue() {
    CompletableFuture<T> run;
    synchronized (this) {
      if (running != null || startScheduled || next == null) {
        return;
      }
      long now = nanoTime.getAsLong();
      long wait = lastStart + gapNanos - now;
      if (wait > 0) {
        startScheduled = true;
        CompletableFuture.delayedExecutor(wait, TimeUnit.NANOSECONDS)
            .execute(
                () -> {
                  synchronized (this) {
                    startScheduled = false;
                  }
                  startIfDue();
                });
        return;
      }
      run = next;
      next = null;
      running = run;
      runningStart = now;
      lastStart = now;
    }
    CompletionStage<T> stage;
    try {
      stage = task.get();
    } catch (RuntimeException e) { // e.g. the executor refused the work (shutting down)
      stage = CompletableFuture.failedFuture(e);
    }
    stage.whenComplete(
        (value, error) -> {
          synchronized (this) {
            running = null;
          }
          if (error == null) {
            run.complete(value);
          } else {
            run.completeExceptionally(error);
          }
          startIfDue();
        });
  }
}
