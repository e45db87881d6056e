package io.weir.sharding.partition;

import io.weir.persistence.serialization.SerializationContract;
import java.util.List;

/**
 * The serialization contract of the sharding module: the partition's protocol (commands, replies),
 * its journal events and its snapshot state ({@link Partition.State}).
 */
class PartitionSerializationTest extends SerializationContract {
  @Override
  protected Class<?> anchor() {
    return PartitionProtocol.class;
  }

  @Override
  protected String module() {
    return "sharding";
  }

  @Override
  protected List<Class<?>> knownBound() {
    return List.of(
        PartitionProtocol.ApplyFrame.class,
        PartitionProtocol.Upsert.class,
        Partition.Written.class,
        Partition.Purged.class,
        Partition.State.class,
        Partition.SnapshotMark.class,
        PartitionEntity.BatchWritten.class);
  }
}
