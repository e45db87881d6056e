package io.weir.persistence.cdc;

import static org.awaitility.Awaitility.await;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * What a pipeline integration test runs in: a fresh database on the test PostgreSQL (source and
 * Weir's state schema alike), an actor test kit, a unique slot name, and the calls tests make on
 * pipelines. Closing it stops the kit and drops the database.
 */
final class PipelineHarness implements AutoCloseable {
  private final TestPostgres.TestDatabase db;
  private final Database state;
  private final ActorTestKit kit;
  private final SourceSettings source;
  private final String slot;

  PipelineHarness(String name) throws SQLException {
    this(name, TestPostgres.server());
  }

  /** As above, on {@code server} (e.g. a private cluster whose settings the test changes). */
  PipelineHarness(String name, TestPostgres server) throws SQLException {
    db = server.freshDatabase(name.replace('-', '_'));
    Config config =
        ConfigFactory.load(
            db.config().withFallback(ConfigFactory.parseResources("weir-persistence.conf")));
    state = Database.create(PostgresSettings.create(config), name);
    SchemaMigrator.migrate(state.dataSource(), "weir");
    kit = ActorTestKit.create(name.replace('_', '-'), config);
    source = new SourceSettings(db.url(), db.server().user(), db.server().password());
    slot = "weir_it_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  }

  TestPostgres.TestDatabase db() {
    return db;
  }

  Database state() {
    return state;
  }

  ActorTestKit kit() {
    return kit;
  }

  SourceSettings source() {
    return source;
  }

  String slot() {
    return slot;
  }

  /** Runs statements in the test database with {@code search_path = public}. */
  void sql(String... statements) throws SQLException {
    try (Connection c = db.connect();
        Statement s = c.createStatement()) {
      // The test login is called weir, so "$user" in the default search_path would be Weir's
      // schema.
      s.execute("SET search_path = public");
      for (String q : statements) {
        s.execute(q);
      }
    }
  }

  ActorRef<CdcPipeline.Command> start(
      SourceSettings from, PipelineSettings settings, ChangeSink sink) {
    return start(from, settings, sink, new SimpleMeterRegistry());
  }

  /**
   * Spawns a pipeline reading {@code from} (usually {@link #source()}; a test may log in as someone
   * else) and starts it; returns once it answered the Start.
   */
  ActorRef<CdcPipeline.Command> start(
      SourceSettings from, PipelineSettings settings, ChangeSink sink, MeterRegistry registry) {
    ActorRef<CdcPipeline.Command> p =
        kit.spawn(
            CdcPipeline.builder(settings, from, sink, state.dataSource(), "weir")
                .metrics(registry)
                .build());
    var probe = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.Start(probe.ref()));
    probe.receiveMessage();
    return p;
  }

  PipelineStatus status(ActorRef<CdcPipeline.Command> p) {
    var probe = kit.<PipelineStatus>createTestProbe();
    p.tell(new CdcPipeline.GetStatus(probe.ref()));
    return probe.receiveMessage(Duration.ofSeconds(10));
  }

  /**
   * Waits (at most {@code timeout}) for the pipeline to reach {@code wanted}; returns that status.
   */
  PipelineStatus awaitState(ActorRef<CdcPipeline.Command> p, String wanted, Duration timeout) {
    await("pipeline state " + wanted)
        .atMost(timeout)
        .pollInterval(Duration.ofMillis(100))
        .until(() -> status(p).state().equals(wanted));
    return status(p);
  }

  @Override
  public void close() {
    kit.shutdownTestKit();
    state.close();
    db.close();
  }
}
