package io.weir.persistence;

import com.typesafe.config.Config;
import java.time.Duration;
import java.util.Map;

/**
 * Connection settings for the PostgreSQL that holds Weir's state ({@code weir.postgres}).
 *
 * @param url JDBC URL, {@code jdbc:postgresql://...}
 * @param password secret; never part of {@link #toString()}
 * @param tls TLS towards the server ({@code weir.postgres.tls}); {@link PostgresTls#NONE} when
 *     unset
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
    Duration maxBackoff,
    PostgresTls tls) {

  static final Map<String, String> ENV =
      Map.of(
          "weir.postgres.url", "WEIR_PG_URL",
          "weir.postgres.user", "WEIR_PG_USER",
          "weir.postgres.password", "WEIR_PG_PASSWORD",
          "weir.postgres.tls.mode", "WEIR_PG_SSLMODE",
          "weir.postgres.tls.root-cert", "WEIR_PG_SSLROOTCERT",
          "weir.postgres.tls.cert", "WEIR_PG_SSLCERT",
          "weir.postgres.tls.key", "WEIR_PG_SSLKEY",
          "weir.postgres.tls.key-password", "WEIR_PG_SSLPASSWORD");

  /**
   * The same server settings for another database URL (e.g. a mirror sink's target), same login and
   * TLS.
   */
  public PostgresSettings withUrl(String otherUrl) {
    return new PostgresSettings(
        otherUrl,
        user,
        password,
        schema,
        poolSize,
        connectTimeout,
        probeInterval,
        minBackoff,
        maxBackoff,
        tls);
  }

  /** The same settings for a pool of another size. */
  public PostgresSettings withPoolSize(int size) {
    return new PostgresSettings(
        url,
        user,
        password,
        schema,
        size,
        connectTimeout,
        probeInterval,
        minBackoff,
        maxBackoff,
        tls);
  }

  /** Only {@code weir.postgres.tls}, checked as {@link #create(Config)} does. */
  public static PostgresTls tls(Config config) {
    return PostgresTls.create(new ConfigValues(config, ENV), "weir.postgres.tls");
  }

  public static PostgresSettings create(Config config) {
    ConfigValues v = new ConfigValues(config, ENV);
    String url = v.requiredString("weir.postgres.url");
    if (!url.startsWith("jdbc:postgresql:")) {
      throw new SettingsException(
          "weir.postgres.url", "must be a JDBC URL starting with jdbc:postgresql:");
    }
    String schema = v.requiredString("weir.postgres.schema");
    if (!Identifiers.isValid(schema)) {
      throw new SettingsException("weir.postgres.schema", Identifiers.SHAPE);
    }
    Duration minBackoff = v.positiveDuration("weir.postgres.min-backoff");
    Duration maxBackoff = v.positiveDuration("weir.postgres.max-backoff");
    if (maxBackoff.compareTo(minBackoff) < 0) {
      throw new SettingsException(
          "weir.postgres.max-backoff", "must not be shorter than weir.postgres.min-backoff");
    }
    PostgresTls tls = PostgresTls.create(v, "weir.postgres.tls");
    tls.checkUrl("weir.postgres.url", url);
    return new PostgresSettings(
        url,
        v.requiredString("weir.postgres.user"),
        v.optionalString("weir.postgres.password"),
        schema,
        v.positiveInt("weir.postgres.pool-size"),
        v.positiveDuration("weir.postgres.connect-timeout"),
        v.positiveDuration("weir.postgres.probe-interval"),
        minBackoff,
        maxBackoff,
        tls);
  }

  @Override
  public String toString() {
    return "PostgresSettings[url="
        + url
        + ", user="
        + user
        + ", password=<hidden>, schema="
        + schema
        + ", poolSize="
        + poolSize
        + ", tls="
        + tls
        + "]";
  }
}
