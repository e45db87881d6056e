package io.weir.persistence.cdc;

import io.weir.persistence.cdc.source.ReplicationConnection;
import io.weir.protocol.Lsn;

/**
 * Where a pipeline's streams stand, across its runs: the connection streaming now, what the last
 * one confirmed and how far behind it was, and the highest position any run acknowledged. The actor
 * writes; metrics scrapes and the sink stage read (and the sink stage moves the acknowledged
 * position), hence the volatile fields.
 */
final class StreamPositions {
  private volatile ReplicationConnection live;
  private volatile Lsn lastConfirmed = Lsn.INVALID;

  /**
   * The lag in bytes when the last stream stopped: what the gauge shows until the next one runs.
   */
  private volatile long lastLagBytes;

  /**
   * The highest server position any earlier connection of this pipeline saw. A new connection knows
   * only its start position until the server's first message, so its own position would show no lag
   * while the WAL is far ahead (a pipeline backing off on full outboxes reconnects often). Until
   * the server's first message on the new connection, the earlier position stands in (the WAL moved
   * on from there); after it, the connection's own (a failover may have moved the server back).
   */
  private volatile long lastServerPosition;

  /**
   * The highest position any run of this pipeline acknowledged (sink-stage writes, actor reads): a
   * sink failure after it moved is the first at a new transaction.
   */
  private volatile Lsn highestAcknowledged = Lsn.INVALID;

  /** {@code c} streams from now on. */
  void streaming(ReplicationConnection c) {
    live = c;
  }

  /** {@code c}'s stream stopped: its positions become the last known ones. */
  void stopped(ReplicationConnection c) {
    if (live == c) {
      live = null;
    }
    lastLagBytes = lagBytes(c);
    lastServerPosition = Math.max(lastServerPosition, c.serverPosition().asLong());
    lastConfirmed = c.confirmed();
  }

  /** The sink stage acknowledged through {@code lsn} (one stage at a time writes). */
  void acknowledgedThrough(Lsn lsn) {
    if (lsn.isAfter(highestAcknowledged)) {
      highestAcknowledged = lsn;
    }
  }

  Lsn highestAcknowledged() {
    return highestAcknowledged;
  }

  /** What the stream running now confirmed, else what the last one did. */
  Lsn confirmed() {
    ReplicationConnection c = live;
    return c != null ? c.confirmed() : lastConfirmed;
  }

  /** The lag of the stream running now; zero when none runs (what the status shows). */
  long currentLagBytes() {
    ReplicationConnection c = live;
    return c != null ? lagBytes(c) : 0;
  }

  /** The lag of the stream running now, else the last known one (what the gauge shows). */
  long lagBytes() {
    ReplicationConnection c = live;
    return c != null ? lagBytes(c) : lastLagBytes;
  }

  /** WAL bytes between the server's position (as far as known) and what {@code c} confirmed. */
  private long lagBytes(ReplicationConnection c) {
    long server =
        c.hasReceived()
            ? c.serverPosition().asLong()
            : Math.max(c.serverPosition().asLong(), lastServerPosition);
    return Math.max(0, server - c.confirmed().asLong());
  }

  /** The pipeline was dropped: a later start begins from nothing. */
  void reset() {
    live = null;
    lastConfirmed = Lsn.INVALID;
    lastLagBytes = 0;
    lastServerPosition = 0;
    highestAcknowledged = Lsn.INVALID;
  }
}
