package io.weir.node.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.protocol.client.ClientReply;
import io.weir.protocol.client.ClientRequest;
import io.weir.protocol.client.Credentials;
import java.nio.charset.StandardCharsets;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpMethods;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.ETag;
import org.apache.pekko.http.javadsl.model.headers.EntityTag;
import org.apache.pekko.http.scaladsl.model.HttpEntity;
import org.apache.pekko.util.ByteString;
import org.junit.jupiter.api.Test;

class GatewayTranslatorTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Credentials TOKEN = Credentials.bearer("secret-token-0123456789");
  private final GatewayTranslator translator = new GatewayTranslator(JSON);

  private static String header(HttpRequest r, String name) {
    return r.getHeader(name).map(h -> h.value()).orElse(null);
  }

  private static String body(HttpRequest r) throws Exception {
    return ((HttpEntity.Strict) r.entity()).getData().utf8String();
  }

  @Test
  void aPutBecomesThePutOfTheDocumentApiWithTheCallersTokenAndConditions() throws Exception {
    HttpRequest r =
        translator.toHttp(
            new ClientRequest.PutDocument(
                TOKEN, "notes", "a/b c\u00e9", JSON.readTree("{\"x\":1}"), 3L, "key-1"));
    assertThat(r.method()).isEqualTo(HttpMethods.PUT);
    assertThat(r.getUri().path())
        .as("segments are percent-encoded; a slash stays inside the id")
        .isEqualTo("/v1/documents/notes/a%2Fb%20c%C3%A9");
    assertThat(header(r, "Authorization")).isEqualTo("Bearer secret-token-0123456789");
    assertThat(header(r, "If-Match")).isEqualTo("\"3\"");
    assertThat(header(r, "Idempotency-Key")).isEqualTo("key-1");
    assertThat(r.entity().getContentType()).isEqualTo(ContentTypes.APPLICATION_JSON);
    assertThat(body(r)).isEqualTo("{\"x\":1}");
  }

  @Test
  void getDeleteAndPostMapToTheirRoutes() throws Exception {
    HttpRequest get = translator.toHttp(new ClientRequest.GetDocument(TOKEN, "notes", "n1"));
    assertThat(get.method()).isEqualTo(HttpMethods.GET);
    assertThat(get.getUri().path()).isEqualTo("/v1/documents/notes/n1");
    assertThat(header(get, "If-Match")).isNull();

    HttpRequest delete =
        translator.toHttp(new ClientRequest.DeleteDocument(TOKEN, "notes", "n1", null, "k"));
    assertThat(delete.method()).isEqualTo(HttpMethods.DELETE);
    assertThat(header(delete, "Idempotency-Key")).isEqualTo("k");
    assertThat(header(delete, "If-Match")).isNull();

    HttpRequest batch =
        translator.toHttp(
            new ClientRequest.WriteDocuments(
                TOKEN, JSON.readTree("{\"items\":[{\"op\":\"delete\"}]}"), "batch-key"));
    assertThat(batch.method()).isEqualTo(HttpMethods.POST);
    assertThat(batch.getUri().path()).isEqualTo("/v1/documents/batch");
    assertThat(header(batch, "Idempotency-Key")).isEqualTo("batch-key");
    assertThat(body(batch)).isEqualTo("{\"items\":[{\"op\":\"delete\"}]}");
    assertThat(io.weir.node.metrics.RouteTemplates.NODE).contains("/v1/documents/batch");

    for (ClientRequest.Endpoint e : ClientRequest.Endpoint.values()) {
      HttpRequest post =
          translator.toHttp(
              new ClientRequest.Post(TOKEN, e, JSON.readTree("{\"collection\":\"notes\"}")));
      assertThat(post.method()).isEqualTo(HttpMethods.POST);
      assertThat(post.getUri().path()).isEqualTo(e.path());
      assertThat(io.weir.node.metrics.RouteTemplates.NODE)
          .as("every endpoint is a route the node serves")
          .contains(e.path());
      assertThat(body(post)).isEqualTo("{\"collection\":\"notes\"}");
    }
  }

  @Test
  void aSuccessCarriesStatusRevisionAndBody() {
    HttpResponse ok =
        HttpResponse.create()
            .withStatus(StatusCodes.OK)
            .addHeader(ETag.create(EntityTag.create("7", false)));
    ClientReply reply = translator.toReply(ok, ByteString.fromString("{\"revision\":7}"));
    assertThat(reply).isInstanceOf(ClientReply.Ok.class);
    ClientReply.Ok o = (ClientReply.Ok) reply;
    assertThat(o.status()).isEqualTo(200);
    assertThat(o.revision()).isEqualTo(7L);
    assertThat(o.body().get("revision").asLong()).isEqualTo(7);

    ClientReply empty =
        translator.toReply(HttpResponse.create().withStatus(204), ByteString.emptyByteString());
    assertThat(((ClientReply.Ok) empty).body()).isNull();
  }

  @Test
  void anErrorKeepsItsTypedBody() {
    ClientReply reply =
        translator.toReply(
            HttpResponse.create().withStatus(409),
            ByteString.fromString(
                "{\"error\":\"conflict\",\"message\":\"revision mismatch\",\"retryable\":false}"));
    assertThat(reply)
        .isEqualTo(
            new ClientReply.Failed(
                409, new io.weir.protocol.http.ErrorBody("conflict", "revision mismatch", false)));

    ClientReply untyped =
        translator.toReply(
            HttpResponse.create().withStatus(502),
            ByteString.fromString("<html>bad gateway</html>"));
    assertThat(((ClientReply.Failed) untyped).error().error()).isEqualTo("internal");
    assertThat(((ClientReply.Failed) untyped).error().retryable()).isTrue();
    assertThat(((ClientReply.Failed) untyped).error().message()).doesNotContain("bad gateway");
  }

  @Test
  void noTokenIdOrBodyInToString() throws Exception {
    var put =
        new ClientRequest.PutDocument(
            TOKEN, "notes", "secret-id", JSON.readTree("{\"pin\":\"4711\"}"), null, "idem");
    var ok = new ClientReply.Ok(200, 1L, JSON.readTree("{\"pin\":\"4711\"}"));
    for (Object o :
        new Object[] {
          put,
          ok,
          TOKEN,
          new ClientRequest.GetDocument(TOKEN, "notes", "secret-id"),
          new ClientRequest.DeleteDocument(TOKEN, "notes", "secret-id", 1L, "idem"),
          new ClientRequest.WriteDocuments(
              TOKEN,
              JSON.readTree("{\"items\":[{\"id\":\"secret-id\",\"body\":{\"pin\":\"4711\"}}]}"),
              "idem"),
          new ClientRequest.Post(
              TOKEN, ClientRequest.Endpoint.CHANGES_READ, JSON.readTree("{\"pin\":\"4711\"}"))
        }) {
      assertThat(o.toString())
          .doesNotContain("secret-token")
          .doesNotContain("secret-id")
          .doesNotContain("4711")
          .doesNotContain("idem");
    }
    assertThat(new String(JSON.writeValueAsBytes(put.body()), StandardCharsets.UTF_8))
        .contains("4711");
  }
}
