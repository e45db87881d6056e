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
    return new ChangeCursor(
        "orders", "ann", 7, 3, hash, fence, positions, (int) (seed % partitions));
  }

  /** A cursor payload written by hand: its positions' and next's bytes as given. */
  private String handWritten(int partitions, byte[] positionBytes, byte[] tail) {
    return signer.sign(
        TokenSigner.Kind.CURSOR,
        NOW + 1000,
        out -> {
          out.writeUTF("orders");
          out.writeUTF("ann");
          out.writeLong(7);
          out.writeLong(3);
          out.writeByte(0);
          out.write(new byte[ChangeCursor.FENCE_BYTES]);
          out.writeShort(partitions);
          out.write(positionBytes);
          out.write(tail);
        });
  }

  @Test
  void theNextPartitionIsOptionalCanonicalAndInRange() throws InvalidToken {
    // Written by a release before the field: the next page starts at partition 0.
    assertThat(ChangeCursor.verify(signer, handWritten(2, new byte[] {5, 6}, new byte[0]), NOW))
        .isEqualTo(
            new ChangeCursor(
                "orders", "ann", 7, 3, new byte[0], new byte[16], new long[] {5, 6}, 0));
    assertThat(
            ChangeCursor.verify(signer, handWritten(2, new byte[] {5, 6}, new byte[] {1}), NOW)
                .next())
        .isEqualTo(1);
    // 0 is never written (one encoding per cursor); past the partitions is out of range.
    for (byte[] tail : new byte[][] {{0}, {2}, {(byte) 0x81, 0}, {1, 1}}) {
      assertThatThrownBy(
              () -> ChangeCursor.verify(signer, handWritten(2, new byte[] {5, 6}, tail), NOW))
          .isInstanceOfSatisfying(
              InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.MALFORMED));
    }
    // A position in more bytes than it needs (5 as 0x85 0x00) is not canonical.
    assertThatThrownBy(
            () ->
                ChangeCursor.verify(
                    signer, handWritten(2, new byte[] {(byte) 0x85, 0, 6}, new byte[0]), NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.MALFORMED));
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
