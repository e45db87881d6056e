package io.weir.persistence.serialization;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.typesafe.config.ConfigFactory;
import io.weir.protocol.CborSerializable;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.Constructor;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.RecordComponent;
import java.lang.reflect.Type;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.Serializer;
import org.apache.pekko.serialization.Serializers;
import org.apache.pekko.serialization.jackson.JacksonCborSerializer;

/**
 * Serialization checks of the classes bound to Weir's {@code jackson-cbor} serializer (every
 * concrete {@link CborSerializable} of a module): a round trip of a representative instance of
 * each, and compatibility with the stored fixtures of earlier formats under {@code
 * src/test/resources/serialization/vN/}. Used by each module's serialization test for its own
 * classes; see docs/protocol.md ("Serialization and compatibility").
 *
 * <p>Representative instances are built from the class's structure: every field gets a value that
 * is not its type's default (distinct numbers, non-empty strings, {@code true}, present optionals,
 * one element per permitted subtype in collections of a sealed type, the last constant of an enum).
 * They are deterministic, so a fixture written once keeps matching the instance the current code
 * builds, until the class changes.
 */
public final class SerializationFixtures implements AutoCloseable {

  /**
   * The format version new fixtures are written to; earlier versions' fixtures stay as they are.
   */
  public static final String CURRENT = "v1";

  /** Set (to true) to write the missing fixtures of {@link #CURRENT} instead of failing. */
  public static final String WRITE_PROPERTY = "weir.serialization.write-fixtures";

  private static final ObjectMapper JSON =
      new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  private final ActorSystem<Void> system;
  private final Serialization serialization;
  private final WireNames wireNames;
  private final Path root;
  private final String module;
  private final Map<String, Map<Class<?>, List<Object>>> expectedOverrides = new HashMap<>();

  /**
   * @param module the Maven module whose classes are checked (for the regeneration command)
   */
  public SerializationFixtures(String module) {
    // Local provider: ActorRefs serialize as paths of this system, resolvable after a round trip.
    this.system =
        ActorSystem.create(
            Behaviors.empty(),
            "WeirSerialization",
            ConfigFactory.parseString("pekko.actor.provider = local\npekko.loglevel = WARNING")
                .withFallback(ConfigFactory.defaultReference()));
    this.serialization = SerializationExtension.get(system);
    this.wireNames = WireNames.from(system.settings().config());
    this.root =
        Path.of(System.getProperty("basedir", ".")).resolve("src/test/resources/serialization");
    this.module = module;
  }

  @Override
  public void close() {
    system.terminate();
  }

  /**
   * Declares what a fixture of an earlier {@code version} of {@code type} must decode to, when the
   * class has changed since (a field added, renamed or removed with a Jackson migration): the
   * current representative instance no longer describes the old bytes.
   */
  public void expectInVersion(String version, Class<?> type, List<Object> expected) {
    expectedOverrides.computeIfAbsent(version, v -> new HashMap<>()).put(type, expected);
  }

  // ---- Which classes ----

