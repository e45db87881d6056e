package io.weir.persistence.serialization;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.typesafe.config.ConfigFactory;
import io.weir.protocol.CborSerializable;
import java.util.Optional;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.jackson.JacksonMigration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The evolution rules of docs/partitions.md ("Changing a serialized class") hold with Weir's
 * serializer configuration: an added field decodes from old bytes to its absent value, an unknown
 * field is ignored, and a Jackson migration renames a class and a field.
 */
class JacksonMigrationTest {
  /** The "old release" shape. */
  public record Before(String name, long count) implements CborSerializable {}

  /** Before with fields added. */
  public record Added(String name, long count, Optional<String> note, String extra, long more)
      implements CborSerializable {}

  /** Before with fewer fields than the bytes carry. */
  public record Fewer(String name) implements CborSerializable {}

  /** Before renamed, with {@code count} renamed to {@code total}. */
  public record After(String name, long total) implements CborSerializable {}

  public static final class BeforeToAfter extends JacksonMigration {
    @Override
    public int currentVersion() {
      return 2;
    }

    @Override
    public String transformClassName(int fromVersion, String className) {
      return After.class.getName();
    }

    @Override
    public JsonNode transform(int fromVersion, JsonNode json) {
      ObjectNode o = (ObjectNode) json;
      if (fromVersion < 2) {
        o.set("total", o.remove("count"));
      }
      return o;
    }
  }

  private static ActorSystem<Void> system;
  private static Serialization serialization;

  @BeforeAll
  static void start() {
    system =
        ActorSystem.create(
            Behaviors.empty(),
            "JacksonMigrationTest",
            ConfigFactory.parseString(
                    "pekko.actor.provider = local\n"
                        + "pekko.serialization.jackson.migrations {\n"
                        + "  \""
                        + Before.class.getName()
                        + "\" = \""
                        + BeforeToAfter.class.getName()
                        + "\"\n"
                        + "}")
                .withFallback(ConfigFactory.defaultReference()));
    serialization = SerializationExtension.get(system);
  }

  @AfterAll
  static void stop() {
    system.terminate();
  }

  private static byte[] bytes(Object o) {
    return serialization.serialize(o).get();
  }

  private static int id(Object o) {
    return serialization.findSerializerFor(o).identifier();
  }

  @Test
  void anAddedFieldDecodesFromOldBytesToItsAbsentValue() {
    Before old = new Before("n", 7);
    Object read = serialization.deserialize(bytes(old), id(old), Added.class.getName()).get();
    assertThat(read).isEqualTo(new Added("n", 7, Optional.empty(), null, 0));
  }

  @Test
  void aFieldTheReaderDoesNotKnowIsIgnored() {
    Added newer = new Added("n", 7, Optional.of("x"), "y", 9);
    Object read = serialization.deserialize(bytes(newer), id(newer), Fewer.class.getName()).get();
    assertThat(read).isEqualTo(new Fewer("n"));
  }

  @Test
  void aMigratedClassIsWrittenWithItsVersionInTheManifest() {
    Before b = new Before("n", 7);
    assertThat(
            org.apache.pekko.serialization.Serializers.manifestFor(
                serialization.findSerializerFor(b), b))
        .isEqualTo(Before.class.getName() + "#2");
  }

  @Test
  void aMigrationRenamesTheClassAndAField() {
    Before old = new Before("n", 7);
    // The old release wrote the bare class name (no migration there yet): version 1.
    Object read = serialization.deserialize(bytes(old), id(old), Before.class.getName()).get();
    assertThat(read).isEqualTo(new After("n", 7));
  }
}
