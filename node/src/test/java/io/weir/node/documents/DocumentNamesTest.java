package io.weir.node.documents;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Document ids: 1 to 512 code points, no control character (checked on every write). */
class DocumentNamesTest {

  @Test
  void idsAreCountedInCodePointsAndRefuseControlCharacters() {
    assertThat(Documents.validId("a")).isTrue();
    assertThat(Documents.validId("")).isFalse();
    assertThat(Documents.validId("x".repeat(512))).isTrue();
    assertThat(Documents.validId("x".repeat(513))).isFalse();
    assertThat(Documents.validId("\uD83D\uDE00".repeat(512)))
        .as("512 code points in 1,024 UTF-16 units")
        .isTrue();
    assertThat(Documents.validId("\uD83D\uDE00".repeat(513))).isFalse();
    assertThat(Documents.validId("a\u0000")).isFalse();
    assertThat(Documents.validId("a\u001Fb")).isFalse();
    assertThat(Documents.validId("a\u007Fb")).isFalse();
    assertThat(Documents.validId("a\u009Fb")).isFalse();
    assertThat(Documents.validId("a\u00A0b")).isTrue();
  }

  @Test
  void theCheckIsTheCodePointRule() {
    SplittableRandom random = new SplittableRandom(11);
    for (int i = 0; i < 20_000; i++) {
      StringBuilder b = new StringBuilder();
      int n = random.nextInt(6);
      for (int k = 0; k < n; k++) {
        b.appendCodePoint(
            switch (random.nextInt(4)) {
              case 0 -> random.nextInt(0x20);
              case 1 -> 0x7F + random.nextInt(0x30);
              case 2 -> 0x10000 + random.nextInt(0x1000);
              default -> 'a' + random.nextInt(26);
            });
      }
      String id = b.toString();
      boolean expected =
          id.codePointCount(0, id.length()) >= 1
              && id.codePoints().noneMatch(Character::isISOControl);
      assertThat(Documents.validId(id)).as("id of %d code points", n).isEqualTo(expected);
    }
  }
}
