package io.weir.sharding.partition;

import io.weir.persistence.ClusterIdentityStore;
import io.weir.sharding.partition.PartitionProtocol.Command;
import org.apache.pekko.cluster.sharding.typed.HashCodeMessageExtractor;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.sharding.typed.ShardingMessageExtractor;

/**
 * Which Cluster Sharding shard each partition belongs to (ADR 0052). A shard is the unit the shard
 * coordinator places on a node and moves: after a node is lost it allocates that node's shards
 * again one at a time, each with a majority write of its state, so fewer shards than partitions
 * bring the lost node's partitions back sooner.
 *
 * <ul>
 *   <li>{@code shards} S at least 1: partition n is in shard {@code n mod S};
 *   <li>{@link #LEGACY} (0): Pekko's default, the entity id's hash modulo {@code
 *       pekko.cluster.sharding.number-of-shards} (1000: one shard per partition up to about 100
 *       partitions, 206 shards for 256). Clusters created before the layout was recorded keep it.
 * </ul>
 *
 * <p>Every node of a cluster must use the same layout: two layouts would put one partition in two
 * shards, and so run it twice. The cluster records its layout in PostgreSQL when it is created and
 * refuses a node configured with another one ({@code weir.partitions.shards}).
 *
 * @param shards S, or {@link #LEGACY}
 */
public record PartitionShards(int shards) {
  /** One shard per partition, by Pekko's hash of the entity id. */
  public static final int LEGACY = ClusterIdentityStore.LEGACY_SHARDS;

  /** The default S for {@code auto}: at most this many shards. */
  public static final int AUTO_MAX = 16;

  /** Pekko's own layout (clusters created before layouts were recorded). */
  public static final PartitionShards LEGACY_LAYOUT = new PartitionShards(LEGACY);

  public PartitionShards {
    if (shards < 0) {
      throw new IllegalArgumentException("shards must be 0 (legacy) or positive");
    }
  }

  /** {@code auto}: min({@value #AUTO_MAX}, partitions) shards. */
  public static PartitionShards auto(int partitions) {
    return new PartitionShards(Math.min(AUTO_MAX, partitions));
  }

  public boolean legacy() {
    return shards == LEGACY;
  }

  /** How {@code weir.partitions.shards} says it: a number, or {@code legacy}. */
  public String describe() {
    return ClusterIdentityStore.describeShards(shards);
  }

  /**
   * The extractor for the partitions' entity type.
   *
   * @param legacyShards {@code pekko.cluster.sharding.number-of-shards}, for the legacy layout
   */
  ShardingMessageExtractor<ShardingEnvelope<Command>, Command> extractor(int legacyShards) {
    if (legacy()) {
      return new HashCodeMessageExtractor<>(legacyShards);
    }
    int s = shards;
    return new ShardingMessageExtractor<>() {
      @Override
      public String entityId(ShardingEnvelope<Command> envelope) {
        return envelope.entityId();
      }

      @Override
      public String shardId(String entityId) {
        return Integer.toString(shardOf(entityId, s));
      }

      @Override
      public Command unwrapMessage(ShardingEnvelope<Command> envelope) {
        return envelope.message();
      }
    };
  }

  /**
   * The shard of entity id {@code entityId} (a partition number) among {@code shards}. An id that
   * is not a number (never sent by Weir) goes by its hash, so it still has a shard.
   */
  static int shardOf(String entityId, int shards) {
    try {
      return Math.floorMod(Integer.parseInt(entityId), shards);
    } catch (NumberFormatException e) {
      return Math.floorMod(entityId.hashCode(), shards);
    }
  }
}
