package io.weir.node.auth;

import java.util.Map;
import java.util.Set;

/**
 * An authenticated caller.
 *
 * @param id stable principal id (never the token)
 * @param administrator whether this principal is a cluster administrator (may reach /admin and holds
 *     every grant)
 * @param grants collection -> grant names ({@code DocumentsRead}, {@code DocumentsWrite}, ...)
 * @param policyEpoch advances with every change to the principal's grants or standing
 */
public record Principal(String id, boolean administrator, Map<String, Set<String>> grants, long policyEpoch) {
  public Principal {
    grants = grants == null ? Map.of() : Map.copyOf(grants);
  }

  public Principal(String id, boolean administrator) {
    this(id, administrator, Map.of(), 0);
  }

  /** Whether this principal may do what {@code grant} allows on {@code collection}. */
  public boolean may(String grant, String collection) {
    return administrator || grants.getOrDefault(collection, Set.of()).contains(grant);
  }
}
