package io.weir.protocol.token;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.protocol.token.TokenSigner.Failure;
import io.weir.protocol.token.TokenSigner.InvalidToken;
import java.util.Base64;
import org.junit.jupiter.api.Test;

class TokenSignerTest {
  private static final byte[] KEY = key(1);
  private static final byte[] OTHER = key(2);
  private static final long NOW = 1_800_000_000_000L;
  private static final long LATER = NOW + 60_000;
  private final TokenSigner signer = TokenSigner.of("k0", KEY);

  private static byte[] key(int seed) {
    byte[] k = new byte[32];
    new java.util.Random(seed).nextBytes(k);
    return k;
  }

  private final BatchToken batch = new BatchToken("inc-1", 7, "search-index", 2, 10, 25);

  @Test
  void aSignedBatchTokenVerifiesToTheSameFields() throws InvalidToken {
    String token = batch.sign(signer, LATER);
    assertThat(token).matches("[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+");
    assertThat(BatchToken.verify(signer, token, NOW)).isEqualTo(batch);
  }

  @Test
  void everyFlippedBitIsRefusedAsTamperedOrMalformed() {
    String token = batch.sign(signer, LATER);
    int dot = token.indexOf('.');
    byte[] payload = Base64.getUrlDecoder().decode(token.substring(0, dot));
    for (int i = 0; i < payload.length; i++) {
      for (int bit = 0; bit < 8; bit++) {
        byte[] copy = payload.clone();
        copy[i] ^= (byte) (1 << bit);
        String tampered =
            Base64.getUrlEncoder().withoutPadding().encodeToString(copy) + token.substring(dot);
        assertThatThrownBy(() -> BatchToken.verify(signer, tampered, NOW))
            .as("byte %d bit %d", i, bit)
            .isInstanceOfSatisfying(
                InvalidToken.class,
                e ->
                    assertThat(e.failure())
                        .isIn(Failure.BAD_SIGNATURE, Failure.MALFORMED, Failure.UNKNOWN_KEY));
      }
    }
  }

  @Test
  void truncatedExtendedAndGarbageTokensAreMalformedOrForged() {
    String token = batch.sign(signer, LATER);
    for (int cut = 0; cut < token.length(); cut++) {
      String truncated = token.substring(0, cut);
      assertThatThrownBy(() -> BatchToken.verify(signer, truncated, NOW))
          .isInstanceOf(InvalidToken.class);
    }
    assertThatThrownBy(() -> BatchToken.verify(signer, token + "A", NOW))
        .isInstanceOf(InvalidToken.class);
    assertThatThrownBy(() -> BatchToken.verify(signer, token + ".x", NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.MALFORMED));
    assertThatThrownBy(() -> BatchToken.verify(signer, "not a token", NOW))
        .isInstanceOf(InvalidToken.class);
    assertThatThrownBy(() -> BatchToken.verify(signer, null, NOW)).isInstanceOf(InvalidToken.class);
    assertThatThrownBy(
            () -> BatchToken.verify(signer, "a".repeat(TokenSigner.MAX_TOKEN_LENGTH + 1), NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.MALFORMED));
  }

  @Test
  void paddedOrNonCanonicalBatchTokensAreMalformed() throws InvalidToken {
    // Consumer names of every length modulo 3 give payload segments of every length modulo 4.
    for (String consumer : new String[] {"c", "cc", "ccc", "cccc"}) {
      BatchToken b = new BatchToken("inc-1", 7, consumer, 2, 10, 25);
      NonCanonical.assertRefused(b.sign(signer, LATER), t -> BatchToken.verify(signer, t, NOW));
    }
  }

