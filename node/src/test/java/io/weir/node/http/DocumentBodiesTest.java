package io.weir.node.http;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A document body's compact form is copied token by token ({@link DocumentBodies#canonicalObject});
 * it must be the text that reading the body into a tree and writing the tree gives ({@link
 * DocumentBodies#canonicalTree}), and refuse what that refuses with the same message, over random
 * bodies valid and not.
 */
class DocumentBodiesTest {

  @Test
  void copiedBodiesAreTheTreesText() {
    SplittableRandom random = new SplittableRandom(7);
    int objects = 0;
    int refused = 0;
    for (int i = 0; i < 40_000; i++) {
      // As the bytes spell it (a mutation may split a surrogate pair: UTF-8 has no lone one).
      byte[] bytes = body(random).getBytes(StandardCharsets.UTF_8);
      String text = new String(bytes, StandardCharsets.UTF_8);
      String expected;
      try {
        expected = DocumentBodies.canonicalTree(text);
        objects++;
      } catch (DocumentBodies.MalformedDocument e) {
        expected = "refused: " + e.getMessage();
        refused++;
      }
      String actual;
      try {
        actual = DocumentBodies.canonicalObject(bytes);
      } catch (DocumentBodies.MalformedDocument e) {
        actual = "refused: " + e.getMessage();
      }
      assertThat(escaped(actual)).as(escaped(text)).isEqualTo(escaped(expected));
    }
    assertThat(objects).as("objects stored").isGreaterThan(10_000);
    assertThat(refused).as("bodies refused").isGreaterThan(5_000);
  }

  @Test
  void numbersKeepTheirExactValue() throws Exception {
    assertThat(
            DocumentBodies.canonicalObject(
                "{ \"a\" : 1.50, \"b\": 1e400, \"c\": -0.0, \"d\": 123456789012345678901234567890,"
                    .concat(" \"e\": -0, \"f\": 2.5E-3 }")
                    .getBytes(StandardCharsets.UTF_8)))
        .isEqualTo(
            "{\"a\":1.50,\"b\":1E+400,\"c\":0.0,\"d\":123456789012345678901234567890,\"e\":0,"
                + "\"f\":0.0025}");
  }

  /** {@code s} with every character outside printable ASCII as a Java escape (readable reports). */
  private static String escaped(String s) {
    StringBuilder b = new StringBuilder();
    for (char c : s.toCharArray()) {
      if (c >= 0x20 && c < 0x7F) {
        b.append(c);
      } else {
        b.append(String.format("\\u%04x", (int) c));
      }
    }
    return b.toString();
  }

  /** A random body: mostly an object, sometimes broken, sometimes another value or two. */
  private static String body(SplittableRandom random) {
    StringBuilder b = new StringBuilder();
    switch (random.nextInt(10)) {
      case 0 -> value(random, b, 2);
      case 1 -> {
        object(random, b, 3);
        b.append(random.nextBoolean() ? " {}" : " 1");
      }
      default -> object(random, b, 3);
    }
    if (random.nextInt(8) == 0 && b.length() > 0) {
      int at = random.nextInt(b.length());
      switch (random.nextInt(4)) {
        case 0 -> b.deleteCharAt(at);
        case 1 -> b.insert(at, "\"a\":1,\"a\":2");
        case 2 -> b.insert(at, ',');
        default -> b.setLength(at);
      }
    }
    return b.toString();
  }

  private static void object(SplittableRandom random, StringBuilder b, int depth) {
    space(random, b);
    b.append('{');
    int n = random.nextInt(depth > 0 ? 6 : 2);
    for (int i = 0; i < n; i++) {
      if (i > 0) {
        b.append(',');
      }
      space(random, b);
      b.append('"').append(random.nextInt(4) == 0 ? string(random) : "f" + i).append('"');
      space(random, b);
      b.append(':');
      value(random, b, depth - 1);
    }
    space(random, b);
    b.append('}');
  }

  private static void value(SplittableRandom random, StringBuilder b, int depth) {
    space(random, b);
    switch (random.nextInt(depth > 0 ? 8 : 6)) {
      case 0 -> b.append(random.nextBoolean() ? "true" : random.nextBoolean() ? "false" : "null");
      case 1, 2 -> b.append(number(random));
      case 3, 4, 5 -> b.append('"').append(string(random)).append('"');
      case 6 -> object(random, b, depth);
      default -> {
        b.append('[');
        int n = random.nextInt(4);
        for (int i = 0; i < n; i++) {
          b.append(i > 0 ? "," : "");
          value(random, b, depth - 1);
        }
        b.append(']');
      }
    }
    space(random, b);
  }

  private static String number(SplittableRandom random) {
    StringBuilder n = new StringBuilder();
    if (random.nextInt(3) == 0) {
      n.append('-');
    }
    int digits = 1 + random.nextInt(random.nextInt(5) == 0 ? 40 : 6);
    for (int i = 0; i < digits; i++) {
      n.append((char) ('0' + (i == 0 && digits > 1 ? 1 + random.nextInt(9) : random.nextInt(10))));
    }
    if (random.nextInt(3) == 0) {
      n.append('.');
      int fraction = 1 + random.nextInt(random.nextInt(5) == 0 ? 30 : 4);
      for (int i = 0; i < fraction; i++) {
        n.append((char) ('0' + random.nextInt(10)));
      }
    }
    if (random.nextInt(5) == 0) {
      n.append(random.nextBoolean() ? 'e' : 'E');
      n.append(random.nextBoolean() ? "" : random.nextBoolean() ? "+" : "-");
      n.append(random.nextInt(random.nextInt(10) == 0 ? 1000 : 30));
    }
    return n.toString();
  }

  private static String string(SplittableRandom random) {
    StringBuilder s = new StringBuilder();
    int n = random.nextInt(12);
    for (int i = 0; i < n; i++) {
      switch (random.nextInt(9)) {
        case 0 -> s.append("\\n");
        case 1 -> s.append("\\u00").append(Integer.toHexString(random.nextInt(32) + 16));
        case 2 -> s.append("\\\"");
        case 3 -> s.append('é');
        case 4 -> s.append("\uD83D\uDE00");
        case 5 -> s.append("\\/");
        case 6 -> s.append((char) (0x7F + random.nextInt(0x700)));
        default -> s.append((char) ('a' + random.nextInt(26)));
      }
    }
    return s.toString();
  }

  private static void space(SplittableRandom random, StringBuilder b) {
    if (random.nextInt(4) == 0) {
      b.append(random.nextBoolean() ? " " : "\n\t");
    }
  }
}
