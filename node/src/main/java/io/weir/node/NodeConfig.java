package io.weir.node;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigParseOptions;
import io.weir.persistence.SettingsException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Loads a node's configuration. Precedence, highest first: JVM system properties, the {@code
 * --config} file, the node's application.conf, each module's reference.conf (where {@code WEIR_*}
 * environment variables override the defaults).
 */
public final class NodeConfig {
  private NodeConfig() {}

  public static Config load(Path configFile) {
    Config user = ConfigFactory.empty();
    if (configFile != null) {
      if (!Files.isReadable(configFile)) {
        throw new SettingsException("--config", "file is missing or not readable");
      }
      try {
        user =
            ConfigFactory.parseFile(
                configFile.toFile(), ConfigParseOptions.defaults().setAllowMissing(false));
      } catch (ConfigException e) {
        throw new SettingsException("--config", "is not valid HOCON (" + position(e) + ")");
      }
    }
    try {
      return ConfigFactory.load(user.withFallback(ConfigFactory.defaultApplication()));
    } catch (ConfigException.UnresolvedSubstitution e) {
      throw new SettingsException(keyOf(e), "is required but not set");
    } catch (ConfigException e) {
      throw new SettingsException(
          keyOf(e), "cannot be read (" + e.getClass().getSimpleName() + ")");
    }
  }

  private static String position(ConfigException e) {
    return e.origin() == null ? "unknown position" : "line " + e.origin().lineNumber();
  }

  // Typesafe Config messages quote the path between ${ } for unresolved substitutions; they never
  // contain values, but we keep only the key to be sure.
  private static String keyOf(ConfigException e) {
    String m = String.valueOf(e.getMessage());
    int start = m.indexOf("${");
    int end = start < 0 ? -1 : m.indexOf('}', start);
    return start >= 0 && end > start ? m.substring(start + 2, end) : "configuration";
  }
}
