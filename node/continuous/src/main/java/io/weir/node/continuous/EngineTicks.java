package io.weir.node.continuous;

import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * The engine's timers: the periodic refresh, and the fence message a held result asks for when no
 * transaction releases it ({@link Maintenance#fence}). Both run on the engine thread; at most one
 * of each waits there, so a busy engine (full reads) does not pile them up, and the holds of a
 * burst share one fence.
 */
final class EngineTicks implements AutoCloseable {
  /**
   * How long a held result waits for a transaction to release it before a fence message is written:
   * under a steady stream of commits no fence is needed.
   */
  static final long FENCE_AFTER_MILLIS = 20;

  private final ScheduledExecutorService ticks;
  private final Consumer<Runnable> onEngine;
  private final AtomicBoolean refreshQueued = new AtomicBoolean();
  private final AtomicBoolean fenceQueued = new AtomicBoolean();

  /** {@code onEngine} runs a task on the engine thread (or drops it once the engine is closed). */
  EngineTicks(Consumer<Runnable> onEngine, ThreadFactory threads) {
    this.onEngine = onEngine;
    this.ticks = Executors.newSingleThreadScheduledExecutor(threads);
  }

  /** Every {@code every}, {@code refresh} on the engine thread while {@code active}. */
  void refreshEvery(Duration every, BooleanSupplier active, Runnable refresh) {
    ticks.scheduleWithFixedDelay(
        () -> {
          if (active.getAsBoolean() && refreshQueued.compareAndSet(false, true)) {
            onEngine.accept(
                () -> {
                  refreshQueued.set(false);
                  refresh.run();
                });
          }
        },
        every.toMillis(),
        every.toMillis(),
        TimeUnit.MILLISECONDS);
  }

  /** {@code fence} on the engine thread {@value #FENCE_AFTER_MILLIS} ms from now, unless due. */
  void fenceSoon(Runnable fence) {
    if (!fenceQueued.compareAndSet(false, true)) {
      return;
    }
    try {
      ticks.schedule(
          () ->
              onEngine.accept(
                  () -> {
                    fenceQueued.set(false);
                    fence.run();
                  }),
          FENCE_AFTER_MILLIS,
          TimeUnit.MILLISECONDS);
    } catch (RejectedExecutionException closed) {
      fenceQueued.set(false); // shutting down
    }
  }

  @Override
  public void close() {
    ticks.shutdownNow();
  }
}
