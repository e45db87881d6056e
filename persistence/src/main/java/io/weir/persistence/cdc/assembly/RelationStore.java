package io.weir.persistence.cdc.assembly;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.Identifiers;
import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.TableSchema;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;

/**
 * The table shapes a pipeline has accepted ({@code <schema>.cdc_relation}), read at connect and
 * written after the transaction that carried a new shape was durably applied. Blocking.
 */
public final class RelationStore {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final DataSource dataSource;
  private final String table;

  public RelationStore(DataSource dataSource, String schema) {
    this.dataSource = dataSource;
    this.table = Identifiers.require("schema name", schema) + ".cdc_relation";
  }

  public Map<Long, TableSchema> load(String pipeline) throws SQLException {
    Map<Long, TableSchema> out = new HashMap<>();
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT relation_id, definition FROM " + table + " WHERE pipeline = ?")) {
      ps.setString(1, pipeline);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          try {
            out.put(rs.getLong(1), JSON.readValue(rs.getString(2), TableSchema.class));
          } catch (JsonProcessingException e) {
            throw new PipelineHaltException(
                HaltReason.SCHEMA_INCOMPATIBLE, "a recorded table shape cannot be read back");
          }
        }
      }
    }
    return out;
  }

  /**
   * Records shapes accepted in the transaction committed at {@code acceptedAt}; an older write
   * never wins.
   */
  public void save(String pipeline, List<TableSchema> schemas, Lsn acceptedAt) throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "INSERT INTO "
                    + table
                    + " (pipeline, relation_id, qualified, accepted_lsn, definition) "
                    + "VALUES (?, ?, ?, ?::pg_lsn, ?) ON CONFLICT (pipeline, relation_id) DO UPDATE SET "
                    + "qualified = excluded.qualified, accepted_lsn = excluded.accepted_lsn, definition = excluded.definition "
                    + "WHERE "
                    + table
                    + ".accepted_lsn < excluded.accepted_lsn")) {
      for (TableSchema s : schemas) {
        ps.setString(1, pipeline);
        ps.setLong(2, s.relationId());
        ps.setString(3, s.qualifiedName());
        ps.setString(4, acceptedAt.toString());
        ps.setString(5, JSON.writeValueAsString(s));
        ps.addBatch();
      }
      ps.executeBatch();
    } catch (JsonProcessingException e) {
      throw new SQLException("cannot encode a table shape", "22000");
    }
  }
}
