package io.weir.persistence.serialization;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigValue;
import com.typesafe.config.ConfigValueType;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The names classes have on the wire where they differ from their Java names: a class that moved
 * (to another file or package) keeps the manifest peers and stored fixtures know it by. Read from
 * {@code weir.serialization.wire-names}, a map from the class's current binary name to its wire
 * name; a class not listed is known by its binary name. Both directions are one-to-one.
 */
public final class WireNames {
  /** The configuration path of the table. */
  public static final String PATH = "weir.serialization.wire-names";

  private final Map<String, String> wireByClass;
  private final Map<String, String> classByWire;

  private WireNames(Map<String, String> wireByClass) {
    this.wireByClass = Map.copyOf(wireByClass);
    Map<String, String> reverse = new HashMap<>();
    wireByClass.forEach(
        (cls, wire) -> {
          if (reverse.put(wire, cls) != null) {
            throw new IllegalArgumentException(PATH + ": two classes have the wire name " + wire);
          }
          if (wireByClass.containsKey(wire)) {
            throw new IllegalArgumentException(
                PATH + ": the wire name " + wire + " is also the name of a listed class");
          }
        });
    this.classByWire = Map.copyOf(reverse);
  }

  /** The table configured under {@link #PATH} (empty when the path is absent). */
  public static WireNames from(Config config) {
    if (!config.hasPath(PATH)) {
      return new WireNames(Map.of());
    }
    Map<String, String> table = new HashMap<>();
    for (Map.Entry<String, ConfigValue> e : config.getObject(PATH).entrySet()) {
      if (e.getValue().valueType() != ConfigValueType.STRING) {
        throw new IllegalArgumentException(
            PATH + ": the value for " + e.getKey() + " is not a name");
      }
      table.put(e.getKey(), (String) e.getValue().unwrapped());
    }
    return new WireNames(table);
  }

  /** The name {@code type} is known by on the wire. */
  public String wireName(Class<?> type) {
    return wireName(type.getName());
  }

  /** The name the class with binary name {@code className} is known by on the wire. */
  public String wireName(String className) {
    return wireByClass.getOrDefault(Objects.requireNonNull(className), className);
  }

  /** The binary name of the class known by {@code wireName} on the wire. */
  public String className(String wireName) {
    return classByWire.getOrDefault(Objects.requireNonNull(wireName), wireName);
  }

  /** How many classes have a wire name of their own. */
  public int size() {
    return wireByClass.size();
  }
}
