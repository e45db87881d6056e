package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A batch request is read in one pass that copies each item's body to its compact form without a
 * tree ({@link DocumentBatchRoutes#readBatch}); it must read every request as reading it whole into
 * a tree does ({@link JsonRoutes#readJson}, then {@link DocumentBodies#canonical} per body): the
 * same tree besides the bodies, the same compact bodies, the same refusals.
 */
class BatchReadTest {

  @Test
  void aRequestReadInOnePassIsTheTreesRequest() throws Exception {
    SplittableRandom random = new SplittableRandom(3);
    int read = 0;
    int copied = 0;
    int refused = 0;
    for (int i = 0; i < 20_000; i++) {
      byte[] bytes = request(random).getBytes(StandardCharsets.UTF_8);
      String text = new String(bytes, StandardCharsets.UTF_8);
      JsonNode whole;
      try {
        whole = JsonRoutes.readJson(bytes);
      } catch (JsonRoutes.MalformedBody e) {
        String message = e.getMessage();
        refused++;
        try {
          DocumentBatchRoutes.readBatch(bytes);
          throw new AssertionError("read what the tree refuses: " + text);
        } catch (JsonRoutes.MalformedBody again) {
          assertThat(again.getMessage()).as(text).isEqualTo(message);
        }
        continue;
      }
      DocumentBatchRoutes.ReadBatch batch = DocumentBatchRoutes.readBatch(bytes);
      read++;
      assertThat(batch.toString()).as("value-free").doesNotContain("\"").doesNotContain("f0");
      if (whole == null) {
        assertThat(batch.root()).as(text).isNull();
        continue;
      }
      JsonNode mine = batch.root().deepCopy();
      JsonNode theirs = whole.deepCopy();
      JsonNode items = batch.root().get("items");
      if (items != null && items.isArray()) {
        for (int k = 0; k < items.size(); k++) {
          String body = batch.bodies().get(items.get(k));
          if (body == null) {
            continue;
          }
          copied++;
          assertThat(body)
              .as(text)
              .isEqualTo(DocumentBodies.canonical(whole.get("items").get(k).get("body")));
          ((ObjectNode) mine.get("items").get(k)).remove("body");
          ((ObjectNode) theirs.get("items").get(k)).remove("body");
        }
      }
      assertThat(mine).as(text).isEqualTo(theirs);
    }
    assertThat(read).as("requests read").isGreaterThan(5_000);
    assertThat(copied).as("bodies copied").isGreaterThan(5_000);
    assertThat(refused).as("requests refused").isGreaterThan(2_000);
  }

  /** A random batch request: mostly well-formed, sometimes broken or of another shape. */
  private static String request(SplittableRandom random) {
    StringBuilder b = new StringBuilder();
    switch (random.nextInt(12)) {
      case 0 -> b.append(random.nextBoolean() ? "" : "[1]");
      case 1 -> b.append("{\"items\": 5, \"x\": {\"body\": {}}}");
      default -> {
        b.append('{');
        if (random.nextInt(6) == 0) {
          b.append("\"other\": [1, {\"a\": 2}], ");
        }
        b.append("\"items\": [");
        int n = random.nextInt(5);
        for (int k = 0; k < n; k++) {
          b.append(k > 0 ? ", " : "");
          item(random, b);
        }
        b.append(']');
        if (random.nextInt(10) == 0) {
          b.append(", \"items\": []");
        }
        b.append('}');
        if (random.nextInt(15) == 0) {
          b.append(" {}");
        }
      }
    }
    if (random.nextInt(8) == 0 && b.length() > 0) {
      int at = random.nextInt(b.length());
      switch (random.nextInt(4)) {
        case 0 -> b.deleteCharAt(at);
        case 1 -> b.insert(at, '{');
        case 2 -> b.insert(at, ",");
        default -> b.setLength(at);
      }
    }
    return b.toString();
  }

  private static void item(SplittableRandom random, StringBuilder b) {
    switch (random.nextInt(10)) {
      case 0 -> b.append(random.nextBoolean() ? "7" : "\"text\"");
      case 1 -> b.append("[{\"body\": {\"a\": 1}}]");
      default -> {
        b.append("{\"op\": \"put\", \"collection\": \"c\", \"id\": \"i").append(random.nextInt(9));
        b.append('"');
        if (random.nextInt(5) == 0) {
          b.append(", \"ifMatch\": ").append(random.nextBoolean() ? "3" : "1.5");
        }
        switch (random.nextInt(8)) {
          case 0 -> {}
          case 1 -> b.append(", \"body\": [1, 2]");
          case 2 -> b.append(", \"body\": null");
          case 3 -> b.append(", \"body\": {\"a\": 1}, \"body\": {\"a\": 2}");
          default -> {
            b.append(", \"body\": ");
            body(random, b, 3);
          }
        }
        if (random.nextInt(6) == 0) {
          b.append(", \"extra\": {\"body\": {\"z\": 1.50}}");
        }
        b.append('}');
      }
    }
  }

  private static void body(SplittableRandom random, StringBuilder b, int depth) {
    b.append('{');
    int n = random.nextInt(depth > 0 ? 5 : 2);
    for (int k = 0; k < n; k++) {
      b.append(k > 0 ? ", " : "").append("\"f").append(k).append("\": ");
      switch (random.nextInt(depth > 0 ? 7 : 5)) {
        case 0 -> b.append(random.nextBoolean() ? "true" : "null");
        case 1 -> b.append(random.nextBoolean() ? "1.50" : "-0.0");
        case 2 -> b.append("123456789012345678901234567890");
        case 3 -> b.append("1e400");
        case 4 -> b.append("\"caf\u00e9 \\n \\u00e9 \\ud83d\\ude00\"");
        case 5 -> body(random, b, depth - 1);
        default -> {
          b.append('[');
          body(random, b, depth - 1);
          b.append(", 2.0e-3]");
        }
      }
    }
    b.append('}');
  }
}
