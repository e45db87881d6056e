package io.weir.sharding.partition;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.sharding.partition.ReadProtocol.Document;
import org.junit.jupiter.api.Test;

/**
 * A cached version is served only at the journal sequence it was cached at (ADR 0032, amended): a
 * partition no longer removes it when it persists a newer change, so this check alone keeps an
 * older body from being served.
 */
class BodyCacheTest {
  @Test
  void aVersionIsServedOnlyAtTheSequenceItWasCachedAt() {
    BodyCache cache = new BodyCache(1 << 20);
    Document v1 = new Document("orders", "1", 1, "{\"v\":1}", false);
    cache.put(Partition.key("orders", "1"), 5, v1);
    assertThat(cache.get(Partition.key("orders", "1"), 5)).isEqualTo(v1);
    assertThat(cache.get(Partition.key("orders", "1"), 6))
        .as("the index names a later change")
        .isNull();
    Document v2 = new Document("orders", "1", 2, "{\"v\":2}", false);
    cache.put(Partition.key("orders", "1"), 6, v2);
    assertThat(cache.get(Partition.key("orders", "1"), 5)).isNull();
    assertThat(cache.get(Partition.key("orders", "1"), 6)).isEqualTo(v2);
  }
}
