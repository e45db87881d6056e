package io.weir.node.auth;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.testing.TestPostgres;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Two nodes' views of the principals on one PostgreSQL: a principal created through one is
 * authenticated by the other at once (a miss reloads before it refuses), while unknown tokens cause
 * at most one reload per gap however many arrive.
 */
class PrincipalsIT {
  private static final String ADMIN = "bootstrap-admin-token-0123";

  @Test
  void aPrincipalCreatedThroughAnotherNodeIsKnownAtOnce() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("principals_it");
        Database database =
            Database.create(
                PostgresSettings.create(
                    ConfigFactory.load(
                        db.config()
                            .withFallback(ConfigFactory.parseResources("weir-persistence.conf")))),
                "principals-it")) {
      SchemaMigrator.migrate(database.dataSource(), "weir");
      Principals nodeA =
          new Principals(
              TokenAuthenticator.withBootstrapAdmin(ADMIN), database.dataSource(), "weir", pool);
      Principals nodeB =
          new Principals(
              TokenAuthenticator.withBootstrapAdmin(ADMIN), database.dataSource(), "weir", pool);
      nodeA.reload().toCompletableFuture().get(10, TimeUnit.SECONDS);
      nodeB.reload().toCompletableFuture().get(10, TimeUnit.SECONDS);

      String token = nodeA.create("reader", false).toCompletableFuture().get(10, TimeUnit.SECONDS);
      assertThat(nodeB.authenticate(token)).as("node B has not reloaded yet").isEmpty();
      Optional<Principal> fresh =
          nodeB.authenticateFresh(token).toCompletableFuture().get(10, TimeUnit.SECONDS);
      assertThat(fresh).as("a miss reloads before refusing").map(Principal::id).contains("reader");

      // Many unknown tokens at once: all refused, with loads coalesced (one per gap at most).
      long t0 = System.nanoTime();
      CompletableFuture<?>[] misses = new CompletableFuture<?>[50];
      for (int i = 0; i < misses.length; i++) {
        misses[i] = nodeB.authenticateFresh("unknown-token-" + i).toCompletableFuture();
      }
      CompletableFuture.allOf(misses).get(10, TimeUnit.SECONDS);
      for (CompletableFuture<?> m : misses) {
        assertThat((Optional<?>) m.get()).as("an unknown token stays unknown").isEmpty();
      }
      double seconds = (System.nanoTime() - t0) / 1e9;
      assertThat(seconds)
          .as("50 misses wait for one or two coalesced loads, not 50 gaps")
          .isLessThan(5);

      nodeA.revoke("reader").toCompletableFuture().get(10, TimeUnit.SECONDS);
      // No announcement reaches B here: its view still holds the principal until B checks (within
      // the staleness bound, PrincipalsAcrossNodesIT) or reloads.
      assertThat(nodeB.authenticate(token))
          .as("a change alone does not touch B's view")
          .isPresent();
      nodeB.reload().toCompletableFuture().get(10, TimeUnit.SECONDS);
      assertThat(nodeB.authenticateFresh(token).toCompletableFuture().get(10, TimeUnit.SECONDS))
          .isEmpty();
      assertThat(nodeB.authenticateFresh(ADMIN).toCompletableFuture().get(1, TimeUnit.SECONDS))
          .as("the bootstrap administrator needs no load")
          .map(Principal::id)
          .contains("admin");

      // A grant given through A counts on B once B looks again (what a 403 does before answering).
      java.util.concurrent.atomic.AtomicInteger announced =
          new java.util.concurrent.atomic.AtomicInteger();
      nodeA.onChange(announced::incrementAndGet);
      String writerToken =
          nodeA.create("writer", false).toCompletableFuture().get(10, TimeUnit.SECONDS);
      Principal writer =
          nodeB
              .authenticateFresh(writerToken)
              .toCompletableFuture()
              .get(10, TimeUnit.SECONDS)
              .orElseThrow();
      assertThat(writer.may("DocumentsWrite", "notes")).isFalse();
      nodeA
          .changeGrant("writer", "notes", "DocumentsWrite", true)
          .toCompletableFuture()
          .get(10, TimeUnit.SECONDS);
      assertThat(nodeB.authenticate(writerToken).orElseThrow().may("DocumentsWrite", "notes"))
          .as("node B has not reloaded yet")
          .isFalse();
      assertThat(
              nodeB
                  .refresh(writer)
                  .toCompletableFuture()
                  .get(10, TimeUnit.SECONDS)
                  .orElseThrow()
                  .may("DocumentsWrite", "notes"))
          .as("looked at again: the grant is there")
          .isTrue();
      nodeA.revoke("writer").toCompletableFuture().get(10, TimeUnit.SECONDS);
      assertThat(nodeB.refresh(writer).toCompletableFuture().get(10, TimeUnit.SECONDS))
          .as("a principal revoked meanwhile is gone")
          .isEmpty();
      assertThat(announced.get())
          .as("create, grant and revoke each announced once they committed")
          .isEqualTo(3);
      assertThat(
              nodeA
                  .changeGrant("nobody", "notes", "DocumentsWrite", true)
                  .toCompletableFuture()
                  .handle((v, e) -> e != null)
                  .get(10, TimeUnit.SECONDS))
          .as("a change that fails")
          .isTrue();
      assertThat(announced.get()).as("a failed change announces nothing").isEqualTo(3);
    } finally {
      pool.shutdownNow();
    }
  }
}
