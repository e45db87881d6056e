package io.weir.persistence;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The fence that makes a restore of schema {@code weir} from a backup safe (ADR 0012).
 *
 * <p>{@code deploy/bin/restore.sh} renames the live schema to {@code weir_pre_restore_<time>},
 * restores the backup and creates {@code <schema>.restore_pending} naming that previous schema, all
 * in one transaction. The first node that starts afterwards calls {@link #applyIfPending} after
 * migrating the schema and before anything reads it, and in one transaction (serialised across
 * nodes by an advisory lock):
 *
 * <ol>
 *   <li>Carries the access-control state over from the previous schema, if it is there: every token
 *       key (retired), the principals, their grants and the collection policies as they were just
 *       before the restore. A restore rewinds data, never credentials: a revoked principal, a
 *       rotated token, a removed grant or a stricter policy is not undone by it.
 *   <li>Retires every key that was not retired with {@code invalidated_by_restore}: tokens signed
 *       with them (batch tokens, cursors) are refused with {@code token-invalidated}.
 *   <li>Adds a fresh signing key, advances {@code cluster.restore_epoch}, sets {@code restored_at}.
 *   <li>Marks every CDC pipeline's slot record restored (records of pipelines only the previous
 *       schema knew are copied, marked): their slots went on after the backup, so the pipeline
 *       halts {@code restored-from-backup} instead of streaming past changes the restored state
 *       never saw.
 *   <li>Drops the marker. The previous schema stays for the operator to inspect and drop.
 * </ol>
 *
 * Nothing here logs a key, a token hash or a row value.
 */
public final class RestoreFence {
  private static final Logger log = LoggerFactory.getLogger(RestoreFence.class);

  /** The marker table restore.sh creates in the restored schema. */
  public static final String MARKER = "restore_pending";

  private static final long LOCK = 0x5765697252737446L; // "WeirRstF"

  private RestoreFence() {}

  /**
   * What a fence did.
   *
   * @param previousSchema the live schema the restore replaced, if it was found
   * @param newKid the key that signs from now on
   */
  public record Applied(
      int restoreEpoch,
      String newKid,
      int keysInvalidated,
      Optional<String> previousSchema,
      int principalsCarried,
      int policiesCarried,
      int pipelinesMarked) {}

  /** Whether {@code schema} holds a restore marker (a restore whose fence has not run yet). */
  public static boolean pending(Connection c, String schema) throws SQLException {
    return tableExists(c, Identifiers.require("schema name", schema), MARKER);
  }

  /** Applies the fence if {@code schema} holds a restore marker; empty when it does not. */
  public static Optional<Applied> applyIfPending(Connection c, String schema) throws SQLException {
    Identifiers.require("schema name", schema);
    boolean auto = c.getAutoCommit();
    c.setAutoCommit(false);
    try {
      try (PreparedStatement s = c.prepareStatement("SELECT pg_advisory_xact_lock(?)")) {
        s.setLong(1, LOCK);
        s.executeQuery().close();
      }
      if (!pending(c, schema)) {
        c.commit();
        return Optional.empty();
      }
      Applied applied = apply(c, schema);
      c.commit();
      log.warn(
          "schema {} was restored from a backup: restore fence applied (restore epoch {}; {} token key(s)"
              + " invalidated, tokens issued before the restore answer token-invalidated; signing with {};"
              + " {} CDC pipeline(s) halt restored-from-backup until dropped and started again; previous schema {}:"
              + " {} principal(s) and {} policy(ies) carried over)",
          schema,
          applied.restoreEpoch(),
          applied.keysInvalidated(),
          applied.newKid(),
          applied.pipelinesMarked(),
          applied.previousSchema().orElse("(none)"),
          applied.principalsCarried(),
          applied.policiesCarried());
      return Optional.of(applied);
    } catch (SQLException | RuntimeException e) {
      c.rollback();
      throw e;
    } finally {
      c.setAutoCommit(auto);
    }
  }

