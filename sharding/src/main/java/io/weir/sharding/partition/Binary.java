package io.weir.sharding.partition;

import io.weir.sharding.partition.ConsumerProtocol.BatchReceipt;
import io.weir.sharding.partition.Partition.Consumer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;

/**
 * The primitives of the partition's binary formats (journal events, ADR 0023; snapshots, ADR 0032):
 * unsigned LEB128 varints, zig-zag signed ones, strings as a varint of UTF-8 length + 1 then the
 * bytes (0 for null), lists as a varint of size + 1 (0 for null), and shared encodings of a
 * consumer. Reads throw on any overrun; callers report that as corrupt input without values.
 */
final class Binary {
  private Binary() {}

  static void writeCut(Out out, Partition.Cut cut) {
    out.bool(cut != null);
    if (cut != null) {
      out.signed(cut.mutations());
      out.string(cut.afterId());
    }
  }

  static Partition.Cut readCut(In in) {
    return in.bool() ? new Partition.Cut((int) in.signed(), in.string()) : null;
  }

  static void writeConsumer(Out out, Consumer c) {
    out.bool(c != null);
    if (c == null) {
      return;
    }
    out.string(c.name());
    out.signed(c.generation());
    out.strings(c.collections());
    out.strings(c.kinds());
    out.signed(c.startAfter());
    out.signed(c.checkpoint());
    out.bool(c.released());
    out.signed(c.reservationCut());
    out.size(c.receipts());
    for (BatchReceipt r : c.receipts()) {
      out.signed(r.start());
      out.signed(r.end());
      out.string(r.effectsDigest());
      out.string(r.commandId());
      out.signed(r.firstSequence());
      out.size(r.revisions());
      for (Long v : r.revisions()) {
        out.signed(v);
      }
      out.signed(r.committedAtMillis());
    }
  }

