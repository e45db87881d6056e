package io.weir.persistence.serialization;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.typesafe.config.ConfigFactory;
import io.weir.protocol.CborSerializable;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.serialization.SerializationExtension;
import org.junit.jupiter.api.Test;

class WireNamesTest {

  @Test
  void aListedClassHasItsWireNameBothWays() {
    WireNames names =
        WireNames.from(
            ConfigFactory.parseString("weir.serialization.wire-names {\"a.New$X\" = \"a.Old$X\"}"));
    assertThat(names.size()).isEqualTo(1);
    assertThat(names.wireName("a.New$X")).isEqualTo("a.Old$X");
    assertThat(names.className("a.Old$X")).isEqualTo("a.New$X");
    // Unlisted names, and the new name arriving from a peer without the table, pass unchanged.
    assertThat(names.wireName("a.Other")).isEqualTo("a.Other");
    assertThat(names.className("a.New$X")).isEqualTo("a.New$X");
  }

  @Test
  void theTableIsEmptyWhenAbsent() {
    assertThat(WireNames.from(ConfigFactory.empty()).size()).isZero();
  }

  @Test
  void twoClassesCannotShareAWireName() {
    assertThatThrownBy(
            () ->
                WireNames.from(
                    ConfigFactory.parseString(
                        "weir.serialization.wire-names {\"a.B\" = \"a.X\", \"a.C\" = \"a.X\"}")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("two classes");
  }

  @Test
  void aWireNameCannotBeAnotherListedClass() {
    assertThatThrownBy(
            () ->
                WireNames.from(
                    ConfigFactory.parseString(
                        "weir.serialization.wire-names {\"a.B\" = \"a.C\", \"a.C\" = \"a.D\"}")))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aValueMustBeAName() {
    assertThatThrownBy(
            () ->
                WireNames.from(
                    ConfigFactory.parseString("weir.serialization.wire-names {\"a.B\" = {}}")))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void weirsSerializerIsBoundToCborMessages() throws Exception {
    ActorSystem<Void> system =
        ActorSystem.create(
            Behaviors.empty(),
            "WireNamesTest",
            ConfigFactory.parseString("pekko.actor.provider = local")
                .withFallback(ConfigFactory.defaultReference()));
    try {
      WeirCborSerializer.requireBound(system);
      assertThat(
              SerializationExtension.get(system).serializerFor(CborSerializable.class).identifier())
          .isEqualTo(33); // Pekko's jackson-cbor identifier: peers of any release agree on it
    } finally {
      system.terminate();
    }
  }

  @Test
  void aNodeWithPekkosOwnCborSerializerBoundIsRefused() {
    // What a classpath whose reference.conf files merged the other way round would give: the
    // manifests of moved classes would go out under their new names, which older peers cannot read.
    ActorSystem<Void> system =
        ActorSystem.create(
            Behaviors.empty(),
            "WireNamesTestPekkos",
            ConfigFactory.parseString(
                    "pekko.actor.provider = local\n"
                        + "pekko.actor.serializers.jackson-cbor ="
                        + " \"org.apache.pekko.serialization.jackson.JacksonCborSerializer\"")
                .withFallback(ConfigFactory.defaultReference()));
    try {
      assertThatThrownBy(() -> WeirCborSerializer.requireBound(system))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("not Weir's serializer");
    } finally {
      system.terminate();
    }
  }
}
