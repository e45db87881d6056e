package io.weir.node.continuous;

import io.weir.protocol.Lsn;
import java.util.List;

/**
 * A result an authoritative read produced, held back until the engine can name the transaction it
 * is the state after (ADR 0042). The read's snapshot holds every transaction delivered so far (the
 * {@link VisibilityGate} makes sure) but may also hold later ones the pipeline has not delivered
 * yet. Until the pipeline has delivered every commit before the read point's limit, each delivered
 * transaction of the session's tables with a commit before it is checked against the snapshot: in
 * it, the label moves to that transaction. One the snapshot lacks leaves the result exact at its
 * label, to be followed by a full read (its changes are gone); one it holds after one it lacks, or
 * any it holds in a scoped delta's snapshot (which read only the keys of the transactions delivered
 * before), makes the result the state after no transaction at all: it is dropped and the query read
 * again. Engine thread only.
 */
final class HeldResult {
  final List<ResultRow> result;
  final ReadPoint at;

  /** Whether a scoped delta read it (only the affected keys of the transactions before). */
  final boolean delta;

  /** What the engine records once the result is appended (the read's or the delta's counters). */
  final Runnable published;

  /** The commit LSN of the last transaction the result holds (null: none delivered yet). */
  private String label;

  /** A transaction of the session's tables before the limit that the snapshot does not hold. */
  private boolean missing;

  /** The snapshot holds a transaction it cannot be labelled with. */
  private boolean torn;

  HeldResult(
      List<ResultRow> result, ReadPoint at, boolean delta, String label, Runnable published) {
    this.result = List.copyOf(result);
    this.at = at;
    this.delta = delta;
    this.label = label;
    this.published = published;
  }

  /** Whether {@code commit} starts at or after the limit: every transaction before it is known. */
  boolean releasedBy(Lsn commit) {
    return commit.compareTo(at.limit()) >= 0;
  }

  /** A delivered transaction of the session's tables, committed before the limit. */
  void relevant(long xid, String commitLsn) {
    if (!at.holds(xid)) {
      missing = true;
    } else if (missing || delta) {
      torn = true;
    } else {
      label = commitLsn;
    }
  }

  /**
   * Whether the result is the state after {@link #label}: the snapshot holds no transaction it
   * cannot be labelled with (it may lack later ones: {@link #behind}).
   */
  boolean exact() {
    return !torn;
  }

  /**
   * Whether a transaction of the window, after the label, is not in the snapshot: the result is
   * exact at its label, and what follows must be read again (the transaction's changes are gone).
   */
  boolean behind() {
    return missing;
  }

  String label() {
    return label;
  }

  @Override
  public String toString() {
    return "HeldResult["
        + result.size()
        + " rows, "
        + at
        + (exact() ? "" : ", unlabelled")
        + (behind() ? ", behind" : "")
        + "]";
  }
}
