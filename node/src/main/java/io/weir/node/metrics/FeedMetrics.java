package io.weir.node.metrics;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.weir.protocol.ErrorCode;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * The public read side: {@code weir.feeds.requests} (tags {@code operation}: changes, query,
 * live-start, live-read; {@code outcome}: ok or the typed error code) and {@code weir.feeds.active}
 * (reads and queries running now). Live queries keep no session on the server (a client holds a
 * signed cursor), so active reads and the rate of live-starts are what a node can count.
 */
public final class FeedMetrics {
  /** The operations: the bounded values of tag {@code operation}. */
  public static final List<String> OPERATIONS =
      List.of("changes", "query", "live-start", "live-read");

  private final MeterRegistry registry;
  private final Map<String, Counter> counters = new ConcurrentHashMap<>();

  public FeedMetrics(MeterRegistry registry, Supplier<Number> active) {
    this.registry = registry;
    Gauge.builder("weir.feeds.active", active)
        .strongReference(true)
        .description("Changes-feed reads and (live) queries running on this node")
        .register(registry);
    for (String op : OPERATIONS) {
      counter(op, "ok");
    }
  }

  /** One finished operation: {@code error} null when it succeeded. */
  public void finished(String operation, ErrorCode error) {
    if (!OPERATIONS.contains(operation)) {
      throw new IllegalArgumentException("unknown feed operation");
    }
    counter(operation, error == null ? "ok" : error.wire()).increment();
  }

  private Counter counter(String operation, String outcome) {
    return counters.computeIfAbsent(
        operation + "|" + outcome,
        k ->
            Counter.builder("weir.feeds.requests")
                .description(
                    "Changes-feed reads and queries by operation and outcome (ok or the error code)")
                .tag("operation", operation)
                .tag("outcome", outcome)
                .register(registry));
  }
}
