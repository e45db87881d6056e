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

  /** Pekko's own shard layout (the id's hash), as {@code partition_shards} records it. */
  public static final int LEGACY_SHARDS = 0;

  /**
   * {@link #loadOrCreate(Connection, String, int, int)} for a caller that runs its partitions in
   * Pekko's own shard layout ({@link #LEGACY_SHARDS}): tests and tools in one process.
   */
  public static ClusterIdentity loadOrCreate(Connection connection, String schema, int partitions)
      throws SQLException {
    return loadOrCreate(connection, schema, partitions, LEGACY_SHARDS);
  }

  /**
   * @param partitions this node's configured partition count; stored when the cluster is created
   *     (or, for a cluster created before partition counts were recorded, by the first node to ask)
   * @param shards this node's shard layout ({@code weir.partitions.shards}: S, or {@link
   *     #LEGACY_SHARDS}); stored when the cluster is created (a cluster created before layouts were
   *     recorded has {@link #LEGACY_SHARDS})
   * @throws PartitionCountMismatch when the cluster was created with another count
   * @throws PartitionShardsMismatch when the cluster was created with another shard layout
   */
  public static ClusterIdentity loadOrCreate(
      Connection connection, String schema, int partitions, int shards) throws SQLException {
    String table = Identifiers.require("schema name", schema) + ".cluster";
    byte[] key = new byte[KEY_BYTES];
    RANDOM.nextBytes(key);
    try (PreparedStatement insert =
        connection.prepareStatement(
            "INSERT INTO "
                + table
                + " (cluster_id, signing_kid, signing_key, partition_count, partition_shards)"
                + " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")) {
      insert.setObject(1, UUID.randomUUID());
      insert.setString(2, "k1");
      insert.setBytes(3, key);
      insert.setInt(4, partitions);
      insert.setInt(5, shards);
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
    int clusterShards;
    try (PreparedStatement select =
            connection.prepareStatement(
                "SELECT cluster_id, signing_kid, signing_key, created_at, partition_count,"
                    + " restore_epoch, partition_shards FROM "
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
      // NULL: a row an older release inserted after migration 19 ran; its nodes use Pekko's layout.
      clusterShards = rs.getInt(7);
    }
    if (identity.partitionCount() != partitions) {
      throw new PartitionCountMismatch(partitions, identity.partitionCount());
    }
    if (clusterShards != shards) {
      throw new PartitionShardsMismatch(shards, clusterShards);
    }
    return identity;
  }

  /** How {@code weir.partitions.shards} names a layout. */
  public static String describeShards(int shards) {
    return shards == LEGACY_SHARDS ? "legacy" : Integer.toString(shards);
  }

  /**
   * The node's shard layout differs from the one the cluster was created with: nodes of one cluster
   * that disagree on it would run a partition twice (ADR 0052).
   */
  public static final class PartitionShardsMismatch extends RuntimeException {
    PartitionShardsMismatch(int configured, int cluster) {
      super(
          "weir.partitions.shards is "
              + describeShards(configured)
              + " but this cluster was created with "
              + describeShards(cluster)
              + " (recorded in PostgreSQL); every node of a cluster must use the same layout: set"
              + " weir.partitions.shards = "
              + describeShards(cluster)
              + (cluster == LEGACY_SHARDS
                  ? " (the layout of clusters created before it was recorded)"
                  : ""));
    }
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
