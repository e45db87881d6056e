package io.weir.persistence;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import java.time.Duration;
import java.util.Map;

/**
 * Typed reads of config keys that fail with a {@link SettingsException} naming the key (and the
 * environment variable that can set it), never the offending value.
 */
public final class ConfigValues {
  private final Config config;
  private final Map<String, String> envNames;

  /**
   * @param envNames config key -> environment variable that overrides it, for error messages
   */
  public ConfigValues(Config config, Map<String, String> envNames) {
    this.config = config;
    this.envNames = Map.copyOf(envNames);
  }

  public String requiredString(String key) {
    String value = optionalString(key);
    if (value == null || value.isBlank()) {
      throw new SettingsException(key, "is required" + envHint(key));
    }
    return value;
  }

  /** A string, or null when the key is absent. */
  public String optionalString(String key) {
    try {
      return config.hasPath(key) ? config.getString(key) : null;
    } catch (ConfigException.WrongType e) {
      throw new SettingsException(key, "must be a string");
    }
  }

  public int port(String key, boolean allowZero) {
    int port = integer(key);
    if (port < (allowZero ? 0 : 1) || port > 65535) {
      throw new SettingsException(
          key, "must be a TCP port " + (allowZero ? "0" : "1") + "-65535" + envHint(key));
    }
    return port;
  }

  public int positiveInt(String key) {
    int n = integer(key);
    if (n <= 0) {
      throw new SettingsException(key, "must be a positive integer" + envHint(key));
    }
    return n;
  }

  /** An integer of 0 or more (e.g. a retry count, where 0 means: give up on the first fault). */
  public int nonNegativeInt(String key) {
    int n = integer(key);
    if (n < 0) {
      throw new SettingsException(key, "must be an integer of 0 or more" + envHint(key));
    }
    return n;
  }

  public Duration positiveDuration(String key) {
    requirePresent(key);
    try {
      Duration d = config.getDuration(key);
      if (d.isNegative() || d.isZero()) {
        throw new SettingsException(key, "must be a positive duration such as 5s");
      }
      return d;
    } catch (ConfigException.BadValue | ConfigException.WrongType e) {
      throw new SettingsException(key, "must be a duration such as 5s or 500ms" + envHint(key));
    }
  }

  /** A size such as 64MiB or 10GiB, at least {@code min} bytes. */
  public long bytes(String key, long min) {
    requirePresent(key);
    try {
      Long n = config.getBytes(key);
      if (n < min) {
        throw new SettingsException(key, "must be at least " + min + " bytes" + envHint(key));
      }
      return n;
    } catch (ConfigException.BadValue | ConfigException.WrongType e) {
      throw new SettingsException(key, "must be a size such as 64MiB" + envHint(key));
    }
  }

  private int integer(String key) {
    requirePresent(key);
    try {
      return config.getInt(key);
    } catch (ConfigException.BadValue | ConfigException.WrongType e) {
      throw new SettingsException(key, "must be an integer" + envHint(key));
    }
  }

  private void requirePresent(String key) {
    if (!config.hasPath(key)) {
      throw new SettingsException(key, "is required" + envHint(key));
    }
  }

  /**
   * {@code " (environment variable X)"} when {@code key} has one, else empty: for messages built
   * elsewhere.
   */
  public String envHintOf(String key) {
    return envHint(key);
  }

  private String envHint(String key) {
    String env = envNames.get(key);
    return env == null ? "" : " (environment variable " + env + ")";
  }
}
