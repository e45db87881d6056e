package io.weir.persistence;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * On how many copies a commit of Weir's journal database is durable before it is acknowledged, as
 * its primary says: 1 + N for {@code synchronous_standby_names = 'ANY N (...)'} or {@code FIRST N
 * (...)} (a bare list or {@code N (...)} is FIRST), counted only when {@code synchronous_commit} on
 * Weir's connections is {@code on} or {@code remote_apply} (a standby has flushed, or applied, the
 * commit before it returns) and at least N standbys stream as {@code sync} or {@code quorum} in
 * {@code pg_stat_replication}; otherwise 1. Reading other roles' walsenders needs {@code
 * pg_monitor} (or a superuser): without it the copies are unknown.
 *
 * @param copies the copies a commit is durable on; meaningful only when {@code known}
 * @param known false when Weir's role cannot see the standbys
 * @param detail value-free: the quorum rule, how many stream, the synchronous_commit setting
 */
public record StorageCopies(int copies, boolean known, String detail) {

  /** Before the first reading. */
  public static final StorageCopies UNREAD = new StorageCopies(1, false, "not read yet");

  /** How many synchronous standbys a commit waits for, from {@code synchronous_standby_names}. */
  public record Quorum(String method, int count) {}

  private static final Pattern METHOD =
      Pattern.compile(
          "^\\s*(?:(FIRST|ANY)\\s+)?(\\d+)\\s*\\((.*)\\)\\s*$", Pattern.CASE_INSENSITIVE);

  /**
   * Parses PostgreSQL's {@code synchronous_standby_names}: empty waits for none; {@code FIRST N
   * (list)}, {@code ANY N (list)}, {@code N (list)} (FIRST) wait for N; a bare list (or {@code *})
   * waits for the first one.
   */
  public static Quorum parse(String standbyNames) {
    String s = standbyNames == null ? "" : standbyNames.strip();
    if (s.isEmpty()) {
      return new Quorum("none", 0);
    }
    Matcher m = METHOD.matcher(s);
    if (m.matches()) {
      String method = m.group(1) == null ? "first" : m.group(1).toLowerCase(Locale.ROOT);
      return new Quorum(method, Integer.parseInt(m.group(2)));
    }
    return new Quorum("first", 1);
  }

  /** Decides the copies from the primary's answers (see the class comment). */
  public static StorageCopies of(
      String standbyNames, String synchronousCommit, boolean canSeeStandbys, int streaming) {
    Quorum q = parse(standbyNames);
    String commit = synchronousCommit == null ? "" : synchronousCommit.toLowerCase(Locale.ROOT);
    boolean waitsForFlush = commit.equals("on") || commit.equals("remote_apply");
    if (q.count() == 0) {
      return new StorageCopies(
          1, true, "no synchronous standbys (synchronous_standby_names empty)");
    }
    if (!waitsForFlush) {
      return new StorageCopies(
          1,
          true,
          "synchronous_commit is "
              + commit
              + " on Weir's connections: a commit returns before a standby has flushed it");
    }
    String rule = q.method().toUpperCase(Locale.ROOT) + " " + q.count();
    if (!canSeeStandbys) {
      return new StorageCopies(
          1,
          false,
          rule
              + " synchronous standbys configured, but Weir's role cannot see pg_stat_replication"
              + " (grant it pg_monitor)");
    }
    if (streaming < q.count()) {
      return new StorageCopies(
          1,
          true,
          rule
              + " synchronous standbys configured, "
              + streaming
              + " streaming as sync or quorum: commits wait until enough stream again");
    }
    return new StorageCopies(
        1 + q.count(),
        true,
        rule + " synchronous standbys, " + streaming + " streaming, synchronous_commit " + commit);
  }

  private static final String SQL =
      "SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit'),"
          + " pg_has_role(current_user, 'pg_monitor', 'USAGE')"
          + " OR (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user),"
          // Physical standbys only: a logical subscriber (Weir's own pipelines too, with '*')
          // can be a synchronous walsender but holds no copy of the journal.
          + " (SELECT count(*) FROM pg_catalog.pg_stat_replication r"
          + "   WHERE r.state = 'streaming' AND r.sync_state IN ('sync', 'quorum')"
          + "   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots s"
          + "     WHERE s.active_pid = r.pid AND s.slot_type = 'logical'))";

  /** Reads the copies on one of Weir's connections to the journal's primary. */
  public static StorageCopies read(Connection c) throws SQLException {
    try (Statement s = c.createStatement()) {
      s.setQueryTimeout(5);
      ResultSet rs = s.executeQuery(SQL);
      rs.next();
      return of(rs.getString(1), rs.getString(2), rs.getBoolean(3), rs.getInt(4));
    }
  }
}
