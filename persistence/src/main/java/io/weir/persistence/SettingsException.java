package io.weir.persistence;

/**
 * A setting is missing or malformed. The message names the key and what shape was expected, never
 * the value (a value may be a secret).
 */
public final class SettingsException extends RuntimeException {
  private final String key;

  public SettingsException(String key, String problem) {
    super(key + ": " + problem);
    this.key = key;
  }

  /** The configuration key at fault, e.g. {@code weir.http.port}. */
  public String key() {
    return key;
  }
}
