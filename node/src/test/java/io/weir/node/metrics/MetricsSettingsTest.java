package io.weir.node.metrics;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import io.weir.persistence.SettingsException;
import org.junit.jupiter.api.Test;

/** {@code weir.metrics.*}: safe defaults, a scrape token that is checked and never shown. */
class MetricsSettingsTest {
  private static final String ADMIN = "admin-token-0123456789";

  private static Config config(String overrides) {
    return ConfigFactory.parseString(overrides)
        .withFallback(ConfigFactory.defaultReference())
        .resolve();
  }

  @Test
  void theDefaultsNeedAnAdministrator() {
    MetricsSettings s = MetricsSettings.create(config(""), ADMIN);
    assertThat(s.enabled()).isTrue();
    assertThat(s.anonymous()).as("metrics are not open by default").isFalse();
    assertThat(s.scrapeToken()).isEmpty();
    assertThat(s.perPartitionLimit()).isEqualTo(256);
  }

  @Test
  void aScrapeTokenIsCheckedAndNeverShown() {
    String token = "scrape-token-secret-4242";
    MetricsSettings s =
        MetricsSettings.create(config("weir.metrics.token = \"" + token + "\""), ADMIN);
    assertThat(s.scrapeToken()).hasValue(token);
    assertThat(s.toString()).doesNotContain(token);
    assertThatThrownBy(() -> MetricsSettings.create(config("weir.metrics.token = short"), ADMIN))
        .isInstanceOf(SettingsException.class)
        .hasMessageContaining("weir.metrics.token")
        .hasMessageNotContaining("short");
    assertThatThrownBy(
            () -> MetricsSettings.create(config("weir.metrics.token = \"" + ADMIN + "\""), ADMIN))
        .as("the admin token cannot double as the scrape token")
        .isInstanceOf(SettingsException.class)
        .hasMessageNotContaining(ADMIN);
    assertThatThrownBy(
            () -> MetricsSettings.create(config("weir.metrics.per-partition-limit = -1"), ADMIN))
        .isInstanceOf(SettingsException.class)
        .hasMessageContaining("per-partition-limit");
  }
}
