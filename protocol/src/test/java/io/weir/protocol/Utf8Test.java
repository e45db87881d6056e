package io.weir.protocol;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class Utf8Test {
  @Test
  void countsWhatTheEncoderWrites() {
    assertThat(Utf8.length(null)).isZero();
    assertThat(Utf8.length("")).isZero();
    assertThat(Utf8.length("plain ascii")).isEqualTo(11);
    assertThat(Utf8.length("é")).isEqualTo(2);
    assertThat(Utf8.length("日本語")).isEqualTo(9);
    assertThat(Utf8.length("😀")).isEqualTo(4);
    SplittableRandom random = new SplittableRandom(7);
    for (int round = 0; round < 2_000; round++) {
      StringBuilder s = new StringBuilder();
      int length = random.nextInt(64);
      for (int i = 0; i < length; i++) {
        int kind = random.nextInt(4);
        int cp =
            switch (kind) {
              case 0 -> random.nextInt(0x80);
              case 1 -> 0x80 + random.nextInt(0x800 - 0x80);
              case 2 -> 0xE000 + random.nextInt(0x10000 - 0xE000);
              default -> 0x10000 + random.nextInt(0x10FFFF - 0x10000);
            };
        s.appendCodePoint(cp);
      }
      String text = s.toString();
      assertThat(Utf8.length(text))
          .as("round %d", round)
          .isEqualTo(text.getBytes(StandardCharsets.UTF_8).length);
    }
  }

  @Test
  void aLoneSurrogateCountsAsTheReplacementCharacter() {
    assertThat(Utf8.length("a\uD800b")).isEqualTo(5);
    assertThat(Utf8.length("\uDC00")).isEqualTo(3);
    assertThat(Utf8.length("\uD83D")).isEqualTo(3);
  }

  /** Text of 938 UTF-16 units is 2,510 bytes: the size a limit in bytes must see. */
  @Test
  void nonLatinTextIsNotUndercounted() {
    String text = "ж".repeat(100) + "日".repeat(736) + "x".repeat(102);
    assertThat(text.length()).isEqualTo(938);
    assertThat(Utf8.length(text))
        .isEqualTo(2_510)
        .isEqualTo(text.getBytes(StandardCharsets.UTF_8).length);
  }
}
