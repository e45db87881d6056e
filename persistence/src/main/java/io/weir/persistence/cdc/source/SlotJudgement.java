package io.weir.persistence.cdc.source;

import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.SlotIncarnation;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Optional;

/**
 * Whether an existing slot may be streamed, decided from the server's answers alone (its identity
 * and timeline, the slot's PostgreSQL 17 flags, the timeline history): the pure part of {@link
 * SlotManager#prepareSlot}, unit-tested with recorded answers of servers this machine cannot run.
 * Every refusal halts the pipeline with a {@link HaltReason}.
 */
final class SlotJudgement {
  private SlotJudgement() {}

  /**
   * What PostgreSQL 17 says of a slot beyond its position, and where it is.
   *
   * @param failover the slot is synchronised to standbys ({@code pg_replication_slots.failover};
   *     false before 17)
   * @param synced the slot was synchronised from a primary ({@code synced}; false before 17): on a
   *     standby it cannot be read; on a promoted standby it is the primary's slot, carried over
   * @param inRecovery the server is a standby ({@code pg_is_in_recovery()})
   */
  record SlotFlags(boolean failover, boolean synced, boolean inRecovery) {
    static final SlotFlags PRIMARY = new SlotFlags(false, false, false);
  }

  /**
   * After a promotion, the sink may hold transactions the promoted server never had (the old
   * primary sent them before a standby received them: {@code synchronized_standby_slots} prevents
   * that). Everything up to where the recorded timeline ended is on the new history; a checkpoint
   * past it, or an unknown branch point, halts.
   *
   * @param branchPoint where {@code recordedTimeline} ended in the server's timeline history
   */
  static void requireOnTheNewHistory(
      int recordedTimeline, Optional<Lsn> branchPoint, Optional<Lsn> checkpointCommit) {
    if (branchPoint.isEmpty()) {
      throw new PipelineHaltException(
          HaltReason.INCARNATION_MISMATCH,
          "the source was promoted, but its timeline history does not show where timeline "
              + recordedTimeline
              + " ended: it cannot be proven that the sink holds only what the new timeline has");
    }
    if (checkpointCommit.isPresent() && checkpointCommit.get().compareTo(branchPoint.get()) > 0) {
      throw new PipelineHaltException(
          HaltReason.INCARNATION_MISMATCH,
          "the sink's checkpoint ("
              + checkpointCommit.get()
              + ") is past where timeline "
              + recordedTimeline
              + " ended on the promoted source ("
              + branchPoint.get()
              + "): transactions the sink holds may not exist there (set"
              + " synchronized_standby_slots on the primary so this cannot happen)");
    }
  }

  /**
   * Where {@code timeline} ended in a timeline history file's {@code content} (lines {@code
   * parentTLI <tab> switchpoint <tab> reason}), or empty when the file does not name it.
   */
  static Optional<Lsn> branchPoint(String content, int timeline) {
    if (content == null) {
      return Optional.empty();
    }
    for (String line : content.split("\n")) {
      String[] f = line.strip().split("\\s+");
      if (f.length >= 2 && !f[0].startsWith("#")) {
        try {
          if (Integer.parseInt(f[0]) == timeline) {
            return Optional.of(Lsn.parse(f[1]));
          }
        } catch (RuntimeException malformed) {
          return Optional.empty();
        }
      }
    }
    return Optional.empty();
  }

  /** The server's history file of {@code timeline} (TIMELINE_HISTORY), or null without one. */
  static String timelineHistory(Connection replicationSession, int timeline) throws SQLException {
    if (timeline <= 1) {
      return null;
    }
    try (Statement s = replicationSession.createStatement();
        ResultSet rs = s.executeQuery("TIMELINE_HISTORY " + timeline)) {
      if (!rs.next()) {
        return null;
      }
      byte[] content = rs.getBytes("content");
      return content == null ? null : new String(content, StandardCharsets.UTF_8);
    }
  }

  /** How a recorded slot may be resumed on this server. */
  enum Resume {
    /** Same server history: resume. */
    SAME,
    /** A failover slot on a standby promoted since (timeline moved on): resume, logged. */
    PROMOTED
  }

  /**
   * Whether an existing slot may be streamed: the pure part of {@link SlotManager#prepareSlot},
   * decided from the server's answers (tested with PostgreSQL 17's recorded answers, which this
   * machine cannot run).
   *
   * @param recorded the incarnation Weir recorded for this slot, empty when it adopts the slot
   * @param failoverWanted the pipeline's {@code failover} setting
   */
  static Resume judge(
      String slot,
      Optional<SlotIncarnation> recorded,
      ReplicationConnection.SystemIdentity server,
      SlotFlags flags,
      boolean failoverWanted) {
    if (flags.inRecovery() && flags.synced()) {
      throw new PipelineHaltException(
          HaltReason.SLOT_SYNCED_UNPROMOTED,
          "slot "
              + slot
              + " is synchronised from the primary onto this standby, which has not been"
              + " promoted: it cannot be read here; point the pipeline at the primary, or promote"
              + " the standby");
    }
    if (recorded.isEmpty()) {
      if (failoverWanted && !flags.failover()) {
        throw new PipelineHaltException(
            HaltReason.SLOT_INCOMPATIBLE,
            "slot "
                + slot
                + " exists without failover but the pipeline asks for failover = true: enable it"
                + " (ALTER_REPLICATION_SLOT "
                + slot
                + " (FAILOVER true)) or drop the slot");
      }
      return Resume.SAME;
    }
    SlotIncarnation incarnation = recorded.get();
    if (incarnation.systemIdentifier() != server.systemIdentifier()) {
      throw new PipelineHaltException(
          HaltReason.SLOT_LOST,
          "the source server's system identifier changed: the slot recorded for this pipeline is gone");
    }
    if (incarnation.timeline() != server.timeline()) {
      if (failoverWanted && flags.failover()) {
        // A promoted standby: same system, a new timeline, and the server says this is the
        // synchronised failover slot. Its position is at most the primary's, which never passed
        // what the sink holds: the sink skips what it has.
        return Resume.PROMOTED;
      }
      throw new PipelineHaltException(
          HaltReason.INCARNATION_MISMATCH,
          "the source server's timeline changed from "
              + incarnation.timeline()
              + " to "
              + server.timeline()
              + (flags.failover()
                  ? " (the slot is a failover slot, but the pipeline has failover = false)"
                  : ""));
    }
    return Resume.SAME;
  }
}
