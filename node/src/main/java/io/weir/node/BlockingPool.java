package io.weir.node;

import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.pekko.Done;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * A pool of PostgreSQL connections with as many threads of its own to wait on them, so blocking
 * JDBC work never holds a dispatcher's thread; both are closed before the actor system terminates.
 *
 * @param database the connections
 * @param threads where work on them runs
 */
record BlockingPool(Database database, ExecutorService threads) {
  /**
   * {@code size} connections of {@code postgres} and {@code size} daemon threads, named {@code
   * name}.
   */
  static BlockingPool open(
      ActorSystem<?> system, PostgresSettings postgres, int size, String name) {
    BlockingPool pool =
        new BlockingPool(
            Database.create(postgres.withPoolSize(size), name),
            Executors.newFixedThreadPool(size, NodeStartup.daemonThreads(name)));
    CoordinatedShutdown.get(system)
        .addTask(
            CoordinatedShutdown.PhaseBeforeActorSystemTerminate(),
            "close-" + name,
            () -> {
              pool.threads.shutdownNow();
              pool.database.close();
              return CompletableFuture.completedFuture(Done.getInstance());
            });
    return pool;
  }
}
