package io.weir.node.metrics;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import io.weir.persistence.ConfigValues;
import io.weir.persistence.SettingsException;
import java.util.Map;
import java.util.Optional;

/**
 * {@code weir.metrics.*}: the Prometheus endpoint {@code GET /metrics} and what it exports.
 *
 * @param enabled off: no meters beyond the pipelines' own, {@code /metrics} answers 404
 * @param scrapeToken a bearer token that opens {@code /metrics} and nothing else (a cluster
 *     administrator's token opens it too); empty: administrators only
 * @param anonymous on: {@code /metrics} needs no token at all (for a port only the scraper reaches)
 * @param perPartitionLimit partition-labelled series are exported while the cluster has at most
 *     this many partitions; above it, only the per-node aggregates (0: never)
 */
public record MetricsSettings(
    boolean enabled, Optional<String> scrapeToken, boolean anonymous, int perPartitionLimit) {
  /** Minimum length of a scrape token, as for the bootstrap admin token. */
  public static final int MIN_TOKEN_LENGTH = 16;

  /** Metrics on, administrators only, per-partition series up to 256 partitions. */
  public static final MetricsSettings DEFAULTS =
      new MetricsSettings(true, Optional.empty(), false, 256);

  public static MetricsSettings create(Config config, String adminToken) {
    ConfigValues v = new ConfigValues(config, Map.of("weir.metrics.token", "WEIR_METRICS_TOKEN"));
    String token = v.optionalString("weir.metrics.token");
    Optional<String> scrape = Optional.empty();
    if (token != null && !token.isEmpty()) {
      if (token.length() < MIN_TOKEN_LENGTH || token.chars().anyMatch(Character::isWhitespace)) {
        throw new SettingsException(
            "weir.metrics.token",
            "must be at least "
                + MIN_TOKEN_LENGTH
                + " characters without white space (environment variable WEIR_METRICS_TOKEN), or empty");
      }
      if (token.equals(adminToken)) {
        // The scraper's credential must not be an administrator's: it is stored with Prometheus.
        throw new SettingsException(
            "weir.metrics.token", "must differ from weir.admin-token (or be empty)");
      }
      scrape = Optional.of(token);
    }
    int limit;
    try {
      limit = config.getInt("weir.metrics.per-partition-limit");
    } catch (ConfigException e) {
      throw new SettingsException(
          "weir.metrics.per-partition-limit", "must be a whole number from 0");
    }
    if (limit < 0) {
      throw new SettingsException(
          "weir.metrics.per-partition-limit", "must be a whole number from 0");
    }
    return new MetricsSettings(
        bool(config, "weir.metrics.enabled"),
        scrape,
        bool(config, "weir.metrics.anonymous"),
        limit);
  }

  private static boolean bool(Config config, String key) {
    try {
      return config.getBoolean(key);
    } catch (ConfigException e) {
      throw new SettingsException(key, "must be on or off");
    }
  }

  /** Never shows the token. */
  @Override
  public String toString() {
    return "MetricsSettings[enabled="
        + enabled
        + ", scrapeToken="
        + (scrapeToken.isPresent() ? "set" : "none")
        + ", anonymous="
        + anonymous
        + ", perPartitionLimit="
        + perPartitionLimit
        + "]";
  }
}
