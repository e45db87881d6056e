package io.weir.persistence.cdc;

import java.util.Locale;

/**
 * What a pipeline is doing, as its status and the {@code weir.cdc.state} gauge show it ({@link
 * #wire()}: the lower-case name).
 */
public enum PipelineState {
  /** Streaming its slot into the sink. */
  RUNNING,
  /** Connecting, and seeding the sink from an initial snapshot meanwhile (shown only). */
  SNAPSHOTTING,
  /** The connect phase: checks, slot, sink open, replication start. */
  CONNECTING,
  /** Waiting to connect again after a failure that may pass. */
  BACKOFF,
  /** Not started, or stopped by an operator. */
  STOPPED,
  /** Stopped by a failure that retrying cannot mend; the reason is in the status. */
  HALTED,
  /** Dropping its slot and records. */
  DROPPING,
  /** Its slot and records are gone; the next start is a first start. */
  DROPPED;

  /** The name the status, the metrics and the HTTP API use. */
  public String wire() {
    return name().toLowerCase(Locale.ROOT);
  }

  /** Stopped, halted or dropped: nothing runs and a start begins afresh. */
  boolean startable() {
    return this == STOPPED || this == HALTED || this == DROPPED;
  }

  /** Stopped, halted, dropped or dropping: nothing runs, and no stream of this run comes back. */
  boolean stoppedForGood() {
    return startable() || this == DROPPING;
  }

  /** This state as the status shows it: snapshotting while connecting with a snapshot running. */
  PipelineState shown(SnapshotStatus snapshot) {
    return this == CONNECTING && snapshot != null && snapshot.state().equals("running")
        ? SNAPSHOTTING
        : this;
  }
}
