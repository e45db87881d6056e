package io.weir.node.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.auth.Policies;
import io.weir.node.documents.Documents;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.persistence.PolicyStore.Visibility;
import io.weir.persistence.PrincipalStore;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code /admin/policies}: collection policies (administrators only).
 *
 * <ul>
 *   <li>{@code GET /admin/policies}: every stored policy.
 *   <li>{@code GET /admin/policies/{collection}}: one (version 0: none stored).
 *   <li>{@code PUT /admin/policies/{collection}} {@code {"sensitiveFields": [...], "visibility":
 *       "none"|"acl"|"owner", "field": "<top-level field>"}}: stores it under a new version and
 *       installs the row rule in every partition; 200 with the version, 503 (retryable) when some
 *       partition did not install it (PUT again).
 * </ul>
 */
final class PolicyRoutes extends JsonRoutes {
  private static final Logger log = LoggerFactory.getLogger(PolicyRoutes.class);
  private static final Set<String> FIELDS = Set.of("sensitiveFields", "visibility", "field");
  static final int MAX_SENSITIVE_FIELDS = 64;
  private final Policies policies;

  PolicyRoutes(ObjectMapper json, Policies policies) {
    super(json);
    this.policies = policies;
  }

  Route routes() {
    return concat(
        pathEndOrSingleSlash(
            () ->
                get(
                    () ->
                        extractRequestContext(
                            ctx ->
                                json(
                                    200,
                                    Map.of(
                                        "policies",
                                        policies.all().stream()
                                            .map(PolicyRoutes::view)
                                            .toList()))))),
        path(
            PathMatchers.segment(),
            collection -> {
              if (!Documents.readableCollection(collection)) {
                return error(
                    ErrorCode.INVALID_NAME, "collections are 1 to 128 of A-Z a-z 0-9 _ . -");
              }
              return concat(
                  get(
                      () ->
                          extractRequestContext(
                              ctx ->
                                  policies.loaded()
                                      ? json(200, view(policies.policy(collection)))
                                      : error(
                                          ErrorCode.UNAVAILABLE,
                                          "the policies are not loaded yet; retry"))),
                  put(() -> jsonBody(ADMIN_BODY, root -> put(collection, root))));
            }));
  }

  private Route put(String collection, JsonNode root) {
    String shape =
        "the body must be {\"sensitiveFields\": [<field>...], \"visibility\": \"none\" | \"acl\" | \"owner\","
            + " \"field\": <field, with acl or owner>}; fields are top-level names of A-Z a-z 0-9 _ (not starting with a digit)";
    if (root == null || !root.isObject()) {
      return error(ErrorCode.BAD_REQUEST, shape);
    }
    for (var it = root.fieldNames(); it.hasNext(); ) {
      if (!FIELDS.contains(it.next())) {
        return error(ErrorCode.BAD_REQUEST, shape);
      }
    }
    JsonNode sensitive = root.get("sensitiveFields");
    JsonNode visibility = root.get("visibility");
    JsonNode field = root.get("field");
    List<String> fields = new ArrayList<>();
    if (sensitive != null) {
      if (!sensitive.isArray() || sensitive.size() > MAX_SENSITIVE_FIELDS) {
        return error(ErrorCode.BAD_REQUEST, shape);
      }
      for (JsonNode f : sensitive) {
        if (!f.isTextual() || !PrincipalStore.validField(f.textValue())) {
          return error(ErrorCode.BAD_REQUEST, shape);
        }
        fields.add(f.textValue());
      }
    }
    Visibility kind;
    try {
      kind =
          visibility == null
              ? Visibility.NONE
              : Visibility.ofWire(visibility.isTextual() ? visibility.textValue() : "?");
    } catch (IllegalArgumentException e) {
      return error(ErrorCode.BAD_REQUEST, shape);
    }
    boolean named =
        field != null && field.isTextual() && PrincipalStore.validField(field.textValue());
    if ((kind == Visibility.NONE) != (field == null) || (field != null && !named)) {
      return error(ErrorCode.BAD_REQUEST, shape);
    }
    if (named && fields.contains(field.textValue())) {
      return error(ErrorCode.BAD_REQUEST, "the visibility field cannot also be sensitive");
    }
    CollectionPolicy policy =
        new CollectionPolicy(collection, 0, fields, kind, named ? field.textValue() : null);
    return onComplete(
        policies.put(policy),
        result -> {
          if (!result.isSuccess()) {
            log.warn(
                "a policy change failed: {}", SafeErrors.describe(unwrap(result.failed().get())));
            return error(
                ErrorCode.UNAVAILABLE,
                "the policy could not be stored (storage unavailable); retry");
          }
          Policies.Installed done = result.get();
          if (done.partitions() < done.total()) {
            return error(
                ErrorCode.UNAVAILABLE,
                "stored as version "
                    + done.version()
                    + " but only "
                    + done.partitions()
                    + " of "
                    + done.total()
                    + " partitions installed its row rule; reads of the collection fail until they do;"
                    + " PUT the policy again");
          }
          Map<String, Object> out = new LinkedHashMap<>(view(policies.policy(collection)));
          out.put("version", done.version());
          out.put("partitions", done.partitions());
          return json(200, out);
        });
  }

  static Map<String, Object> view(CollectionPolicy p) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("collection", p.collection());
    out.put("version", p.version());
    out.put("sensitiveFields", p.sensitiveFields());
    out.put("visibility", p.visibility().wire());
    out.put("field", p.visibilityField());
    return out;
  }
}
