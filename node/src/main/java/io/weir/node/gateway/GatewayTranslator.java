package io.weir.node.gateway;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.client.ClientReply;
import io.weir.protocol.client.ClientRequest;
import io.weir.protocol.http.ErrorBody;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpHeader;
import org.apache.pekko.http.javadsl.model.HttpMethods;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.headers.Authorization;
import org.apache.pekko.http.javadsl.model.headers.ETag;
import org.apache.pekko.http.javadsl.model.headers.RawHeader;
import org.apache.pekko.util.ByteString;

/**
 * Turns a protocol {@link ClientRequest} into the HTTP request it stands for, and the node's HTTP
 * answer into a {@link ClientReply}. Pure translation: the request is then served by the node's own
 * routes, so a protocol client is authenticated, authorised and limited exactly like an HTTP
 * caller.
 */
final class GatewayTranslator {
  private final ObjectMapper json;

  GatewayTranslator(ObjectMapper json) {
    this.json = json;
  }

  HttpRequest toHttp(ClientRequest request) throws JsonProcessingException {
    List<HttpHeader> headers = new ArrayList<>();
    headers.add(Authorization.oauth2(request.credentials().bearerToken()));
    headers.add(RawHeader.create("X-Weir-Via", "protocol"));
    if (request instanceof ClientRequest.PutDocument put) {
      conditional(headers, put.ifMatch(), put.idempotencyKey());
      return HttpRequest.PUT(documentPath(put.collection(), put.id()))
          .addHeaders(headers)
          .withEntity(ContentTypes.APPLICATION_JSON, json.writeValueAsBytes(put.body()));
    } else if (request instanceof ClientRequest.GetDocument get) {
      return HttpRequest.GET(documentPath(get.collection(), get.id())).addHeaders(headers);
    } else if (request instanceof ClientRequest.DeleteDocument delete) {
      conditional(headers, delete.ifMatch(), delete.idempotencyKey());
      return HttpRequest.create(documentPath(delete.collection(), delete.id()))
          .withMethod(HttpMethods.DELETE)
          .addHeaders(headers);
    } else if (request instanceof ClientRequest.WriteDocuments batch) {
      conditional(headers, null, batch.idempotencyKey());
      return HttpRequest.POST("/v1/documents/batch")
          .addHeaders(headers)
          .withEntity(ContentTypes.APPLICATION_JSON, json.writeValueAsBytes(batch.body()));
    } else if (request instanceof ClientRequest.Post post) {
      return HttpRequest.POST(post.endpoint().path())
          .addHeaders(headers)
          .withEntity(ContentTypes.APPLICATION_JSON, json.writeValueAsBytes(post.body()));
    }
    throw new IllegalArgumentException("unknown request type");
  }

  /**
   * The reply for a response whose entity has been read in full. A 2xx answer becomes {@link
   * ClientReply.Ok} (with the {@code ETag} revision, if any); anything else {@link
   * ClientReply.Failed} with the typed error body the route produced.
   */
  ClientReply toReply(HttpResponse response, ByteString entity) {
    int status = response.status().intValue();
    if (status >= 200 && status < 300) {
      Long revision =
          response.getHeader(ETag.class).map(e -> parseRevision(e.etag().tag())).orElse(null);
      JsonNode body = null;
      if (!entity.isEmpty()) {
        try {
          body = json.readTree(entity.toArray());
        } catch (IOException e) {
          return failed(500, ErrorCode.INTERNAL, "the node answered with a body that is not JSON");
        }
      }
      return new ClientReply.Ok(status, revision, body);
    }
    try {
      JsonNode body = json.readTree(entity.toArray());
      if (body != null && body.hasNonNull("error")) {
        return new ClientReply.Failed(
            status,
            new ErrorBody(
                body.get("error").asText(),
                body.path("message").asText(""),
                body.path("retryable").asBoolean(false)));
      }
    } catch (IOException e) {
      // falls through: not a typed body
    }
    return new ClientReply.Failed(
        status,
        new ErrorBody(
            ErrorCode.INTERNAL.wire(),
            "the node answered HTTP status " + status + " without a typed error body",
            status >= 500));
  }

  static ClientReply failed(int status, ErrorCode code, String message) {
    return new ClientReply.Failed(status, ErrorBody.of(code, message));
  }

  private static void conditional(List<HttpHeader> headers, Long ifMatch, String idempotencyKey) {
    if (ifMatch != null) {
      headers.add(RawHeader.create("If-Match", "\"" + ifMatch + "\""));
    }
    if (idempotencyKey != null) {
      headers.add(RawHeader.create("Idempotency-Key", idempotencyKey));
    }
  }

  private static Long parseRevision(String tag) {
    try {
      return Long.parseLong(tag);
    } catch (NumberFormatException e) {
      return null;
    }
  }

  /** {@code /v1/documents/<collection>/<id>} with both segments percent-encoded (RFC 3986). */
  static String documentPath(String collection, String id) {
    return "/v1/documents/" + segment(collection) + "/" + segment(id);
  }

  static String segment(String value) {
    StringBuilder out = new StringBuilder(value.length() + 8);
    for (byte b : value.getBytes(StandardCharsets.UTF_8)) {
      int c = b & 0xff;
      if ((c >= 'a' && c <= 'z')
          || (c >= 'A' && c <= 'Z')
          || (c >= '0' && c <= '9')
          || c == '-'
          || c == '.'
          || c == '_'
          || c == '~') {
        out.append((char) c);
      } else {
        out.append('%')
            .append(Character.toUpperCase(Character.forDigit(c >> 4, 16)))
            .append(Character.toUpperCase(Character.forDigit(c & 0xf, 16)));
      }
    }
    return out.toString();
  }
}
