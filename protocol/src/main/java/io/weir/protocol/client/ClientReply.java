package io.weir.protocol.client;

import com.fasterxml.jackson.databind.JsonNode;
import io.weir.protocol.CborSerializable;
import io.weir.protocol.http.ErrorBody;

/**
 * The gateway's answer to a {@link ClientRequest}: what the HTTP request would have answered.
 * {@code toString()} never includes a body.
 */
public sealed interface ClientReply extends CborSerializable {
  /** The HTTP status the request would have had. */
  int status();

  /**
   * A 2xx answer.
   *
   * @param revision the document revision of a document operation (the HTTP {@code ETag}); null
   *     otherwise
   * @param body the JSON reply body; null when the HTTP reply has none
   */
  record Ok(int status, Long revision, JsonNode body) implements ClientReply {
    @Override
    public String toString() {
      return "Ok[status=" + status + "]";
    }
  }

  /**
   * A refused or failed request, with the typed error body every HTTP error carries. {@link
   * ErrorBody#retryable()} says whether the same request may succeed later unchanged.
   */
  record Failed(int status, ErrorBody error) implements ClientReply {
    @Override
    public String toString() {
      return "Failed[status=" + status + ", error=" + (error == null ? null : error.error()) + "]";
    }
  }
}
