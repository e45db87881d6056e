package io.weir.node.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.PrincipalStore;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.testing.TestPostgres;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Principal token rotation on PostgreSQL with a clock the test moves: the previous token is the
 * same principal until its grace ends (by the clock, without a reload), a second rotation ends the
 * first grace, revoking ends both, and a node that reloads (another node's view) sees the same.
 */
class PrincipalRotationIT {

  /** A clock the test sets. */
  private static final class TestClock extends Clock {
    final AtomicReference<Instant> now = new AtomicReference<>(Instant.now());

    @Override
    public ZoneOffset getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(java.time.ZoneId zone) {
      return this;
    }

    @Override
    public Instant instant() {
      return now.get();
    }
  }

  @Test
  void thePreviousTokenWorksUntilItsGraceEndsAndRevokingEndsBoth() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try (TestPostgres.TestDatabase db =
            TestPostgres.server().freshDatabase("principal_rotation_it");
        Database database =
            Database.create(
                PostgresSettings.create(
                    ConfigFactory.load(
                        db.config()
                            .withFallback(ConfigFactory.parseResources("weir-persistence.conf")))),
                "principal-rotation-it")) {
      SchemaMigrator.migrate(database.dataSource(), "weir");
      TestClock clock = new TestClock();
      TokenAuthenticator admin =
          TokenAuthenticator.withBootstrapAdmin("bootstrap-admin-token-0123");
      Principals here =
          new Principals(admin, database.dataSource(), "weir", pool, clock, Duration.ofHours(1));
      Principals there =
          new Principals(admin, database.dataSource(), "weir", pool, clock, Duration.ofHours(1));

      String first = get(here.create("svc", false));
      PrincipalStore.Rotated rotated = get(here.rotate("svc", Duration.ofMinutes(10)));
      String second = rotated.token();
      assertThat(rotated.previousValidUntil())
          .isBetween(
              Instant.now().plus(Duration.ofMinutes(9)),
              Instant.now().plus(Duration.ofMinutes(11)));
      assertThat(rotated.toString()).doesNotContain(second);
      get(there.reload());
      for (Principals view : new Principals[] {here, there}) {
        assertThat(view.authenticate(first).map(Principal::id))
            .as("previous token in its grace")
            .contains("svc");
        assertThat(view.authenticate(second).map(Principal::id)).contains("svc");
      }
      clock.now.set(rotated.previousValidUntil());
      for (Principals view : new Principals[] {here, there}) {
        assertThat(view.authenticate(first)).as("previous token at the end of its grace").isEmpty();
        assertThat(view.authenticate(second).map(Principal::id)).contains("svc");
      }
      clock.now.set(Instant.now());

      // A second rotation ends the first grace at once and starts its own.
      String third = get(here.rotate("svc", Duration.ofMinutes(10))).token();
      assertThat(here.authenticate(first)).isEmpty();
      assertThat(here.authenticate(second).map(Principal::id)).contains("svc");
      assertThat(here.authenticate(third).map(Principal::id)).contains("svc");
      assertThat(here.all().get(0).previousValidUntil()).isNotNull();

      get(here.revoke("svc"));
      get(there.reload());
      for (Principals view : new Principals[] {here, there}) {
        assertThat(view.authenticate(second)).isEmpty();
        assertThat(view.authenticate(third)).isEmpty();
      }
      assertThat(here.all().get(0).previousValidUntil()).as("revoking clears the grace").isNull();
      assertThatThrownBy(() -> get(here.rotate("svc", Duration.ofMinutes(1))))
          .hasRootCauseInstanceOf(PrincipalStore.Refused.class);
      assertThatThrownBy(() -> get(here.rotate("nobody", Duration.ZERO)))
          .hasRootCauseInstanceOf(PrincipalStore.Refused.class);

      // Zero grace: the previous token stops at once.
      String a1 = get(here.create("app", false));
      PrincipalStore.Rotated now = get(here.rotate("app", Duration.ZERO));
      assertThat(now.previousValidUntil()).isNull();
      assertThat(here.authenticate(a1)).isEmpty();
      assertThat(here.authenticate(now.token()).map(Principal::id)).contains("app");
      assertThat(here.authenticate("bootstrap-admin-token-0123"))
          .isEqualTo(Optional.of(new Principal("admin", true)));
    } finally {
      pool.shutdownNow();
    }
  }

  private static <T> T get(java.util.concurrent.CompletionStage<T> stage) throws Exception {
    try {
      return stage.toCompletableFuture().get(20, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      throw e;
    }
  }
}