  static Consumer readConsumer(In in) {
    if (!in.bool()) {
      return null;
    }
    String name = in.string();
    long generation = in.signed();
    List<String> collections = in.strings();
    List<String> kinds = in.strings();
    long startAfter = in.signed();
    long checkpoint = in.signed();
    boolean released = in.bool();
    long reservationCut = in.signed();
    int n = in.size();
    List<BatchReceipt> receipts = n < 0 ? null : new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      long start = in.signed();
      long end = in.signed();
      String digest = in.string();
      String commandId = in.string();
      long first = in.signed();
      int k = in.size();
      List<Long> revisions = new ArrayList<>(Math.max(k, 0));
      for (int j = 0; j < k; j++) {
        revisions.add(in.signed());
      }
      receipts.add(new BatchReceipt(start, end, digest, commandId, first, revisions, in.signed()));
    }
    return new Consumer(
        name,
        generation,
        collections,
        kinds,
        startAfter,
        checkpoint,
        released,
        reservationCut,
        receipts);
  }

  /**
   * Strings that repeat inside an event (collection names, entry kinds, slot names): the first
   * occurrence is written in full after a 0, later ones as their index + 1.
   */
  static final class Strings {
    private final HashMap<String, Integer> written = new HashMap<>();
    private final List<String> read = new ArrayList<>();

    void write(Out out, String s) {
      Integer index = s == null ? null : written.get(s);
      if (index != null) {
        out.unsigned(index + 1L);
        return;
      }
      out.unsigned(0);
      out.string(s);
      if (s != null) {
        written.put(s, written.size());
      }
    }

    String read(In in) {
      long index = in.unsigned();
      if (index == 0) {
        String s = in.string();
        if (s != null) {
          read.add(s);
        }
        return s;
      }
      if (index > read.size()) {
        throw new IllegalStateException("string reference");
      }
      return read.get((int) index - 1);
    }
  }

  /** A growing byte buffer with the primitives of the format. */
  static final class Out {
    private byte[] buf;
    private int pos;

    Out(int capacity) {
      buf = new byte[Math.max(capacity, 16)];
    }

    private void ensure(int n) {
      if (pos + n > buf.length) {
        buf = Arrays.copyOf(buf, Math.max(buf.length * 2, pos + n));
      }
    }

    void raw(byte b) {
      ensure(1);
      buf[pos++] = b;
    }

    void bool(boolean b) {
      raw(b ? (byte) 1 : (byte) 0);
    }

    void unsigned(long v) {
      ensure(10);
      while ((v & ~0x7FL) != 0) {
        buf[pos++] = (byte) ((v & 0x7F) | 0x80);
        v >>>= 7;
      }
      buf[pos++] = (byte) v;
    }

    void signed(long v) {
      unsigned((v << 1) ^ (v >> 63));
    }

    void size(List<?> list) {
      unsigned(list == null ? 0 : list.size() + 1L);
    }

    void string(String s) {
      if (s == null) {
        unsigned(0);
        return;
      }
      byte[] b = s.getBytes(StandardCharsets.UTF_8);
      unsigned(b.length + 1L);
      ensure(b.length);
      System.arraycopy(b, 0, buf, pos, b.length);
      pos += b.length;
    }

    /** A count of a map's entries. */
    void count(int n) {
      unsigned(n);
    }

    /** Eight bytes, big-endian. */
    void fixed64(long v) {
      ensure(8);
      for (int i = 7; i >= 0; i--) {
        buf[pos++] = (byte) (v >>> (8 * i));
      }
    }

    void strings(List<String> list) {
      size(list);
      if (list != null) {
        for (String s : list) {
          string(s);
        }
      }
    }

    byte[] bytes() {
      return pos == buf.length ? buf : Arrays.copyOf(buf, pos);
    }
  }

  /** Reads what {@link Out} wrote; any overrun throws (and is reported as a corrupt event). */
  static final class In {
    private final byte[] buf;
    private int pos;

    In(byte[] buf) {
      this.buf = buf;
    }

    byte raw() {
      if (pos >= buf.length) {
        throw new IllegalStateException("truncated");
      }
      return buf[pos++];
    }

    boolean bool() {
      byte b = raw();
      if (b != 0 && b != 1) {
        throw new IllegalStateException("boolean");
      }
      return b == 1;
    }

    long unsigned() {
      long v = 0;
      for (int shift = 0; shift < 64; shift += 7) {
        byte b = raw();
        v |= (long) (b & 0x7F) << shift;
        if ((b & 0x80) == 0) {
          return v;
        }
      }
      throw new IllegalStateException("varint");
    }

    long signed() {
      long u = unsigned();
      return (u >>> 1) ^ -(u & 1);
    }

    /** A list size, -1 for null. */
    int size() {
      long n = unsigned();
      if (n > buf.length - pos + 1L) {
        // Every element takes at least one byte: a larger count is corrupt, not a huge allocation.
        throw new IllegalStateException("size");
      }
      return (int) n - 1;
    }

    /** A count of a map's entries (each at least one byte). */
    int count() {
      long n = unsigned();
      if (n > buf.length - pos) {
        throw new IllegalStateException("count");
      }
      return (int) n;
    }

    long fixed64() {
      long v = 0;
      for (int i = 0; i < 8; i++) {
        v = (v << 8) | (raw() & 0xFF);
      }
      return v;
    }

    /** Whether every byte was read. */
    boolean atEnd() {
      return pos == buf.length;
    }

    int remaining() {
      return buf.length - pos;
    }

    String string() {
      long n = unsigned();
      if (n == 0) {
        return null;
      }
      long len = n - 1;
      if (len > buf.length - pos) {
        throw new IllegalStateException("truncated");
      }
      String s = new String(buf, pos, (int) len, StandardCharsets.UTF_8);
      pos += (int) len;
      return s;
    }

    List<String> strings() {
      int n = size();
      if (n < 0) {
        return null;
      }
      List<String> out = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        out.add(string());
      }
      return out;
    }
  }
}
