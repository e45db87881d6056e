package io.weir.node.metrics;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.FileDescriptorMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The node's meter registry and its Prometheus exposition ({@code GET /metrics}, see
 * docs/metrics.md). Holds the JVM and process binders, the partitions' and HTTP meters, and the
 * hooks other parts of the node register their meters through.
 *
 * <p>Labels stay bounded: the hooks here take label values only from an enum ({@link
 * #reasonCounter}) or none ({@link #active}); a component that registers on {@link #registry()}
 * directly must do the same and never put a document, an id, a query or a token into a tag.
 */
public final class NodeMetrics implements AutoCloseable {
  private final PrometheusMeterRegistry registry;
  private final MetricsSettings settings;
  private final JvmGcMetrics gc;

  public NodeMetrics(MetricsSettings settings) {
    this.settings = settings;
    this.registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    if (settings.enabled()) {
      new ClassLoaderMetrics().bindTo(registry);
      new JvmMemoryMetrics().bindTo(registry);
      new JvmThreadMetrics().bindTo(registry);
      new ProcessorMetrics().bindTo(registry);
      new UptimeMetrics().bindTo(registry);
      new FileDescriptorMetrics().bindTo(registry);
      gc = new JvmGcMetrics();
      gc.bindTo(registry);
    } else {
      gc = null;
    }
  }

  public MetricsSettings settings() {
    return settings;
  }

  /** The registry, for components that register their own meters (bounded labels only). */
  public MeterRegistry registry() {
    return registry;
  }

  /** The Prometheus text exposition of every meter. */
  public String scrape() {
    return registry.scrape();
  }

  /**
   * Meters of the partitions this node hosts, for {@link
   * io.weir.sharding.partition.PartitionSharding#init}.
   */
  public PartitionMetrics partitions(int partitionCount) {
    return new PartitionMetrics(registry, partitionCount, settings.perPartitionLimit());
  }

  /** Meters of the HTTP API, for {@code ApiServices.Builder.httpMetrics}. */
  public HttpMetrics http(RouteTemplates templates) {
    return new HttpMetrics(registry, templates);
  }

  /**
   * A counter per value of {@code reasons}, all registered at 0 (so the first increase shows): e.g.
   * continuous-query fallbacks by reason. The tag's values are the enum's constants in lower case
   * with hyphens.
   */
  public <E extends Enum<E>> ReasonCounter<E> reasonCounter(
      String name, String description, String tag, Class<E> reasons) {
    Map<E, Counter> counters = new EnumMap<>(reasons);
    for (E e : reasons.getEnumConstants()) {
      counters.put(
          e, Counter.builder(name).description(description).tag(tag, wire(e)).register(registry));
    }
    return new ReasonCounter<>(counters);
  }

  /** A gauge of things open now, e.g. live or continuous query sessions on this node. */
  public Active active(String name, String description) {
    AtomicLong count = new AtomicLong();
    Gauge.builder(name, count, AtomicLong::get)
        .description(description)
        .strongReference(true)
        .register(registry);
    return new Active(count);
  }

  static String wire(Enum<?> e) {
    return e.name().toLowerCase(Locale.ROOT).replace('_', '-');
  }

  /** Counters by an enum's values. */
  public static final class ReasonCounter<E extends Enum<E>> {
    private final Map<E, Counter> counters;

    ReasonCounter(Map<E, Counter> counters) {
      this.counters = counters;
    }

    public void increment(E reason) {
      counters.get(reason).increment();
    }

    public double count(E reason) {
      return counters.get(reason).count();
    }
  }

  /** A count of open things: {@link #opened()} and {@link #closed()} once each per thing. */
  public static final class Active {
    private final AtomicLong count;

    Active(AtomicLong count) {
      this.count = count;
    }

    public void opened() {
      count.incrementAndGet();
    }

    public void closed() {
      count.decrementAndGet();
    }

    public long value() {
      return count.get();
    }
  }

  @Override
  public void close() {
    if (gc != null) {
      gc.close();
    }
    registry.close();
  }
}
