package io.weir.protocol.http;

import java.util.Map;

/**
 * Reply of {@code GET /health/ready}: {@code ready} is true when every check passes.
 *
 * @param checks check name -> state, e.g. {@code "cluster-member" -> "up"}, {@code "storage" ->
 *     "ready"}
 */
public record Readiness(boolean ready, Map<String, String> checks) {
  public Readiness {
    checks = Map.copyOf(checks);
  }
}
