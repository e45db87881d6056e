package io.weir.node.feed;

import io.weir.protocol.CborSerializable;

/**
 * A node's partitions persisted new outbox entries since its last signal ({@link TailSignals}):
 * every node's pushed live queries read on. {@code origin} is the sending member's address.
 */
public record TailsAdvanced(String origin) implements CborSerializable {}
