package io.weir.protocol;

/**
 * Marker for messages and events that cross the wire or reach the journal in Jackson CBOR. Bound to
 * Pekko's {@code jackson-cbor} serializer in configuration; nothing else is bound to it.
 */
public interface CborSerializable {}
