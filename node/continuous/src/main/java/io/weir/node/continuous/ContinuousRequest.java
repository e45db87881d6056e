package io.weir.node.continuous;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.persistence.Identifiers;
import io.weir.protocol.ErrorCode;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;

/**
 * A registration request: {@code {"scope", "sql", "keyColumns": [..], "orderBy": [{"column",
 * "direction": "asc"|"desc"}], "limit", "parameters": {name: value}, "maintenance", "evaluator",
 * "projector"}}. {@code toString} carries neither SQL nor values.
 */
public record ContinuousRequest(
    String scope,
    String sql,
    ObjectNode parameters,
    List<String> keyColumns,
    List<Definition.OrderColumn> orderBy,
    int limit,
    String maintenance,
    String evaluator,
    String projector) {
  /** The fields a registration request may have. */
  public static final Set<String> FIELDS =
      Set.of(
          "scope",
          "sql",
          "keyColumns",
          "orderBy",
          "limit",
          "parameters",
          "maintenance",
          "evaluator",
          "projector");

  private static final String COLUMN = "[A-Za-z_][A-Za-z0-9_$]{0,62}";

  /** The shape of an evaluator's name. */
  static final String EVALUATOR_NAME = "[A-Za-z0-9_-]{1,64}";

  public ContinuousRequest {
    keyColumns = List.copyOf(keyColumns);
    orderBy = List.copyOf(orderBy);
  }

  /**
   * Checks the request's shape; {@link ContinuousQueryException} (400) naming the field, never its
   * value.
   */
  public static ContinuousRequest parse(JsonNode root, int maxLimit) {
    if (root == null || !root.isObject()) {
      throw bad("the body must be a JSON object");
    }
    for (var it = root.fieldNames(); it.hasNext(); ) {
      String name = it.next();
      if (!FIELDS.contains(name)) {
        throw bad(
            name.matches("[A-Za-z0-9_]{1,64}")
                ? "unknown field " + name + "; the fields are " + new TreeSet<>(FIELDS)
                : "the body has an unknown field");
      }
    }
    JsonNode scope = root.get("scope");
    if (scope == null || !scope.isTextual() || !Identifiers.isValid(scope.textValue())) {
      throw bad(
          "scope must be a security scope name ("
              + Identifiers.SHAPE.replaceFirst("^must be ", "")
              + ")");
    }
    JsonNode sql = root.get("sql");
    if (sql == null || !sql.isTextual() || sql.textValue().length() > 32 * 1024) {
      throw bad("sql must be a string of at most 32768 characters");
    }
    JsonNode limit = root.get("limit");
    if (limit == null
        || !limit.canConvertToInt()
        || !limit.isIntegralNumber()
        || limit.intValue() < 1
        || limit.intValue() > maxLimit) {
      throw bad("limit must be an integer from 1 to " + maxLimit);
    }
    JsonNode keys = root.get("keyColumns");
    List<String> keyColumns = new ArrayList<>();
    if (keys == null || !keys.isArray() || keys.isEmpty() || keys.size() > 16) {
      throw bad("keyColumns must be a list of 1 to 16 column names");
    }
    for (JsonNode k : keys) {
      if (!k.isTextual() || !k.textValue().matches(COLUMN) || keyColumns.contains(k.textValue())) {
        throw bad(
            "keyColumns must list distinct column names (a letter or underscore, then letters, digits, _ or $)");
      }
      keyColumns.add(k.textValue());
    }
    List<Definition.OrderColumn> orderBy = new ArrayList<>();
    JsonNode order = root.get("orderBy");
    if (order != null && !order.isNull()) {
      if (!order.isArray() || order.size() > 16) {
        throw bad(
            "orderBy must be a list of at most 16 {\"column\", \"direction\": \"asc\"|\"desc\"}");
      }
      for (JsonNode o : order) {
        JsonNode column = o.get("column");
        JsonNode direction = o.get("direction");
        String d =
            direction == null
                ? "asc"
                : direction.isTextual() ? direction.textValue().toLowerCase(Locale.ROOT) : "";
        if (!o.isObject()
            || o.size() > 2
            || column == null
            || !column.isTextual()
            || !column.textValue().matches(COLUMN)
            || !(d.equals("asc") || d.equals("desc"))
            || orderBy.stream().anyMatch(x -> x.column().equals(column.textValue()))) {
          throw bad(
              "orderBy must be a list of {\"column\": <distinct column name>, \"direction\": \"asc\"|\"desc\"}");
        }
        orderBy.add(new Definition.OrderColumn(column.textValue(), d.equals("desc")));
      }
    }
    JsonNode params = root.get("parameters");
    ObjectNode parameters;
    if (params == null || params.isNull()) {
      parameters = JsonNodeFactory.instance.objectNode();
    } else if (params.isObject()) {
      parameters = (ObjectNode) params;
      for (var it = parameters.fieldNames(); it.hasNext(); ) {
        if (!it.next().matches("[A-Za-z_][A-Za-z0-9_]{0,62}")) {
          throw new ContinuousQueryException(
              ErrorCode.INVALID_PARAMETER,
              "parameter names are a letter or underscore, then letters, digits or underscores");
        }
      }
    } else {
      throw new ContinuousQueryException(
          ErrorCode.INVALID_PARAMETER, "parameters must be an object of name -> value");
    }
    JsonNode maintenance = root.get("maintenance");
    String mode = "incremental";
    if (maintenance != null && !maintenance.isNull()) {
      if (!maintenance.isTextual()
          || !(maintenance.textValue().equals("incremental")
              || maintenance.textValue().equals("full"))) {
        throw bad("maintenance must be \"incremental\" (the default) or \"full\"");
      }
      mode = maintenance.textValue();
    }
    String evaluatorName = plugin(root, "evaluator", mode, "replaces the scoped delta");
    String projectorName = plugin(root, "projector", mode, "maintains the result incrementally");
    return new ContinuousRequest(
        scope.textValue(),
        sql.textValue(),
        parameters,
        keyColumns,
        orderBy,
        limit.intValue(),
        mode,
        evaluatorName,
        projectorName);
  }

  /** The name in field {@code field} (an installed evaluator or projector), or null. */
  private static String plugin(JsonNode root, String field, String mode, String what) {
    JsonNode node = root.get(field);
    if (node == null || node.isNull()) {
      return null;
    }
    if (!node.isTextual() || !node.textValue().matches(EVALUATOR_NAME)) {
      throw bad(
          field
              + " must be the name of an installed "
              + field
              + " (1 to 64 letters, digits, - or _)");
    }
    if (mode.equals("full")) {
      throw bad(
          "a"
              + (field.startsWith("e") ? "n " : " ")
              + field
              + " "
              + what
              + ", which maintenance \"full\" turns off: give one of the two");
    }
    return node.textValue();
  }

  private static ContinuousQueryException bad(String message) {
    return new ContinuousQueryException(ErrorCode.BAD_REQUEST, message);
  }

  @Override
  public String toString() {
    return "ContinuousRequest[" + scope + ", keys=" + keyColumns + ", limit=" + limit + "]";
  }
}
