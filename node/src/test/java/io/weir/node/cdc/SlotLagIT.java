package io.weir.node.cdc;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * {@link SlotLag} against a real PostgreSQL: a slot nobody consumes falls behind by the WAL of the
 * rows written after it, holds at least that much WAL, and a report is reused within its time to
 * live; a pipeline whose slot does not exist says so; a source that cannot be reached gives its
 * pipelines a value-free error while the others are still reported.
 */
class SlotLagIT {
  private static final String SECRET = "ROWCANARY71aa";

  @Test
  void slotsReportTheirLagAndRetainedWal() throws Exception {
    ExecutorService io = Executors.newFixedThreadPool(2);
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("slotlag")) {
      String slot = "lag_" + db.name().substring(db.name().length() - 10);
      try (Connection c = db.connect();
          Statement s = c.createStatement()) {
        s.execute("CREATE TABLE public.t (id bigint PRIMARY KEY, note text)");
        s.execute("CREATE PUBLICATION lag_pub FOR TABLE public.t");
        s.execute("SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
      }
      int closedPort = freePort();
      Config config =
          ConfigFactory.parseString(
                  String.join(
                      "\n",
                      "weir.pipelines.watched { slot = "
                          + slot
                          + ", publications = [lag_pub], sink.target-schema = m1 }",
                      "weir.pipelines.unborn { slot = unborn_"
                          + slot
                          + ", publications = [lag_pub], sink.target-schema = m2 }",
                      "weir.pipelines.elsewhere { slot = "
                          + slot
                          + ", publications = [lag_pub], sink.target-schema = m3,",
                      "  source.url = \"jdbc:postgresql://127.0.0.1:"
                          + closedPort
                          + "/nowhere\" }"))
              .withFallback(db.config())
              .withFallback(ConfigFactory.parseResources("reference.conf"))
              .resolve(ConfigResolveOptions.noSystem());
      MutableClock clock = new MutableClock();
      SlotLag lag = new SlotLag(PipelineConfig.all(config), io, Duration.ofSeconds(2), clock);

      Map<String, SlotLag.Slot> before =
          byPipeline(lag.report().toCompletableFuture().get(30, TimeUnit.SECONDS));
      SlotLag.Slot watched = before.get("watched");
      assertThat(watched.exists()).isTrue();
      assertThat(watched.active()).as("nobody streams from it").isFalse();
      assertThat(watched.walStatus()).isEqualTo("reserved");
      assertThat(watched.error()).isNull();
      assertThat(watched.lagBytes()).isNotNegative();
      assertThat(before.get("unborn").exists()).as("a slot not created yet").isFalse();
      assertThat(before.get("unborn").error()).isNull();
      assertThat(before.get("elsewhere").error())
          .as("an unreachable source")
          .isEqualTo("PSQLException");
      assertThat(before.get("elsewhere").lagBytes()).isNull();

      try (Connection c = db.connect();
          Statement s = c.createStatement()) {
        s.execute(
            "INSERT INTO public.t SELECT g, '"
                + SECRET
                + "' || repeat('x', 200) FROM generate_series(1, 2000) g");
      }
      SlotLag.Report cached = lag.report().toCompletableFuture().get(30, TimeUnit.SECONDS);
      assertThat(byPipeline(cached).get("watched").lagBytes())
          .as("within the time to live the report is reused")
          .isEqualTo(watched.lagBytes());
      clock.advance(Duration.ofSeconds(3));
      SlotLag.Report after = lag.report().toCompletableFuture().get(30, TimeUnit.SECONDS);
      SlotLag.Slot grown = byPipeline(after).get("watched");
      System.out.printf(
          "slot lag: %d -> %d bytes after 2000 rows, retained %d bytes%n",
          watched.lagBytes(), grown.lagBytes(), grown.retainedBytes());
      assertThat(grown.lagBytes() - watched.lagBytes())
          .as("the rows' WAL is behind the slot")
          .isGreaterThan(2000L * 200);
      assertThat(grown.retainedBytes())
          .as("the slot holds at least the WAL it has not confirmed")
          .isGreaterThanOrEqualTo(grown.lagBytes());
      assertThat(after.slots().stream().map(SlotLag.Slot::pipeline).toList())
          .as("every configured pipeline, in configuration order")
          .containsExactly("elsewhere", "unborn", "watched");
      assertThat(after.toString()).doesNotContain(SECRET);
    } finally {
      io.shutdownNow();
    }
  }

  private static Map<String, SlotLag.Slot> byPipeline(SlotLag.Report r) {
    return r.slots().stream().collect(Collectors.toMap(SlotLag.Slot::pipeline, s -> s));
  }

  private static int freePort() {
    return io.weir.persistence.testing.TestPorts.free();
  }

  /** A clock the test moves. */
  private static final class MutableClock extends Clock {
    private volatile Instant now = Instant.parse("2026-01-01T00:00:00Z");

    void advance(Duration d) {
      now = now.plus(d);
    }

    @Override
    public Instant instant() {
      return now;
    }

    @Override
    public java.time.ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(java.time.ZoneId zone) {
      return this;
    }
  }
}
