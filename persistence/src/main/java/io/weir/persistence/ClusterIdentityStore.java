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

  /**
   * @param partitions this node's configured partition count; stored when the cluster is created
   *     (or, for a cluster created before partition counts were recorded, by the first node to ask)
   * @throws PartitionCountMismatch when the cluster was created with another count
   */
  public static ClusterIdentity loadOrCreate(Connection connection, String schema, int partitions)
      throws SQLException {
    String table = Identifiers.require("schema name", schema) + ".cluster";
    byte[] key = new byte[KEY_BYTES];
    RANDOM.nextBytes(key);
    try (PreparedStatement insert =
        connection.prepareStatement(
            "INSERT INTO "
                + table
                + " (cluster_id, signing_kid, signing_key, partition_count) VALUES (?, ?, ?, ?) "
                + "ON CONFLICT DO NOTHING")) {
      insert.setObject(1, UUID.randomUUID());
      insert.setString(2, "k1");
      insert.setBytes(3, key);
      insert.setInt(4, partitions);
      insert.executeUpdate();
    }
    // The first signing key, for clusters whose identity was created after the token_keys
    // migration.
    try (PreparedStatement first =
        connection.prepareStatement(
            "INSERT INTO "
                + Identifiers.require("schema name", schema)
                + ".token_keys (kid, key, created_at)"
                + " SELECT signing_kid, signing_key, created_at FROM "
                + table
                + " ON CONFLICT DO NOTHING")) {
      first.executeUpdate();
    }
    try (PreparedStatement adopt =
        connection.prepareStatement(
            "UPDATE " + table + " SET partition_count = ? WHERE partition_count IS NULL")) {
      adopt.setInt(1, partitions);
      adopt.executeUpdate();
    }
    ClusterIdentity identity;
    try (PreparedStatement select =
            connection.prepareStatement(
                "SELECT cluster_id, signing_kid, signing_key, created_at, partition_count,"
                    + " restore_epoch FROM "
                    + table);
        ResultSet rs = select.executeQuery()) {
      if (!rs.next()) {
        throw new SQLException("cluster identity row missing after insert", "55000");
      }
      identity =
          new ClusterIdentity(
              rs.getObject(1, UUID.class),
              rs.getString(2),
              rs.getBytes(3),
              rs.getTimestamp(4).toInstant(),
              rs.getInt(5),
              rs.getInt(6));
    }
    if (identity.partitionCount() != partitions) {
      throw new PartitionCountMismatch(partitions, identity.partitionCount());
    }
    return identity;
  }

  /** The node's partition count differs from the one the cluster was created with. */
  public static final class PartitionCountMismatch extends RuntimeException {
    private final int configured;
    private final int cluster;

    PartitionCountMismatch(int configured, int cluster) {
      super(
          "weir.partitions.count is "
              + configured
              + " but this cluster was created with "
              + cluster
              + " partitions (recorded in PostgreSQL); the count cannot change: set weir.partitions.count = "
              + cluster);
      this.configured = configured;
      this.cluster = cluster;
    }

    public int configured() {
      return configured;
    }

    public int cluster() {
      return cluster;
    }
  }
}
