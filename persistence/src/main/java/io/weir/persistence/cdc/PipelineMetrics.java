package io.weir.persistence.cdc;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
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
 *   <li>{@code weir.cdc.halts} (tag {@code reason}) — fail-closed halts
 *   <li>{@code weir.cdc.confirmed.lsn}, {@code weir.cdc.lag.bytes} — gauges
 *   <li>{@code weir.cdc.streamed.transactions} (tag {@code spilled}) — streamed transactions applied,
 *       read from memory or from a spill file
 *   <li>{@code weir.cdc.spill.bytes}, {@code weir.cdc.spill.memory.bytes} — gauges: payload of
 *       streamed transactions in spill files and in memory now (with streaming on)
 *   <li>{@code weir.cdc.alerts} (tag {@code alert}) — conditions an operator must act on, e.g.
 *       {@code spill-limit-exceeded}
 * </ul>
 */
public final class PipelineMetrics {
  private final MeterRegistry registry;
  private final String pipeline;
  private final Counter transactions;
  private final Timer apply;
  // Keyed by relation id: a table keeps its name for the life of a relation id (a rename halts).
  private final Map<Long, Counter> rowsByTable = new ConcurrentHashMap<>();

  public PipelineMetrics(MeterRegistry registry, String pipeline, Supplier<Number> confirmedLsn, Supplier<Number> lagBytes) {
    this.registry = registry;
    this.pipeline = pipeline;
    this.transactions = Counter.builder("weir.cdc.transactions").tag("pipeline", pipeline)
        .description("Transactions durably applied by the sink").register(registry);
    this.apply = Timer.builder("weir.cdc.sink.apply").tag("pipeline", pipeline)
        .description("Time per sink call").register(registry);
    // Strong references: the suppliers are lambdas nothing else holds, and a weakly held gauge
    // state would be collected and read as NaN.
    Gauge.builder("weir.cdc.confirmed.lsn", confirmedLsn).tag("pipeline", pipeline).strongReference(true)
        .description("Position last confirmed to PostgreSQL as flushed").register(registry);
    Gauge.builder("weir.cdc.lag.bytes", lagBytes).tag("pipeline", pipeline).strongReference(true)
        .description("WAL bytes between the server's position and the confirmed one").register(registry);
  }

  public Timer applyTimer() {
    return apply;
  }

  void applied(List<Transaction> batch) {
    transactions.increment(batch.size());
    // Per-table counts come with each transaction (its changes may be a single-pass sequence that
    // the sink has consumed); touch each counter once per batch.
    Map<TableSchema, long[]> counts = new java.util.HashMap<>();
    for (Transaction t : batch) {
      t.rowsByTable().forEach((table, n) -> counts.computeIfAbsent(table, k -> new long[1])[0] += n);
    }
    counts.forEach((table, n) -> rowsByTable.computeIfAbsent(table.relationId(), id ->
        Counter.builder("weir.cdc.rows").tag("pipeline", pipeline).tag("table", table.qualifiedName())
            .description("Row changes applied").register(registry)).increment(n[0]));
  }

  void spillGauges(Supplier<Number> diskBytes, Supplier<Number> memoryBytes) {
    Gauge.builder("weir.cdc.spill.bytes", diskBytes).tag("pipeline", pipeline).strongReference(true)
        .description("Bytes of streamed transactions in spill files").register(registry);
    Gauge.builder("weir.cdc.spill.memory.bytes", memoryBytes).tag("pipeline", pipeline).strongReference(true)
        .description("Bytes of streamed transactions held in memory").register(registry);
  }

  void streamed(boolean spilled) {
    registry.counter("weir.cdc.streamed.transactions", "pipeline", pipeline, "spilled", Boolean.toString(spilled))
        .increment();
  }

  void alert(HaltReason reason) {
    registry.counter("weir.cdc.alerts", "pipeline", pipeline, "alert", reason.wire()).increment();
  }

  void restarted(String errorClass) {
    registry.counter("weir.cdc.restarts", "pipeline", pipeline, "error", errorClass).increment();
  }

  void halted(HaltReason reason) {
    registry.counter("weir.cdc.halts", "pipeline", pipeline, "reason", reason.wire()).increment();
  }
}
