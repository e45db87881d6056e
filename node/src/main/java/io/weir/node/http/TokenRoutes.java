package io.weir.node.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.tokens.TokenKeys;
import io.weir.persistence.SafeErrors;
import io.weir.persistence.TokenKeyStore;
import io.weir.protocol.ErrorCode;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.http.javadsl.server.Route;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code /admin/tokens/*}: the cluster's token-signing keys (administrators only; no key material
 * ever leaves the node).
 *
 * <ul>
 *   <li>{@code GET keys}: {@code {"active", "keys": [{"kid", "createdAt", "retiredAt", "active",
 *       "invalidatedByRestore"}], "restoreEpoch", "restoredAt"}}.
 *   <li>{@code POST rotate}: adds a key that signs from now on; tokens of the older keys still
 *       verify until retired. 200 with the keys.
 *   <li>{@code POST retire} {@code {"kid"}}: tokens signed with that key are refused from now on
 *       (other nodes: after their next key reload, {@code weir.tokens.key-refresh}). 404 for an
 *       unknown key, 409 for the signing key (rotate first).
 * </ul>
 */
final class TokenRoutes extends JsonRoutes {
  private static final Logger log = LoggerFactory.getLogger(TokenRoutes.class);
  private final TokenKeys keys;

  TokenRoutes(ObjectMapper json, TokenKeys keys) {
    super(json);
    this.keys = keys;
  }

  Route routes() {
    return concat(
        path(
            "keys",
            () ->
                get(
                    () ->
                        keys.ring().isPresent()
                            ? json(200, view(keys.ring().get()))
                            : error(
                                ErrorCode.UNAVAILABLE,
                                "the cluster's token keys are not loaded yet (storage is starting); retry"))),
        path("rotate", () -> post(() -> answer(keys.rotate()))),
        path(
            "retire",
            () ->
                post(
                    () ->
                        jsonBody(
                            ADMIN_BODY,
                            root -> {
                              if (root == null
                                  || !root.isObject()
                                  || root.size() != 1
                                  || !root.path("kid").isTextual()
                                  || !root.get("kid").asText().matches("[A-Za-z0-9_-]{1,32}")) {
                                return error(
                                    ErrorCode.BAD_REQUEST,
                                    "the body must be {\"kid\": \"<key id>\"}, a key id of 1 to 32 of A-Z a-z 0-9 _ -");
                              }
                              return answer(keys.retire(root.get("kid").asText()));
                            }))));
  }

  private Route answer(CompletionStage<?> done) {
    return onComplete(
        done,
        result -> {
          if (result.isSuccess()) {
            return json(200, view(keys.ring().orElseThrow()));
          }
          Throwable t = unwrap(result.failed().get());
          if (t instanceof TokenKeyStore.KeyRefused refused) {
            return error(
                refused.notFound() ? ErrorCode.NOT_FOUND : ErrorCode.CONFLICT,
                refused.getMessage());
          }
          log.warn("a token key operation failed: {}", SafeErrors.describe(t));
          return error(
              ErrorCode.UNAVAILABLE,
              "the token keys could not be changed (storage unavailable); retry");
        });
  }

  private static Map<String, Object> view(TokenKeyStore.KeyRing ring) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("active", ring.activeKid());
    List<Map<String, Object>> list =
        ring.info().stream()
            .map(
                k -> {
                  Map<String, Object> m = new LinkedHashMap<>();
                  m.put("kid", k.kid());
                  m.put("createdAt", k.createdAt().toString());
                  m.put("retiredAt", k.retiredAt() == null ? null : k.retiredAt().toString());
                  m.put("active", k.active());
                  m.put("invalidatedByRestore", k.invalidatedByRestore());
                  return m;
                })
            .toList();
    out.put("keys", list);
    out.put("restoreEpoch", ring.restoreEpoch());
    out.put("restoredAt", ring.restoredAt() == null ? null : ring.restoredAt().toString());
    return out;
  }
}
