package io.weir.node.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.protocol.ErrorCode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The node's OpenAPI document read for tests: its operations, the status codes and error codes each
 * documents, and a structural check of the OpenAPI 3 shape (no validator library: the checks Weir's
 * document needs, with Jackson).
 */
final class OpenApiDocument {
  /** The HTTP methods an OpenAPI path item may hold operations for. */
  static final List<String> METHODS =
      List.of("get", "put", "post", "delete", "options", "head", "patch", "trace");

  private static final Pattern PLACEHOLDER = Pattern.compile("\\{([A-Za-z0-9_]+)}");

  /** Every error code the node answers with and its HTTP status: {@link ErrorCode}'s. */
  static final Map<String, Integer> CODES = codes();

  private static Map<String, Integer> codes() {
    Map<String, Integer> out = new LinkedHashMap<>();
    for (ErrorCode c : ErrorCode.values()) {
      out.put(c.wire(), c.httpStatus());
    }
    return Map.copyOf(out);
  }

  final JsonNode root;

  OpenApiDocument(JsonNode root) {
    this.root = root;
  }

  static OpenApiDocument parse(byte[] json) throws IOException {
    return new OpenApiDocument(new ObjectMapper().readTree(json));
  }

  static OpenApiDocument fromClassPath() throws IOException {
    return parse(OpenApi.document());
  }

  /** The document's path templates, in order. */
  Set<String> paths() {
    Set<String> out = new LinkedHashSet<>();
    root.path("paths").fieldNames().forEachRemaining(out::add);
    return out;
  }

  /** The methods (lower case) documented for {@code path}. */
  Set<String> methods(String path) {
    Set<String> out = new LinkedHashSet<>();
    JsonNode item = root.path("paths").path(path);
    for (String m : METHODS) {
      if (item.has(m)) {
        out.add(m);
      }
    }
    return out;
  }

  JsonNode operation(String path, String method) {
    return root.path("paths").path(path).path(method.toLowerCase(Locale.ROOT));
  }

  /** The status codes {@code path} {@code method} documents, e.g. "200", "404". */
  Set<String> statuses(String path, String method) {
    Set<String> out = new LinkedHashSet<>();
    operation(path, method).path("responses").fieldNames().forEachRemaining(out::add);
    return out;
  }

  /** Whether an operation needs a token. */
  enum Auth {
    /** No security requirement: never a token. */
    NONE,
    /** An empty requirement among others: a token or none, as the node's settings say. */
    OPTIONAL,
    REQUIRED
  }

  /** The operation's security: its own list, else the document's. */
  Auth auth(String path, String method) {
    JsonNode op = operation(path, method);
    JsonNode security = op.has("security") ? op.get("security") : root.path("security");
    if (security.isEmpty()) {
      return Auth.NONE;
    }
    for (JsonNode requirement : security) {
      if (requirement.isEmpty()) {
        return Auth.OPTIONAL;
      }
    }
    return Auth.REQUIRED;
  }

  /**
   * The error codes a response documents: the {@code error} enum of its Error-based schema; empty
   * when the response is not an error body.
   */
  Set<String> errorCodes(JsonNode response) {
    JsonNode schema = resolve(response).path("content").path("application/json").path("schema");
    schema = resolve(schema);
    JsonNode codes = schema.path("properties").path("error").path("enum");
    Set<String> out = new LinkedHashSet<>();
    if (refersTo(schema, "#/components/schemas/Error")) {
      codes.forEach(c -> out.add(c.asText()));
    }
    return out;
  }

  Set<String> errorCodes(String path, String method, int status) {
    JsonNode response = operation(path, method).path("responses").path(Integer.toString(status));
    return response.isMissingNode() ? Set.of() : errorCodes(response);
  }

  private static boolean refersTo(JsonNode schema, String ref) {
    for (JsonNode part : schema.path("allOf")) {
      if (ref.equals(part.path("$ref").asText())) {
        return true;
      }
    }
    return false;
  }

  /** {@code node} itself, or what its {@code $ref} (a local reference) names. */
  JsonNode resolve(JsonNode node) {
    for (int depth = 0; depth < 8 && node.has("$ref"); depth++) {
      node =
          pointer(node.get("$ref").asText())
              .orElse(com.fasterxml.jackson.databind.node.MissingNode.getInstance());
    }
    return node;
  }

  private Optional<JsonNode> pointer(String ref) {
    if (!ref.startsWith("#/")) {
      return Optional.empty();
    }
    JsonNode at = root.at(ref.substring(1));
    return at.isMissingNode() ? Optional.empty() : Optional.of(at);
  }

