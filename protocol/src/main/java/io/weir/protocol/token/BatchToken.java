package io.weir.protocol.token;

import java.io.IOException;
import java.util.Objects;

/**
 * What a projection batch token binds: the partition's incarnation, the partition, the consumer and
 * its generation, and the batch's exact positions. A commit names its batch only through this
 * token, so a checkpoint can never be supplied as a raw offset.
 *
 * @param start the consumer's checkpoint the batch was read from (the last position already
 *     processed; the batch holds the positions after it)
 * @param end the batch's through-position: the checkpoint a commit moves to ({@code start} for an
 *     empty tail batch)
 */
public record BatchToken(
    String incarnation, int partition, String consumer, long generation, long start, long end) {
  public BatchToken {
    Objects.requireNonNull(incarnation, "incarnation");
    Objects.requireNonNull(consumer, "consumer");
    if (start < 0 || end < start) {
      throw new IllegalArgumentException("a batch ends at or after its start");
    }
  }

  public String sign(TokenSigner signer, long expiresAtMillis) {
    return signer.sign(
        TokenSigner.Kind.BATCH,
        expiresAtMillis,
        out -> {
          out.writeUTF(incarnation);
          out.writeInt(partition);
          out.writeUTF(consumer);
          out.writeLong(generation);
          out.writeLong(start);
          out.writeLong(end);
        });
  }

  public static BatchToken verify(TokenSigner signer, String token, long nowMillis)
      throws TokenSigner.InvalidToken {
    return signer.verify(
        token,
        TokenSigner.Kind.BATCH,
        nowMillis,
        in -> {
          String incarnation = in.readUTF();
          int partition = in.readInt();
          String consumer = in.readUTF();
          long generation = in.readLong();
          long start = in.readLong();
          long end = in.readLong();
          if (start < 0 || end < start) {
            throw new IOException("positions out of order");
          }
          return new BatchToken(incarnation, partition, consumer, generation, start, end);
        });
  }

  /** Consumer names are identifiers, but keep even them out of logs. */
  @Override
  public String toString() {
    return "BatchToken[partition=" + partition + ", start=" + start + ", end=" + end + "]";
  }
}