  private static Applied apply(Connection c, String schema) throws SQLException {
    Optional<String> previous = previousSchema(c, schema);
    int principals = 0;
    int policies = 0;
    if (previous.isPresent()) {
      String p = previous.get();
      if (tableExists(c, p, "token_keys")) {
        // Keys made after the backup: their tokens are genuine, and issued before the restore.
        try (Statement s = c.createStatement()) {
          s.executeUpdate(
              "INSERT INTO "
                  + schema
                  + ".token_keys (kid, key, created_at, retired_at, invalidated_by_restore)"
                  + " SELECT kid, key, created_at, coalesce(retired_at, clock_timestamp()), retired_at IS NULL FROM "
                  + p
                  + ".token_keys ON CONFLICT (kid) DO NOTHING");
        }
      }
      if (tableExists(c, p, "principals") && tableExists(c, p, "grants")) {
        try (Statement s = c.createStatement()) {
          s.executeUpdate("DELETE FROM " + schema + ".grants");
          s.executeUpdate("DELETE FROM " + schema + ".principals");
        }
        principals = copy(c, p, schema, "principals");
        copy(c, p, schema, "grants");
      }
      if (tableExists(c, p, "collection_policies")) {
        try (Statement s = c.createStatement()) {
          s.executeUpdate("DELETE FROM " + schema + ".collection_policies");
        }
        policies = copy(c, p, schema, "collection_policies");
        // Versions only move forward: partitions restored with older rules get the current one
        // installed again on their next governed read.
        try (Statement s = c.createStatement();
            ResultSet rs =
                s.executeQuery(
                    "SELECT greatest((SELECT max(version) FROM "
                        + schema
                        + ".collection_policies),"
                        + " (SELECT last_value FROM "
                        + p
                        + ".policy_versions), (SELECT last_value FROM "
                        + schema
                        + ".policy_versions))")) {
          rs.next();
          long top = rs.getLong(1);
          try (PreparedStatement set =
              c.prepareStatement("SELECT setval('" + schema + ".policy_versions', ?)")) {
            set.setLong(1, Math.max(1, top));
            set.executeQuery().close();
          }
        }
      }
      if (tableExists(c, p, "cdc_slot")) {
        try (Statement s = c.createStatement()) {
          s.executeUpdate(
              "INSERT INTO "
                  + schema
                  + ".cdc_slot (pipeline, slot_name, incarnation, system_identifier, timeline)"
                  + " SELECT pipeline, slot_name, incarnation, system_identifier, timeline FROM "
                  + p
                  + ".cdc_slot ON CONFLICT (pipeline) DO NOTHING");
        }
      }
    }
    try (Statement s = c.createStatement()) {
      s.executeUpdate(
          "UPDATE "
              + schema
              + ".token_keys SET retired_at = clock_timestamp(),"
              + " invalidated_by_restore = true WHERE retired_at IS NULL");
    }
    int invalidated = countWhere(c, schema + ".token_keys", "invalidated_by_restore");
    String kid = TokenKeyStore.insertKey(c, schema);
    int epoch;
    try (Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "UPDATE "
                    + schema
                    + ".cluster SET restore_epoch = restore_epoch + 1,"
                    + " restored_at = clock_timestamp() RETURNING restore_epoch")) {
      epoch = rs.next() ? rs.getInt(1) : 0;
    }
    int pipelines;
    try (Statement s = c.createStatement()) {
      pipelines =
          s.executeUpdate("UPDATE " + schema + ".cdc_slot SET restored_at = clock_timestamp()");
      s.executeUpdate("DROP TABLE " + schema + "." + MARKER);
    }
    return new Applied(epoch, kid, invalidated, previous, principals, policies, pipelines);
  }

  /**
   * The schema the marker names, when it is a valid identifier other than {@code schema} and
   * exists.
   */
  private static Optional<String> previousSchema(Connection c, String schema) throws SQLException {
    List<String> named = new ArrayList<>();
    try (Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT previous_schema FROM "
                    + schema
                    + "."
                    + MARKER
                    + " WHERE previous_schema IS NOT NULL")) {
      while (rs.next()) {
        named.add(rs.getString(1));
      }
    }
    for (String name : named) {
      if (!Identifiers.isValid(name) || name.equals(schema)) {
        log.warn(
            "the restore marker names a previous schema that is not a valid identifier; nothing is carried over");
        return Optional.empty();
      }
      try (PreparedStatement s =
          c.prepareStatement("SELECT 1 FROM pg_namespace WHERE nspname = ?")) {
        s.setString(1, name);
        try (ResultSet rs = s.executeQuery()) {
          if (rs.next()) {
            return Optional.of(name);
          }
        }
      }
      log.warn(
          "the schema replaced by the restore ({}) no longer exists; nothing is carried over from it",
          name);
    }
    return Optional.empty();
  }

  private static boolean tableExists(Connection c, String schema, String table)
      throws SQLException {
    // A scan of pg_class under this statement's snapshot, not to_regclass: name lookup goes through
    // the backend's catalog caches, which may still hold a marker another node's fence dropped
    // while
    // this one waited for the advisory lock (the DELETE that follows then fails: relation does not
    // exist).
    try (PreparedStatement s =
        c.prepareStatement(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class r"
                + " JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace WHERE n.nspname = ? AND r.relname = ?)")) {
      s.setString(1, schema);
      s.setString(2, table);
      try (ResultSet rs = s.executeQuery()) {
        rs.next();
        return rs.getBoolean(1);
      }
    }
  }

  private static int countWhere(Connection c, String table, String condition) throws SQLException {
    try (Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT count(*) FROM " + table + " WHERE " + condition)) {
      rs.next();
      return rs.getInt(1);
    }
  }

  /**
   * Copies every row of {@code from.table} into {@code to.table}, through the columns both have
   * (the previous schema may be of an older version). Column names come from the catalog.
   */
  private static int copy(Connection c, String from, String to, String table) throws SQLException {
    Set<String> target = columns(c, to, table);
    Set<String> common = new LinkedHashSet<>(columns(c, from, table));
    common.retainAll(target);
    String cols = String.join(", ", common.stream().map(Identifiers::quote).toList());
    try (Statement s = c.createStatement()) {
      return s.executeUpdate(
          "INSERT INTO "
              + to
              + "."
              + table
              + " ("
              + cols
              + ") SELECT "
              + cols
              + " FROM "
              + from
              + "."
              + table);
    }
  }

  private static Set<String> columns(Connection c, String schema, String table)
      throws SQLException {
    Set<String> out = new LinkedHashSet<>();
    try (PreparedStatement s =
        c.prepareStatement(
            "SELECT column_name FROM information_schema.columns"
                + " WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position")) {
      s.setString(1, schema);
      s.setString(2, table);
      try (ResultSet rs = s.executeQuery()) {
        while (rs.next()) {
          out.add(rs.getString(1));
        }
      }
    }
    return out;
  }
}
