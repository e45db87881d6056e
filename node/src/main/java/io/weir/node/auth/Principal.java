package io.weir.node.auth;

import java.util.Map;
import java.util.Set;

/**
 * An authenticated caller.
 *
 * @param id stable principal id (never the token)
 * @param administrator whether this principal is a cluster administrator (may reach /admin and
 *     holds every grant)
 * @param grants collection -> grant names ({@code DocumentsRead}, {@code DocumentsWrite}, ...)
 * @param policyEpoch advances with every change to the principal's grants or standing
 * @param groups groups it belongs to: an ACL field entry {@code "group:<name>"} names them
 */
public record Principal(
    String id,
    boolean administrator,
    Map<String, Set<String>> grants,
    long policyEpoch,
    Set<String> groups) {
  public Principal {
    grants = grants == null ? Map.of() : Map.copyOf(grants);
    groups = groups == null ? Set.of() : Set.copyOf(groups);
  }

  public Principal(
      String id, boolean administrator, Map<String, Set<String>> grants, long policyEpoch) {
    this(id, administrator, grants, policyEpoch, Set.of());
  }

  public Principal(String id, boolean administrator) {
    this(id, administrator, Map.of(), 0);
  }

  /**
   * Whether this principal holds the field grant {@code grant} ({@code FieldRead}, {@code
   * FieldUse}) on {@code field}.
   */
  public boolean mayField(String grant, String collection, String field) {
    return administrator || grants.getOrDefault(collection, Set.of()).contains(grant + ":" + field);
  }

  /** Ids and groups only. */
  @Override
  public String toString() {
    return "Principal["
        + id
        + ", administrator="
        + administrator
        + ", policyEpoch="
        + policyEpoch
        + "]";
  }

  /** Whether this principal may do what {@code grant} allows on {@code collection}. */
  public boolean may(String grant, String collection) {
    return administrator || grants.getOrDefault(collection, Set.of()).contains(grant);
  }
}
