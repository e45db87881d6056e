package io.weir.persistence.cdc.source;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.function.Predicate;
import java.util.regex.Pattern;

/**
 * Who holds a pipeline's slot, and when a new owner may take it over (ADR 0037).
 *
 * <p>A pipeline's replication connection names its cluster member in {@code application_name}
 * ({@code weir-replication <member>}). When a member freezes (a paused VM, SIGSTOP) its walsender
 * stays connected, so PostgreSQL keeps the slot active for it until {@code wal_sender_timeout} (60
 * s by default), and the pipeline's new owner is refused with SQLState 55006 meanwhile. Once the
 * cluster has downed that member, the new owner ends the walsender ({@code pg_terminate_backend})
 * and streams at once. It does so only for a holder whose name is a member id the cluster downed
 * ({@code downed}); a holder that is merely slow, this member itself, another program, or a name
 * that is not a member id is never ended: the owner then waits as before.
 *
 * @param self this member's id (digits), or null: the connection names no member and nothing is
 *     ever ended
 * @param downed whether a member id names a member this cluster has downed
 */
public record SlotHolders(String self, Predicate<String> downed) {
  /** Names no member and ends nothing (tools, tests, single processes). */
  public static final SlotHolders NONE = new SlotHolders(null, member -> false);

  static final String APPLICATION = "weir-replication";

  /** A member id as Weir writes it: digits (a Pekko member's unique id), never a client value. */
  private static final Pattern MEMBER = Pattern.compile("[0-9]{1,20}");

  public SlotHolders {
    if (self != null && !MEMBER.matcher(self).matches()) {
      throw new IllegalArgumentException("a member id is 1 to 20 digits");
    }
    if (downed == null) {
      throw new IllegalArgumentException("downed is required");
    }
  }

  /** The {@code application_name} of this member's replication connections. */
  public String applicationName() {
    return self == null ? APPLICATION : APPLICATION + " " + self;
  }

  private static final String HOLDER =
      "SELECT s.active_pid, a.application_name, a.backend_start"
          + " FROM pg_catalog.pg_replication_slots s"
          + " JOIN pg_catalog.pg_stat_activity a ON a.pid = s.active_pid"
          + " WHERE s.slot_name = ? AND s.active";

  /**
   * Ends the backend only while it is still the one looked at: the slot's active process, with the
   * same name and start time (the start time as the role may see it: null for another role's
   * session without {@code pg_read_all_stats}, and then null again). Between the look and the end
   * the walsender may have let the slot go, exited (its process id then free for an unrelated
   * backend) or been replaced; none of them is ended.
   */
  private static final String END_HOLDER =
      "SELECT pg_catalog.pg_terminate_backend(a.pid) FROM pg_catalog.pg_replication_slots s"
          + " JOIN pg_catalog.pg_stat_activity a ON a.pid = s.active_pid"
          + " WHERE s.slot_name = ? AND s.active AND a.pid = ? AND a.application_name = ?"
          + " AND a.backend_start IS NOT DISTINCT FROM ?";

  /**
   * Ends the walsender holding {@code slot} when its connection names a member the cluster downed,
   * and waits until the slot is free (at most {@code wait}). Blocking; on a normal connection to
   * the source. The role needs the right to signal the walsender: the same role, or {@code
   * pg_signal_backend}.
   *
   * @return the process id of the walsender ended, or 0 when none was
   */
  public int endDownedHolder(Connection source, String slot, Duration wait)
      throws SQLException, InterruptedException {
    if (self == null) {
      return 0;
    }
    int pid;
    String name;
    OffsetDateTime started;
    try (PreparedStatement ps = source.prepareStatement(HOLDER)) {
      ps.setQueryTimeout(10);
      ps.setString(1, slot);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          return 0;
        }
        pid = rs.getInt(1);
        name = rs.getString(2);
        started = rs.getObject(3, OffsetDateTime.class);
      }
    }
    String member = memberOf(name);
    // backend_start is null for another role's sessions without pg_read_all_stats: then the slot,
    // the process id and the name still have to match.
    if (member == null || member.equals(self) || !downed.test(member)) {
      return 0;
    }
    try (PreparedStatement ps = source.prepareStatement(END_HOLDER)) {
      ps.setQueryTimeout(10);
      ps.setString(1, slot);
      ps.setInt(2, pid);
      ps.setString(3, name);
      ps.setObject(4, started, Types.TIMESTAMP_WITH_TIMEZONE);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next() || !rs.getBoolean(1)) {
          return 0;
        }
      }
    }
    long until = System.nanoTime() + wait.toNanos();
    try (PreparedStatement ps =
        source.prepareStatement(
            "SELECT active_pid IS DISTINCT FROM ? FROM pg_catalog.pg_replication_slots"
                + " WHERE slot_name = ?")) {
      ps.setQueryTimeout(10);
      ps.setInt(1, pid);
      ps.setString(2, slot);
      while (System.nanoTime() < until) {
        try (ResultSet rs = ps.executeQuery()) {
          if (!rs.next() || rs.getBoolean(1)) {
            break;
          }
        }
        Thread.sleep(50);
      }
    }
    return pid;
  }

  /** The member id an application name carries, or null when it is not a Weir member's. */
  public static String memberOf(String applicationName) {
    if (applicationName == null || !applicationName.startsWith(APPLICATION + " ")) {
      return null;
    }
    String member = applicationName.substring(APPLICATION.length() + 1);
    return MEMBER.matcher(member).matches() ? member : null;
  }
}
