package io.weir.bench;

import java.util.concurrent.CompletableFuture;

/** What the benchmark reads from a drain's sink. */
interface DrainCounts {
  /** Completes with {@link System#nanoTime()} when the workload's last transaction is applied. */
  CompletableFuture<Long> finished();

  long rows();

  long transactions();
}