  /**
   * What is wrong with the document's OpenAPI 3 shape, as sentences; empty when nothing is. Checks:
   * the top-level fields; every operation has responses, each with a description; status keys are
   * HTTP codes; every local {@code $ref} resolves; every placeholder of a path is a declared path
   * parameter and every declared path parameter is a placeholder; operation ids are unique; the
   * Error schema lists exactly Weir's codes; every error response lists codes whose HTTP status is
   * that response's status.
   */
  List<String> problems() {
    List<String> problems = new ArrayList<>();
    if (!root.path("openapi").asText().matches("3\\.0\\.[0-9]+")) {
      problems.add("openapi should be a 3.0.x version");
    }
    if (!root.path("info").path("title").isTextual()
        || !root.path("info").path("version").isTextual()) {
      problems.add("info should have a title and a version");
    }
    if (!root.path("paths").isObject() || root.path("paths").isEmpty()) {
      problems.add("paths should be a non-empty object");
    }
    collectRefs(root, "", problems);
    Set<String> wires = new TreeSet<>(CODES.keySet());
    Set<String> errorEnum = new TreeSet<>();
    root.path("components")
        .path("schemas")
        .path("Error")
        .path("properties")
        .path("error")
        .path("enum")
        .forEach(c -> errorEnum.add(c.asText()));
    if (!errorEnum.equals(wires)) {
      problems.add(
          "the Error schema's codes "
              + errorEnum
              + " should be exactly io.weir.protocol.ErrorCode's "
              + wires);
    }
    for (Iterator<Map.Entry<String, JsonNode>> it = root.path("x-http-layer-errors").fields();
        it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      for (String c : errorCodes(e.getValue())) {
        if (!Integer.valueOf(e.getKey()).equals(CODES.get(c))) {
          problems.add(
              "x-http-layer-errors lists "
                  + c
                  + " under "
                  + e.getKey()
                  + ", but the node answers it with "
                  + CODES.get(c));
        }
      }
    }
    Map<String, String> operationIds = new LinkedHashMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = root.path("paths").fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      String path = e.getKey();
      if (!path.startsWith("/")) {
        problems.add(path + " should start with /");
      }
      Set<String> placeholders = new LinkedHashSet<>();
      Matcher m = PLACEHOLDER.matcher(path);
      while (m.find()) {
        placeholders.add(m.group(1));
      }
      if (methods(path).isEmpty()) {
        problems.add(path + " should have at least one operation");
      }
      for (String method : methods(path)) {
        String where = method.toUpperCase(Locale.ROOT) + " " + path;
        JsonNode op = e.getValue().get(method);
        String id = op.path("operationId").asText("");
        if (id.isEmpty()) {
          problems.add(where + " should have an operationId");
        } else if (operationIds.put(id, where) != null) {
          problems.add(where + " reuses the operationId " + id);
        }
        Set<String> declared = new LinkedHashSet<>();
        List<JsonNode> parameters = new ArrayList<>();
        e.getValue().path("parameters").forEach(parameters::add);
        op.path("parameters").forEach(parameters::add);
        for (JsonNode p : parameters) {
          p = resolve(p);
          if (!p.path("name").isTextual()
              || !Set.of("path", "query", "header", "cookie").contains(p.path("in").asText())) {
            problems.add(where + " has a parameter without a name or a valid in");
          }
          if (p.path("in").asText().equals("path")) {
            declared.add(p.path("name").asText());
            if (!p.path("required").asBoolean(false)) {
              problems.add(
                  where + ": path parameter " + p.path("name").asText() + " should be required");
            }
          }
        }
        if (!declared.equals(placeholders)) {
          problems.add(
              where
                  + " declares path parameters "
                  + declared
                  + " but its path has "
                  + placeholders);
        }
        JsonNode body = op.path("requestBody");
        if (!body.isMissingNode() && !resolve(body).path("content").isObject()) {
          problems.add(where + ": the requestBody should have content");
        }
        JsonNode responses = op.path("responses");
        if (!responses.isObject() || responses.isEmpty()) {
          problems.add(where + " should document its responses");
          continue;
        }
        for (Iterator<Map.Entry<String, JsonNode>> r = responses.fields(); r.hasNext(); ) {
          Map.Entry<String, JsonNode> response = r.next();
          String status = response.getKey();
          if (!status.matches("[1-5][0-9][0-9]")) {
            problems.add(where + ": response key " + status + " should be an HTTP status code");
            continue;
          }
          JsonNode resolved = resolve(response.getValue());
          if (!resolved.path("description").isTextual()) {
            problems.add(where + " " + status + " should have a description");
          }
          Set<String> codes = errorCodes(response.getValue());
          int code = Integer.parseInt(status);
          if (code >= 400 && codes.isEmpty() && !(path.equals("/health/ready") && code == 503)) {
            problems.add(where + " " + status + " should be an Error body listing its codes");
          }
          for (String c : codes) {
            Integer known = CODES.get(c);
            if (known == null) {
              problems.add(
                  where + " " + status + " lists " + c + ", which is not a Weir error code");
            } else if (known != code) {
              problems.add(
                  where
                      + " lists "
                      + c
                      + " under "
                      + status
                      + ", but Weir answers it with "
                      + known);
            }
          }
        }
      }
    }
    return problems;
  }

  private void collectRefs(JsonNode node, String at, List<String> problems) {
    if (node.isObject()) {
      JsonNode ref = node.get("$ref");
      if (ref != null && (!ref.isTextual() || pointer(ref.asText()).isEmpty())) {
        problems.add("the reference " + ref + " at " + at + " should resolve within the document");
      }
      node.fields()
          .forEachRemaining(e -> collectRefs(e.getValue(), at + "/" + e.getKey(), problems));
    } else if (node.isArray()) {
      for (int i = 0; i < node.size(); i++) {
        collectRefs(node.get(i), at + "/" + i, problems);
      }
    }
  }
}
