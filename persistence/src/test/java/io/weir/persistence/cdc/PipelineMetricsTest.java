package io.weir.persistence.cdc;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.weir.protocol.Lsn;
import java.time.Instant;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * A pipeline's meters: lag in time, state, halts by reason, and their removal when the pipeline
 * stops.
 */
class PipelineMetricsTest {
  @Test
  void lagInSecondsIsTheAgeOfTheOldestTransactionNotYetApplied() {
    LagClock clock = new LagClock();
    long now = 1_000_000L;
    assertThat(clock.seconds(now)).as("nothing waiting reads 0").isZero();
    clock.received(Lsn.of(100), Instant.ofEpochMilli(now - 5_000));
    clock.received(Lsn.of(200), Instant.ofEpochMilli(now - 2_000));
    assertThat(clock.seconds(now)).as("the oldest waiting transaction's age").isEqualTo(5.0);
    clock.applied(Lsn.of(100));
    assertThat(clock.seconds(now)).as("once it is applied, the next one's age").isEqualTo(2.0);
    assertThat(clock.seconds(now + 3_000)).as("a stalled sink's lag grows").isEqualTo(5.0);
    clock.applied(Lsn.of(250));
    assertThat(clock.seconds(now)).as("all applied reads 0").isZero();
    assertThat(clock.waiting()).isZero();
    clock.received(Lsn.of(300), Instant.ofEpochMilli(now + 60_000));
    assertThat(clock.seconds(now)).as("a source clock ahead of ours never reads negative").isZero();
    clock.received(Lsn.of(400), Instant.ofEpochMilli(now + 61_000));
    clock.keepOldest();
    assertThat(clock.waiting())
        .as("a stopped stream keeps only the oldest waiting transaction")
        .isEqualTo(1);
    assertThat(clock.seconds(now + 70_000)).as("whose age keeps growing").isEqualTo(10.0);
    clock.received(
        Lsn.of(300), Instant.ofEpochMilli(now + 60_000)); // the next run receives it again
    clock.applied(Lsn.of(300));
    assertThat(clock.waiting()).isZero();
    clock.received(Lsn.of(500), Instant.ofEpochMilli(now));
    clock.reset();
    assertThat(clock.waiting()).as("a dropped pipeline forgets what it waited for").isZero();
  }

  @Test
  void haltReasonsAreRegisteredUpFrontAndStatesAreOneHot() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    PipelineMetrics metrics = new PipelineMetrics(registry, "orders", () -> 0, () -> 0);
    AtomicReference<String> state = new AtomicReference<>("running");
    metrics.stateGauges(state::get);
    metrics.lagSeconds(() -> 1.5);
    assertThat(registry.find("weir.cdc.halts").tag("pipeline", "orders").counters())
        .as("one halt counter per reason, all at 0")
        .hasSize(HaltReason.values().length)
        .allSatisfy(c -> assertThat(c.count()).isZero());
    metrics.halted(HaltReason.SLOT_LOST);
    assertThat(registry.get("weir.cdc.halts").tag("reason", "slot-lost").counter().count())
        .isEqualTo(1.0);
    assertThat(registry.get("weir.cdc.state").tag("state", "running").gauge().value())
        .isEqualTo(1.0);
    assertThat(registry.get("weir.cdc.state").tag("state", "halted").gauge().value()).isZero();
    state.set("halted");
    assertThat(registry.get("weir.cdc.state").tag("state", "running").gauge().value()).isZero();
    assertThat(registry.get("weir.cdc.state").tag("state", "halted").gauge().value())
        .isEqualTo(1.0);
    assertThat(registry.find("weir.cdc.state").gauges())
        .as("one gauge per known state")
        .hasSize(PipelineMetrics.STATES.size());
    assertThat(registry.get("weir.cdc.lag.seconds").gauge().value()).isEqualTo(1.5);
  }

  @Test
  void closingRemovesOnlyThisPipelinesMeters() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    PipelineMetrics orders = new PipelineMetrics(registry, "orders", () -> 0, () -> 0);
    new PipelineMetrics(registry, "items", () -> 0, () -> 0);
    registry.counter("weir.other", "pipeline", "orders");
    orders.close();
    assertThat(registry.getMeters())
        .as("the pipeline's meters are gone")
        .noneMatch(
            m ->
                "orders".equals(m.getId().getTag("pipeline"))
                    && m.getId().getName().startsWith("weir.cdc."));
    assertThat(registry.getMeters().stream().map(Meter::getId).map(id -> id.getTag("pipeline")))
        .as("another pipeline's meters and other families stay")
        .contains("items", "orders");
  }
}
