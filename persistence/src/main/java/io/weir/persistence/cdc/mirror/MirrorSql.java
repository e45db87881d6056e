package io.weir.persistence.cdc.mirror;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * SQL text of the mirror. Table and column names come from the source catalog and may be any
 * identifier, so they are always quoted ({@link #quote}); values are always bind parameters, each
 * sent as untyped text so the server casts it to the target column's type.
 */
final class MirrorSql {
  private MirrorSql() {}

  /** {@code name} as a quoted identifier: in double quotes, embedded double quotes doubled. */
  static String quote(String name) {
    return io.weir.persistence.Identifiers.quote(name);
  }

  static String qualified(String schema, String table) {
    return quote(schema) + '.' + quote(table);
  }

  /**
   * {@code INSERT INTO t (c...) VALUES (?...) ON CONFLICT (k...) DO UPDATE SET c = EXCLUDED.c} for
   * every inserted non-key column, or {@code DO NOTHING} when all inserted columns are keys. Binds
   * {@code columns} in order.
   */
  static String upsert(String qualifiedTarget, List<String> columns, List<String> keys) {
    StringBuilder sql = new StringBuilder(64 + columns.size() * 24);
    sql.append("INSERT INTO ").append(qualifiedTarget).append(" (");
    appendList(sql, columns, "", "");
    sql.append(") VALUES (");
    for (int i = 0; i < columns.size(); i++) {
      sql.append(i == 0 ? "?" : ", ?");
    }
    sql.append(") ON CONFLICT (");
    appendList(sql, keys, "", "");
    sql.append(") DO ");
    Set<String> keySet = Set.copyOf(keys);
    List<String> rest = new ArrayList<>();
    for (String c : columns) {
      if (!keySet.contains(c)) {
        rest.add(c);
      }
    }
    if (rest.isEmpty()) {
      sql.append("NOTHING");
    } else {
      sql.append("UPDATE SET ");
      for (int i = 0; i < rest.size(); i++) {
        String q = quote(rest.get(i));
        sql.append(i == 0 ? "" : ", ").append(q).append(" = EXCLUDED.").append(q);
      }
    }
    return sql.toString();
  }

  /** {@code DELETE FROM t WHERE k1 = ? AND ...}; binds {@code keys} in order. */
  static String deleteByKey(String qualifiedTarget, List<String> keys) {
    StringBuilder sql = new StringBuilder("DELETE FROM ").append(qualifiedTarget).append(" WHERE ");
    appendKeyPredicate(sql, keys);
    return sql.toString();
  }

  /**
   * {@code UPDATE t SET c = ?, ... WHERE k1 = ? AND ...}; binds {@code columns}, then {@code keys}.
   */
  static String updateByKey(String qualifiedTarget, List<String> columns, List<String> keys) {
    StringBuilder sql = new StringBuilder("UPDATE ").append(qualifiedTarget).append(" SET ");
    appendList(sql, columns, "", " = ?");
    sql.append(" WHERE ");
    appendKeyPredicate(sql, keys);
    return sql.toString();
  }

  /** {@code TRUNCATE t1, t2 [RESTART IDENTITY]}; never CASCADE (see the sink's class docs). */
  static String truncate(List<String> qualifiedTargets, boolean restartIdentity) {
    return "TRUNCATE "
        + String.join(", ", qualifiedTargets)
        + (restartIdentity ? " RESTART IDENTITY" : "");
  }

  static String createCheckpointTable(String qualified) {
    return "CREATE TABLE IF NOT EXISTS "
        + qualified
        + " ("
        + "pipeline text PRIMARY KEY, "
        + "incarnation text NOT NULL, "
        + "commit_lsn pg_lsn NOT NULL, "
        + "updated_at timestamptz NOT NULL DEFAULT now(), "
        + "snapshot_progress text)";
  }

  /** No unique constraint on purpose: duplicates must be countable, not refused. */
  static String createAppliedLog(String qualified) {
    return "CREATE TABLE IF NOT EXISTS "
        + qualified
        + " ("
        + "pipeline text NOT NULL, "
        + "xid bigint NOT NULL, "
        + "commit_lsn pg_lsn NOT NULL, "
        + "applied_at timestamptz NOT NULL DEFAULT now())";
  }

  private static void appendKeyPredicate(StringBuilder sql, List<String> keys) {
    for (int i = 0; i < keys.size(); i++) {
      sql.append(i == 0 ? "" : " AND ").append(quote(keys.get(i))).append(" = ?");
    }
  }

  private static void appendList(
      StringBuilder sql, List<String> names, String before, String after) {
    for (int i = 0; i < names.size(); i++) {
      sql.append(i == 0 ? "" : ", ").append(before).append(quote(names.get(i))).append(after);
    }
  }
}
