package io.weir.protocol.pgoutput;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Strict UTF-8 decoding on the fast path of {@link String#String(byte[], int, int,
 * java.nio.charset.Charset)}.
 *
 * <p>The JDK decoder is intrinsified but replaces malformed input with U+FFFD. A valid input yields
 * U+FFFD only if it spells that character, so only then is the input checked again with a reporting
 * decoder: the common case costs one pass.
 */
final class Utf8 {

  private static final char REPLACEMENT = '\uFFFD';

  private Utf8() {}

  /** The decoded text, or {@code null} if the bytes are not well-formed UTF-8. */
  static String decodeOrNull(byte[] bytes, int offset, int length) {
    String text = new String(bytes, offset, length, StandardCharsets.UTF_8);
    if (text.indexOf(REPLACEMENT) >= 0 && !isWellFormed(bytes, offset, length)) {
      return null;
    }
    return text;
  }

  private static boolean isWellFormed(byte[] bytes, int offset, int length) {
    try {
      StandardCharsets.UTF_8
          .newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(bytes, offset, length));
      return true;
    } catch (CharacterCodingException e) {
      return false;
    }
  }
}
