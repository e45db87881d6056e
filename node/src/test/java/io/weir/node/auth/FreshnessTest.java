package io.weir.node.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.weir.node.NodeSettings;
import io.weir.persistence.SettingsException;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code weir.principals.max-staleness} and {@code check-timeout}: defaults and limits. */
class FreshnessTest {
  private static Config with(Map<String, Object> overrides) {
    Map<String, Object> base = new HashMap<>();
    base.put("weir.admin-token", "an-admin-token-of-sufficient-length");
    base.put("weir.postgres.url", "jdbc:postgresql://127.0.0.1:5432/weir");
    base.put("weir.postgres.password", "a-password");
    base.putAll(overrides);
    return ConfigFactory.parseMap(base)
        .withFallback(ConfigFactory.parseResources("reference.conf"))
        .resolve(ConfigResolveOptions.noSystem());
  }

  @Test
  void theDefaultsAreOneSecondAndTwo() {
    Freshness f = NodeSettings.create(with(Map.of())).principalFreshness();
    assertThat(f).isEqualTo(Freshness.DEFAULT);
    assertThat(f.maxStaleness()).isEqualTo(Duration.ofSeconds(1));
    assertThat(f.checkTimeout()).isEqualTo(Duration.ofSeconds(2));
  }

  @Test
  void aBoundUpToFiveSecondsIsAccepted() {
    assertThat(
            NodeSettings.create(with(Map.of("weir.principals.max-staleness", "5s")))
                .principalFreshness()
                .maxStaleness())
        .isEqualTo(Duration.ofSeconds(5));
    assertThat(
            NodeSettings.create(with(Map.of("weir.principals.max-staleness", "200ms")))
                .principalFreshness()
                .maxStaleness())
        .isEqualTo(Duration.ofMillis(200));
  }

  @Test
  void aLongerOrEmptyBoundIsRefusedAtStartUp() {
    for (String bad : new String[] {"6s", "1m", "0s", "-1s", "soon"}) {
      assertThatThrownBy(
              () -> NodeSettings.create(with(Map.of("weir.principals.max-staleness", bad))))
          .as(bad)
          .isInstanceOf(SettingsException.class)
          .hasMessageContaining("weir.principals.max-staleness");
    }
    for (String bad : new String[] {"31s", "0s"}) {
      assertThatThrownBy(
              () -> NodeSettings.create(with(Map.of("weir.principals.check-timeout", bad))))
          .as(bad)
          .isInstanceOf(SettingsException.class)
          .hasMessageContaining("weir.principals.check-timeout");
    }
    assertThatThrownBy(() -> new Freshness(Duration.ofSeconds(6), Duration.ofSeconds(2)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new Freshness(Duration.ZERO, Duration.ofSeconds(2)))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
