package io.weir.node.continuous;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.weir.persistence.SettingsException;
import io.weir.protocol.ErrorCode;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class ContinuousSettingsTest {
  private static Config config(String extra) {
    return ConfigFactory.parseString(
            "weir.postgres.url = \"jdbc:postgresql://127.0.0.1/weir\"\n" + extra)
        .withFallback(ConfigFactory.parseResources("reference.conf"))
        .resolve(ConfigResolveOptions.noSystem());
  }

  @Test
  void scopesHaveTheirOwnLoginAndPoolAndHideThePassword() {
    ContinuousSettings s =
        ContinuousSettings.create(
            config(
                "weir.continuous.scopes.tenant_a { user = cq_a, password = \"canary-secret\" }\n"
                    + "weir.continuous.scopes.tenant_b { user = cq_b, url = \"jdbc:postgresql://10.0.0.1/src\", pool-size = 4 }"));
    assertThat(s.statementTimeout()).isEqualTo(Duration.ofSeconds(5));
    assertThat(s.maxLimit()).isEqualTo(1000);
    ContinuousSettings.Scope a = s.scopes().get("tenant_a");
    assertThat(a.user()).isEqualTo("cq_a");
    assertThat(a.url())
        .as("the scope's database defaults to Weir's")
        .isEqualTo("jdbc:postgresql://127.0.0.1/weir");
    assertThat(a.poolSize()).isEqualTo(2);
    assertThat(a.toString())
        .as("a scope's string form hides its password")
        .doesNotContain("canary-secret");
    assertThat(s.scopes().get("tenant_b").poolSize()).isEqualTo(4);
  }

  @Test
  void badScopesAreConfigurationErrorsNamingTheKey() {
    assertThatThrownBy(
            () -> ContinuousSettings.create(config("weir.continuous.scopes.Bad-Name { user = x }")))
        .isInstanceOfSatisfying(
            SettingsException.class, e -> assertThat(e.key()).isEqualTo("weir.continuous.scopes"));
    assertThatThrownBy(
            () -> ContinuousSettings.create(config("weir.continuous.scopes.a { password = p }")))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.continuous.scopes.a.user"));
    assertThatThrownBy(
            () ->
                ContinuousSettings.create(
                    config("weir.continuous.scopes.a { user = u, url = \"http://x\" }")))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.continuous.scopes.a.url"));
  }

  @Test
  void requestShapeErrorsAreTypedAndValueFree() throws Exception {
    ObjectMapper json = new ObjectMapper();
    String ok = "{\"scope\":\"a\",\"sql\":\"SELECT 1 AS id\",\"keyColumns\":[\"id\"],\"limit\":5}";
    ContinuousRequest r = ContinuousRequest.parse(json.readTree(ok), 10);
    assertThat(r.orderBy()).isEmpty();
    assertThat(r.parameters().size()).isZero();
    assertThat(r.toString()).doesNotContain("SELECT");
    String[][] bad = {
      {"{\"scope\":\"a\",\"sql\":\"x\",\"keyColumns\":[\"id\"],\"limit\":11}", "bad-request"},
      {"{\"scope\":\"A-b\",\"sql\":\"x\",\"keyColumns\":[\"id\"],\"limit\":1}", "bad-request"},
      {"{\"scope\":\"a\",\"sql\":\"x\",\"keyColumns\":[],\"limit\":1}", "bad-request"},
      {"{\"scope\":\"a\",\"sql\":\"x\",\"keyColumns\":[\"id\",\"id\"],\"limit\":1}", "bad-request"},
      {
        "{\"scope\":\"a\",\"sql\":\"x\",\"keyColumns\":[\"id\"],\"limit\":1,\"orderBy\":[{\"column\":\"s\",\"direction\":\"up\"}]}",
        "bad-request"
      },
      {
        "{\"scope\":\"a\",\"sql\":\"x\",\"keyColumns\":[\"id\"],\"limit\":1,\"extra\":1}",
        "bad-request"
      },
      {
        "{\"scope\":\"a\",\"sql\":\"x\",\"keyColumns\":[\"id\"],\"limit\":1,\"parameters\":[1]}",
        "invalid-parameter"
      },
      {
        "{\"scope\":\"a\",\"sql\":\"x\",\"keyColumns\":[\"id\"],\"limit\":1,\"parameters\":{\"1x\":1}}",
        "invalid-parameter"
      },
    };
    for (String[] b : bad) {
      assertThatThrownBy(() -> ContinuousRequest.parse(json.readTree(b[0]), 10))
          .as("the request should be refused: %s", b[0])
          .isInstanceOfSatisfying(
              ContinuousQueryException.class, e -> assertThat(e.code().wire()).isEqualTo(b[1]));
    }
    assertThat(ErrorCode.QUERY_NOT_ALLOWED.httpStatus()).isEqualTo(400);
  }
}
