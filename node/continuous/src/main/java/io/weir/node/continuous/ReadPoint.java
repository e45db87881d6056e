package io.weir.node.continuous;

import io.weir.protocol.Lsn;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Arrays;

/**
 * Where an authoritative read stood: the snapshot it read ({@code xmin}, {@code xmax} and the
 * transactions it saw in progress, 64-bit) and a WAL position {@code limit} read after the snapshot
 * was taken. Every transaction the snapshot holds committed before the snapshot, so its commit
 * record starts before {@code limit}; a transaction whose commit record starts at or after it is
 * not in the snapshot. Once the pipeline has delivered every commit before {@code limit}, the
 * engine knows exactly which delivered transactions the read holds ({@link #holds}) and so which
 * transaction its result is the state after (ADR 0042).
 */
record ReadPoint(long xmin, long xmax, long[] inProgress, Lsn limit) {

  /** The prefix of the logical messages that tell the engine the pipeline reached a position. */
  static final String FENCE_PREFIX = "weir-continuous-fence";

  ReadPoint {
    inProgress = inProgress.clone();
    Arrays.sort(inProgress);
  }

  /**
   * The read point of the transaction on {@code c}: its snapshot, and the WAL position now. On a
   * primary the insert position: a visible commit's record was inserted before it became visible.
   * On a standby the received position, or a page past the replayed one when nothing streams: a
   * commit being replayed is visible before the replayed position moves past it. Run right after
   * the statement that took the snapshot, in the same transaction (the shorter the window between
   * snapshot and limit, the fewer commits fall in it).
   */
  static ReadPoint of(Connection c) throws SQLException {
    try (Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT pg_snapshot_xmin(p)::text, pg_snapshot_xmax(p)::text,"
                    + " ARRAY(SELECT pg_snapshot_xip(p)::text), CASE WHEN pg_is_in_recovery()"
                    + " THEN GREATEST(COALESCE(pg_last_wal_receive_lsn(), '0/0'),"
                    + " pg_last_wal_replay_lsn() + 8192) ELSE pg_current_wal_insert_lsn() END::text"
                    + " FROM pg_current_snapshot() AS p")) {
      rs.next();
      String[] xip = (String[]) rs.getArray(3).getArray();
      long[] running = new long[xip.length];
      for (int i = 0; i < xip.length; i++) {
        running[i] = Long.parseLong(xip[i]);
      }
      return new ReadPoint(
          Long.parseLong(rs.getString(1)),
          Long.parseLong(rs.getString(2)),
          running,
          Lsn.parse(rs.getString(4)));
    }
  }

  /**
   * Writes a non-transactional logical message: once the pipeline delivers it, every commit before
   * it has been delivered, even when no transaction follows. The transaction on {@code c} also
   * takes a transaction id, so that its commit (the caller's) flushes the WAL and the message is
   * decoded at once (PostgreSQL 15 cannot flush a message by itself). Fails on a standby (no WAL is
   * written there).
   */
  static void fence(Connection c) throws SQLException {
    try (Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT pg_logical_emit_message(false, '"
                    + FENCE_PREFIX
                    + "', '')::text, txid_current()")) {
      rs.next();
    }
  }

  /**
   * Whether the read's snapshot holds the committed transaction {@code xid} (32 bits, as pgoutput
   * reports it): widened to 64 bits at the smallest signed distance from xmax, it is below xmin, or
   * below xmax and not in progress.
   */
  boolean holds(long xid) {
    long low = xmax & 0xffffffffL;
    long distance = ((xid - low + 0x80000000L) % 0x100000000L + 0x100000000L) % 0x100000000L;
    long wide = xmax + distance - 0x80000000L;
    if (wide >= xmax) {
      return false;
    }
    return wide < xmin || Arrays.binarySearch(inProgress, wide) < 0;
  }

  @Override
  public String toString() {
    return "ReadPoint[xmin="
        + xmin
        + ", xmax="
        + xmax
        + ", inProgress="
        + inProgress.length
        + ", limit="
        + limit
        + "]";
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ReadPoint p
        && p.xmin == xmin
        && p.xmax == xmax
        && Arrays.equals(p.inProgress, inProgress)
        && p.limit.equals(limit);
  }

  @Override
  public int hashCode() {
    return Long.hashCode(xmin) * 31 + Long.hashCode(xmax) * 17 + limit.hashCode();
  }
}
