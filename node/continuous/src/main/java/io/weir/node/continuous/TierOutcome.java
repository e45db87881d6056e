package io.weir.node.continuous;

import java.util.List;

/**
 * What one tier made of a session's transaction: a result its rules prove, a reason it could not
 * (the next tier runs, {@link FallbackReason#next()}), or a failed authoritative read (recorded on
 * the session: its repair is pending). The engine, not the tier, commits a result and counts it.
 */
sealed interface TierOutcome {
  /** Rows read from PostgreSQL on the way (counted whatever the outcome). */
  long rowsRead();

  /**
   * The new result, not yet committed.
   *
   * @param lookups whether lookup rules added keys (a joined table changed)
   */
  record Applied(List<ResultRow> result, long rowsRead, boolean lookups) implements TierOutcome {
    @Override
    public String toString() {
      return "Applied[" + result.size() + " rows]";
    }
  }

  record Fallback(FallbackReason reason, long rowsRead) implements TierOutcome {}

  /** The read failed; {@code reason} is the session's pending repair. */
  record RepairPending(String reason) implements TierOutcome {
    @Override
    public long rowsRead() {
      return 0;
    }
  }
}
