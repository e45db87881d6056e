package io.weir.node.metrics;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.weir.sharding.partition.PartitionObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.ToLongFunction;

/**
 * The partitions hosted by this node, as meters (see docs/metrics.md and ADR 0015).
 *
 * <p>Per node, always: {@code weir.partitions.hosted}, {@code weir.partition.frames} (persisted
 * frames), {@code weir.partition.writes} (journal writes: frames / writes is the group-commit
 * factor), {@code weir.partition.quota.refusals}, the outbox totals {@code
 * weir.partitions.outbox.entries} and {@code weir.partitions.outbox.bytes}, the fullest partition's
 * {@code weir.partitions.quota.use.max}, the histogram {@code weir.partition.recovery} of recovery
 * times, and the documents tables' {@code weir.partitions.table.lag} (unapplied events), {@code
 * weir.partitions.table.lag.bytes} (their outbox images' UTF-8 bytes) and {@code
 * weir.partitions.table.halted} (partitions whose table apply fails or is storage-behind).
 *
 * <p>Per partition (tag {@code partition}, a number below P), only while P is at most {@code
 * weir.metrics.per-partition-limit}: {@code weir.partition.outbox.entries}, {@code
 * weir.partition.outbox.bytes} and {@code weir.partition.quota.use}. A partition's series exist on
 * the node hosting it and leave with it ({@link #stopped}).
 */
public final class PartitionMetrics implements PartitionObserver {
  /** Values of the {@code source} label of {@code weir_partition_before_images_total}. */
  public static final List<String> BEFORE_IMAGE_SOURCES = List.of("memory", "table");

  /** Values of the {@code source} label of {@code weir_partition_receipt_lookups_total}. */
  public static final List<String> RECEIPT_LOOKUP_SOURCES = List.of("filter", "table");

  static final Duration[] MARK_BUCKETS = {
    Duration.ofMillis(1), Duration.ofMillis(2), Duration.ofMillis(5), Duration.ofMillis(10),
    Duration.ofMillis(25), Duration.ofMillis(50), Duration.ofMillis(100), Duration.ofMillis(250),
    Duration.ofSeconds(1)
  };

  static final Duration[] RECOVERY_BUCKETS = {
    Duration.ofMillis(100), Duration.ofMillis(250), Duration.ofMillis(500), Duration.ofSeconds(1),
    Duration.ofMillis(2500), Duration.ofSeconds(5), Duration.ofSeconds(10), Duration.ofSeconds(30),
    Duration.ofSeconds(60), Duration.ofSeconds(120)
  };

  /** One hosted partition's latest outbox figures. */
  private record Outbox(long entries, long bytes, double quotaUse) {}

  private final MeterRegistry registry;
  private final boolean perPartition;
  private final Map<Integer, Outbox> hosted = new ConcurrentHashMap<>();
  private final Map<Integer, List<Meter>> partitionMeters = new ConcurrentHashMap<>();

  /** One hosted partition's documents table: unapplied events and bytes, whether it is halted. */
  private record Table(long lagEvents, long lagBytes, boolean halted) {}

  private final Map<Integer, Table> tables = new ConcurrentHashMap<>();

  /** Hosted partitions halted storage-behind (ADR 0036). */
  private final Map<Integer, Boolean> behind = new ConcurrentHashMap<>();

  private final Timer marks;
  private final Counter frames;
  private final Counter writes;
  private final Counter refusals;
  private final Counter storageRefusals;
  private final Counter beforeImagesInMemory;
  private final Counter beforeImagesRead;
  private final Counter receiptsRuledOut;
  private final Counter receiptsRead;
  private final Timer recovery;

