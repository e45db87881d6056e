/**
 * The actor message protocol for client applications: Pekko applications that join a Weir cluster
 * with the role {@value io.weir.protocol.client.ClientRequest#CLIENT_ROLE}, hosting nothing, and
 * send {@link io.weir.protocol.client.ClientRequest}s to the gateway of any server node. Messages
 * are {@link io.weir.protocol.CborSerializable}: a client binds that marker to Pekko's {@code
 * jackson-cbor} serializer, as the nodes do. See docs/protocol-client.md.
 */
package io.weir.protocol.client;
