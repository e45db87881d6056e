package io.weir.sharding.partition;

import io.weir.sharding.partition.Binary.In;
import io.weir.sharding.partition.Binary.Out;
import io.weir.sharding.partition.Binary.Strings;
import io.weir.sharding.partition.Partition.FrameApplied;
import io.weir.sharding.partition.Partition.OutboxEntry;
import io.weir.sharding.partition.Partition.Purged;
import io.weir.sharding.partition.Partition.RuleChange;
import io.weir.sharding.partition.Partition.Written;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.ReadProtocol.Document;
import java.io.NotSerializableException;
import java.util.ArrayList;
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

  /** The format written: 2 adds each frame's cut (ADR 0033). Format 1 is still read. */
  static final byte FORMAT = 2;

  static final byte FIRST_FORMAT = 1;
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
      if (format < FIRST_FORMAT || format > FORMAT) {
        throw new NotSerializableException(
            "partition event "
                + manifest
                + " has format "
                + format
                + "; this version reads formats "
                + FIRST_FORMAT
                + " to "
                + FORMAT);
      }
      Object event;
      if (WRITTEN.equals(manifest)) {
        event = readWritten(in, format);
      } else if (PURGED.equals(manifest)) {
        event = new Purged(in.signed());
      } else {
        throw new NotSerializableException("unknown partition event manifest " + manifest);
      }
      if (!in.atEnd()) {
        throw new NotSerializableException(
            "partition event " + manifest + " has " + in.remaining() + " trailing bytes");
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
      Binary.writeConsumer(out, f.consumer());
      out.strings(f.fenced());
      RuleChange r = f.rule();
      out.bool(r != null);
      if (r != null) {
        out.string(r.collection());
        out.string(r.field());
        out.signed(r.version());
      }
      Binary.writeCut(out, f.cut());
    }
  }

  private static Written readWritten(In in, byte format) {
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
      Partition.Consumer consumer = Binary.readConsumer(in);
      List<String> fenced = in.strings();
      RuleChange rule = in.bool() ? new RuleChange(in.string(), in.string(), in.signed()) : null;
      Partition.Cut cut = format >= 2 ? Binary.readCut(in) : null;
      out.add(
          new FrameApplied(commandId, entries, source, reset, loaded, consumer, fenced, rule, cut));
    }
    return new Written(incarnation, out);
  }
}
