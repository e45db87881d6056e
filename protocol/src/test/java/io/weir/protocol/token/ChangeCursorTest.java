package io.weir.protocol.token;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.protocol.token.TokenSigner.Failure;
import io.weir.protocol.token.TokenSigner.InvalidToken;
import java.util.Base64;
import java.util.Random;
import org.junit.jupiter.api.Test;

class ChangeCursorTest {
  private static final long NOW = 1_800_000_000_000L;
  private final TokenSigner signer = TokenSigner.of("k0", key(1));

  private static byte[] key(int seed) {
    byte[] k = new byte[32];
    new Random(seed).nextBytes(k);
    return k;
  }

  private static ChangeCursor cursor(int partitions, long seed) {
    Random r = new Random(seed);
    long[] positions = new long[partitions];
    for (int i = 0; i < partitions; i++) {
      positions[i] = i % 3 == 0 ? 0 : Math.abs(r.nextLong() >> r.nextInt(63));
    }
    byte[] fence = new byte[ChangeCursor.FENCE_BYTES];
    r.nextBytes(fence);
    byte[] hash = seed % 2 == 0 ? new byte[0] : new byte[32];
    r.nextBytes(hash);
    return new ChangeCursor("orders", "ann", 7, 3, hash, fence, positions);
  }

  @Test
  void cursorsRoundTripForEveryPartitionCountUpToTheMaximum() throws InvalidToken {
    for (int n : new int[] {1, 2, 64, 256, ChangeCursor.MAX_PARTITIONS}) {
      for (long seed = 0; seed < 20; seed++) {
        ChangeCursor c = cursor(n, seed);
        String token = c.sign(signer, NOW + 1000);
        assertThat(token.length()).isLessThanOrEqualTo(TokenSigner.MAX_TOKEN_LENGTH);
        assertThat(ChangeCursor.verify(signer, token, NOW)).isEqualTo(c);
      }
    }
  }

  @Test
  void aCursorIsNotABatchTokenAndABatchTokenIsNotACursor() {
    String cursor = cursor(4, 1).sign(signer, NOW + 1000);
    assertThatThrownBy(() -> BatchToken.verify(signer, cursor, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.WRONG_KIND));
    String batch = new BatchToken("i", 0, "c", 1, 0, 0).sign(signer, NOW + 1000);
    assertThatThrownBy(() -> ChangeCursor.verify(signer, batch, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.WRONG_KIND));
  }

  @Test
  void tamperedForeignAndExpiredCursorsAreRefused() {
    String token = cursor(8, 3).sign(signer, NOW + 1000);
    int dot = token.indexOf('.');
    byte[] payload = Base64.getUrlDecoder().decode(token.substring(0, dot));
    for (int i = 0; i < payload.length; i++) {
      byte[] copy = payload.clone();
      copy[i] ^= 0x10;
      String forged =
          Base64.getUrlEncoder().withoutPadding().encodeToString(copy) + token.substring(dot);
      assertThatThrownBy(() -> ChangeCursor.verify(signer, forged, NOW))
          .isInstanceOf(InvalidToken.class);
    }
    assertThatThrownBy(() -> ChangeCursor.verify(TokenSigner.of("k0", key(2)), token, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.BAD_SIGNATURE));
    assertThatThrownBy(() -> ChangeCursor.verify(signer, token, NOW + 1000))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.EXPIRED));
  }

  @Test
  void paddedOrNonCanonicalCursorsAreMalformed() throws InvalidToken {
    for (int n : new int[] {1, 2, 3, 8}) {
      for (long seed = 0; seed < 3; seed++) {
        String token = cursor(n, seed).sign(signer, NOW + 1000);
        NonCanonical.assertRefused(token, t -> ChangeCursor.verify(signer, t, NOW));
      }
    }
  }

  @Test
  void toStringNamesNoCollectionOrPrincipal() {
    assertThat(cursor(4, 1).toString()).doesNotContain("orders").doesNotContain("ann");
  }
}
