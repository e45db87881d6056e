package io.weir.persistence.serialization;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.TestInstance;

/**
 * The serialization contract of one module's messages, events and snapshots (every concrete class
 * bound to Weir's {@code jackson-cbor} serializer in that module): each round-trips, and every
 * stored fixture of the current and earlier formats still decodes to what it stood for. A module
 * extends this with an anchor class of its own; see {@link SerializationFixtures}.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
public abstract class SerializationContract {

  protected SerializationFixtures fixtures;

  /** A class of the module (its classes directory is scanned). */
  protected abstract Class<?> anchor();

  /** The Maven module (for the fixture-writing command). */
  protected abstract String module();

  /** Classes that must be among the bound ones: a guard against a scan that finds nothing. */
  protected abstract List<Class<?>> knownBound();

  /**
   * Overrides of expected instances for earlier versions' fixtures (see {@link
   * SerializationFixtures#expectInVersion}).
   */
  protected void expectations(SerializationFixtures f) {}

  /**
   * Classes with stored fixtures that no longer exist, each with the reason no peer, journal or
   * snapshot can hold one (a message an actor only ever sent itself, never across the wire or into
   * storage). Their fixtures are kept as a record and not decoded; the class must really be gone.
   */
  protected java.util.Map<String, String> retired() {
    return java.util.Map.of();
  }

  @BeforeAll
  void start() {
    fixtures = new SerializationFixtures(module());
    expectations(fixtures);
  }

  @AfterAll
  void stop() {
    fixtures.close();
  }

  private List<Class<?>> bound() {
    return SerializationFixtures.boundClasses(anchor());
  }

  @Test
  void theScanFindsTheBoundClasses() {
    assertThat(bound()).containsAll(knownBound());
  }

  @TestFactory
  Stream<DynamicTest> everyBoundClassRoundTrips() {
    return bound().stream()
        .map(
            type ->
                DynamicTest.dynamicTest(
                    type.getName(),
                    () -> {
                      for (Object sample : fixtures.samples(type)) {
                        SerializationFixtures.Serialized s = fixtures.serialize(sample);
                        assertThat(s.manifest()).as("manifest").startsWith(fixtures.wireName(type));
                        Object back = fixtures.deserialize(s);
                        assertThat(back).as("round trip of " + type.getName()).isEqualTo(sample);
                        // Serializing again gives the same bytes: nothing was lost or defaulted.
                        assertThat(fixtures.serialize(back).payload()).isEqualTo(s.payload());
                      }
                    }));
  }

  @TestFactory
  Stream<DynamicTest> everyBoundClassHasAFixtureOfTheCurrentFormat() {
    return bound().stream()
        .map(
            type ->
                DynamicTest.dynamicTest(
                    type.getName(),
                    () -> {
                      if (Files.exists(fixtures.fixture(SerializationFixtures.CURRENT, type))) {
                        return;
                      }
                      if (SerializationFixtures.writing()) {
                        fixtures.write(type);
                        return;
                      }
                      fail(
                          "no "
                              + SerializationFixtures.CURRENT
                              + " serialization fixture for "
                              + type.getName()
                              + "; write the missing fixtures with: mvn -o test -pl "
                              + module()
                              + " -Dtest="
                              + getClass().getSimpleName()
                              + " -D"
                              + SerializationFixtures.WRITE_PROPERTY
                              + "=true (and commit them)");
                    }));
  }

  @TestFactory
  Stream<DynamicTest> storedFixturesDecodeWithTheCurrentCode() {
    List<DynamicTest> tests = new ArrayList<>();
    for (String version : fixtures.versions()) {
      for (String className : fixtures.fixtureClassNames(version)) {
        tests.add(
            DynamicTest.dynamicTest(
                version + " " + className,
                () -> {
                  Class<?> type;
                  if (retired().containsKey(className)) {
                    assertThat(retired().get(className))
                        .as("why " + className + " retired")
                        .isNotBlank();
                    assertThatThrownBy(
                            () -> Class.forName(className, false, anchor().getClassLoader()))
                        .as(className + " is declared retired")
                        .isInstanceOf(ClassNotFoundException.class);
                    return;
                  }
                  try {
                    type =
                        Class.forName(
                            fixtures.className(className), false, anchor().getClassLoader());
                  } catch (ClassNotFoundException e) {
                    throw new AssertionError(
                        "a "
                            + version
                            + " fixture names "
                            + className
                            + ", which no longer exists:"
                            + " a peer or journal of that format may still hold it. Keep the class (give"
                            + " it its old name in weir.serialization.wire-names when it moved, or map"
                            + " its manifest in a Jackson migration) before deleting the fixture",
                        e);
                  }
                  List<SerializationFixtures.Serialized> stored = fixtures.read(version, className);
                  List<Object> expected = fixtures.expected(version, type);
                  assertThat(stored).as("samples in the fixture").hasSize(expected.size());
                  for (int i = 0; i < stored.size(); i++) {
                    Object decoded = fixtures.deserialize(stored.get(i));
                    assertThat(decoded)
                        .as(version + " fixture of " + className)
                        .isEqualTo(expected.get(i));
                    SerializationFixtures.Serialized again = fixtures.serialize(decoded);
                    if (again.serializerId() == stored.get(i).serializerId()) {
                      // Sent by this code under the same serializer, it carries the manifest the
                      // fixture's release used (the wire name, when the class moved since), so a
                      // peer of that release finds the class. (Bytes may differ: fields added since
                      // are ignored by older readers.)
                      assertThat(again.manifest())
                          .as("manifest of " + className)
                          .isEqualTo(stored.get(i).manifest());
                    }
                  }
                }));
      }
    }
    if (!SerializationFixtures.writing()) {
      assertThat(tests).as("fixtures of module " + module()).isNotEmpty();
    }
    return tests.stream();
  }
}