  /**
   * Every concrete class under the compiled classes of {@code anchor}'s module (its code source)
   * that is bound to Weir's serializer, sorted by name.
   */
  public static List<Class<?>> boundClasses(Class<?> anchor) {
    Path classes;
    try {
      classes = Path.of(anchor.getProtectionDomain().getCodeSource().getLocation().toURI());
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
    List<String> names = new ArrayList<>();
    try {
      if (Files.isDirectory(classes)) {
        try (Stream<Path> files = Files.walk(classes)) {
          files
              .filter(p -> p.toString().endsWith(".class"))
              .forEach(
                  f ->
                      names.add(
                          classes
                              .relativize(f)
                              .toString()
                              .replace(f.getFileSystem().getSeparator(), ".")));
        }
      } else {
        // The module's jar (a build of one module resolves the others from the local repository).
        try (java.util.jar.JarFile jar = new java.util.jar.JarFile(classes.toFile())) {
          jar.stream()
              .map(java.util.jar.JarEntry::getName)
              .filter(n -> n.endsWith(".class"))
              .forEach(n -> names.add(n.replace('/', '.')));
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    List<Class<?>> found = new ArrayList<>();
    try {
      for (String file : names) {
        String name = file.substring(0, file.length() - ".class".length());
        if (name.endsWith("module-info") || name.endsWith("package-info")) {
          continue;
        }
        Class<?> c = Class.forName(name, false, anchor.getClassLoader());
        if (CborSerializable.class.isAssignableFrom(c)
            && !c.isInterface()
            && !Modifier.isAbstract(c.getModifiers())
            && !c.isAnonymousClass()
            && !c.isSynthetic()) {
          found.add(c);
        }
      }
    } catch (ClassNotFoundException e) {
      throw new IllegalStateException(e);
    }
    found.sort(Comparator.comparing(Class::getName));
    return found;
  }

  // ---- Representative instances ----

  /** The representative instances of {@code type}: every constant of an enum, else one instance. */
  public List<Object> samples(Class<?> type) {
    if (type.isEnum()) {
      return List.of(type.getEnumConstants());
    }
    return List.of(new Samples().of(type, type, 0));
  }

  private final class Samples {
    private long next = 1;

    private long number() {
      return next++;
    }

    Object of(Type generic, Class<?> raw, int depth) {
      if (depth > 12) {
        throw new IllegalStateException("type nesting too deep (a cycle?) at " + raw.getName());
      }
      if (raw == long.class || raw == Long.class) {
        return 1_000L + number();
      }
      if (raw == int.class || raw == Integer.class) {
        return (int) (10 + number());
      }
      if (raw == short.class || raw == Short.class) {
        return (short) (10 + number());
      }
      if (raw == double.class || raw == Double.class) {
        return 0.5 + number();
      }
      if (raw == boolean.class || raw == Boolean.class) {
        return true;
      }
      if (raw == String.class) {
        return "text-" + number();
      }
      if (raw == byte[].class) {
        return new byte[] {1, 2, (byte) number()};
      }
      if (raw.isEnum()) {
        Object[] constants = raw.getEnumConstants();
        return constants[constants.length - 1];
      }
      if (JsonNode.class.isAssignableFrom(raw)) {
        // A JSON document carried as a tree (protocol client requests and replies).
        return com.fasterxml.jackson.databind.node.JsonNodeFactory.instance
            .objectNode()
            .put("text", "text-" + number())
            .put("n", (int) number());
      }
      if (raw == Object.class || Throwable.class.isAssignableFrom(raw)) {
        throw new IllegalStateException(
            raw.getName() + " in a serialized class: bind a typed, value-free field instead");
      }
      if (ActorRef.class.isAssignableFrom(raw)) {
        return system.deadLetters();
      }
      if (raw == Optional.class) {
        Type t = typeArgument(generic, 0);
        return Optional.of(of(t, rawOf(t), depth + 1));
      }
      if (List.class.isAssignableFrom(raw) || raw == java.util.Collection.class) {
        Type t = typeArgument(generic, 0);
        return new ArrayList<>(elements(t, depth));
      }
      if (Set.class.isAssignableFrom(raw)) {
        Type t = typeArgument(generic, 0);
        return new TreeSet<>(elements(t, depth));
      }
      if (Map.class.isAssignableFrom(raw)) {
        Type k = typeArgument(generic, 0);
        Type v = typeArgument(generic, 1);
        Map<Object, Object> map =
            raw == TreeMap.class
                ? new TreeMap<>()
                : raw == LinkedHashMap.class ? new LinkedHashMap<>() : new HashMap<>();
        for (Object value : elements(v, depth)) {
          map.put(of(k, rawOf(k), depth + 1), value);
        }
        return map;
      }
      if (raw.isInterface() || Modifier.isAbstract(raw.getModifiers())) {
        List<Class<?>> concrete = concreteSubclasses(raw);
        return of(concrete.get(0), concrete.get(0), depth + 1);
      }
      if (raw.isRecord()) {
        RecordComponent[] components = raw.getRecordComponents();
        Object[] args = new Object[components.length];
        for (int i = 0; i < components.length; i++) {
          args[i] = of(components[i].getGenericType(), components[i].getType(), depth + 1);
        }
        Class<?>[] types =
            Arrays.stream(components).map(RecordComponent::getType).toArray(Class<?>[]::new);
        return construct(raw, types, args);
      }
      Constructor<?> creator =
          Arrays.stream(raw.getDeclaredConstructors())
              .filter(c -> c.isAnnotationPresent(JsonCreator.class))
              .findFirst()
              .orElseGet(
                  () ->
                      Arrays.stream(raw.getDeclaredConstructors())
                          .max(Comparator.comparingInt(Constructor::getParameterCount))
                          .orElseThrow(
                              () ->
                                  new IllegalStateException("no constructor in " + raw.getName())));
      Type[] params = creator.getGenericParameterTypes();
      Object[] args = new Object[params.length];
      for (int i = 0; i < params.length; i++) {
        args[i] = of(params[i], rawOf(params[i]), depth + 1);
      }
      return construct(raw, creator.getParameterTypes(), args);
    }

    /** One value per permitted concrete subtype of a sealed element type, else one value. */
    private List<Object> elements(Type t, int depth) {
      Class<?> raw = rawOf(t);
      if (raw.isInterface() || Modifier.isAbstract(raw.getModifiers())) {
        List<Object> out = new ArrayList<>();
        for (Class<?> c : concreteSubclasses(raw)) {
          out.add(of(c, c, depth + 1));
        }
        return out;
      }
      return List.of(of(t, raw, depth + 1));
    }
  }

  private static Object construct(Class<?> type, Class<?>[] parameterTypes, Object[] args) {
    try {
      Constructor<?> c = type.getDeclaredConstructor(parameterTypes);
      c.setAccessible(true);
      return c.newInstance(args);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot build a representative " + type.getName(), e);
    }
  }

  /** The concrete classes of a sealed hierarchy, in declaration order. */
  private static List<Class<?>> concreteSubclasses(Class<?> type) {
    if (!type.isSealed()) {
      throw new IllegalStateException(
          type.getName()
              + " is neither concrete nor sealed: no representative instance can be chosen for it");
    }
    List<Class<?>> out = new ArrayList<>();
    for (Class<?> c : type.getPermittedSubclasses()) {
      if (c.isInterface() || Modifier.isAbstract(c.getModifiers())) {
        out.addAll(concreteSubclasses(c));
      } else {
        out.add(c);
      }
    }
    return out;
  }

  private static Type typeArgument(Type generic, int index) {
    if (generic instanceof ParameterizedType p) {
      return p.getActualTypeArguments()[index];
    }
    throw new IllegalStateException("raw generic type " + generic);
  }

  private static Class<?> rawOf(Type t) {
    if (t instanceof Class<?> c) {
      return c;
    }
    if (t instanceof ParameterizedType p) {
      return (Class<?>) p.getRawType();
    }
    throw new IllegalStateException("unsupported field type " + t);
  }

  // ---- Serialization ----

  /** A message as it crosses the wire: serializer id, manifest and bytes. */
  public record Serialized(int serializerId, String manifest, byte[] payload) {}

  /**
   * Serializes {@code message} with the serializer Pekko binds to its class, which must be Weir's
   * (Jackson CBOR or a hand-written one of Weir's, such as the partition events' encoding).
   */
  public Serialized serialize(Object message) {
    Serializer serializer = serialization.findSerializerFor(message);
    if (!(serializer instanceof JacksonCborSerializer)
        && !serializer.getClass().getName().startsWith("io.weir.")) {
      throw new AssertionError(
          message.getClass().getName()
              + " is bound to "
              + serializer.getClass().getName()
              + ", neither Weir's jackson-cbor serializer nor one of Weir's own");
    }
    String manifest = Serializers.manifestFor(serializer, message);
    byte[] bytes = serialization.serialize(message).get();
    return new Serialized(serializer.identifier(), manifest, bytes);
  }

  public Object deserialize(Serialized s) {
    return serialization.deserialize(s.payload(), s.serializerId(), s.manifest()).get();
  }

  // ---- Fixtures ----

  /** A fixture file is named by the class's wire name: what peers and journals know it by. */
  public Path fixture(String version, Class<?> type) {
    return root.resolve(version).resolve(wireName(type) + ".json");
  }

  /**
   * The name {@code type} has in manifests ({@link WireNames}; its binary name unless it moved).
   */
  public String wireName(Class<?> type) {
    return wireNames.wireName(type);
  }

  /** The binary name of the class a fixture or manifest names by {@code wireName}. */
  public String className(String wireName) {
    return wireNames.className(wireName);
  }

  /** The fixture versions present (v1, v2, ...), oldest first. */
  public List<String> versions() {
    if (!Files.isDirectory(root)) {
      return List.of();
    }
    try (Stream<Path> dirs = Files.list(root)) {
      return dirs.filter(Files::isDirectory)
          .map(p -> p.getFileName().toString())
          .filter(n -> n.matches("v\\d+"))
          .sorted(Comparator.comparingInt(n -> Integer.parseInt(n.substring(1))))
          .toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The wire names of the classes a fixture directory has fixtures of (by file name). */
  public List<String> fixtureClassNames(String version) {
    try (Stream<Path> files = Files.list(root.resolve(version))) {
      return files
          .map(p -> p.getFileName().toString())
          .filter(n -> n.endsWith(".json"))
          .map(n -> n.substring(0, n.length() - ".json".length()))
          .sorted()
          .toList();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public static boolean writing() {
    return Boolean.getBoolean(WRITE_PROPERTY);
  }

  /** Writes the fixture of {@code type} in {@link #CURRENT}; never replaces an existing one. */
  public void write(Class<?> type) throws IOException {
    Path file = fixture(CURRENT, type);
    if (Files.exists(file)) {
      throw new IllegalStateException(
          "fixture exists already (earlier formats are never rewritten): " + file);
    }
    ObjectNode doc = JSON.createObjectNode();
    doc.put("class", wireName(type));
    ArrayNode list = doc.putArray("samples");
    for (Object sample : samples(type)) {
      Serialized s = serialize(sample);
      ObjectNode n = list.addObject();
      n.put("serializerId", s.serializerId());
      n.put("manifest", s.manifest());
      n.put("payload", Base64.getEncoder().encodeToString(s.payload()));
    }
    Files.createDirectories(file.getParent());
    Files.writeString(file, JSON.writeValueAsString(doc) + "\n");
  }

  /** The serialized samples stored in a fixture. */
  public List<Serialized> read(String version, String className) throws IOException {
    JsonNode doc = JSON.readTree(root.resolve(version).resolve(className + ".json").toFile());
    List<Serialized> out = new ArrayList<>();
    for (JsonNode n : doc.get("samples")) {
      out.add(
          new Serialized(
              n.get("serializerId").asInt(),
              n.get("manifest").asText(),
              Base64.getDecoder().decode(n.get("payload").asText())));
    }
    return out;
  }

  /**
   * What the samples of a {@code version} fixture of {@code type} must decode to with the current
   * code.
   */
  public List<Object> expected(String version, Class<?> type) {
    return expectedOverrides.getOrDefault(version, Map.of()).getOrDefault(type, samples(type));
  }
}
