package io.weir.protocol.token;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.Arrays;
import java.util.Objects;

/**
 * What a changes-feed or live-query cursor binds: the collection, the principal and its policy
 * epoch, the collection policy's version, the live query's fingerprint (empty for the changes
 * feed), a fence over every partition's incarnation and row-visibility epoch, and the position
 * reached in each partition. Signed as {@link TokenSigner.Kind#CURSOR}: a cursor never passes as a
 * batch or replay token.
 *
 * @param fence 16 bytes (see the node's feed): a restored partition or a row-visibility change
 *     makes the cursor's fence differ from the current one
 * @param positions per partition, the last outbox position the reader has seen
 * @param next the partition the next page serves first: pages share their limit and byte budget out
 *     round-robin from here, so no partition waits behind busier ones (0 for a new cursor)
 */
public record ChangeCursor(
    String collection,
    String principal,
    long policyEpoch,
    long policyVersion,
    byte[] queryHash,
    byte[] fence,
    long[] positions,
    int next) {
  public static final int FENCE_BYTES = 16;

  /** Partitions a cursor can hold (its encoded size stays well below the token limit). */
  public static final int MAX_PARTITIONS = 512;

  public ChangeCursor {
    Objects.requireNonNull(collection, "collection");
    Objects.requireNonNull(principal, "principal");
    queryHash = queryHash == null ? new byte[0] : queryHash.clone();
    if (fence == null || fence.length != FENCE_BYTES) {
      throw new IllegalArgumentException("a fence has " + FENCE_BYTES + " bytes");
    }
    fence = fence.clone();
    positions = positions.clone();
    if (positions.length == 0 || positions.length > MAX_PARTITIONS) {
      throw new IllegalArgumentException("a cursor holds 1 to " + MAX_PARTITIONS + " partitions");
    }
    for (long p : positions) {
      if (p < 0) {
        throw new IllegalArgumentException("positions are not negative");
      }
    }
    if (next < 0 || next >= positions.length) {
      throw new IllegalArgumentException("next names one of the cursor's partitions");
    }
  }

  /** A cursor whose next page starts at partition 0. */
  public ChangeCursor(
      String collection,
      String principal,
      long policyEpoch,
      long policyVersion,
      byte[] queryHash,
      byte[] fence,
      long[] positions) {
    this(collection, principal, policyEpoch, policyVersion, queryHash, fence, positions, 0);
  }

  public String sign(TokenSigner signer, long expiresAtMillis) {
    return signer.sign(
        TokenSigner.Kind.CURSOR,
        expiresAtMillis,
        out -> {
          out.writeUTF(collection);
          out.writeUTF(principal);
          out.writeLong(policyEpoch);
          out.writeLong(policyVersion);
          out.writeByte(queryHash.length);
          out.write(queryHash);
          out.write(fence);
          out.writeShort(positions.length);
          for (long p : positions) {
            writeVarLong(out, p);
          }
          // Written only when not 0, so every cursor has one encoding (and cursors signed before
          // the field existed read as starting at partition 0).
          if (next != 0) {
            writeVarLong(out, next);
          }
        });
  }

  public static ChangeCursor verify(TokenSigner signer, String token, long nowMillis)
      throws TokenSigner.InvalidToken {
    return signer.verify(
        token,
        TokenSigner.Kind.CURSOR,
        nowMillis,
        in -> {
          String collection = in.readUTF();
          String principal = in.readUTF();
          long policyEpoch = in.readLong();
          long policyVersion = in.readLong();
          byte[] hash = new byte[in.readUnsignedByte()];
          in.readFully(hash);
          byte[] fence = new byte[FENCE_BYTES];
          in.readFully(fence);
          int n = in.readUnsignedShort();
          if (n == 0 || n > MAX_PARTITIONS) {
            throw new IOException("partition count out of range");
          }
          long[] positions = new long[n];
          for (int i = 0; i < n; i++) {
            positions[i] = readVarLong(in);
          }
          int next = 0;
          if (in.available() > 0) {
            long v = readVarLong(in);
            if (v == 0 || v >= n) {
              throw new IOException("next partition out of range");
            }
            next = (int) v;
          }
          return new ChangeCursor(
              collection, principal, policyEpoch, policyVersion, hash, fence, positions, next);
        });
  }

  private static void writeVarLong(DataOutputStream out, long v) throws IOException {
    while ((v & ~0x7FL) != 0) {
      out.writeByte((int) ((v & 0x7F) | 0x80));
      v >>>= 7;
    }
    out.writeByte((int) v);
  }

  private static long readVarLong(DataInputStream in) throws IOException {
    long v = 0;
    for (int shift = 0; shift < 63; shift += 7) {
      int b = in.readUnsignedByte();
      v |= (long) (b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        if (v < 0) {
          throw new IOException("position out of range");
        }
        if (b == 0 && shift > 0) {
          throw new IOException("position not in its shortest encoding");
        }
        return v;
      }
    }
    throw new IOException("position too long");
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ChangeCursor c
        && c.collection.equals(collection)
        && c.principal.equals(principal)
        && c.policyEpoch == policyEpoch
        && c.policyVersion == policyVersion
        && Arrays.equals(c.queryHash, queryHash)
        && Arrays.equals(c.fence, fence)
        && Arrays.equals(c.positions, positions)
        && c.next == next;
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        collection,
        principal,
        policyEpoch,
        policyVersion,
        Arrays.hashCode(queryHash),
        Arrays.hashCode(fence),
        Arrays.hashCode(positions),
        next);
  }

  /** Names and ids stay out of logs; counts only. */
  @Override
  public String toString() {
    return "ChangeCursor[partitions=" + positions.length + ", policyEpoch=" + policyEpoch + "]";
  }
}
