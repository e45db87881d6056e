package io.weir.node.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The partitions' meters: per-node aggregates always, per-partition series only below the limit.
 */
class PartitionMetricsTest {
  @Test
  void aggregatesAndPerPartitionSeriesFollowTheHostedPartitions() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    PartitionMetrics metrics = new PartitionMetrics(registry, 64, 256);
    assertThat(metrics.perPartition()).isTrue();
    metrics.recovered(3, TimeUnit.MILLISECONDS.toNanos(1500));
    metrics.outbox(3, 10, 1000, 0.1);
    metrics.outbox(5, 30, 500, 0.3);
    metrics.persisted(3, 4);
    metrics.persisted(5, 1);
    metrics.quotaRefused(5, 2);
    assertThat(registry.get("weir.partitions.hosted").gauge().value()).isEqualTo(2);
    assertThat(registry.get("weir.partitions.outbox.entries").gauge().value()).isEqualTo(40);
    assertThat(registry.get("weir.partitions.outbox.bytes").gauge().value()).isEqualTo(1500);
    assertThat(registry.get("weir.partitions.quota.use.max").gauge().value()).isEqualTo(0.3);
    assertThat(registry.get("weir.partition.frames").counter().count()).isEqualTo(5);
    assertThat(registry.get("weir.partition.writes").counter().count())
        .as("one write per persisted batch")
        .isEqualTo(2);
    assertThat(registry.get("weir.partition.quota.refusals").counter().count()).isEqualTo(2);
    assertThat(registry.get("weir.partition.recovery").timer().count()).isEqualTo(1);
    assertThat(registry.get("weir.partition.recovery").timer().totalTime(TimeUnit.MILLISECONDS))
        .isEqualTo(1500);
    assertThat(registry.get("weir.partition.outbox.entries").tag("partition", "5").gauge().value())
        .isEqualTo(30);
    assertThat(registry.get("weir.partition.quota.use").tag("partition", "3").gauge().value())
        .isEqualTo(0.1);

    metrics.outbox(5, 31, 510, 0.31);
    assertThat(registry.find("weir.partition.outbox.entries").tag("partition", "5").gauges())
        .as("a partition's series is registered once")
        .hasSize(1);
    assertThat(registry.get("weir.partition.outbox.entries").tag("partition", "5").gauge().value())
        .isEqualTo(31);

    metrics.stopped(5);
    assertThat(registry.find("weir.partition.outbox.entries").tag("partition", "5").gauges())
        .as("a partition that left this node is not reported here")
        .isEmpty();
    assertThat(registry.get("weir.partitions.hosted").gauge().value()).isEqualTo(1);
    assertThat(registry.get("weir.partitions.outbox.entries").gauge().value()).isEqualTo(10);
    metrics.outbox(5, 0, 0, 0);
    assertThat(registry.find("weir.partition.outbox.entries").tag("partition", "5").gauges())
        .as("it is reported again once it runs here again")
        .hasSize(1);
  }

  @Test
  void documentsTablesReportTheirLagAndHaltedOnes() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    PartitionMetrics metrics = new PartitionMetrics(registry, 64, 256);
    metrics.table(1, 12, 3_000, false);
    metrics.table(2, 1001, 70_000_000, true);
    metrics.table(3, 0, 0, true);
    assertThat(registry.get("weir.partitions.table.lag").gauge().value()).isEqualTo(1013);
    assertThat(registry.get("weir.partitions.table.lag.bytes").gauge().value())
        .isEqualTo(70_003_000);
    assertThat(registry.get("weir.partitions.table.halted").gauge().value()).isEqualTo(2);
    metrics.table(2, 0, 0, false);
    metrics.stopped(3);
    assertThat(registry.get("weir.partitions.table.lag").gauge().value()).isEqualTo(12);
    assertThat(registry.get("weir.partitions.table.lag.bytes").gauge().value()).isEqualTo(3_000);
    assertThat(registry.get("weir.partitions.table.halted").gauge().value())
        .as("a caught-up table and a partition that left are not halted here")
        .isZero();
  }

  @Test
  void abovethePerPartitionLimitOnlyAggregatesAreExported() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    PartitionMetrics metrics = new PartitionMetrics(registry, 1024, 256);
    assertThat(metrics.perPartition()).isFalse();
    for (int p = 0; p < 1024; p++) {
      metrics.outbox(p, 1, 100, 0.01);
    }
    assertThat(registry.find("weir.partition.outbox.entries").gauges())
        .as("no per-partition series")
        .isEmpty();
    assertThat(registry.find("weir.partition.quota.use").gauges()).isEmpty();
    assertThat(registry.get("weir.partitions.outbox.entries").gauge().value()).isEqualTo(1024);
    assertThat(registry.get("weir.partitions.hosted").gauge().value()).isEqualTo(1024);
  }
}
