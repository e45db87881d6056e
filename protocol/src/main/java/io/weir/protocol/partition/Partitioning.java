package io.weir.protocol.partition;

import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * Where a document lives: partition = a stable hash of (collection, partition key) modulo the
 * cluster's partition count P. The hash is MurmurHash3 (x86, 32-bit, seed 0) of the UTF-8 bytes of
 * the collection, a zero byte, and the partition key's canonical text ({@link #canonicalKey}).
 * Every node and every release must compute the same partition for the same document: the function
 * and the canonical encoding are part of the persisted format and never change.
 */
public final class Partitioning {
  /** The largest partition count a cluster may have. */
  public static final int MAX_PARTITIONS = 65_536;

  private Partitioning() {}

  /**
   * @param partitions the cluster's partition count, 1 to {@link #MAX_PARTITIONS}
   * @return the partition, 0 to {@code partitions - 1}
   */
  public static int partitionOf(String collection, String partitionKey, int partitions) {
    if (partitions < 1 || partitions > MAX_PARTITIONS) {
      throw new IllegalArgumentException(
          "the partition count must be between 1 and " + MAX_PARTITIONS);
    }
    byte[] c = collection.getBytes(StandardCharsets.UTF_8);
    byte[] k = partitionKey.getBytes(StandardCharsets.UTF_8);
    byte[] data = new byte[c.length + 1 + k.length];
    System.arraycopy(c, 0, data, 0, c.length);
    System.arraycopy(k, 0, data, c.length + 1, k.length);
    return Integer.remainderUnsigned(murmur3(data), partitions);
  }

  /**
   * The canonical text of a key made of column values (text forms, in key column order): a single
   * value is itself; several are a compact JSON array of strings ({@code ["a","b"]}) with the
   * minimal escaping of RFC 8259 (quote, backslash, control characters as {@code \\u00XX}). NULL
   * components are refused: keys come from primary keys.
   */
  public static String canonicalKey(List<String> values) {
    if (values.isEmpty()) {
      throw new IllegalArgumentException("a key needs at least one value");
    }
    for (String v : values) {
      if (v == null) {
        throw new IllegalArgumentException("a key value must not be NULL");
      }
    }
    if (values.size() == 1) {
      return values.get(0);
    }
    StringBuilder out = new StringBuilder("[");
    for (int i = 0; i < values.size(); i++) {
      if (i > 0) {
        out.append(',');
      }
      out.append('"');
      String v = values.get(i);
      for (int j = 0; j < v.length(); j++) {
        char ch = v.charAt(j);
        if (ch == '"' || ch == '\\') {
          out.append('\\').append(ch);
        } else if (ch < 0x20) {
          out.append(String.format("\\u%04x", (int) ch));
        } else {
          out.append(ch);
        }
      }
      out.append('"');
    }
    return out.append(']').toString();
  }

  /** MurmurHash3 x86 32-bit, seed 0. */
  static int murmur3(byte[] data) {
    final int c1 = 0xcc9e2d51;
    final int c2 = 0x1b873593;
    int h = 0;
    int blocks = data.length / 4;
    for (int i = 0; i < blocks; i++) {
      int at = i * 4;
      int k =
          (data[at] & 0xff)
              | (data[at + 1] & 0xff) << 8
              | (data[at + 2] & 0xff) << 16
              | (data[at + 3] & 0xff) << 24;
      k *= c1;
      k = Integer.rotateLeft(k, 15);
      k *= c2;
      h ^= k;
      h = Integer.rotateLeft(h, 13);
      h = h * 5 + 0xe6546b64;
    }
    int tail = blocks * 4;
    int k = 0;
    switch (data.length & 3) {
      case 3:
        k ^= (data[tail + 2] & 0xff) << 16;
      // fall through
      case 2:
        k ^= (data[tail + 1] & 0xff) << 8;
      // fall through
      case 1:
        k ^= data[tail] & 0xff;
        k *= c1;
        k = Integer.rotateLeft(k, 15);
        k *= c2;
        h ^= k;
        break;
      default:
        break;
    }
    h ^= data.length;
    h ^= h >>> 16;
    h *= 0x85ebca6b;
    h ^= h >>> 13;
    h *= 0xc2b2ae35;
    h ^= h >>> 16;
    return h;
  }
}
