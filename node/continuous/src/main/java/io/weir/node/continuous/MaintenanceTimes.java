package io.weir.node.continuous;

import com.fasterxml.jackson.databind.node.ObjectNode;
import org.HdrHistogram.Histogram;

/**
 * A session's maintenance time per relevant transaction, in microseconds: all of it until its
 * events are durable ({@code maintenanceMicros}), the engine's own work in it (reads, merge and
 * diff: {@code workMicros}) and the durable append of its events to the replay log ({@code
 * appendMicros}: every append of its events, whenever it runs (a held result is appended when a
 * later transaction or a fence releases it); it overlaps other sessions' work). Thread-safe: an
 * append's answer arrives on another thread.
 */
final class MaintenanceTimes {
  private static final long HIGHEST = 3_600_000_000L;

  private final Histogram total = new Histogram(HIGHEST, 2);
  private final Histogram work = new Histogram(HIGHEST, 2);
  private final Histogram append = new Histogram(HIGHEST, 2);

  /**
   * Records one transaction: work from {@code startedNanos} to {@code workDoneNanos}, and its
   * events durable at {@code appendDoneNanos} (0 when it appended none).
   */
  synchronized void record(long startedNanos, long workDoneNanos, long appendDoneNanos) {
    add(total, Math.max(workDoneNanos, appendDoneNanos) - startedNanos);
    add(work, workDoneNanos - startedNanos);
  }

  /** Records one append that took {@code nanos} until its answer. */
  synchronized void append(long nanos) {
    add(append, nanos);
  }

  private static void add(Histogram h, long nanos) {
    h.recordValue(Math.min(HIGHEST, Math.max(0, nanos / 1000)));
  }

  /** Puts {@code maintenanceMicros}, {@code workMicros} and {@code appendMicros} into a status. */
  synchronized void put(ObjectNode status) {
    put(status.putObject("maintenanceMicros"), total);
    put(status.putObject("workMicros"), work);
    put(status.putObject("appendMicros"), append);
  }

  private static void put(ObjectNode o, Histogram h) {
    o.put("count", h.getTotalCount());
    o.put("p50", h.getValueAtPercentile(50));
    o.put("p99", h.getValueAtPercentile(99));
    o.put("max", h.getMaxValue());
  }
}
