package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.protocol.ErrorCode;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * How the node reads what a client sends, without a server: bodies are valid UTF-8 holding one JSON
 * value and nothing after it; request targets percent-decode to valid UTF-8.
 */
class StrictInputTest {

  private static byte[] bytes(int... values) {
    byte[] out = new byte[values.length];
    for (int i = 0; i < values.length; i++) {
      out[i] = (byte) values[i];
    }
    return out;
  }

  @Test
  void bodiesMustBeValidUtf8() throws Exception {
    assertThat(JsonRoutes.utf8("{\"a\":\"é€😀\"}".getBytes(StandardCharsets.UTF_8)))
        .isEqualTo("{\"a\":\"é€😀\"}");
    assertThat(JsonRoutes.utf8(bytes(0xEF, 0xBB, 0xBF, '{', '}')))
        .as("a leading byte order mark is dropped")
        .isEqualTo("{}");
    for (byte[] bad :
        new byte[][] {
          bytes(0xC0, 0xAF), // overlong "/"
          bytes(0xE0, 0x80, 0xAF), // overlong "/" in three bytes
          bytes(0xED, 0xA0, 0x80), // an encoded surrogate
          bytes(0xF4, 0x90, 0x80, 0x80), // past U+10FFFF
          bytes(0x80), // a continuation byte alone
          bytes('"', 0xC3), // a truncated sequence
          bytes(0xFF)
        }) {
      assertThatThrownBy(() -> JsonRoutes.utf8(bad))
          .isInstanceOf(JsonRoutes.MalformedBody.class)
          .hasMessage("the body is not valid UTF-8");
    }
  }

  @Test
  void aJsonBodyIsOneValueAndNothingAfterIt() throws Exception {
    assertThat(JsonRoutes.readJson("  ".getBytes(StandardCharsets.UTF_8))).isNull();
    assertThat(JsonRoutes.readJson("{\"a\":1}\n".getBytes(StandardCharsets.UTF_8)).get("a").asInt())
        .isEqualTo(1);
    for (String bad : new String[] {"{\"a\":1} x", "{\"a\":1} {}", "{\"a\":1,\"a\":2}", "{"}) {
      assertThatThrownBy(() -> JsonRoutes.readJson(bad.getBytes(StandardCharsets.UTF_8)))
          .as(bad)
          .isInstanceOf(JsonRoutes.MalformedBody.class)
          .hasMessage("the body is not valid JSON");
    }
    byte[] utf16 = "{\"a\":1}".getBytes(StandardCharsets.UTF_16LE);
    assertThatThrownBy(() -> JsonRoutes.readJson(utf16))
        .as("UTF-16 is not guessed from the bytes")
        .isInstanceOf(JsonRoutes.MalformedBody.class);
  }

  @Test
  void documentsStoreNoOverlongForms() {
    assertThatThrownBy(
            () ->
                DocumentBodies.canonicalObject(
                    bytes('{', '"', 'a', '"', ':', '"', 0xC0, 0xAF, '"', '}')))
        .isInstanceOf(DocumentBodies.MalformedDocument.class)
        .hasMessage("the body is not valid UTF-8");
  }

  @Test
  void textIsDecodedOnlyWhenItIsValidUtf8() throws Exception {
    assertThat(JsonRoutes.utf8(bytes('{', '}'))).isEqualTo("{}");
    assertThat(JsonRoutes.utf8(bytes('"', 0xEF, 0xBF, 0xBD, '"')))
        .as("a replacement character sent as such is text like any other")
        .isEqualTo("\"\uFFFD\"");
    assertThat(JsonRoutes.utf8(bytes(0xEF, 0xBB, 0xBF, '1')))
        .as("the BOM is dropped")
        .isEqualTo("1");
    for (byte[] bad :
        new byte[][] {
          bytes('"', 0xFF, '"'), bytes('a', 0xC3), bytes(0xC3, 'a', 'b'), bytes(0xED, 0xA0, 0x80)
        }) {
      assertThatThrownBy(() -> JsonRoutes.utf8(bad)).isInstanceOf(JsonRoutes.MalformedBody.class);
    }
  }

  @Test
  void requestTargetsMustPercentDecodeToValidUtf8() {
    assertThat(HttpApi.badEncoding("/v1/documents/things/caf%C3%A9")).isNull();
    assertThat(HttpApi.badEncoding("/v1/documents/things/a%2Fb?x=%E2%82%AC&y=1")).isNull();
    assertThat(HttpApi.badEncoding("http://host:8080/v1/documents/a/b%C3%A9")).isNull();
    assertThat(HttpApi.badEncoding("*")).isNull();
    for (String bad :
        new String[] {
          "/v1/documents/things/a%FF",
          "/v1/documents/th%C0%AFings/a",
          "/v1/documents/things/%ED%A0%80",
          "/v1/documents/things/%E2%82",
          "/v1/documents/things/a%zz",
          "/v1/documents/things/a%F",
          "/v1/documents/things/a\uFFFD",
          "/v1/documents/things/a\u0001b",
          "http://host/v1/documents/a/%FF"
        }) {
      assertThat(HttpApi.badEncoding(bad)).as(bad).isEqualTo(ErrorCode.INVALID_NAME);
    }
    assertThat(HttpApi.badEncoding("/admin/outbox/status?partition=%FF"))
        .isEqualTo(ErrorCode.BAD_REQUEST);
    assertThat(HttpApi.badEncoding("/admin/outbox/status?partition=\u00011"))
        .as("a control character in a query without escapes")
        .isEqualTo(ErrorCode.BAD_REQUEST);
    assertThat(HttpApi.badEncoding("/v1/documents/things/caf\u00e9"))
        .as("a character beyond ASCII in a path without escapes")
        .isEqualTo(ErrorCode.INVALID_NAME);
  }
}
