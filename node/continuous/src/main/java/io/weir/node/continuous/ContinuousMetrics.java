package io.weir.node.continuous;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import java.util.stream.Stream;

/**
 * Continuous top-N queries on this node: sessions held, transactions by how they were handled,
 * safety fallbacks by rule, authoritative (full) reads by cause and rows read from PostgreSQL.
 * Every tag value is one of the fixed lists below (an unknown fallback reason counts as {@code
 * other}): no query text, parameter, key or row value ever becomes a label.
 */
final class ContinuousMetrics {
  /**
   * Why a tier could not prove a result ({@link FallbackReason}'s wire names, then {@code other}):
   * the {@code reason} tag's values.
   */
  public static final List<String> FALLBACK_REASONS =
      Stream.concat(
              Arrays.stream(FallbackReason.values()).map(FallbackReason::wireName),
              Stream.of("other"))
          .toList();

  /** What started a full read ({@link FullRead.Cause}'s wire names): the {@code cause} tag. */
  public static final List<String> FULL_READ_CAUSES = FullRead.Cause.wires();

  /** How a transaction was handled by a session. */
  public static final List<String> TRANSACTION_OUTCOMES =
      List.of("incremental", "unrelated", "duplicate");

  private final Map<String, Counter> fallbacks = new HashMap<>();
  private final Map<String, Counter> fullReads = new HashMap<>();
  private final Map<String, Counter> transactions = new HashMap<>();
  private final Counter rowsRead;

  ContinuousMetrics(MeterRegistry registry, Supplier<Number> sessions) {
    Gauge.builder("weir.continuous.sessions", sessions)
        .strongReference(true)
        .description("Continuous-query sessions maintained on this node")
        .register(registry);
    for (String r : FALLBACK_REASONS) {
      fallbacks.put(
          r,
          Counter.builder("weir.continuous.fallbacks")
              .tag("reason", r)
              .description("Incremental maintenance abandoned for a full read, by safety rule")
              .register(registry));
    }
    for (String c : FULL_READ_CAUSES) {
      fullReads.put(
          c,
          Counter.builder("weir.continuous.full.reads")
              .tag("cause", c)
              .description("Authoritative full reads of continuous queries, by cause")
              .register(registry));
    }
    for (String o : TRANSACTION_OUTCOMES) {
      transactions.put(
          o,
          Counter.builder("weir.continuous.transactions")
              .tag("outcome", o)
              .description("Transactions handled per session without a full read, by outcome")
              .register(registry));
    }
    rowsRead =
        Counter.builder("weir.continuous.rows.read")
            .description("Rows read from PostgreSQL by continuous queries (deltas and full reads)")
            .register(registry);
  }

  public void fallback(FallbackReason reason) {
    fallbacks.get(reason.wireName()).increment();
  }

  public void fullRead(FullRead.Cause cause) {
    fullReads.get(cause.wire()).increment();
  }

  public void transaction(String outcome) {
    Counter c = transactions.get(outcome);
    if (c == null) {
      throw new IllegalArgumentException("unknown transaction outcome");
    }
    c.increment();
  }

  public void rowsRead(long rows) {
    rowsRead.increment(rows);
  }
}
