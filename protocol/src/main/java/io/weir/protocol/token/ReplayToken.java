package io.weir.protocol.token;

import java.io.IOException;
import java.util.Objects;

/**
 * Where a continuous-query subscriber stands: the subscription id and the replay sequence of the
 * last event it received. Signed as {@link TokenSigner.Kind#REPLAY} with an expiry, it is the SSE
 * event id; a client resumes with it, so a token of one subscription never resumes another, and a
 * batch token or change cursor never passes as one.
 */
public record ReplayToken(String subscription, long sequence) {
  public ReplayToken {
    Objects.requireNonNull(subscription, "subscription");
    if (sequence < 0) {
      throw new IllegalArgumentException("a replay sequence is not negative");
    }
  }

  public String sign(TokenSigner signer, long expiresAtMillis) {
    return signer.sign(
        TokenSigner.Kind.REPLAY,
        expiresAtMillis,
        out -> {
          out.writeUTF(subscription);
          out.writeLong(sequence);
        });
  }

  public static ReplayToken verify(TokenSigner signer, String token, long nowMillis)
      throws TokenSigner.InvalidToken {
    return signer.verify(
        token,
        TokenSigner.Kind.REPLAY,
        nowMillis,
        in -> {
          String subscription = in.readUTF();
          long sequence = in.readLong();
          if (sequence < 0) {
            throw new IOException("sequence out of range");
          }
          return new ReplayToken(subscription, sequence);
        });
  }
}
