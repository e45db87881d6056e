package io.weir.persistence.cdc;

import io.weir.persistence.Database;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.persistence.testing.TestPostgres;
import java.sql.SQLException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/**
 * Base of the pipeline integration tests: a {@link PipelineHarness} per test (fresh database, state
 * schema, actor kit, slot name) and an executor for sinks, closed after each test in that order
 * (pipelines stop before their sinks' executor goes away).
 */
abstract class PipelineITBase {
  protected PipelineHarness h;
  protected TestPostgres.TestDatabase db;
  protected Database state;
  protected ActorTestKit kit;
  protected SourceSettings source;
  protected String slot;
  protected ExecutorService blockingIo;

  /** Names the test's database and actor system. */
  protected abstract String harnessName();

  @BeforeEach
  final void openHarness() throws SQLException {
    h = new PipelineHarness(harnessName());
    db = h.db();
    state = h.state();
    kit = h.kit();
    source = h.source();
    slot = h.slot();
    blockingIo = Executors.newFixedThreadPool(2);
  }

  @AfterEach
  final void closeHarness() throws InterruptedException {
    h.close();
    blockingIo.shutdownNow();
    blockingIo.awaitTermination(10, TimeUnit.SECONDS);
  }

  protected void sql(String... statements) throws SQLException {
    h.sql(statements);
  }

  protected PipelineStatus status(ActorRef<CdcPipeline.Command> p) {
    return h.status(p);
  }
}
