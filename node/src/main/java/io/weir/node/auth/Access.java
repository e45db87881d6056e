package io.weir.node.auth;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.persistence.PolicyStore.Visibility;
import java.io.IOException;
import java.util.function.Predicate;

/**
 * The rules every output follows (document reads, change images, query rows): row visibility by the
 * collection's rule and sensitive fields omitted unless the principal holds {@code FieldRead} on
 * them. Administrators see every row and field. Document reads and change images apply them to the
 * stored text in one pass ({@link ShownImage}); query rows to parsed trees (here).
 *
 * <p>Row rules: {@code acl} - the field is an array listing principal ids and {@code
 * "group:<name>"} entries; {@code owner} - the field is the one principal's id. A row whose field
 * is missing or of another shape is visible to nobody but administrators (fail closed).
 */
public final class Access {
  /** Exact numbers, so a projected body keeps the stored values. */
  public static final ObjectMapper JSON =
      JsonMapper.builder()
          .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
          .nodeFactory(JsonNodeFactory.withExactBigDecimals(true))
          .build();

  private Access() {}

  /** Whether the policy restricts nothing: no row rule and no sensitive field. */
  public static boolean unrestricted(CollectionPolicy policy) {
    return policy.visibility() == Visibility.NONE && policy.sensitiveFields().isEmpty();
  }

  /** The row's ACL value under {@code policy} ({@link NullNode} when absent). */
  public static JsonNode aclOf(CollectionPolicy policy, JsonNode body) {
    if (policy.visibility() == Visibility.NONE || body == null || !body.isObject()) {
      return NullNode.getInstance();
    }
    JsonNode v = body.get(policy.visibilityField());
    return v == null ? NullNode.getInstance() : v;
  }

  /** Whether {@code principal} may see a row whose ACL value is {@code acl}. */
  public static boolean visible(Principal principal, CollectionPolicy policy, JsonNode acl) {
    if (principal.administrator() || policy.visibility() == Visibility.NONE) {
      return true;
    }
    if (acl == null) {
      return false;
    }
    if (policy.visibility() == Visibility.OWNER) {
      return acl.isTextual() && acl.textValue().equals(principal.id());
    }
    if (!acl.isArray()) {
      return false;
    }
    for (JsonNode entry : acl) {
      if (entry.isTextual()) {
        String e = entry.textValue();
        if (e.equals(principal.id())
            || (e.startsWith("group:") && principal.groups().contains(e.substring(6)))) {
          return true;
        }
      }
    }
    return false;
  }

  /** Whether {@code principal} may see the row {@code body}. */
  public static boolean visibleRow(Principal principal, CollectionPolicy policy, JsonNode body) {
    return visible(principal, policy, aclOf(policy, body));
  }

  /** Whether {@code principal} may see a row whose ACL the partition reported as JSON text. */
  public static boolean visibleAcl(Principal principal, CollectionPolicy policy, String aclJson) {
    if (principal.administrator() || policy.visibility() == Visibility.NONE) {
      return true;
    }
    JsonNode acl = tree(aclJson);
    return acl != null && visible(principal, policy, acl);
  }

  /**
   * {@code json} read as a tree ({@link #JSON}: exact numbers), or null when there is none or it is
   * not JSON, a number no {@code BigDecimal} holds included (a CDC row's {@code json} column may
   * carry one; Jackson reports it unchecked).
   */
  public static JsonNode tree(String json) {
    if (json == null) {
      return null;
    }
    try {
      return JSON.readTree(json);
    } catch (IOException | NumberFormatException e) {
      return null;
    }
  }

  /** Top-level fields {@code principal} may not see: sensitive ones without {@code FieldRead}. */
  public static Predicate<String> omitted(Principal principal, CollectionPolicy policy) {
    if (principal.administrator() || policy.sensitiveFields().isEmpty()) {
      return f -> false;
    }
    return f ->
        policy.sensitiveFields().contains(f)
            && !principal.mayField("FieldRead", policy.collection(), f);
  }

  /** A copy of {@code body} without the fields {@code principal} may not see. */
  public static ObjectNode project(Principal principal, CollectionPolicy policy, ObjectNode body) {
    ObjectNode out = body.deepCopy();
    Predicate<String> hidden = omitted(principal, policy);
    out.properties().removeIf(e -> hidden.test(e.getKey()));
    return out;
  }

  /**
   * Whether a query predicate of {@code principal} may use the field {@code path}: {@code FieldUse}
   * on its top-level field, or {@code FieldUse} on {@code *} for a field that is not sensitive.
   */
  public static boolean mayUse(Principal principal, CollectionPolicy policy, String path) {
    String top = path.contains(".") ? path.substring(0, path.indexOf('.')) : path;
    return principal.mayField("FieldUse", policy.collection(), top)
        || (!policy.sensitiveFields().contains(top)
            && principal.mayField("FieldUse", policy.collection(), "*"));
  }
}
