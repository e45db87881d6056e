package io.weir.persistence.cdc.mirror;

import io.weir.persistence.cdc.mirror.MirrorSql.Equality;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A target table as its catalog describes it: its columns (type, identity, generated, equality) and
 * the key the mirror finds its rows by, chosen as PostgreSQL's apply worker chooses it: the replica
 * identity index when the table has {@code REPLICA IDENTITY USING INDEX}, else the primary key,
 * else none (rows are then found by their whole old image, which needs the source's {@code REPLICA
 * IDENTITY FULL}).
 *
 * @param key the key columns in index order; empty when the table has neither
 * @param keyKind {@code "primary key"} or {@code "replica identity index"}, for messages; null
 *     without a key
 */
record TargetTable(Map<String, TargetColumn> columns, List<String> key, String keyKind) {

  /**
   * @param type the cast SQL of the column's type ({@link MirrorSql#typeName}); a domain keeps its
   *     name, so its constraints apply
   * @param identityAlways a GENERATED ALWAYS identity column: written with OVERRIDING SYSTEM VALUE,
   *     never by UPDATE
   * @param generated a generated (stored) column: the target computes it, nothing may write it
   */
  record TargetColumn(
      String name,
      String type,
      boolean identityAlways,
      boolean generated,
      Equality equality,
      boolean composite) {
    MirrorSql.Column column() {
      return new MirrorSql.Column(name, type, equality, composite);
    }
  }

  TargetTable {
    columns = Collections.unmodifiableMap(new LinkedHashMap<>(columns));
    key = List.copyOf(key);
  }

  private static final String TABLE_SQL =
      "SELECT c.oid, c.relkind, c.relreplident FROM pg_catalog.pg_class c"
          + " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
          + " WHERE n.nspname = ? AND c.relname = ?";

  /**
   * Per column: name, the type's schema and name (a domain's own), identity and generated flags,
   * whether the (base) type is composite, and how it compares: the default B-tree or hash operator
   * class of the base type, or of the polymorphic type its kind matches (arrays, enums, ranges,
   * multiranges, composites), directly or through a binary-coercible cast, as PostgreSQL's type
   * cache looks the equality up; json and xml compare as their stored text.
   */
  private static final String COLUMNS_SQL =
      "SELECT a.attname, tn.nspname, t.typname, a.attidentity = 'a', a.attgenerated <> '',"
          + " b.typtype = 'c',"
          + " CASE WHEN b.oid IN ('pg_catalog.json'::pg_catalog.regtype,"
          + "                     'pg_catalog.xml'::pg_catalog.regtype) THEN 'text'"
          + "  WHEN b.typtype <> 'd' AND EXISTS (SELECT 1 FROM pg_catalog.pg_opclass oc"
          + "   JOIN pg_catalog.pg_am am ON am.oid = oc.opcmethod"
          + "   WHERE oc.opcdefault AND am.amname IN ('btree', 'hash')"
          + "   AND (oc.opcintype = p.poly OR EXISTS (SELECT 1 FROM pg_catalog.pg_cast k"
          + "     WHERE k.castsource = p.poly AND k.casttarget = oc.opcintype"
          + "     AND k.castmethod = 'b'))) THEN 'operator'"
          + "  ELSE 'none' END"
          + " FROM pg_catalog.pg_attribute a"
          + " JOIN pg_catalog.pg_type t ON t.oid = a.atttypid"
          + " JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace"
          + " JOIN pg_catalog.pg_type b"
          + "   ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END"
          + " CROSS JOIN LATERAL (SELECT CASE"
          + "   WHEN b.typcategory = 'A' THEN 'pg_catalog.anyarray'::pg_catalog.regtype::pg_catalog.oid"
          + "   WHEN b.typtype = 'e' THEN 'pg_catalog.anyenum'::pg_catalog.regtype::pg_catalog.oid"
          + "   WHEN b.typtype = 'r' THEN 'pg_catalog.anyrange'::pg_catalog.regtype::pg_catalog.oid"
          + "   WHEN b.typtype = 'm'"
          + "     THEN 'pg_catalog.anymultirange'::pg_catalog.regtype::pg_catalog.oid"
          + "   WHEN b.typtype = 'c' THEN 'pg_catalog.record'::pg_catalog.regtype::pg_catalog.oid"
          + "   ELSE b.oid END AS poly) p"
          + " WHERE a.attrelid = ? AND a.attnum > 0 AND NOT a.attisdropped"
          + " ORDER BY a.attnum";

  /** The primary key and the replica identity index, with their columns in index order. */
  private static final String KEYS_SQL =
      "SELECT i.indisprimary, i.indisreplident,"
          + " (SELECT pg_catalog.array_agg(a.attname ORDER BY k.ord)"
          + "  FROM pg_catalog.unnest(i.indkey::pg_catalog.int2[]) WITH ORDINALITY k(attnum, ord)"
          + "  JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum)"
          + " FROM pg_catalog.pg_index i"
          + " WHERE i.indrelid = ? AND (i.indisprimary OR i.indisreplident)";

  /**
   * Reads the table; empty when it does not exist.
   *
   * @throws io.weir.persistence.cdc.sink.SinkException (permanent) when it is not a table
   */
  static Optional<TargetTable> read(Connection c, String schema, String table, String what)
      throws SQLException {
    long oid;
    char replident;
    try (PreparedStatement ps = c.prepareStatement(TABLE_SQL)) {
      ps.setString(1, schema);
      ps.setString(2, table);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          return Optional.empty();
        }
        oid = rs.getLong(1);
        String kind = rs.getString(2);
        if (!"r".equals(kind) && !"p".equals(kind)) {
          throw MirrorFailures.refused(
              what,
              MirrorFailures.NOT_A_TABLE,
              "the target is not a table (a view, foreign table or other relation)");
        }
        String ri = rs.getString(3);
        replident = ri == null || ri.isEmpty() ? 'd' : ri.charAt(0);
      }
    }
    Map<String, TargetColumn> columns = new LinkedHashMap<>();
    try (PreparedStatement ps = c.prepareStatement(COLUMNS_SQL)) {
      ps.setLong(1, oid);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          String name = rs.getString(1);
          columns.put(
              name,
              new TargetColumn(
                  name,
                  MirrorSql.typeName(rs.getString(2), rs.getString(3)),
                  rs.getBoolean(4),
                  rs.getBoolean(5),
                  switch (rs.getString(7)) {
                    case "operator" -> Equality.OPERATOR;
                    case "text" -> Equality.TEXT;
                    default -> Equality.NONE;
                  },
                  rs.getBoolean(6)));
        }
      }
    }
    List<String> primary = List.of();
    List<String> identity = List.of();
    try (PreparedStatement ps = c.prepareStatement(KEYS_SQL)) {
      ps.setLong(1, oid);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          List<String> names = names(rs.getArray(3));
          if (rs.getBoolean(1)) {
            primary = names;
          }
          if (rs.getBoolean(2)) {
            identity = names;
          }
        }
      }
    }
    if (replident == 'i' && !identity.isEmpty()) {
      return Optional.of(new TargetTable(columns, identity, "replica identity index"));
    }
    if (!primary.isEmpty()) {
      return Optional.of(new TargetTable(columns, primary, "primary key"));
    }
    return Optional.of(new TargetTable(columns, List.of(), null));
  }

  private static List<String> names(Array array) throws SQLException {
    if (array == null) {
      return List.of();
    }
    Object[] values = (Object[]) array.getArray();
    List<String> names = new ArrayList<>(values.length);
    for (Object v : values) {
      names.add((String) v);
    }
    return names;
  }
}