  /**
   * @param partitions the cluster's partition count P
   * @param perPartitionLimit per-partition series while P is at most this
   */
  public PartitionMetrics(MeterRegistry registry, int partitions, int perPartitionLimit) {
    this.registry = registry;
    this.perPartition = partitions <= perPartitionLimit;
    frames =
        Counter.builder("weir.partition.frames")
            .description("Frames persisted by the partitions hosted here")
            .register(registry);
    writes =
        Counter.builder("weir.partition.writes")
            .description(
                "Journal writes of the partitions hosted here (each holds one or more frames)")
            .register(registry);
    refusals =
        Counter.builder("weir.partition.quota.refusals")
            .description(
                "Frames and projection batches refused because a partition's outbox quota was used up")
            .register(registry);
    storageRefusals =
        Counter.builder("weir.partition.storage.refusals")
            .description(
                "Writes refused because the storage kept fewer copies of a commit than"
                    + " weir.storage.required-copies")
            .register(registry);
    beforeImagesInMemory =
        Counter.builder("weir.partition.before.images")
            .tag("source", BEFORE_IMAGE_SOURCES.get(0))
            .description(
                "Current versions of documents that writes changed, found in a partition's"
                    + " unapplied changes or body cache (docs/partitions.md)")
            .register(registry);
    beforeImagesRead =
        Counter.builder("weir.partition.before.images")
            .tag("source", BEFORE_IMAGE_SOURCES.get(1))
            .description(
                "Current versions of documents that writes changed, read from the documents table")
            .register(registry);
    receiptsRuledOut =
        Counter.builder("weir.partition.receipt.lookups")
            .tag("source", RECEIPT_LOOKUP_SOURCES.get(0))
            .description(
                "Keyed writes whose receipt was not in a partition's heap, ruled out by its receipt"
                    + " filter without a read (ADR 0057)")
            .register(registry);
    receiptsRead =
        Counter.builder("weir.partition.receipt.lookups")
            .tag("source", RECEIPT_LOOKUP_SOURCES.get(1))
            .description(
                "Keyed writes whose receipt was not in a partition's heap, looked up in the receipts"
                    + " table")
            .register(registry);
    recovery =
        Timer.builder("weir.partition.recovery")
            .description(
                "Time a partition took to recover from its snapshot and journal on this node")
            .serviceLevelObjectives(RECOVERY_BUCKETS)
            .register(registry);
    marks =
        Timer.builder("weir.partition.mark")
            .description(
                "Time to keep a group commit's acknowledged mark on a majority of the nodes before"
                    + " the commit is answered")
            .serviceLevelObjectives(MARK_BUCKETS)
            .register(registry);
    Gauge.builder("weir.partitions.storage.behind", behind, Map::size)
        .description(
            "Hosted partitions whose journal lacks writes they acknowledged (storage-behind):"
                + " they refuse writes until an operator accepts the loss")
        .register(registry);
    Gauge.builder("weir.partitions.hosted", hosted, Map::size)
        .description("Partitions running on this node")
        .register(registry);
    Gauge.builder("weir.partitions.outbox.entries", hosted, h -> sum(h, Outbox::entries))
        .description("Retained outbox entries over the partitions hosted here")
        .register(registry);
    Gauge.builder("weir.partitions.outbox.bytes", hosted, h -> sum(h, Outbox::bytes))
        .description(
            "Retained outbox bytes (before and after images) over the partitions hosted here")
        .register(registry);
    Gauge.builder(
            "weir.partitions.quota.use.max",
            hosted,
            h -> h.values().stream().mapToDouble(Outbox::quotaUse).max().orElse(0))
        .description("The fullest hosted partition's use of its outbox quota (1 = full)")
        .register(registry);
    Gauge.builder(
            "weir.partitions.table.lag",
            tables,
            t -> t.values().stream().mapToLong(Table::lagEvents).sum())
        .description(
            "Persisted events not yet applied to the documents table, over the partitions hosted"
                + " here")
        .register(registry);
    Gauge.builder(
            "weir.partitions.table.lag.bytes",
            tables,
            t -> t.values().stream().mapToLong(Table::lagBytes).sum())
        .description(
            "UTF-8 bytes of the outbox images of the events not yet applied to the documents"
                + " table, over the partitions hosted here")
        .baseUnit("bytes")
        .register(registry);
    Gauge.builder(
            "weir.partitions.table.halted",
            tables,
            t -> t.values().stream().filter(Table::halted).count())
        .description(
            "Hosted partitions whose documents table apply fails (retried) or is storage-behind")
        .register(registry);
  }

  @Override
  public void table(int partition, long lagEvents, long lagBytes, boolean halted) {
    tables.put(partition, new Table(lagEvents, lagBytes, halted));
  }

  private static double sum(Map<Integer, Outbox> hosted, ToLongFunction<Outbox> f) {
    long total = 0;
    for (Outbox o : hosted.values()) {
      total += f.applyAsLong(o);
    }
    return total;
  }

  /** Whether partition-labelled series are exported. */
  public boolean perPartition() {
    return perPartition;
  }

  @Override
  public void storageBehind(int partition, boolean halted) {
    if (halted) {
      behind.put(partition, true);
    } else {
      behind.remove(partition);
    }
  }

  @Override
  public void markRaised(int partition, long nanos) {
    marks.record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void recovered(int partition, long nanos) {
    recovery.record(nanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void persisted(int partition, int count) {
    frames.increment(count);
    writes.increment();
  }

  @Override
  public void beforeImages(int partition, int inMemory, int read) {
    beforeImagesInMemory.increment(inMemory);
    beforeImagesRead.increment(read);
  }

  @Override
  public void receiptLookups(int partition, int ruledOut, int read) {
    receiptsRuledOut.increment(ruledOut);
    receiptsRead.increment(read);
  }

  @Override
  public void quotaRefused(int partition, int count) {
    refusals.increment(count);
  }

  @Override
  public void storageRefused(int partition, int count) {
    storageRefusals.increment(count);
  }

  @Override
  public void outbox(int partition, long entries, long bytes, double quotaUse) {
    if (hosted.put(partition, new Outbox(entries, bytes, quotaUse)) == null && perPartition) {
      register(partition);
    }
  }

  private void register(int partition) {
    String tag = Integer.toString(partition);
    List<Meter> meters = new ArrayList<>();
    meters.add(
        Gauge.builder(
                "weir.partition.outbox.entries", hosted, h -> value(h, partition, Outbox::entries))
            .tag("partition", tag)
            .description("Retained outbox entries of one partition")
            .register(registry));
    meters.add(
        Gauge.builder(
                "weir.partition.outbox.bytes", hosted, h -> value(h, partition, Outbox::bytes))
            .tag("partition", tag)
            .description("Retained outbox bytes of one partition")
            .register(registry));
    meters.add(
        Gauge.builder(
                "weir.partition.quota.use",
                hosted,
                h -> {
                  Outbox o = h.get(partition);
                  return o == null ? 0 : o.quotaUse();
                })
            .tag("partition", tag)
            .description("One partition's use of its outbox quota (1 = full)")
            .register(registry));
    partitionMeters.put(partition, meters);
  }

  private static double value(
      Map<Integer, Outbox> hosted, int partition, ToLongFunction<Outbox> f) {
    Outbox o = hosted.get(partition);
    return o == null ? 0 : f.applyAsLong(o);
  }

  @Override
  public void stopped(int partition) {
    hosted.remove(partition);
    behind.remove(partition);
    tables.remove(partition);
    List<Meter> meters = partitionMeters.remove(partition);
    if (meters != null) {
      meters.forEach(registry::remove);
    }
  }
}
