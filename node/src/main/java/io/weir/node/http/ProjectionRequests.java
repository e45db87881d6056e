package io.weir.node.http;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;

/**
 * The bodies of the projection consumer endpoints ({@link ProjectionRoutes}), read with {@link
 * JsonRoutes#STRICT}. Their {@code toString} carries no token text, id or document.
 */
final class ProjectionRequests {
  private ProjectionRequests() {}

  record ConfigureRequest(
      Integer partition,
      String consumer,
      Long generation,
      List<String> collections,
      List<String> kinds,
      Long startAfter) {}

  record ReadRequest(
      Integer partition, String consumer, Long generation, Integer maxEntries, Long maxBytes) {}

  record ReleaseRequest(Integer partition, String consumer, Long generation) {}

  record CommitRequest(
      String token,
      String commandId,
      List<EffectRequest> effects,
      Integer partition,
      String consumer,
      Long generation) {
    /** No token text and no document. */
    @Override
    public String toString() {
      return "CommitRequest[effects=" + (effects == null ? 0 : effects.size()) + "]";
    }
  }

  /** One effect: {@code op} is {@code upsert} (with {@code document}) or {@code delete}. */
  record EffectRequest(
      String op,
      String collection,
      String id,
      Long expectedRevision,
      @JsonProperty("document") JsonNode document) {
    /** No id and no document: row values. */
    @Override
    public String toString() {
      return "EffectRequest[" + op + ", " + collection + "]";
    }
  }

  /** Where in the body a shape error is, by field names only (never a value). */
  static String fieldPath(Exception e) {
    if (e instanceof JsonMappingException m && !m.getPath().isEmpty()) {
      StringBuilder path = new StringBuilder();
      for (JsonMappingException.Reference r : m.getPath()) {
        if (r.getFieldName() != null && r.getFieldName().matches("[A-Za-z0-9_]{1,64}")) {
          path.append(path.length() == 0 ? "" : ".").append(r.getFieldName());
        } else if (r.getIndex() >= 0) {
          path.append('[').append(r.getIndex()).append(']');
        }
      }
      return path.length() == 0 ? "" : " (at " + path + ")";
    }
    return "";
  }
}
