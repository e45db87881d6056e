package io.weir.persistence.cdc.source;

import io.weir.persistence.Identifiers;
import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A table as a publication streams it, read from the catalog: the shape a pgoutput Relation message
 * would announce (published, non-generated columns in attribute order, replica identity flags as
 * pgoutput sets them), the publications' row filter, the planner's row estimate and the primary key
 * used to read it in key order.
 *
 * @param rowFilter SQL expression from the catalog restricting published rows, null for all rows
 *     (several publications: rows any of them publishes)
 * @param estimatedRows {@code pg_class.reltuples}, 0 when never analyzed
 * @param primaryKey indexes into {@code schema.columns()} of the primary key (or, without one, of
 *     the replica identity index), in key order; empty when the table has neither
 * @param partitioned a partitioned table published through its root: its rows live in the
 *     partitions, so reads must not say {@code ONLY}
 * @param findsRows whether any of the publications sends updates or deletes of it, which must find
 *     the row they are about (an insert-only table needs no identity)
 */
public record PublishedTable(
    TableSchema schema,
    String rowFilter,
    long estimatedRows,
    List<Integer> primaryKey,
    boolean partitioned,
    boolean findsRows) {

  public PublishedTable {
    primaryKey = List.copyOf(primaryKey);
  }

  /** The FROM clause target: {@code ONLY "schema"."table"}, without ONLY for a partitioned root. */
  public String fromClause() {
    return (partitioned ? "" : "ONLY ") + quotedName();
  }

  /** Quoted {@code "schema"."table"}. */
  public String quotedName() {
    return quote(schema.schema()) + "." + quote(schema.table());
  }

  /** Quoted column list in column order. */
  public String quotedColumns() {
    List<String> names = new ArrayList<>();
    for (TableSchema.Column c : schema.columns()) {
      names.add(quote(c.name()));
    }
    return String.join(", ", names);
  }

  public static String quote(String identifier) {
    return Identifiers.quote(identifier);
  }

  private static final String TABLES_SQL =
      "SELECT c.oid, n.nspname, c.relname, c.relreplident, greatest(c.reltuples, 0)::bigint, "
          + "bool_or(pt.rowfilter IS NULL), "
          + "string_agg('(' || pt.rowfilter || ')', ' OR '), "
          + "array_agg(DISTINCT a.name) FILTER (WHERE a.name IS NOT NULL), c.relkind = 'p', "
          + "bool_or(p.pubupdate OR p.pubdelete) "
          + "FROM pg_catalog.pg_publication_tables pt "
          + "JOIN pg_catalog.pg_publication p ON p.pubname = pt.pubname "
          + "JOIN pg_catalog.pg_namespace n ON n.nspname = pt.schemaname "
          + "JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename "
          + "LEFT JOIN LATERAL unnest(pt.attnames) AS a(name) ON true "
          + "WHERE pt.pubname = ANY(?) "
          + "GROUP BY c.oid, n.nspname, c.relname, c.relreplident, c.reltuples, c.relkind "
          + "ORDER BY n.nspname, c.relname";

  private static final String COLUMNS_SQL =
      "SELECT a.attnum, a.attname, a.atttypid, a.atttypmod "
          + "FROM pg_catalog.pg_attribute a "
          + "WHERE a.attrelid = ? AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' "
          + "AND a.attname = ANY(?) ORDER BY a.attnum";

  private static final String INDEX_SQL =
      "SELECT i.indisprimary, i.indisreplident, i.indkey::int2[] FROM pg_catalog.pg_index i "
          + "WHERE i.indrelid = ? AND (i.indisprimary OR i.indisreplident)";

  /**
   * The tables the publications stream, as seen by the connection's current snapshot (call it
   * inside the snapshot's transaction).
   */
  public static List<PublishedTable> list(Connection c, List<String> publications)
      throws SQLException {
    record Row(
        long oid,
        String schema,
        String table,
        char identity,
        long estimate,
        boolean unfiltered,
        String filter,
        List<String> columns,
        boolean partitioned,
        boolean findsRows) {}
    List<Row> rows = new ArrayList<>();
    try (PreparedStatement ps = c.prepareStatement(TABLES_SQL)) {
      ps.setArray(1, c.createArrayOf("text", publications.toArray()));
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          Array cols = rs.getArray(8);
          List<String> columns = cols == null ? List.of() : List.of((String[]) cols.getArray());
          rows.add(
              new Row(
                  rs.getLong(1),
                  rs.getString(2),
                  rs.getString(3),
                  rs.getString(4).charAt(0),
                  rs.getLong(5),
                  rs.getBoolean(6),
                  rs.getString(7),
                  columns,
                  rs.getBoolean(9),
                  rs.getBoolean(10)));
        }
      }
    }
    List<PublishedTable> out = new ArrayList<>();
    for (Row r : rows) {
      Map<Short, Integer> indexOfAttnum = new LinkedHashMap<>();
      List<short[]> primary = new ArrayList<>();
      List<short[]> replident = new ArrayList<>();
      try (PreparedStatement ps = c.prepareStatement(INDEX_SQL)) {
        ps.setLong(1, r.oid());
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            Short[] keys = (Short[]) rs.getArray(3).getArray();
            short[] k = new short[keys.length];
            for (int i = 0; i < keys.length; i++) {
              k[i] = keys[i];
            }
            if (rs.getBoolean(1)) {
              primary.add(k);
            }
            if (rs.getBoolean(2)) {
              replident.add(k);
            }
          }
        }
      }
      ReplicaIdentity identity =
          ReplicaIdentity.forWireByte(r.identity())
              .orElseThrow(
                  () ->
                      new PipelineHaltException(
                          HaltReason.SCHEMA_INCOMPATIBLE,
                          "table "
                              + r.schema()
                              + "."
                              + r.table()
                              + " has an unknown replica identity"));
      short[] identityKey =
          switch (identity) {
            case DEFAULT -> primary.isEmpty() ? new short[0] : primary.get(0);
            case INDEX -> replident.isEmpty() ? new short[0] : replident.get(0);
            default -> new short[0];
          };
      List<TableSchema.Column> columns = new ArrayList<>();
      try (PreparedStatement ps = c.prepareStatement(COLUMNS_SQL)) {
        ps.setLong(1, r.oid());
        ps.setArray(2, c.createArrayOf("text", r.columns().toArray()));
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            short attnum = rs.getShort(1);
            boolean key = identity == ReplicaIdentity.FULL || contains(identityKey, attnum);
            indexOfAttnum.put(attnum, columns.size());
            columns.add(new TableSchema.Column(rs.getString(2), rs.getLong(3), rs.getInt(4), key));
          }
        }
      }
      short[] order =
          !primary.isEmpty()
              ? primary.get(0)
              : (!replident.isEmpty() ? replident.get(0) : new short[0]);
      List<Integer> pk = new ArrayList<>();
      for (short attnum : order) {
        Integer at = indexOfAttnum.get(attnum);
        if (at == null) {
          pk.clear(); // a key column is not published: the key cannot order the reads
          break;
        }
        pk.add(at);
      }
      TableSchema schema = new TableSchema(r.oid(), r.schema(), r.table(), identity, columns);
      out.add(
          new PublishedTable(
              schema,
              r.unfiltered() ? null : r.filter(),
              r.estimate(),
              pk,
              r.partitioned(),
              r.findsRows()));
    }
    return out;
  }

  private static boolean contains(short[] keys, short attnum) {
    for (short k : keys) {
      if (k == attnum) {
        return true;
      }
    }
    return false;
  }
}
