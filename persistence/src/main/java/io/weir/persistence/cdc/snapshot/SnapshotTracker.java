package io.weir.persistence.cdc.snapshot;

import io.weir.persistence.cdc.SnapshotStatus;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;

/**
 * Live progress of one snapshot: read by status requests, logged at a bounded rate. Thread-safe.
 */
public final class SnapshotTracker {
  private static final long LOG_EVERY_NANOS = Duration.ofSeconds(10).toNanos();

  private final String kind;
  private final long started = System.nanoTime();
  private final AtomicLong rowsDone = new AtomicLong();
  private volatile int tablesDone;
  private volatile int tablesTotal;
  private volatile long rowsEstimated;
  private volatile String table;
  private volatile String state = "running";
  private long lastLog = System.nanoTime();

  public SnapshotTracker(String kind) {
    this.kind = kind;
  }

  void planned(int tables, long estimatedRows) {
    tablesTotal = tables;
    rowsEstimated = estimatedRows;
  }

  void reading(String qualifiedTable) {
    table = qualifiedTable;
  }

  void applied(long rows) {
    rowsDone.addAndGet(rows);
  }

  void tableDone() {
    tablesDone++;
    table = null;
  }

  public void finished(String finalState) {
    state = finalState;
    table = null;
  }

  long rows() {
    return rowsDone.get();
  }

  public SnapshotStatus view() {
    return new SnapshotStatus(
        kind,
        state,
        tablesDone,
        tablesTotal,
        rowsDone.get(),
        rowsEstimated,
        table,
        Duration.ofNanos(System.nanoTime() - started).toMillis());
  }

  /** Logs progress if the last line is older than ten seconds. */
  synchronized void maybeLog(Logger log, String pipeline) {
    long now = System.nanoTime();
    if (now - lastLog >= LOG_EVERY_NANOS) {
      lastLog = now;
      log(log, pipeline);
    }
  }

  public void log(Logger log, String pipeline) {
    SnapshotStatus s = view();
    log.info(
        "pipeline {}: {} snapshot {}: {} of {} tables, {} rows of about {}, {} s",
        pipeline,
        s.kind(),
        s.state(),
        s.tablesDone(),
        s.tablesTotal(),
        s.rowsDone(),
        s.rowsEstimated(),
        s.elapsedMillis() / 1000);
  }
}
