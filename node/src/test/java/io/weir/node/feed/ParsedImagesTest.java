package io.weir.node.feed;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;

/** Images parsed once and shared, within a bound on the text held. */
class ParsedImagesTest {
  @Test
  void anImageIsParsedOnceAndTheBoundEvictsTheOldest() {
    ParsedImages images = new ParsedImages(100);
    String a = "{\"a\":1,\"pad\":\"xxxxxxxx\"}"; // 24 characters
    JsonNode parsed = images.tree(a);
    assertThat(images.tree(new String(a.toCharArray()))).isSameAs(parsed);
    assertThat(images.tree(a).get("a").asInt()).isEqualTo(1);
    assertThat(images.tree(null)).isNull();
    assertThat(images.tree("not json {")).isNull();
    assertThat(images.tree("not json {")).as("a failure is remembered too").isNull();
    assertThat(images.size()).isEqualTo(2);
    String big = "{\"b\":\"" + "y".repeat(30) + "\"}";
    assertThat(images.tree(big).get("b").asText()).hasSize(30);
    assertThat(images.size()).as("an image over a quarter of the bound is not kept").isEqualTo(2);
    for (int i = 0; i < 10; i++) {
      images.tree("{\"n\":" + (100 + i) + "}"); // 9 characters each
    }
    assertThat(images.size()).as("at most 100 characters held").isLessThanOrEqualTo(100 / 9);
    assertThat(images.tree(a))
        .as("the oldest went first; parsed again")
        .isNotSameAs(parsed)
        .isEqualTo(parsed);
  }
}
