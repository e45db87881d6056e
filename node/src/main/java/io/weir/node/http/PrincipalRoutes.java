package io.weir.node.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.auth.Principals;
import io.weir.node.documents.Documents;
import io.weir.persistence.PrincipalStore;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code /admin/principals}: principals and their grants (administrators only).
 *
 * <ul>
 *   <li>{@code GET /admin/principals}: every principal (never its token or its hash).
 *   <li>{@code POST /admin/principals} {@code {"id", "administrator"?, "groups"?}}: 201 {@code
 *       {"id", "token"}}: the bearer token, shown this once; 409 when the id exists (ids are never
 *       reused).
 *   <li>{@code POST /admin/principals/{id}/revoke}: its token (and a previous one in its grace
 *       period) stops working; 404 unknown.
 *   <li>{@code POST /admin/principals/{id}/rotate} {@code {"graceSeconds"?}}: 200 {@code {"id",
 *       "token", "previousValidUntil"}}: a new bearer token, shown this once; the previous token
 *       stays valid until {@code previousValidUntil} (default {@code
 *       weir.principals.rotation-grace}); 404 for an unknown or revoked principal.
 *   <li>{@code POST /admin/principals/{id}/grants} and {@code .../grants/revoke} {@code
 *       {"collection", "grant"}}: adds or removes a grant ({@code DocumentsRead}, {@code
 *       DocumentsWrite}, {@code ChangesRead}, {@code QueryRead}; {@code ContinuousQuery} with a
 *       security scope as the collection), or a field grant {@code {"collection", "grant":
 *       "FieldRead"|"FieldUse", "field"}}; 404 for an unknown or revoked principal.
 * </ul>
 *
 * <p>Changes hold at once on this node; other nodes see them at their next reload ({@code
 * weir.principals.refresh}).
 */
final class PrincipalRoutes extends JsonRoutes {
  private static final Logger log = LoggerFactory.getLogger(PrincipalRoutes.class);
  static final int MAX_GROUPS = 64;
  private final Principals principals;

  PrincipalRoutes(ObjectMapper json, Principals principals) {
    super(json);
    this.principals = principals;
  }

  Route routes() {
    return concat(
        pathEndOrSingleSlash(
            () ->
                concat(
                    get(
                        () ->
                            extractRequestContext(
                                ctx ->
                                    json(
                                        200,
                                        Map.of(
                                            "principals",
                                            principals.all().stream()
                                                .map(PrincipalRoutes::view)
                                                .toList())))),
                    post(
                        () ->
                            body(
                                object -> {
                                  JsonNode id = object.get("id");
                                  JsonNode admin = object.get("administrator");
                                  JsonNode groups = object.get("groups");
                                  String shape =
                                      "the body must be {\"id\": \"<1 to 64 of A-Z a-z 0-9 _ . @ ->\", \"administrator\": false,"
                                          + " \"groups\": [<1 to 64 of A-Z a-z 0-9 _ . @ ->...]}";
                                  List<String> inGroups = new ArrayList<>();
                                  boolean known = true;
                                  for (var it = object.fieldNames(); it.hasNext(); ) {
                                    known &=
                                        Set.of("id", "administrator", "groups").contains(it.next());
                                  }
                                  if (groups != null
                                      && groups.isArray()
                                      && groups.size() <= MAX_GROUPS) {
                                    for (JsonNode g : groups) {
                                      if (!g.isTextual()
                                          || !PrincipalStore.validGroup(g.textValue())) {
                                        return error(ErrorCode.BAD_REQUEST, shape);
                                      }
                                      inGroups.add(g.textValue());
                                    }
                                  } else if (groups != null) {
                                    return error(ErrorCode.BAD_REQUEST, shape);
                                  }
                                  if (!known
                                      || id == null
                                      || !id.isTextual()
                                      || !PrincipalStore.validId(id.asText())
                                      || (admin != null && !admin.isBoolean())) {
                                    return error(ErrorCode.BAD_REQUEST, shape);
                                  }
                                  return onComplete(
                                      principals.create(
                                          id.asText(),
                                          admin != null && admin.asBoolean(),
                                          inGroups),
                                      result ->
                                          result.isSuccess()
                                              ? json(
                                                  201,
                                                  Map.of("id", id.asText(), "token", result.get()))
                                              : failed(result.failed().get()));
                                })))),
        pathPrefix(
            PathMatchers.segment(),
            id ->
                concat(
                    path("revoke", () -> post(() -> answer(principals.revoke(id)))),
                    path("rotate", () -> post(() -> rotate(id))),
                    path(
                        PathMatchers.segment("grants").slash("revoke"),
                        () -> post(() -> grant(id, false))),
                    path("grants", () -> post(() -> grant(id, true))))));
  }

