package io.weir.protocol.token;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.protocol.token.TokenSigner.Failure;
import io.weir.protocol.token.TokenSigner.InvalidToken;
import java.util.Random;
import org.junit.jupiter.api.Test;

class ReplayTokenTest {
  private static final long NOW = 1_800_000_000_000L;

  private static byte[] key(int seed) {
    byte[] k = new byte[32];
    new Random(seed).nextBytes(k);
    return k;
  }

  @Test
  void roundTripsAndIsBoundToItsKindKeyAndExpiry() throws InvalidToken {
    TokenSigner signer = TokenSigner.of("k0", key(1));
    String token =
        new ReplayToken("cq_0123456789abcdef0123456789abcdef", 41).sign(signer, NOW + 1000);
    assertThat(ReplayToken.verify(signer, token, NOW))
        .isEqualTo(new ReplayToken("cq_0123456789abcdef0123456789abcdef", 41));
    assertThatThrownBy(() -> ReplayToken.verify(signer, token, NOW + 1000))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.EXPIRED));
    assertThatThrownBy(() -> ReplayToken.verify(TokenSigner.of("k0", key(2)), token, NOW))
        .isInstanceOf(InvalidToken.class);
    String batch =
        signer.sign(
            TokenSigner.Kind.BATCH,
            NOW + 1000,
            out -> {
              out.writeUTF("cq_0123456789abcdef0123456789abcdef");
              out.writeLong(41);
            });
    assertThatThrownBy(() -> ReplayToken.verify(signer, batch, NOW))
        .isInstanceOfSatisfying(
            InvalidToken.class, e -> assertThat(e.failure()).isEqualTo(Failure.WRONG_KIND));
    char[] chars = token.toCharArray();
    chars[3] = chars[3] == 'A' ? 'B' : 'A';
    assertThatThrownBy(() -> ReplayToken.verify(signer, new String(chars), NOW))
        .isInstanceOf(InvalidToken.class);
  }

  @Test
  void paddedOrNonCanonicalReplayTokensAreMalformed() throws InvalidToken {
    TokenSigner signer = TokenSigner.of("k0", key(1));
    for (long sequence : new long[] {0, 41, Long.MAX_VALUE}) {
      for (String subscription : new String[] {"cq_1", "cq_12", "cq_123"}) {
        String token = new ReplayToken(subscription, sequence).sign(signer, NOW + 1000);
        NonCanonical.assertRefused(token, t -> ReplayToken.verify(signer, t, NOW));
      }
    }
  }
}
