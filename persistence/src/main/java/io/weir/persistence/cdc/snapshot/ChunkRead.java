package io.weir.persistence.cdc.snapshot;

import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.persistence.cdc.PipelineSettings;
import io.weir.persistence.cdc.source.PublishedTable;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.TupleData;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

/**
 * One chunk of an incremental snapshot ({@link IncrementalSnapshot}): the next rows of a published
 * table in primary-key order after the last key handled, read at a repeatable-read snapshot whose
 * xid set is returned with them (the chunk counts only if every transaction delivered since the low
 * watermark is visible in it). A keyed chunk ends at {@code snapshot.batch-rows} rows or {@link
 * #MAX_CHUNK_CHARS}; a table without a key is read whole, up to {@code snapshot.max-unkeyed-rows},
 * beyond which the pipeline halts ({@code snapshot-failed}).
 */
final class ChunkRead {
  /** A keyed chunk ends early at this many characters of values, whatever its row count. */
  static final long MAX_CHUNK_CHARS = 8L << 20;

  private ChunkRead() {}

  /** The rows read, their keys (row numbers for a table without a key) and the snapshot. */
  record Read(
      List<Object> keys, List<TupleData> rows, XidHistory.PgSnapshot snapshot, boolean complete) {
    /** Value-free: keys and rows are data. */
    @Override
    public String toString() {
      return "Read[rows=" + rows.size() + ", complete=" + complete + "]";
    }
  }

  /**
   * Reads the chunk of {@code t} after the primary key {@code after} (null: from the start): the
   * key columns' types with autocommit on, then one repeatable-read, read-only transaction,
   * committed here. On failure the caller rolls back and restores autocommit.
   */
  static Read read(Connection conn, PublishedTable t, List<String> after, PipelineSettings settings)
      throws SQLException {
    boolean keyed = !t.primaryKey().isEmpty();
    int limit = keyed ? settings.snapshotBatchRows() : settings.incrementalMaxUnkeyedRows() + 1;
    StringBuilder sql =
        new StringBuilder("SELECT ")
            .append(t.quotedColumns())
            .append(" FROM ")
            .append(t.fromClause());
    List<String> where = new ArrayList<>();
    if (t.rowFilter() != null) {
      where.add("(" + t.rowFilter() + ")");
    }
    List<String> keyNames = new ArrayList<>();
    List<String> keyTypes = new ArrayList<>();
    if (keyed) {
      for (int column : t.primaryKey()) {
        TableSchema.Column col = t.schema().columns().get(column);
        keyNames.add(PublishedTable.quote(col.name()));
        keyTypes.add(typeName(conn, col));
      }
      if (after != null) {
        List<String> params = new ArrayList<>();
        for (String type : keyTypes) {
          params.add("?::" + type);
        }
        where.add("(" + String.join(", ", keyNames) + ") > (" + String.join(", ", params) + ")");
      }
    }
    if (!where.isEmpty()) {
      sql.append(" WHERE ").append(String.join(" AND ", where));
    }
    if (keyed) {
      sql.append(" ORDER BY ").append(String.join(", ", keyNames));
    }
    sql.append(" LIMIT ").append(limit);
    // The key types were read above with autocommit on: SET TRANSACTION must be the transaction's
    // first statement.
    conn.setAutoCommit(false);
    XidHistory.PgSnapshot snapshot;
    try (Statement s = conn.createStatement()) {
      s.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
      try (ResultSet rs = s.executeQuery("SELECT pg_current_snapshot()::text")) {
        rs.next();
        snapshot = XidHistory.PgSnapshot.parse(rs.getString(1));
      }
    }
    try (PreparedStatement ps =
        conn.prepareStatement(
            "SELECT 1 FROM pg_catalog.pg_publication_tables WHERE pubname = ANY(?) AND schemaname = ? AND tablename = ?")) {
      ps.setArray(1, conn.createArrayOf("text", settings.publications().toArray()));
      ps.setString(2, t.schema().schema());
      ps.setString(3, t.schema().table());
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          throw new PipelineHaltException(
              HaltReason.SNAPSHOT_FAILED,
              "table "
                  + t.schema().qualifiedName()
                  + " is no longer in the pipeline's publications");
        }
      }
    }
    List<Object> keys = new ArrayList<>();
    List<TupleData> rows = new ArrayList<>();
    int columns = t.schema().columns().size();
    long bytes = 0;
    boolean cut = false;
    try (PreparedStatement ps = conn.prepareStatement(sql.toString())) {
      ps.setFetchSize(500); // a cursor: the byte bound below also bounds what the driver holds
      if (keyed && after != null) {
        for (int i = 0; i < after.size(); i++) {
          ps.setString(i + 1, after.get(i));
        }
      }
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          String[] values = new String[columns];
          for (int i = 0; i < columns; i++) {
            values[i] = rs.getString(i + 1);
            bytes += values[i] == null ? 0 : values[i].length();
          }
          TupleData row = TupleData.ofText(values);
          rows.add(row);
          keys.add(keyed ? IncrementalSnapshot.keyOf(t.primaryKey(), row) : rows.size());
          if (keyed && bytes >= MAX_CHUNK_CHARS) {
            // A chunk of wide rows ends early; the next one continues after its last key.
            cut = true;
            break;
          }
        }
      }
    }
    conn.commit();
    if (!keyed && rows.size() >= limit) {
      throw new PipelineHaltException(
          HaltReason.SNAPSHOT_FAILED,
          "table "
              + t.schema().qualifiedName()
              + " has no primary key and more than "
              + settings.incrementalMaxUnkeyedRows()
              + " rows (snapshot.max-unkeyed-rows)");
    }
    return new Read(keys, rows, snapshot, !keyed || (!cut && rows.size() < limit));
  }

  private static String typeName(Connection c, TableSchema.Column col) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement("SELECT format_type(?, ?)")) {
      ps.setLong(1, col.typeOid());
      ps.setInt(2, col.typeModifier());
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getString(1);
      }
    }
  }
}