  @Test
  void onlyTheUrlSafeAlphabetWithoutPaddingDecodes() {
    String token = batch.sign(signer, LATER);
    int dot = token.indexOf('.');
    String payload = token.substring(0, dot);
    String mac = token.substring(dot + 1);
    for (String bad :
        new String[] {
          payload + "=." + mac,
          payload + "." + mac + "==",
          payload + "." + mac.substring(0, 40) + "+/" + mac.charAt(42),
          payload + " ." + mac,
          payload + "." + mac.substring(0, 20) + "==" + mac.substring(22),
          payload + ".",
        }) {
      assertThatThrownBy(() -> BatchToken.verify(signer, bad, NOW))
          .isInstanceOfSatisfying(
              InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.MALFORMED));
    }
  }

  @Test
  void aTokenSignedWithAnotherSecretIsForged() {
    TokenSigner other = TokenSigner.of("k0", OTHER);
    String token = batch.sign(other, LATER);
    assertThatThrownBy(() -> BatchToken.verify(signer, token, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.BAD_SIGNATURE));
  }

  @Test
  void expiredTokensAreRefused() {
    String token = batch.sign(signer, NOW);
    assertThatThrownBy(() -> BatchToken.verify(signer, token, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.EXPIRED));
  }

  @Test
  void aTokenOfAnotherKindNeverStandsInForABatchToken() {
    String cursor =
        signer.sign(
            TokenSigner.Kind.CURSOR,
            LATER,
            out -> {
              out.writeUTF("inc-1");
              out.writeInt(7);
              out.writeUTF("search-index");
              out.writeLong(2);
              out.writeLong(10);
              out.writeLong(25);
            });
    assertThatThrownBy(() -> BatchToken.verify(signer, cursor, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.WRONG_KIND));
  }

  @Test
  void rotationKeepsOldTokensValidUntilTheirKeyIsRetired() throws InvalidToken {
    String old = batch.sign(signer, LATER);
    TokenSigner rotated = new TokenSigner("k1", java.util.Map.of("k0", KEY, "k1", OTHER));
    assertThat(BatchToken.verify(rotated, old, NOW)).isEqualTo(batch);
    String fresh = batch.sign(rotated, LATER);
    assertThat(fresh).isNotEqualTo(old);
    TokenSigner retired = TokenSigner.of("k1", OTHER);
    assertThat(BatchToken.verify(retired, fresh, NOW)).isEqualTo(batch);
    assertThatThrownBy(() -> BatchToken.verify(retired, old, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.UNKNOWN_KEY));
  }

  @Test
  void aTokenOfAKeyFencedByARestoreIsInvalidatedOnlyWhenGenuine() throws InvalidToken {
    String old = batch.sign(signer, LATER);
    String oldCursor =
        new ChangeCursor("notes", "reader", 3, 4, new byte[0], new byte[16], new long[] {1, 2})
            .sign(signer, LATER);
    // After the restore: k0 is fenced, k1 signs.
    TokenSigner restored =
        new TokenSigner("k1", java.util.Map.of("k1", OTHER), java.util.Map.of("k0", KEY));
    assertThatThrownBy(() -> BatchToken.verify(restored, old, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class,
            e -> {
              assertThat(e.failure()).isEqualTo(Failure.INVALIDATED_BY_RESTORE);
              assertThat(e.getMessage())
                  .isEqualTo("the token was issued before the cluster was restored from a backup");
            });
    assertThatThrownBy(() -> ChangeCursor.verify(restored, oldCursor, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class,
            e -> assertThat(e.failure()).isEqualTo(Failure.INVALIDATED_BY_RESTORE));
    // Checked before the expiry: an expired token of a fenced key is still told it was invalidated.
    assertThatThrownBy(() -> BatchToken.verify(restored, old, LATER + 1))
        .isInstanceOfSatisfying(
            InvalidToken.class,
            e -> assertThat(e.failure()).isEqualTo(Failure.INVALIDATED_BY_RESTORE));
    // A forgery naming the fenced key id stays a forgery; another kind stays another kind.
    String forged = batch.sign(TokenSigner.of("k0", key(3)), LATER);
    assertThatThrownBy(() -> BatchToken.verify(restored, forged, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.BAD_SIGNATURE));
    assertThatThrownBy(() -> BatchToken.verify(restored, oldCursor, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.WRONG_KIND));
    // New tokens verify; a key cannot be both active and fenced.
    assertThat(BatchToken.verify(restored, batch.sign(restored, LATER), NOW)).isEqualTo(batch);
    assertThatThrownBy(
            () -> new TokenSigner("k0", java.util.Map.of("k0", KEY), java.util.Map.of("k0", KEY)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(restored.toString()).doesNotContain(java.util.HexFormat.of().formatHex(KEY));
  }

  @Test
  void messagesAndToStringCarryNoKeyOrField() {
    assertThat(signer.toString())
        .doesNotContain(java.util.HexFormat.of().formatHex(KEY))
        .doesNotContain(Base64.getEncoder().encodeToString(KEY));
    assertThat(batch.toString()).doesNotContain("search-index").doesNotContain("inc-1");
    assertThatThrownBy(() -> TokenSigner.of("k0", new byte[16]))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new TokenSigner("k9", java.util.Map.of("k0", KEY)))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