  /**
   * {@code POST /admin/principals/{id}/rotate} with an optional body {@code {"graceSeconds": N}}.
   */
  private Route rotate(String id) {
    return jsonBody(
        ADMIN_BODY,
        root -> {
          long max = PrincipalStore.MAX_ROTATION_GRACE.toSeconds();
          String shape = "the body must be empty or {\"graceSeconds\": <0 to " + max + ">}";
          Duration grace = principals.rotationGrace();
          if (root != null) {
            if (!root.isObject()) {
              return error(ErrorCode.BAD_REQUEST, shape);
            }
            JsonNode seconds = root.get("graceSeconds");
            if (root.size() > 1
                || (root.size() == 1
                    && (seconds == null
                        || !seconds.canConvertToLong()
                        || !seconds.isIntegralNumber()
                        || seconds.asLong() < 0
                        || seconds.asLong() > max))) {
              return error(ErrorCode.BAD_REQUEST, shape);
            }
            if (seconds != null) {
              grace = Duration.ofSeconds(seconds.asLong());
            }
          }
          return onComplete(
              principals.rotate(id, grace),
              result -> {
                if (!result.isSuccess()) {
                  return failed(result.failed().get());
                }
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("id", id);
                out.put("token", result.get().token());
                out.put(
                    "previousValidUntil",
                    result.get().previousValidUntil() == null
                        ? null
                        : result.get().previousValidUntil().toString());
                return json(200, out);
              });
        });
  }

  private Route grant(String id, boolean add) {
    return body(
        object -> {
          JsonNode collection = object.get("collection");
          JsonNode grant = object.get("grant");
          JsonNode field = object.get("field");
          String shape =
              "the body must be {\"collection\": \"<collection>\", \"grant\": one of "
                  + new TreeSet<>(PrincipalStore.GRANTS)
                  + "} or {\"collection\", \"grant\": \"FieldRead\" | \"FieldUse\","
                  + " \"field\": \"<top-level field>\" (FieldUse also \"*\": every field that is not sensitive)}";
          if (collection == null
              || !collection.isTextual()
              || !Documents.readableCollection(collection.asText())
              || grant == null
              || !grant.isTextual()) {
            return error(ErrorCode.BAD_REQUEST, shape);
          }
          String name = grant.asText();
          if (object.size() == 2 && PrincipalStore.GRANTS.contains(name)) {
            return answer(principals.changeGrant(id, collection.asText(), name, add));
          }
          boolean fieldOk =
              field != null
                  && field.isTextual()
                  && (PrincipalStore.validField(field.asText())
                      || (name.equals("FieldUse") && field.asText().equals("*")));
          if (object.size() == 3 && PrincipalStore.FIELD_GRANTS.contains(name) && fieldOk) {
            return answer(
                principals.changeGrant(id, collection.asText(), name, field.asText(), add));
          }
          return error(ErrorCode.BAD_REQUEST, shape);
        });
  }

  private Route body(Function<JsonNode, Route> inner) {
    return jsonBody(
        ADMIN_BODY,
        root -> {
          if (root == null || !root.isObject()) {
            return error(ErrorCode.BAD_REQUEST, "the body must be a JSON object");
          }
          return inner.apply(root);
        });
  }

  private Route answer(CompletionStage<Void> done) {
    return onComplete(
        done,
        result ->
            result.isSuccess() ? json(200, Map.of("done", true)) : failed(result.failed().get()));
  }

  private Route failed(Throwable failure) {
    Throwable t = unwrap(failure);
    if (t instanceof PrincipalStore.Refused refused) {
      return error(
          refused.notFound() ? ErrorCode.NOT_FOUND : ErrorCode.CONFLICT, refused.getMessage());
    }
    log.warn("a principal change failed: {}", SafeErrors.describe(t));
    return error(
        ErrorCode.UNAVAILABLE, "the principals could not be changed (storage unavailable); retry");
  }

  private static Map<String, Object> view(PrincipalStore.StoredPrincipal p) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("id", p.id());
    out.put("administrator", p.administrator());
    out.put("policyEpoch", p.policyEpoch());
    out.put("createdAt", p.createdAt().toString());
    out.put("revokedAt", p.revokedAt() == null ? null : p.revokedAt().toString());
    out.put(
        "previousTokenValidUntil",
        p.previousValidUntil() == null ? null : p.previousValidUntil().toString());
    out.put("grants", new TreeMap<>(p.grants()));
    out.put("groups", new TreeSet<>(p.groups()));
    return out;
  }
}
