package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.pekko.http.javadsl.model.HttpEntity;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.MediaTypes;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.scaladsl.model.ErrorInfo;
import org.apache.pekko.http.scaladsl.model.StatusCode;
import org.junit.jupiter.api.Test;

/**
 * The answers to requests Pekko HTTP's parser refuses, for every status it refuses with (including
 * those a socket test cannot easily provoke, such as 413 before the routes): typed JSON, and none
 * of the parser's text, which quotes the request.
 */
class HttpLayerErrorsTest {
  private static final String CANARY = "zq7canary";

  @Test
  void everyParserRefusalIsTypedJsonWithoutTheRequestsText() throws Exception {
    HttpLayerErrors handler = new HttpLayerErrors();
    Object[][] cases = {
      {400, 400, "bad-request"},
      {413, 413, "document-too-large"},
      {414, 414, "uri-too-long"},
      {431, 431, "headers-too-large"},
      {501, 501, "not-implemented"},
      {505, 505, "http-version-not-supported"},
      {422, 400, "bad-request"},
      {417, 400, "bad-request"}
    };
    for (Object[] c : cases) {
      int status = (Integer) c[0];
      HttpResponse r =
          handler.handle(
              (StatusCode) StatusCodes.get(status),
              new ErrorInfo("Illegal 'authorization' header: Bearer " + CANARY, CANARY),
              null,
              null);
      assertThat(r.status().intValue()).as("%d", status).isEqualTo(c[1]);
      assertThat(r.entity().getContentType().mediaType()).isEqualTo(MediaTypes.APPLICATION_JSON);
      String text = ((HttpEntity.Strict) r.entity()).getData().utf8String();
      assertThat(text).as("%d", status).doesNotContain(CANARY);
      JsonNode body = new ObjectMapper().readTree(text);
      assertThat(body.path("error").asText()).as("%d", status).isEqualTo(c[2]);
      assertThat(body.path("message").asText()).isNotBlank();
      assertThat(body.path("retryable").asBoolean(true)).isFalse();
    }
  }

  @Test
  void theLayersOwnCodesAreKnownToTheRequestLog() {
    for (io.weir.protocol.ErrorCode c :
        java.util.List.of(
            io.weir.protocol.ErrorCode.URI_TOO_LONG,
            io.weir.protocol.ErrorCode.HEADERS_TOO_LARGE,
            io.weir.protocol.ErrorCode.NOT_IMPLEMENTED,
            io.weir.protocol.ErrorCode.HTTP_VERSION_NOT_SUPPORTED)) {
      assertThat(RequestLog.REASONS).contains(c.wire());
      assertThat(HttpLayerErrors.body(c.httpStatus()).error()).isEqualTo(c.wire());
    }
  }
}
