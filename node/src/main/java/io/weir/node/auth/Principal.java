package io.weir.node.auth;

/**
 * An authenticated caller.
 *
 * @param id stable principal id (never the token)
 * @param administrator whether this principal is a cluster administrator (may reach /admin)
 */
public record Principal(String id, boolean administrator) {}
