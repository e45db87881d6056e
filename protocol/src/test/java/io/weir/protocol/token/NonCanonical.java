package io.weir.protocol.token;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.protocol.token.TokenSigner.Failure;
import io.weir.protocol.token.TokenSigner.InvalidToken;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Spellings of a genuine token that the JDK's base64url decoder reads as the same bytes but that
 * {@link TokenSigner#sign} never writes: {@code =} padding, and a last character whose unused low
 * bits are set. Every such spelling must be refused as {@link Failure#MALFORMED}.
 */
final class NonCanonical {
  private static final String ALPHABET =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

  private NonCanonical() {}

  /** Functional form of a kind's {@code verify}. */
  @FunctionalInterface
  interface Verifier {
    Object verify(String token) throws InvalidToken;
  }

  private static final String[] SEGMENT = {"payload", "MAC"};

  /**
   * Each segment that has room for padding, padded (the MAC segment always has: 43 chars), by a
   * description of the change.
   */
  static Map<String, String> padded(String token) {
    Map<String, String> out = new LinkedHashMap<>();
    String[] seg = segments(token);
    for (int i = 0; i < 2; i++) {
      int r = seg[i].length() % 4;
      if (r != 0) {
        String[] copy = seg.clone();
        copy[i] = seg[i] + "=".repeat(4 - r);
        out.put("padded " + SEGMENT[i] + " segment", copy[0] + "." + copy[1]);
      }
    }
    return out;
  }

  /**
   * Each segment whose last character carries unused bits (its length is not a multiple of 4), with
   * the lowest of them set: the same bytes, another text; by a description of the change.
   */
  static Map<String, String> unusedBits(String token) {
    Map<String, String> out = new LinkedHashMap<>();
    String[] seg = segments(token);
    for (int i = 0; i < 2; i++) {
      String s = seg[i];
      if (s.length() % 4 != 0) {
        int last = ALPHABET.indexOf(s.charAt(s.length() - 1));
        String[] copy = seg.clone();
        copy[i] = s.substring(0, s.length() - 1) + ALPHABET.charAt(last ^ 1);
        out.put("unused bits set in the " + SEGMENT[i] + " segment", copy[0] + "." + copy[1]);
      }
    }
    return out;
  }

  /**
   * Asserts that {@code genuine} verifies, and that every non-canonical spelling of it decodes (by
   * the JDK) to the same bytes yet is refused as malformed, with a message that quotes nothing of
   * it.
   */
  static void assertRefused(String genuine, Verifier verifier) throws InvalidToken {
    assertThat(verifier.verify(genuine)).isNotNull();
    assertThat(padded(genuine)).as("the MAC segment can always be padded").isNotEmpty();
    assertThat(unusedBits(genuine)).as("the MAC's last character has unused bits").isNotEmpty();
    Map<String, String> variants = new LinkedHashMap<>(padded(genuine));
    variants.putAll(unusedBits(genuine));
    String[] original = segments(genuine);
    List<String> accepted = new ArrayList<>();
    for (Map.Entry<String, String> v : variants.entrySet()) {
      String variant = v.getValue();
      String[] seg = segments(variant);
      assertThat(variant).isNotEqualTo(genuine);
      for (int i = 0; i < 2; i++) {
        assertThat(Base64.getUrlDecoder().decode(seg[i]))
            .as("the JDK decodes the %s to the genuine bytes", v.getKey())
            .isEqualTo(Base64.getUrlDecoder().decode(original[i]));
      }
      try {
        verifier.verify(variant);
        accepted.add(v.getKey());
      } catch (InvalidToken e) {
        assertThat(e.failure()).as(v.getKey()).isEqualTo(Failure.MALFORMED);
        assertThat(e.getMessage()).doesNotContain(seg[0]).doesNotContain(seg[1]);
      }
    }
    assertThat(accepted).as("non-canonical spellings that verified").isEmpty();
  }

  private static String[] segments(String token) {
    int dot = token.indexOf('.');
    return new String[] {token.substring(0, dot), token.substring(dot + 1)};
  }
}
