package io.weir.persistence.cdc.mirror;

import io.weir.persistence.Identifiers;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * SQL text of the mirror. Table, column and type names come from the catalogs and may be any
 * identifier, so they are always quoted ({@link #quote}); values are always bind parameters, sent
 * as untyped text and cast in the statement to the target column's type ({@code ?::"ns"."type"}),
 * so that operators such as {@code =} on a composite, range or domain column resolve to the
 * column's type and the server's input function for that type reads the text.
 */
final class MirrorSql {
  private MirrorSql() {}

  /** The alias of the target row in an upsert's DO UPDATE clause. */
  static final String TARGET_ALIAS = "weir_target";

  /** How rows of a keyless target are matched on a column (see {@link TargetTable}). */
  enum Equality {
    /** The type's default B-tree or hash equality, written {@code =}. */
    OPERATOR,
    /** No equality operator, but the stored text is the value (json, xml): compare as text. */
    TEXT,
    /** Neither: rows cannot be matched on this column. */
    NONE
  }

  /**
   * A column as statements use it: its name, the SQL of its type for casts (quoted, schema
   * qualified, without type modifier), how it compares, and whether its type is composite (where
   * {@code IS NULL} means "every field is NULL", so a NULL is matched with {@code IS NOT DISTINCT
   * FROM}).
   */
  record Column(String name, String type, Equality equality, boolean composite) {
    Column {
      Objects.requireNonNull(name, "name");
      Objects.requireNonNull(type, "type");
      Objects.requireNonNull(equality, "equality");
    }

    String quoted() {
      return quote(name);
    }

    /** {@code ?::type}: a parameter read as a value of the column's type. */
    String param() {
      return "?::" + type;
    }
  }

  /** {@code name} as a quoted identifier: in double quotes, embedded double quotes doubled. */
  static String quote(String name) {
    return Identifiers.quote(name);
  }

  static String qualified(String schema, String table) {
    return quote(schema) + '.' + quote(table);
  }

  /** A type from the catalog as cast target: {@code "schema"."typname"}, no type modifier. */
  static String typeName(String schema, String typname) {
    return qualified(schema, typname);
  }

  /**
   * {@code INSERT INTO t AS weir_target (c...) [OVERRIDING SYSTEM VALUE] VALUES (?::type...) ON
   * CONFLICT (k...) DO UPDATE SET c = EXCLUDED.c} for every inserted column that is neither a key
   * nor in {@code neverSet} (GENERATED ALWAYS identity columns, which no UPDATE may set), or {@code
   * DO NOTHING} when no column is left. With a {@code guard} column the update happens only where
   * the stored value of that column equals the inserted one ({@code WHERE weir_target.g IS NOT
   * DISTINCT FROM EXCLUDED.g}), so the update count tells whether it did. Binds {@code columns} in
   * order.
   */
  static String upsert(
      String qualifiedTarget,
      List<Column> columns,
      List<String> keys,
      boolean overriding,
      Set<String> neverSet,
      String guard) {
    StringBuilder sql = new StringBuilder(64 + columns.size() * 40);
    sql.append("INSERT INTO ").append(qualifiedTarget).append(" AS ").append(TARGET_ALIAS);
    appendValues(sql, columns, overriding);
    sql.append(" ON CONFLICT (");
    appendNames(sql, keys);
    sql.append(") DO ");
    Set<String> keySet = Set.copyOf(keys);
    List<String> rest = new ArrayList<>();
    for (Column c : columns) {
      if (!keySet.contains(c.name()) && !neverSet.contains(c.name())) {
        rest.add(c.name());
      }
    }
    if (rest.isEmpty() && guard == null) {
      sql.append("NOTHING");
      return sql.toString();
    }
    if (rest.isEmpty()) {
      rest.add(keys.get(0)); // a no-op assignment, so that the guard decides the update count
    }
    sql.append("UPDATE SET ");
    for (int i = 0; i < rest.size(); i++) {
      String q = quote(rest.get(i));
      sql.append(i == 0 ? "" : ", ").append(q).append(" = EXCLUDED.").append(q);
    }
    if (guard != null) {
      String g = quote(guard);
      sql.append(" WHERE ")
          .append(TARGET_ALIAS)
          .append('.')
          .append(g)
          .append(" IS NOT DISTINCT FROM EXCLUDED.")
          .append(g);
    }
    return sql.toString();
  }

  /** {@code INSERT INTO t (c...) [OVERRIDING SYSTEM VALUE] VALUES (?::type...)}; binds columns. */
  static String insert(String qualifiedTarget, List<Column> columns, boolean overriding) {
    StringBuilder sql = new StringBuilder("INSERT INTO ").append(qualifiedTarget);
    appendValues(sql, columns, overriding);
    return sql.toString();
  }

  /** {@code DELETE FROM t WHERE k1 = ?::type AND ...}; binds {@code keys} in order. */
  static String deleteByKey(String qualifiedTarget, List<Column> keys) {
    StringBuilder sql = new StringBuilder("DELETE FROM ").append(qualifiedTarget).append(" WHERE ");
    appendKeyPredicate(sql, keys);
    return sql.toString();
  }

  /**
   * {@code UPDATE t SET c = ?::type, ... WHERE k1 = ?::type AND ...}; binds {@code columns}, then
   * {@code keys}.
   */
  static String updateByKey(String qualifiedTarget, List<Column> columns, List<Column> keys) {
    StringBuilder sql = new StringBuilder("UPDATE ").append(qualifiedTarget).append(" SET ");
    appendAssignments(sql, columns);
    sql.append(" WHERE ");
    appendKeyPredicate(sql, keys);
    return sql.toString();
  }

  /**
   * Replaces the row with key {@code keys} by a new one, in one statement: {@code WITH old AS
   * (DELETE FROM t WHERE k = ?::type ... RETURNING kept...) INSERT INTO t (c..., kept...)
   * [OVERRIDING SYSTEM VALUE] SELECT ?::type..., old.kept... FROM old}. The {@code kept} columns
   * (unchanged TOAST) come from the deleted row. For rows whose GENERATED ALWAYS identity column
   * changes, which no UPDATE can set. The update count is 0 when no row had the key. Binds {@code
   * keys}, then {@code columns}.
   */
  static String replaceByKey(
      String qualifiedTarget,
      List<Column> columns,
      List<String> kept,
      List<Column> keys,
      boolean overriding) {
    StringBuilder where = new StringBuilder();
    appendKeyPredicate(where, keys);
    return replace(qualifiedTarget, columns, kept, where.toString(), overriding);
  }

  /**
   * The predicate matching a row of a keyless target by every column of an old row image: {@code c
   * = ?::type} (or {@code c::text = ?::text} for {@link Equality#TEXT}) for a column with a value,
   * {@code c IS NULL} (composite: {@code c IS NOT DISTINCT FROM NULL}) for one in {@code nulls}.
   * Binds the columns not in {@code nulls}, in order.
   */
  static String match(List<Column> columns, BitSet nulls) {
    StringBuilder sql = new StringBuilder();
    for (int i = 0; i < columns.size(); i++) {
      Column c = columns.get(i);
      sql.append(i == 0 ? "" : " AND ");
      if (nulls.get(i)) {
        sql.append(c.quoted()).append(c.composite() ? " IS NOT DISTINCT FROM NULL" : " IS NULL");
      } else if (c.equality() == Equality.TEXT) {
        sql.append(c.quoted()).append("::pg_catalog.text = ?::pg_catalog.text");
      } else if (c.equality() == Equality.OPERATOR) {
        sql.append(c.quoted()).append(" = ").append(c.param());
      } else {
        throw new IllegalArgumentException("a column without equality cannot be matched");
      }
    }
    return sql.toString();
  }

  /**
   * {@code DELETE FROM t WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM t WHERE match LIMIT
   * 1)}: one row of those equal to the old image (duplicates are equal, so any one will do; {@code
   * tableoid} because a partitioned target's rows share ctids across partitions). Binds the match.
   */
  static String deleteOne(String qualifiedTarget, String match) {
    return "DELETE FROM " + qualifiedTarget + " WHERE " + oneRow(qualifiedTarget, match);
  }

  /**
   * {@code UPDATE t SET c = ?::type ... WHERE (tableoid, ctid) = (SELECT ... LIMIT 1)}: one row
   * equal to the old image. Binds {@code columns}, then the match.
   */
  static String updateOne(String qualifiedTarget, List<Column> columns, String match) {
    StringBuilder sql = new StringBuilder("UPDATE ").append(qualifiedTarget).append(" SET ");
    appendAssignments(sql, columns);
    sql.append(" WHERE ").append(oneRow(qualifiedTarget, match));
    return sql.toString();
  }

  /**
   * {@link #replaceByKey} for one row equal to the old image of a keyless target. Binds the match,
   * then {@code columns}.
   */
  static String replaceOne(
      String qualifiedTarget,
      List<Column> columns,
      List<String> kept,
      String match,
      boolean overriding) {
    return replace(qualifiedTarget, columns, kept, oneRow(qualifiedTarget, match), overriding);
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

  private static String oneRow(String qualifiedTarget, String match) {
    return "(tableoid, ctid) = (SELECT tableoid, ctid FROM "
        + qualifiedTarget
        + " WHERE "
        + match
        + " LIMIT 1)";
  }

  private static String replace(
      String qualifiedTarget,
      List<Column> columns,
      List<String> kept,
      String where,
      boolean overriding) {
    StringBuilder sql = new StringBuilder("WITH weir_old AS (DELETE FROM ");
    sql.append(qualifiedTarget).append(" WHERE ").append(where).append(" RETURNING ");
    if (kept.isEmpty()) {
      sql.append("1");
    } else {
      appendNames(sql, kept);
    }
    sql.append(") INSERT INTO ").append(qualifiedTarget).append(" (");
    List<String> names = new ArrayList<>();
    for (Column c : columns) {
      names.add(c.name());
    }
    names.addAll(kept);
    appendNames(sql, names);
    sql.append(')');
    if (overriding) {
      sql.append(" OVERRIDING SYSTEM VALUE");
    }
    sql.append(" SELECT ");
    for (int i = 0; i < columns.size(); i++) {
      sql.append(i == 0 ? "" : ", ").append(columns.get(i).param());
    }
    for (int i = 0; i < kept.size(); i++) {
      sql.append(columns.isEmpty() && i == 0 ? "" : ", ")
          .append("weir_old.")
          .append(quote(kept.get(i)));
    }
    sql.append(" FROM weir_old");
    return sql.toString();
  }

  private static void appendValues(StringBuilder sql, List<Column> columns, boolean overriding) {
    sql.append(" (");
    for (int i = 0; i < columns.size(); i++) {
      sql.append(i == 0 ? "" : ", ").append(columns.get(i).quoted());
    }
    sql.append(')');
    if (overriding) {
      sql.append(" OVERRIDING SYSTEM VALUE");
    }
    sql.append(" VALUES (");
    for (int i = 0; i < columns.size(); i++) {
      sql.append(i == 0 ? "" : ", ").append(columns.get(i).param());
    }
    sql.append(')');
  }

  private static void appendAssignments(StringBuilder sql, List<Column> columns) {
    for (int i = 0; i < columns.size(); i++) {
      Column c = columns.get(i);
      sql.append(i == 0 ? "" : ", ").append(c.quoted()).append(" = ").append(c.param());
    }
  }

  private static void appendKeyPredicate(StringBuilder sql, List<Column> keys) {
    for (int i = 0; i < keys.size(); i++) {
      Column k = keys.get(i);
      sql.append(i == 0 ? "" : " AND ").append(k.quoted()).append(" = ").append(k.param());
    }
  }

  private static void appendNames(StringBuilder sql, List<String> names) {
    for (int i = 0; i < names.size(); i++) {
      sql.append(i == 0 ? "" : ", ").append(quote(names.get(i)));
    }
  }
}
