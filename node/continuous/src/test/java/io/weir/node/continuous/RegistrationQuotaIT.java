package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.testing.TestPostgres;
import io.weir.protocol.ErrorCode;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/** The per-scope registration quota holds in PostgreSQL, also when registrations race. */
class RegistrationQuotaIT {

  /**
   * A registration with an id of the stored shape ({@code cq_} and 32 hex digits) derived from
   * {@code name}.
   */
  private static Registrar.Compiled compiled(String name, String scope) {
    String id =
        "cq_"
            + String.format(
                    "%032x",
                    new java.math.BigInteger(
                        1, name.getBytes(java.nio.charset.StandardCharsets.UTF_8)))
                .substring(0, 32);
    return new Registrar.Compiled(
        id,
        scope,
        "role_" + scope,
        new Definition(
            "SELECT id FROM t",
            JsonNodeFactory.instance.objectNode(),
            List.of("id"),
            List.of(),
            1,
            List.of("id"),
            List.of("public.t"),
            List.of("int4"),
            null,
            null));
  }

  @Test
  void aScopeHoldsAtMostItsQuotaAndAnExistingRegistrationIsAlwaysAnswered() throws Exception {
    try (TestPostgres.TestDatabase db = TestPostgres.server().freshDatabase("cq_quota");
        Database database =
            Database.create(
                PostgresSettings.create(
                    ConfigFactory.load(
                        db.config()
                            .withFallback(ConfigFactory.parseResources("weir-persistence.conf")))),
                "cq-quota-it")) {
      SchemaMigrator.migrate(database.dataSource(), "weir");
      RegistrationStore store = new RegistrationStore(database.dataSource(), "weir");
      for (int i = 0; i < 3; i++) {
        assertThat(store.insert(compiled("cq_a" + i, "a"), "admin", 3)).isTrue();
      }
      assertThatThrownBy(() -> store.insert(compiled("cq_a3", "a"), "admin", 3))
          .isInstanceOfSatisfying(
              ContinuousQueryException.class,
              e -> {
                assertThat(e.code()).isEqualTo(ErrorCode.QUOTA_EXCEEDED);
                assertThat(e.getMessage()).contains("max-registrations-per-scope");
              });
      assertThat(store.insert(compiled("cq_a1", "a"), "admin", 3))
          .as("the same registration again: not created, no error")
          .isFalse();
      assertThat(store.insert(compiled("cq_b0", "b"), "admin", 3))
          .as("another scope has its own quota")
          .isTrue();
      assertThat(store.delete(compiled("cq_a0", "a").id())).isTrue();
      assertThat(store.insert(compiled("cq_a3", "a"), "admin", 3))
          .as("room again after a deletion")
          .isTrue();

      // Twelve registrations of one scope at once through "different nodes": exactly five stored.
      ExecutorService pool = Executors.newFixedThreadPool(6);
      try {
        List<Future<Boolean>> results = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
          String id = "cq_race" + i;
          results.add(
              pool.submit(
                  () -> {
                    try {
                      return store.insert(compiled(id, "race"), "admin", 5);
                    } catch (ContinuousQueryException e) {
                      return false;
                    }
                  }));
        }
        int created = 0;
        for (Future<Boolean> f : results) {
          created += f.get() ? 1 : 0;
        }
        assertThat(created).isEqualTo(5);
        assertThat(store.all().stream().filter(s -> s.scope().equals("race")).count()).isEqualTo(5);
      } finally {
        pool.shutdownNow();
      }
    }
  }
}
