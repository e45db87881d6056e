package io.weir.protocol.client;

import com.fasterxml.jackson.databind.JsonNode;
import io.weir.protocol.CborSerializable;
import java.util.Objects;

/**
 * A request a protocol client sends to a server node's gateway ({@link #GATEWAY_PATH}), with the
 * principal's {@link Credentials}. Every request is served exactly as the HTTP request it names
 * would be, by the same code: the same authentication, grants, policies, limits and error codes
 * (the request and reply bodies are those of the OpenAPI document, {@code GET /openapi.json}). The
 * reply is always a {@link ClientReply}.
 *
 * <p>{@code toString()} of every request names its operation and collection only: document bodies,
 * ids and tokens never reach a log line.
 */
public sealed interface ClientRequest extends CborSerializable {
  /**
   * The actor system name of every node's gateway port. A client is never a member of the cluster:
   * it runs Pekko remoting of its own ({@code pekko.actor.provider = remote}) and sends to {@code
   * pekko://weir-gateway@<host>:<gateway port>/user/weir-gateway}, by actor selection.
   */
  String GATEWAY_SYSTEM = "weir-gateway";

  /** Where the gateway runs in the {@link #GATEWAY_SYSTEM} of a node. */
  String GATEWAY_PATH = "/user/weir-gateway";

  Credentials credentials();

  /**
   * The HTTP operation this request stands for, e.g. {@code PUT /v1/documents/{collection}/{id}}.
   */
  String operation();

  /** {@code PUT /v1/documents/{collection}/{id}}: create or replace a document. */
  record PutDocument(
      Credentials credentials,
      String collection,
      String id,
      JsonNode body,
      Long ifMatch,
      String idempotencyKey)
      implements ClientRequest {
    public PutDocument {
      Objects.requireNonNull(collection, "collection");
      Objects.requireNonNull(id, "id");
      Objects.requireNonNull(body, "body");
    }

    @Override
    public String operation() {
      return "PUT /v1/documents/{collection}/{id}";
    }

    @Override
    public String toString() {
      return "PutDocument[collection=" + collection + "]";
    }
  }

  /** {@code GET /v1/documents/{collection}/{id}}. */
  record GetDocument(Credentials credentials, String collection, String id)
      implements ClientRequest {
    public GetDocument {
      Objects.requireNonNull(collection, "collection");
      Objects.requireNonNull(id, "id");
    }

    @Override
    public String operation() {
      return "GET /v1/documents/{collection}/{id}";
    }

    @Override
    public String toString() {
      return "GetDocument[collection=" + collection + "]";
    }
  }

  /** {@code DELETE /v1/documents/{collection}/{id}}. */
  record DeleteDocument(
      Credentials credentials, String collection, String id, Long ifMatch, String idempotencyKey)
      implements ClientRequest {
    public DeleteDocument {
      Objects.requireNonNull(collection, "collection");
      Objects.requireNonNull(id, "id");
    }

    @Override
    public String operation() {
      return "DELETE /v1/documents/{collection}/{id}";
    }

    @Override
    public String toString() {
      return "DeleteDocument[collection=" + collection + "]";
    }
  }

  /**
   * {@code POST /v1/documents/batch}: many document writes, {@code body} the request's {@code
   * {"items": [...]}}; the reply's body has a result per item. The idempotency key, if any, covers
   * the whole batch.
   */
  record WriteDocuments(Credentials credentials, JsonNode body, String idempotencyKey)
      implements ClientRequest {
    public WriteDocuments {
      Objects.requireNonNull(body, "body");
    }

    @Override
    public String operation() {
      return "POST /v1/documents/batch";
    }

    @Override
    public String toString() {
      return "WriteDocuments[items=" + body.path("items").size() + "]";
    }
  }

  /**
   * A request whose body is the JSON object of an HTTP {@code POST}: the changes feed, queries,
   * live queries and the projection consumer operations.
   */
  record Post(Credentials credentials, Endpoint endpoint, JsonNode body) implements ClientRequest {
    public Post {
      Objects.requireNonNull(endpoint, "endpoint");
      Objects.requireNonNull(body, "body");
    }

    @Override
    public String operation() {
      return "POST " + endpoint.path();
    }

    @Override
    public String toString() {
      return "Post[" + endpoint + "]";
    }
  }

  /** The {@code POST} endpoints a client may call through the protocol. */
  enum Endpoint {
    CHANGES_READ("/v1/changes/read"),
    QUERY("/v1/query"),
    LIVE_QUERY_START("/v1/query/live/start"),
    LIVE_QUERY_READ("/v1/query/live/read"),
    PROJECTION_CONFIGURE("/admin/projections/configure"),
    PROJECTION_READ("/admin/projections/read"),
    PROJECTION_COMMIT("/admin/projections/commit"),
    PROJECTION_RELEASE("/admin/projections/release");

    private final String path;

    Endpoint(String path) {
      this.path = path;
    }

    public String path() {
      return path;
    }
  }
}
