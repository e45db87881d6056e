package io.weir.protocol.partition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class PartitioningTest {
  @Test
  void murmur3MatchesTheReferenceVectors() {
    // Published MurmurHash3_x86_32 values for seed 0.
    assertThat(Partitioning.murmur3(new byte[0])).isZero();
    assertThat(Partitioning.murmur3("hello".getBytes(StandardCharsets.UTF_8)))
        .isEqualTo(0x248bfa47);
    assertThat(
            Partitioning.murmur3(
                "The quick brown fox jumps over the lazy dog".getBytes(StandardCharsets.UTF_8)))
        .isEqualTo(0x2e4ff723);
  }

  @Test
  void partitionsAreStableAndSpread() {
    // Persisted format: these must never change from release to release.
    assertThat(Partitioning.partitionOf("public.orders", "42", 64))
        .isEqualTo(Partitioning.partitionOf("public.orders", "42", 64));
    int[] counts = new int[64];
    for (int i = 0; i < 64_000; i++) {
      counts[Partitioning.partitionOf("public.orders", Integer.toString(i), 64)]++;
    }
    for (int n : counts) {
      assertThat(n).as("roughly 1000 keys per partition").isBetween(800, 1200);
    }
    assertThat(Partitioning.partitionOf("a", "bc", 1024))
        .as("the collection/key boundary counts")
        .isNotEqualTo(Partitioning.partitionOf("ab", "c", 1024));
    assertThat(Partitioning.partitionOf("x", "y", 1)).isZero();
    assertThatThrownBy(() -> Partitioning.partitionOf("x", "y", 0))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void compositeKeysHaveOneCanonicalText() {
    assertThat(Partitioning.canonicalKey(List.of("42"))).isEqualTo("42");
    assertThat(Partitioning.canonicalKey(List.of("a", "b"))).isEqualTo("[\"a\",\"b\"]");
    assertThat(Partitioning.canonicalKey(List.of("a,\"b", "c\\d\n")))
        .isEqualTo("[\"a,\\\"b\",\"c\\\\d\\u000a\"]");
    assertThat(Partitioning.canonicalKey(List.of("a", "b,c")))
        .isNotEqualTo(Partitioning.canonicalKey(List.of("a,b", "c")));
    assertThatThrownBy(() -> Partitioning.canonicalKey(java.util.Arrays.asList("a", null)))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
