package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.metrics.RouteTemplates;
import io.weir.protocol.ErrorCode;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The OpenAPI document on the class path: valid OpenAPI 3 shape, exactly the node's routes (the
 * route table metrics label requests by), Weir's error codes under the status Weir answers them
 * with. {@code OpenApiIT} checks the methods and answers against a running node.
 */
class OpenApiDocumentTest {

  @Test
  void theDocumentHasTheShapeOfOpenApi3() throws Exception {
    OpenApiDocument doc = OpenApiDocument.fromClassPath();
    assertThat(doc.problems())
        .as("the OpenAPI document should have no structural problems")
        .isEmpty();
  }

  @Test
  void everyServedRouteIsDocumentedAndEveryDocumentedPathIsServed() throws Exception {
    Set<String> documented = OpenApiDocument.fromClassPath().paths();
    Set<String> served = new LinkedHashSet<>(RouteTemplates.NODE);
    assertThat(documented)
        .as("every route in RouteTemplates.NODE should be a path of the OpenAPI document")
        .containsAll(served);
    assertThat(served)
        .as("every path of the OpenAPI document should be a route in RouteTemplates.NODE")
        .containsAll(documented);
  }

  @Test
  void protectedOperationsDocumentTheAuthenticationFailure() throws Exception {
    OpenApiDocument doc = OpenApiDocument.fromClassPath();
    for (String path : doc.paths()) {
      for (String method : doc.methods(path)) {
        if (doc.auth(path, method) != OpenApiDocument.Auth.NONE) {
          assertThat(doc.errorCodes(path, method, 401))
              .as("%s %s may need a token, so it should document 401 unauthenticated", method, path)
              .containsExactly("unauthenticated");
        }
        if (path.startsWith("/admin/")) {
          assertThat(doc.errorCodes(path, method, 403))
              .as("%s %s is for administrators, so it should document 403", method, path)
              .contains("forbidden");
        }
        assertThat(doc.errorCodes(path, method, 500))
            .as("%s %s should document 500 internal", method, path)
            .containsExactly("internal");
      }
    }
  }

  @Test
  void errorsOfTheHttpLayerAreDocumented() throws Exception {
    OpenApiDocument doc = OpenApiDocument.fromClassPath();
    com.fasterxml.jackson.databind.JsonNode layer = doc.root.path("x-http-layer-errors");
    assertThat(layer.isObject())
        .as("the document should list what the HTTP layer answers before any route")
        .isTrue();
    for (ErrorCode c :
        List.of(
            ErrorCode.URI_TOO_LONG,
            ErrorCode.HEADERS_TOO_LARGE,
            ErrorCode.NOT_IMPLEMENTED,
            ErrorCode.HTTP_VERSION_NOT_SUPPORTED)) {
      assertThat(doc.errorCodes(layer.path(Integer.toString(c.httpStatus()))))
          .as("x-http-layer-errors should list %s under %d", c.wire(), c.httpStatus())
          .containsExactly(c.wire());
    }
    assertThat(doc.errorCodes(layer.path("400")))
        .as("not HTTP, and a path or query that does not percent-decode to UTF-8")
        .containsExactlyInAnyOrder("bad-request", "invalid-name");
    assertThat(doc.errorCodes(layer.path("413"))).containsExactly("document-too-large");
    assertThat(doc.errorCodes(layer.path("503")))
        .as("no answer within the request timeout")
        .containsExactly("unavailable");
    for (int status : new int[] {400, 413, 414, 431, 501, 505}) {
      assertThat(HttpLayerErrors.body(status).error())
          .as("what the node answers for %d is what the document says", status)
          .isIn(doc.errorCodes(layer.path(Integer.toString(status))));
      assertThat(HttpLayerErrors.answeredStatus(status)).isEqualTo(status);
    }
  }

  @Test
  void theStructuralCheckFindsABrokenDocument() throws Exception {
    OpenApiDocument doc = OpenApiDocument.fromClassPath();
    ObjectNode broken = doc.root.deepCopy();
    ObjectNode get =
        (ObjectNode) broken.path("paths").path("/v1/documents/{collection}/{id}").path("get");
    ((ArrayNode)
            get.path("responses")
                .path("404")
                .path("content")
                .path("application/json")
                .path("schema")
                .path("properties")
                .path("error")
                .path("enum"))
        .add("conflict");
    ((ObjectNode) broken.path("paths").path("/admin/pipelines/{name}")).remove("parameters");
    ((ObjectNode) broken.path("paths").path("/admin/cluster").path("get")).remove("responses");
    ((ObjectNode) broken.path("paths").path("/admin/partitions").path("get").path("responses"))
        .putObject("418")
        .put("$ref", "#/components/responses/NoSuchThing");
    ((ArrayNode)
            broken
                .path("components")
                .path("schemas")
                .path("Error")
                .path("properties")
                .path("error")
                .path("enum"))
        .add("TokenInvalidated");
    assertThat(new OpenApiDocument(broken).problems())
        .as("each defect put in should be reported")
        .anyMatch(p -> p.contains("lists conflict under 404"))
        .anyMatch(p -> p.contains("/admin/pipelines/{name} declares path parameters []"))
        .anyMatch(p -> p.contains("GET /admin/cluster should document its responses"))
        .anyMatch(p -> p.contains("NoSuchThing"))
        .anyMatch(p -> p.contains("should be exactly io.weir.protocol.ErrorCode's"));
  }
}
