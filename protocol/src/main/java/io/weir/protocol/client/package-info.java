/**
 * The actor message protocol for client applications: Pekko applications that are not members of
 * the Weir cluster. A client runs Pekko remoting of its own and sends {@link
 * io.weir.protocol.client.ClientRequest}s to the gateway port of any server node ({@value
 * io.weir.protocol.client.ClientRequest#GATEWAY_SYSTEM} system, path {@value
 * io.weir.protocol.client.ClientRequest#GATEWAY_PATH}). Messages are {@link
 * io.weir.protocol.CborSerializable}: a client binds that marker to Pekko's {@code jackson-cbor}
 * serializer, as the nodes do. See docs/protocol-client.md.
 */
package io.weir.protocol.client;
