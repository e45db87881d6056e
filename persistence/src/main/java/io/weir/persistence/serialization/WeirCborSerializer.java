package io.weir.persistence.serialization;

import com.fasterxml.jackson.dataformat.cbor.CBORFactory;
import io.weir.protocol.CborSerializable;
import java.io.NotSerializableException;
import java.util.Optional;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.jackson.JacksonObjectMapperProvider;
import org.apache.pekko.serialization.jackson.JacksonSerializer;

/**
 * Pekko's Jackson CBOR serializer (the same mapper, identifier and bytes as {@code
 * JacksonCborSerializer}) with one addition: manifests use {@link WireNames}, so a class that moved
 * keeps the manifest it had. Nodes of the release before and after the move exchange its messages
 * in either direction, and stored fixtures of the old name still decode. Bound under Pekko's
 * binding name {@code jackson-cbor}, whose identifier (33) it keeps.
 *
 * <p>A manifest is the class's name, followed by {@code #version} when a Jackson migration is
 * registered for it; only the name part is translated.
 */
public final class WeirCborSerializer extends JacksonSerializer {
  private final WireNames wireNames;

  public WeirCborSerializer(ExtendedActorSystem system, String bindingName) {
    super(
        system,
        bindingName,
        JacksonObjectMapperProvider.get(system)
            .getOrCreate(bindingName, Optional.of(new CBORFactory())));
    this.wireNames = WireNames.from(system.settings().config());
  }

  /**
   * Fails unless {@link CborSerializable} messages use this serializer. The binding replaces
   * Pekko's own entry for {@code jackson-cbor} in {@code reference.conf}, and which entry wins
   * depends on the order of the configuration files on the classpath (or on how a fat jar merged
   * them): with Pekko's serializer a node would send moved classes under their new names, which
   * peers of an earlier release cannot decode.
   */
  public static void requireBound(ActorSystem<?> system) {
    Object bound;
    try {
      bound = SerializationExtension.get(system).serializerFor(CborSerializable.class);
    } catch (NotSerializableException e) {
      throw new IllegalStateException("no serializer is bound to CborSerializable", e);
    }
    if (!(bound instanceof WeirCborSerializer)) {
      throw new IllegalStateException(
          "pekko.actor.serializers.jackson-cbor is "
              + bound.getClass().getName()
              + ", not Weir's serializer (check how the reference.conf files were merged)");
    }
  }

  @Override
  public String manifest(Object o) {
    String manifest = super.manifest(o);
    String className = o.getClass().getName();
    String wire = wireNames.wireName(className);
    if (wire.equals(className) || !manifest.startsWith(className)) {
      return manifest;
    }
    return wire + manifest.substring(className.length());
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) {
    int version = manifest.indexOf('#');
    String name = version < 0 ? manifest : manifest.substring(0, version);
    String className = wireNames.className(name);
    if (className.equals(name)) {
      return super.fromBinary(bytes, manifest);
    }
    return super.fromBinary(
        bytes, version < 0 ? className : className + manifest.substring(version));
  }
}
