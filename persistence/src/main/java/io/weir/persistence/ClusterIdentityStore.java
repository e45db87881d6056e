package io.weir.persistence;

import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.UUID;

/**
 * Reads the cluster identity, creating it on first use. Nodes that start together race on the
 * insert; {@code ON CONFLICT DO NOTHING} lets one win and every node then reads the winner's row.
 */
public final class ClusterIdentityStore {
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final int KEY_BYTES = 32;

  private ClusterIdentityStore() {}

  public static ClusterIdentity loadOrCreate(Connection connection, String schema) throws SQLException {
    String table = Identifiers.require("schema name", schema) + ".cluster";
    byte[] key = new byte[KEY_BYTES];
    RANDOM.nextBytes(key);
    try (PreparedStatement insert =
        connection.prepareStatement(
            "INSERT INTO " + table + " (cluster_id, signing_kid, signing_key) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")) {
      insert.setObject(1, UUID.randomUUID());
      insert.setString(2, "k1");
      insert.setBytes(3, key);
      insert.executeUpdate();
    }
    try (PreparedStatement select =
            connection.prepareStatement("SELECT cluster_id, signing_kid, signing_key, created_at FROM " + table);
        ResultSet rs = select.executeQuery()) {
      if (!rs.next()) {
        throw new SQLException("cluster identity row missing after insert", "55000");
      }
      return new ClusterIdentity(
          rs.getObject(1, UUID.class), rs.getString(2), rs.getBytes(3), rs.getTimestamp(4).toInstant());
    }
  }
}
