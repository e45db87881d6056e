package io.weir.persistence;

import com.typesafe.config.Config;
import java.time.Duration;
import java.util.Map;

/**
 * Connection settings for the PostgreSQL that holds Weir's state ({@code weir.postgres}).
 *
 * @param url JDBC URL, {@code jdbc:postgresql://...}
 * @param password secret; never part of {@link #toString()}
 */
public record PostgresSettings(
    String url,
    String user,
    String password,
    String schema,
    int poolSize,
    Duration connectTimeout,
    Duration probeInterval,
    Duration minBackoff,
    Duration maxBackoff) {

  static final Map<String, String> ENV =
      Map.of(
          "weir.postgres.url", "WEIR_PG_URL",
          "weir.postgres.user", "WEIR_PG_USER",
          "weir.postgres.password", "WEIR_PG_PASSWORD");

  public static PostgresSettings create(Config config) {
    ConfigValues v = new ConfigValues(config, ENV);
    String url = v.requiredString("weir.postgres.url");
    if (!url.startsWith("jdbc:postgresql:")) {
      throw new SettingsException("weir.postgres.url", "must be a JDBC URL starting with jdbc:postgresql:");
    }
    String schema = v.requiredString("weir.postgres.schema");
    if (!Identifiers.isValid(schema)) {
      throw new SettingsException("weir.postgres.schema", Identifiers.SHAPE);
    }
    Duration minBackoff = v.positiveDuration("weir.postgres.min-backoff");
    Duration maxBackoff = v.positiveDuration("weir.postgres.max-backoff");
    if (maxBackoff.compareTo(minBackoff) < 0) {
      throw new SettingsException("weir.postgres.max-backoff", "must not be shorter than weir.postgres.min-backoff");
    }
    return new PostgresSettings(
        url,
        v.requiredString("weir.postgres.user"),
        v.optionalString("weir.postgres.password"),
        schema,
        v.positiveInt("weir.postgres.pool-size"),
        v.positiveDuration("weir.postgres.connect-timeout"),
        v.positiveDuration("weir.postgres.probe-interval"),
        minBackoff,
        maxBackoff);
  }

  @Override
  public String toString() {
    return "PostgresSettings[url=" + url + ", user=" + user + ", password=<hidden>, schema=" + schema
        + ", poolSize=" + poolSize + "]";
  }
}
