package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.sharding.partition.PartitionProtocol.Command;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.apache.pekko.cluster.sharding.typed.HashCodeMessageExtractor;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.sharding.typed.ShardingMessageExtractor;
import org.junit.jupiter.api.Test;

class PartitionShardsTest {
  @Test
  void partitionNIsInShardNModS() {
    ShardingMessageExtractor<ShardingEnvelope<Command>, Command> e =
        new PartitionShards(16).extractor(1000);
    Map<String, Integer> perShard = new HashMap<>();
    for (int n = 0; n < 64; n++) {
      String shard = e.shardId(Integer.toString(n));
      assertThat(shard).isEqualTo(Integer.toString(n % 16));
      perShard.merge(shard, 1, Integer::sum);
    }
    assertThat(perShard).hasSize(16).allSatisfy((shard, count) -> assertThat(count).isEqualTo(4));
  }

  @Test
  void theLegacyLayoutIsPekkosDefaultOneShardPerPartition() {
    ShardingMessageExtractor<ShardingEnvelope<Command>, Command> legacy =
        PartitionShards.LEGACY_LAYOUT.extractor(1000);
    HashCodeMessageExtractor<Command> pekko = new HashCodeMessageExtractor<>(1000);
    Set<String> shards = new HashSet<>();
    for (int n = 0; n < 64; n++) {
      String id = Integer.toString(n);
      assertThat(legacy.shardId(id)).isEqualTo(pekko.shardId(id));
      shards.add(legacy.shardId(id));
    }
    assertThat(shards).as("64 partitions, 64 shards").hasSize(64);
  }

  @Test
  void autoIsAtMostSixteenShardsAndNeverMoreThanThePartitions() {
    assertThat(PartitionShards.auto(64).shards()).isEqualTo(16);
    assertThat(PartitionShards.auto(512).shards()).isEqualTo(16);
    assertThat(PartitionShards.auto(4).shards()).isEqualTo(4);
    assertThat(PartitionShards.LEGACY_LAYOUT.describe()).isEqualTo("legacy");
    assertThat(new PartitionShards(8).describe()).isEqualTo("8");
    assertThatThrownBy(() -> new PartitionShards(-1)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theEnvelopeCarriesTheEntityAndItsMessage() {
    ShardingMessageExtractor<ShardingEnvelope<Command>, Command> e =
        new PartitionShards(4).extractor(1000);
    Command message = new StatusProtocol.GetStatus(null);
    ShardingEnvelope<Command> envelope = new ShardingEnvelope<>("7", message);
    assertThat(e.entityId(envelope)).isEqualTo("7");
    assertThat(e.unwrapMessage(envelope)).isSameAs(message);
    assertThat(e.shardId("7")).isEqualTo("3");
    assertThat(e.shardId("not-a-number")).matches("[0-3]");
  }
}
