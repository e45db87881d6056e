package io.weir.node;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.testing.TestPostgres;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The guarantee token keys and principals rest on: a load that read the rows before a later load
 * published can never overwrite it (a slow scheduled reload cannot bring back a retired key or a
 * revoked principal). Each load reads a numbered value through PostgreSQL, so the value shows which
 * load it is.
 */
class OrderedLoadsIT {

  @Test
  void aSlowEarlierLoadDoesNotOverwriteALaterOne() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("ordered_loads_it");
        Database database =
            Database.create(
                PostgresSettings.create(
                    ConfigFactory.load(
                        db.config()
                            .withFallback(ConfigFactory.parseResources("weir-persistence.conf")))),
                "ordered-loads-it")) {
      CountDownLatch slowRead = new CountDownLatch(1);
      CountDownLatch release = new CountDownLatch(1);
      AtomicInteger loads = new AtomicInteger();
      OrderedLoads<String> view =
          new OrderedLoads<>(
              database.dataSource(),
              pool,
              c -> {
                int n = loads.incrementAndGet();
                String value;
                try (var rs = c.createStatement().executeQuery("SELECT 'load " + n + "'")) {
                  rs.next();
                  value = rs.getString(1);
                }
                if (n == 1) {
                  slowRead.countDown();
                  release.await(10, TimeUnit.SECONDS); // read, then held back before publishing
                }
                return value;
              },
              "initial");
      CompletableFuture<String> slow = view.run(null).toCompletableFuture();
      assertThat(slowRead.await(10, TimeUnit.SECONDS)).isTrue();
      String fast = view.run(null).toCompletableFuture().get(10, TimeUnit.SECONDS);
      assertThat(fast).isEqualTo("load 2");
      assertThat(view.current()).isEqualTo("load 2");
      release.countDown();
      assertThat(slow.get(10, TimeUnit.SECONDS))
          .as("the slow load answers with the newer value")
          .isEqualTo("load 2");
      assertThat(view.current()).as("and did not overwrite it").isEqualTo("load 2");
      assertThat(view.run(null).toCompletableFuture().get(10, TimeUnit.SECONDS))
          .as("a later load publishes")
          .isEqualTo("load 3");
    } finally {
      pool.shutdownNow();
    }
  }
}
