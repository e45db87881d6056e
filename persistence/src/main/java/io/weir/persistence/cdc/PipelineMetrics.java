package io.weir.persistence.cdc;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * A pipeline's meters. Tags carry the pipeline name, table names, halt reasons and error classes;
 * never a row value.
 *
 * <ul>
 *   <li>{@code weir.cdc.transactions} — transactions durably applied by the sink
 *   <li>{@code weir.cdc.rows} (tag {@code table}) — row changes applied, per source table
 *   <li>{@code weir.cdc.sink.apply} — time per sink call
 *   <li>{@code weir.cdc.restarts} (tag {@code error}) — stream restarts after transient failures
 *   <li>{@code weir.cdc.sink.failures} — sink failures that count towards {@code max-sink-retries}
 *       (a SQLState outside the transient classes, at the same transaction)
 *   <li>{@code weir.cdc.halts} (tag {@code reason}, one of {@link HaltReason}, each registered at
 *       0) — fail-closed halts
 *   <li>{@code weir.cdc.confirmed.lsn}, {@code weir.cdc.lag.bytes} — gauges
 *   <li>{@code weir.cdc.lag.seconds} — gauge: age of the oldest transaction received from the slot
 *       and not yet applied by the sink (by its commit time), 0 when none is waiting
 *   <li>{@code weir.cdc.state} (tag {@code state}, one of {@link #STATES}) — 1 for the pipeline's
 *       current state, 0 for the others
 *   <li>{@code weir.cdc.streamed.transactions} (tag {@code spilled}) — streamed transactions
 *       applied, read from memory or from a spill file
 *   <li>{@code weir.cdc.spill.bytes}, {@code weir.cdc.spill.memory.bytes} — gauges: payload of
 *       streamed transactions in spill files and in memory now (with streaming on)
 *   <li>{@code weir.cdc.alerts} (tag {@code alert}) — conditions an operator must act on, e.g.
 *       {@code spill-limit-exceeded}
 * </ul>
 */
public final class PipelineMetrics {
  /**
   * The states a pipeline shows ({@link PipelineStatus#state()}): the bounded values of tag {@code
   * state}.
   */
  public static final List<String> STATES =
      Arrays.stream(PipelineState.values()).map(PipelineState::wire).toList();

  private final MeterRegistry registry;
  private final String pipeline;
  private final Counter transactions;
  private final Timer apply;
  // Keyed by relation id: a table keeps its name for the life of a relation id (a rename halts).
  private final Map<Long, Counter> rowsByTable = new ConcurrentHashMap<>();

  public PipelineMetrics(
      MeterRegistry registry,
      String pipeline,
      Supplier<Number> confirmedLsn,
      Supplier<Number> lagBytes) {
    this.registry = registry;
    this.pipeline = pipeline;
    this.transactions =
        Counter.builder("weir.cdc.transactions")
            .tag("pipeline", pipeline)
            .description("Transactions durably applied by the sink")
            .register(registry);
    this.apply =
        Timer.builder("weir.cdc.sink.apply")
            .tag("pipeline", pipeline)
            .description("Time per sink call")
            .register(registry);
    // Strong references: the suppliers are lambdas nothing else holds, and a weakly held gauge
    // state would be collected and read as NaN.
    Gauge.builder("weir.cdc.confirmed.lsn", confirmedLsn)
        .tag("pipeline", pipeline)
        .strongReference(true)
        .description("Position last confirmed to PostgreSQL as flushed")
        .register(registry);
    Gauge.builder("weir.cdc.lag.bytes", lagBytes)
        .tag("pipeline", pipeline)
        .strongReference(true)
        .description("WAL bytes between the server's position and the confirmed one")
        .register(registry);
    registry.counter("weir.cdc.sink.failures", "pipeline", pipeline);
    // Every reason at 0 from the start, so increase() and alerts see the first halt.
    for (HaltReason reason : HaltReason.values()) {
      registry.counter("weir.cdc.halts", "pipeline", pipeline, "reason", reason.wire());
    }
  }

  /** Registers {@code weir.cdc.lag.seconds} over {@code seconds}. */
  void lagSeconds(Supplier<Number> seconds) {
    Gauge.builder("weir.cdc.lag.seconds", seconds)
        .tag("pipeline", pipeline)
        .strongReference(true)
        .description(
            "Age of the oldest transaction received and not yet applied by the sink (0: none waiting)")
        .register(registry);
  }

  /**
   * Registers {@code weir.cdc.state}: one gauge per state of {@link #STATES}, 1 for the current
   * one.
   */
  void stateGauges(Supplier<String> current) {
    for (String s : STATES) {
      Gauge.builder("weir.cdc.state", () -> s.equals(current.get()) ? 1 : 0)
          .tag("pipeline", pipeline)
          .tag("state", s)
          .strongReference(true)
          .description("1 for the pipeline's current state, 0 for the others")
          .register(registry);
    }
  }

  /**
   * Removes this pipeline's meters: its actor stopped (the pipelines moved to another node with
   * their singleton, or the node shuts down), so its gauges would report a stale run.
   */
  void close() {
    for (Meter m : List.copyOf(registry.getMeters())) {
      if (pipeline.equals(m.getId().getTag("pipeline"))
          && m.getId().getName().startsWith("weir.cdc.")) {
        registry.remove(m);
      }
    }
    rowsByTable.clear();
  }

  public Timer applyTimer() {
    return apply;
  }

  void applied(List<Transaction> batch) {
    transactions.increment(batch.size());
    // Per-table counts come with each transaction (its changes may be a single-pass sequence that
    // the sink has consumed); touch each counter once per batch.
    Map<TableSchema, long[]> counts = new HashMap<>();
    for (Transaction t : batch) {
      t.rowsByTable()
          .forEach((table, n) -> counts.computeIfAbsent(table, k -> new long[1])[0] += n);
    }
    counts.forEach(
        (table, n) ->
            rowsByTable
                .computeIfAbsent(
                    table.relationId(),
                    id ->
                        Counter.builder("weir.cdc.rows")
                            .tag("pipeline", pipeline)
                            .tag("table", table.qualifiedName())
                            .description("Row changes applied")
                            .register(registry))
                .increment(n[0]));
  }

  void spillGauges(Supplier<Number> diskBytes, Supplier<Number> memoryBytes) {
    Gauge.builder("weir.cdc.spill.bytes", diskBytes)
        .tag("pipeline", pipeline)
        .strongReference(true)
        .description("Bytes of streamed transactions in spill files")
        .register(registry);
    Gauge.builder("weir.cdc.spill.memory.bytes", memoryBytes)
        .tag("pipeline", pipeline)
        .strongReference(true)
        .description("Bytes of streamed transactions held in memory")
        .register(registry);
  }

  void streamed(boolean spilled) {
    registry
        .counter(
            "weir.cdc.streamed.transactions",
            "pipeline",
            pipeline,
            "spilled",
            Boolean.toString(spilled))
        .increment();
  }

  void alert(HaltReason reason) {
    registry.counter("weir.cdc.alerts", "pipeline", pipeline, "alert", reason.wire()).increment();
  }

  void restarted(String errorClass) {
    registry.counter("weir.cdc.restarts", "pipeline", pipeline, "error", errorClass).increment();
  }

  /** A sink failure that counts towards max-sink-retries ({@code weir.cdc.sink.failures}). */
  void sinkFailed() {
    registry.counter("weir.cdc.sink.failures", "pipeline", pipeline).increment();
  }

  /** The slot was taken over from a downed member's walsender ({@code weir.cdc.slot.takeovers}). */
  void slotTakenOver() {
    registry.counter("weir.cdc.slot.takeovers", "pipeline", pipeline).increment();
  }

  void halted(HaltReason reason) {
    registry.counter("weir.cdc.halts", "pipeline", pipeline, "reason", reason.wire()).increment();
  }
}
