package io.weir.node.metrics;

import java.util.ArrayList;
import java.util.List;

/**
 * Maps a request path to the route template that serves it, e.g. {@code /v1/documents/a/b} to
 * {@code /v1/documents/{collection}/{id}}: metrics label requests by template, never by raw path,
 * because ids and collection names in paths are user data and unbounded. A path no template matches
 * is labelled by its known root ({@code /admin/**}, {@code /v1/**}, {@code /health/**}) or {@code
 * unmatched}, so the label has a fixed, small set of values.
 *
 * <p>Add the template here when adding a route (until then its requests count under their root),
 * and the route to the OpenAPI document: OpenApiDocumentTest requires both to name the same paths.
 */
public final class RouteTemplates {
  /**
   * Every route the node serves; the OpenAPI document ({@code io/weir/node/http/openapi.json}) has
   * exactly these paths (OpenApiDocumentTest).
   */
  public static final List<String> NODE =
      List.of(
          "/openapi.json",
          "/health/alive",
          "/health/ready",
          "/metrics",
          "/admin/metrics",
          "/admin/cluster",
          "/admin/partitions",
          "/admin/partitions/{partition}/accept-storage-loss",
          "/admin/outbox/status",
          "/admin/outbox/settings",
          "/admin/outbox/purge",
          "/admin/pipelines",
          "/admin/pipelines/{name}",
          "/admin/pipelines/{name}/start",
          "/admin/pipelines/{name}/stop",
          "/admin/pipelines/{name}/check",
          "/admin/pipelines/{name}/snapshot",
          "/admin/slots",
          "/admin/projections/configure",
          "/admin/projections/read",
          "/admin/projections/commit",
          "/admin/projections/release",
          "/admin/tokens/keys",
          "/admin/tokens/rotate",
          "/admin/tokens/retire",
          "/admin/principals",
          "/admin/principals/{id}/revoke",
          "/admin/principals/{id}/rotate",
          "/admin/principals/{id}/grants",
          "/admin/principals/{id}/grants/revoke",
          "/admin/policies",
          "/admin/policies/{collection}",
          "/v1/documents/batch",
          "/v1/documents/{collection}/{id}",
          "/v1/changes/read",
          "/v1/query",
          "/v1/query/live/start",
          "/v1/query/live/read",
          "/v1/query/live/stream",
          "/v1/continuous",
          "/v1/continuous/{id}",
          "/v1/continuous/{id}/events",
          "/v1/continuous/{id}/status",
          "/v1/continuous/{id}/result",
          "/console",
          "/console/{file}");

  /** Label of a path under no known root. */
  public static final String UNMATCHED = "unmatched";

  private static final List<String> ROOTS = List.of("admin", "v1", "health");

  private final List<String[]> templates = new ArrayList<>();
  private final List<String> labels = new ArrayList<>();

  public RouteTemplates(List<String> templates) {
    for (String t : templates) {
      if (!t.startsWith("/")) {
        throw new IllegalArgumentException("a template starts with /");
      }
      this.templates.add(t.substring(1).split("/", -1));
      labels.add(t);
    }
  }

  /** The node's routes. */
  public static RouteTemplates node() {
    return new RouteTemplates(NODE);
  }

  /**
   * The label of {@code path}: its template; literal segments match before {@code {...}} ones (so
   * {@code /admin/policies/x} is {@code /admin/policies/{collection}}, never a literal route).
   */
  public String label(String path) {
    // Segment bounds in place (every request is labelled; no split, no substrings).
    int from = path.startsWith("/") ? 1 : 0;
    int to = path.length();
    if (to > from && path.charAt(to - 1) == '/') {
      to--; // routes accept one trailing slash
    }
    int count = 1;
    for (int i = from; i < to; i++) {
      if (path.charAt(i) == '/') {
        count++;
      }
    }
    int[] starts = new int[count + 1]; // segment k is [starts[k], starts[k + 1] - 1)
    starts[0] = from;
    for (int i = from, k = 1; i < to; i++) {
      if (path.charAt(i) == '/') {
        starts[k++] = i + 1;
      }
    }
    starts[count] = to + 1;
    String best = null;
    int bestLiterals = -1;
    for (int i = 0; i < templates.size(); i++) {
      String[] t = templates.get(i);
      if (t.length != count) {
        continue;
      }
      int literals = 0;
      boolean match = true;
      for (int k = 0; k < t.length && match; k++) {
        int length = starts[k + 1] - 1 - starts[k];
        if (t[k].startsWith("{")) {
          match = length > 0;
        } else {
          match = t[k].length() == length && path.regionMatches(starts[k], t[k], 0, length);
          literals++;
        }
      }
      if (match && literals > bestLiterals) {
        best = labels.get(i);
        bestLiterals = literals;
      }
    }
    if (best != null) {
      return best;
    }
    int firstLength = starts[1] - 1 - starts[0];
    for (String root : ROOTS) {
      if (root.length() == firstLength && path.regionMatches(starts[0], root, 0, firstLength)) {
        return "/" + root + "/**";
      }
    }
    return UNMATCHED;
  }

  /**
   * Every label {@link #label} can return: the templates, the roots' fallbacks and {@link
   * #UNMATCHED}.
   */
  public List<String> labels() {
    List<String> all = new ArrayList<>(labels);
    ROOTS.forEach(r -> all.add("/" + r + "/**"));
    all.add(UNMATCHED);
    return all;
  }
}
