package io.weir.sharding.partition;

import io.weir.sharding.partition.Partition.Consumer;
import io.weir.sharding.partition.Partition.FrameApplied;
import io.weir.sharding.partition.Partition.OutboxEntry;
import io.weir.sharding.partition.Partition.Purged;
import io.weir.sharding.partition.Partition.RuleChange;
import io.weir.sharding.partition.Partition.Written;
import io.weir.sharding.partition.PartitionProtocol.BatchReceipt;
import io.weir.sharding.partition.PartitionProtocol.Document;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import java.io.NotSerializableException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Optional;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * The journal encoding of a partition's events ({@link Written}, {@link Purged}): a compact binary
 * format written by hand, because these events carry every row change into every partition and
 * their encoding was the largest single cost of the CDC-to-partitions path (see ADR 0023). Other
 * partition messages and the snapshot keep Jackson CBOR.
 *
 * <p>Layout: a format byte ({@value #FORMAT}), then the event. Integers are unsigned LEB128
 * varints, signed ones zig-zag encoded first; strings are a varint of UTF-8 length + 1 followed by
 * the bytes, 0 standing for null. Inside one event, collection names and entry kinds are written
 * once and then referred to by index ({@link Strings}). Lists are a varint of size + 1, 0 for null.
 *
 * <p>Events written by Jackson CBOR before this serializer existed keep their serializer id in the
 * journal and are still decoded by Jackson, so old journals recover unchanged.
 *
 * <p>Error messages name the manifest and the problem, never a value from the payload.
 */
public final class PartitionEventSerializer extends SerializerWithStringManifest {
  /** The serializer id stored with each journal row; never reuse or change it. */
  public static final int IDENTIFIER = 7_301;

  static final byte FORMAT = 1;
  private static final int INITIAL_BUFFER = 4_096;
  static final String WRITTEN = Written.class.getName();
  static final String PURGED = Purged.class.getName();

  public PartitionEventSerializer(ExtendedActorSystem system) {}

  public PartitionEventSerializer() {}

  @Override
  public int identifier() {
    return IDENTIFIER;
  }

  @Override
  public String manifest(Object o) {
    if (o instanceof Written) {
      return WRITTEN;
    }
    if (o instanceof Purged) {
      return PURGED;
    }
    throw new IllegalArgumentException("not a partition event: " + o.getClass().getName());
  }

  @Override
  public byte[] toBinary(Object o) {
    // No size estimate: a buffer that grows now and then keeps its growth branch in the JIT's
    // profile; one that almost never grows had it compiled out, and each rare growth then threw the
    // whole inlined encoder back to the interpreter for a recompilation (measured: ADR 0023).
    Out out = new Out(INITIAL_BUFFER);
    out.raw(FORMAT);
    if (o instanceof Written w) {
      writeWritten(out, w);
    } else if (o instanceof Purged p) {
      out.signed(p.through());
    } else {
      throw new IllegalArgumentException("not a partition event: " + o.getClass().getName());
    }
    return out.bytes();
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) throws NotSerializableException {
    try {
      In in = new In(bytes);
      byte format = in.raw();
      if (format != FORMAT) {
        throw new NotSerializableException(
            "partition event "
                + manifest
                + " has format "
                + format
                + "; this version reads format "
                + FORMAT);
      }
      Object event;
      if (WRITTEN.equals(manifest)) {
        event = readWritten(in);
      } else if (PURGED.equals(manifest)) {
        event = new Purged(in.signed());
      } else {
        throw new NotSerializableException("unknown partition event manifest " + manifest);
      }
      if (in.pos != bytes.length) {
        throw new NotSerializableException(
            "partition event " + manifest + " has " + (bytes.length - in.pos) + " trailing bytes");
      }
      return event;
    } catch (RuntimeException e) {
      // Truncated or corrupt input: say where, not what (the payload holds row values).
      throw new NotSerializableException(
          "corrupt partition event " + manifest + " (" + e.getClass().getSimpleName() + ")");
    }
  }

  private static void writeWritten(Out out, Written w) {
    Strings strings = new Strings();
    out.string(w.incarnation());
    out.size(w.frames());
    for (FrameApplied f : w.frames()) {
      out.string(f.commandId());
      out.size(f.entries());
      for (OutboxEntry e : f.entries()) {
        out.signed(e.sequence());
        out.signed(e.ordinal());
        strings.write(out, e.collection());
        out.string(e.id());
        strings.write(out, e.kind());
        out.signed(e.revision());
        out.string(e.before());
        out.string(e.after());
        out.signed(e.evaluatedAtMillis());
        out.signed(e.commitLsn());
      }
      if (f.source() == null) {
        out.raw((byte) 0);
      } else if (f.source().isEmpty()) {
        out.raw((byte) 1);
      } else {
        SourcePosition s = f.source().get();
        out.raw((byte) 2);
        strings.write(out, s.source());
        out.signed(s.commitLsn());
        out.signed(s.previousLsn());
        out.signed(s.part());
        out.bool(s.last());
      }
      out.strings(f.reset());
      out.size(f.loaded());
      if (f.loaded() != null) {
        for (Document d : f.loaded()) {
          strings.write(out, d.collection());
          out.string(d.id());
          out.signed(d.revision());
          out.string(d.body());
          out.bool(d.deleted());
          out.string(d.acl());
        }
      }
      writeConsumer(out, f.consumer());
      out.strings(f.fenced());
      RuleChange r = f.rule();
      out.bool(r != null);
      if (r != null) {
        out.string(r.collection());
        out.string(r.field());
        out.signed(r.version());
      }
    }
  }

  private static Written readWritten(In in) {
    Strings strings = new Strings();
    String incarnation = in.string();
    int frames = in.size();
    List<FrameApplied> out = frames < 0 ? null : new ArrayList<>(frames);
    for (int i = 0; i < frames; i++) {
      String commandId = in.string();
      int n = in.size();
      List<OutboxEntry> entries = n < 0 ? null : new ArrayList<>(n);
      for (int k = 0; k < n; k++) {
        entries.add(
            new OutboxEntry(
                in.signed(),
                (int) in.signed(),
                strings.read(in),
                in.string(),
                strings.read(in),
                in.signed(),
                in.string(),
                in.string(),
                in.signed(),
                in.signed()));
      }
      byte sourceTag = in.raw();
      Optional<SourcePosition> source;
      if (sourceTag == 0) {
        source = null;
      } else if (sourceTag == 1) {
        source = Optional.empty();
      } else if (sourceTag == 2) {
        source =
            Optional.of(
                new SourcePosition(
                    strings.read(in), in.signed(), in.signed(), (int) in.signed(), in.bool()));
      } else {
        throw new IllegalStateException("source tag");
      }
      List<String> reset = in.strings();
      int m = in.size();
      List<Document> loaded = m < 0 ? null : new ArrayList<>(m);
      for (int k = 0; k < m; k++) {
        loaded.add(
            new Document(
                strings.read(in), in.string(), in.signed(), in.string(), in.bool(), in.string()));
      }
      Consumer consumer = readConsumer(in);
      List<String> fenced = in.strings();
      RuleChange rule = in.bool() ? new RuleChange(in.string(), in.string(), in.signed()) : null;
      out.add(new FrameApplied(commandId, entries, source, reset, loaded, consumer, fenced, rule));
    }
    return new Written(incarnation, out);
  }

  private static void writeConsumer(Out out, Consumer c) {
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

  private static Consumer readConsumer(In in) {
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
  private static final class Strings {
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
