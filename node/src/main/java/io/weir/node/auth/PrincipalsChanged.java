package io.weir.node.auth;

import io.weir.protocol.CborSerializable;

/**
 * Published on the cluster topic {@code weir-principals} after a change to principals or grants
 * made through a node has committed: the other nodes reload their principals at once. Carries no
 * principal, token or grant, only the address of the node the change went through. Losing one is
 * harmless: every node also reloads on its schedule ({@code weir.principals.refresh}).
 */
public record PrincipalsChanged(String origin) implements CborSerializable {}
