package io.weir.node.http;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;

/**
 * The OpenAPI 3 document of the node's HTTP API, served at {@code GET /openapi.json}. It is the
 * resource {@code io/weir/node/http/openapi.json}, written by hand next to the routes (ADR 0016);
 * {@code OpenApiDocumentTest} and {@code OpenApiIT} keep it equal to what the node serves. It holds
 * no secrets and no configuration, so it needs no token.
 */
public final class OpenApi {
  /** Where the document lives on the class path. */
  public static final String RESOURCE = "/io/weir/node/http/openapi.json";

  private static final byte[] DOCUMENT = load();

  private OpenApi() {}

  /** The document's bytes (UTF-8 JSON); a copy, so callers cannot change what is served. */
  public static byte[] document() {
    return DOCUMENT.clone();
  }

  private static byte[] load() {
    try (InputStream in = OpenApi.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        throw new IllegalStateException(
            "the OpenAPI document " + RESOURCE + " is missing from the class path");
      }
      return in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException("the OpenAPI document " + RESOURCE + " cannot be read", e);
    }
  }
}
