package io.weir.sharding.partition;

import io.weir.sharding.partition.Binary.In;
import io.weir.sharding.partition.Binary.Out;
import io.weir.sharding.partition.Partition.Consumer;
import io.weir.sharding.partition.Partition.PartProgress;
import io.weir.sharding.partition.Partition.RowRule;
import io.weir.sharding.partition.Partition.Segment;
import io.weir.sharding.partition.Partition.SnapshotMark;
import java.io.NotSerializableException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * The snapshot encoding of a partition ({@link PartitionState}, ADR 0032): the index of its
 * documents and the rest of its state, never a body, in the binary primitives of {@link Binary}.
 * Per document: its id, revision, how far its last change lies behind the snapshot's journal
 * sequence and its body's UTF-8 size, about 15 to 25 bytes for short ids.
 *
 * <p>Layout: a format byte ({@value #FORMAT}); the counters (next outbox sequence, first retained
 * one, retained bytes, journal events, incarnation, event bytes, the snapshot mark); receipts,
 * watermarks, split-slice progress, where frames written in parts go on (format 2), the outbox
 * index, consumers, row rules and row-visibility epochs, each a count and its entries; then the
 * index: a count of collections, and for each its name, a count of documents and the documents.
 *
 * <p>A snapshot written before this serializer (Jackson CBOR of the old state with every body) is
 * never read here: {@link LegacySnapshots} moves its documents into the documents table first. A
 * release before this one cannot read this serializer's id, so it never recovers a partition whose
 * bodies left its snapshot. Error messages name the problem, never a value.
 */
public final class PartitionSnapshotSerializer extends SerializerWithStringManifest {
  /** The serializer id stored with each snapshot row; never reuse or change it. */
  public static final int IDENTIFIER = 7_303;

  /**
   * The format written: 2 adds, per source, where a frame written in parts goes on (ADR 0033); 3
   * each receipt's time and the receipts' time marks (ADR 0034). Formats 1 and 2 are still read:
   * their receipts count as written when read.
   */
  static final byte FORMAT = 3;

  static final byte FIRST_FORMAT = 1;
  static final String MANIFEST = PartitionState.class.getName();

  public PartitionSnapshotSerializer(ExtendedActorSystem system) {}

  public PartitionSnapshotSerializer() {}

  @Override
  public int identifier() {
    return IDENTIFIER;
  }

  @Override
  public String manifest(Object o) {
    if (o instanceof PartitionState) {
      return MANIFEST;
    }
    throw new IllegalArgumentException("not a partition snapshot: " + o.getClass().getName());
  }

  @Override
  public byte[] toBinary(Object o) {
    if (!(o instanceof PartitionState s)) {
      throw new IllegalArgumentException("not a partition snapshot: " + o.getClass().getName());
    }
    return write(s);
  }

  static byte[] write(PartitionState s) {
    Out out = new Out((int) Math.min(1 << 20, 256 + s.index.size() * 24));
    out.raw(FORMAT);
    out.signed(s.nextSequence);
    out.signed(s.outboxFirst);
    out.signed(s.outboxBytes);
    out.signed(s.events);
    out.string(s.incarnation);
    out.signed(s.eventBytes);
    out.signed(s.mark.events);
    out.signed(s.mark.eventBytes);
    out.count(s.receipts.size());
    for (Map.Entry<String, Receipt> e : s.receipts.entrySet()) {
      out.string(e.getKey());
      Receipt a = e.getValue();
      out.string(a.commandId());
      out.signed(a.firstSequence());
      out.size(a.revisions());
      for (Long r : a.revisions()) {
        out.signed(r);
      }
      out.signed(a.atMillis());
    }
    out.signed(s.receiptsSpilledAt);
    out.signed(s.receiptsLatestAt);
    out.count(s.watermarks.size());
    for (Map.Entry<String, Long> e : new TreeMap<>(s.watermarks).entrySet()) {
      out.string(e.getKey());
      out.signed(e.getValue());
    }
    out.count(s.partials.size());
    for (Map.Entry<String, PartProgress> e : new TreeMap<>(s.partials).entrySet()) {
      out.string(e.getKey());
      out.signed(e.getValue().commitLsn());
      out.signed(e.getValue().done());
    }
    out.count(s.cuts.size());
    for (Map.Entry<String, Partition.Cut> e : new TreeMap<>(s.cuts).entrySet()) {
      out.string(e.getKey());
      out.signed(e.getValue().mutations());
      out.string(e.getValue().afterId());
    }
    out.count(s.outbox.size());
    s.outbox.forEach(
        (first, segment) -> {
          out.signed(first);
          out.signed(segment.journalSequence());
          out.signed(segment.entries());
          out.signed(segment.bytes());
        });
    out.count(s.consumers.size());
    for (Consumer c : new TreeMap<>(s.consumers).values()) {
      Binary.writeConsumer(out, c);
    }
    out.count(s.rules.size());
    for (Map.Entry<String, RowRule> e : new TreeMap<>(s.rules).entrySet()) {
      out.string(e.getKey());
      out.string(e.getValue().field());
      out.signed(e.getValue().version());
    }
    out.count(s.rowEpochs.size());
    for (Map.Entry<String, Long> e : new TreeMap<>(s.rowEpochs).entrySet()) {
      out.string(e.getKey());
      out.signed(e.getValue());
    }
    List<String> collections = s.index.collections();
    collections.sort(Ids.ORDER);
    out.count(collections.size());
    for (String collection : collections) {
      out.string(collection);
      List<Map.Entry<String, DocumentIndex.Entry>> docs = new ArrayList<>();
      s.index.forEach(collection, (id, e) -> docs.add(Map.entry(id, e)));
      out.count(docs.size());
      for (Map.Entry<String, DocumentIndex.Entry> d : docs) {
        DocumentIndex.Entry e = d.getValue();
        out.string(d.getKey());
        out.signed(e.revision());
        out.unsigned(s.events - e.lastSeq());
        out.signed(e.bytes());
      }
    }
    return out.bytes();
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) throws NotSerializableException {
    if (!MANIFEST.equals(manifest)) {
      throw new NotSerializableException("unknown partition snapshot manifest " + manifest);
    }
    try {
      In in = new In(bytes);
      byte format = in.raw();
      if (format < FIRST_FORMAT || format > FORMAT) {
        throw new NotSerializableException(
            "partition snapshot has format "
                + format
                + "; this version reads formats "
                + FIRST_FORMAT
                + " to "
                + FORMAT);
      }
      PartitionState s = read(in, format);
      if (!in.atEnd()) {
        throw new NotSerializableException(
            "partition snapshot has " + in.remaining() + " trailing bytes");
      }
      return s;
    } catch (RuntimeException e) {
      throw new NotSerializableException(
          "corrupt partition snapshot (" + e.getClass().getSimpleName() + ")");
    }
  }

  private static PartitionState read(In in, byte format) {
    long nextSequence = in.signed();
    long outboxFirst = in.signed();
    long outboxBytes = in.signed();
    long events = in.signed();
    String incarnation = in.string();
    long eventBytes = in.signed();
    SnapshotMark mark = new SnapshotMark(in.signed(), in.signed());
    LinkedHashMap<String, Receipt> receipts = new LinkedHashMap<>();
    long readAt = System.currentTimeMillis();
    for (int i = in.count(); i > 0; i--) {
      String key = in.string();
      String commandId = in.string();
      long first = in.signed();
      int n = in.size();
      List<Long> revisions = new ArrayList<>(Math.max(n, 0));
      for (int k = 0; k < n; k++) {
        revisions.add(in.signed());
      }
      receipts.put(
          key, new Receipt(commandId, first, revisions, format >= 3 ? in.signed() : readAt));
    }
    long spilledAt = format >= 3 ? in.signed() : 0;
    long latestAt = format >= 3 ? in.signed() : receipts.isEmpty() ? 0 : readAt;
    HashMap<String, Long> watermarks = new HashMap<>();
    for (int i = in.count(); i > 0; i--) {
      watermarks.put(in.string(), in.signed());
    }
    HashMap<String, PartProgress> partials = new HashMap<>();
    for (int i = in.count(); i > 0; i--) {
      partials.put(in.string(), new PartProgress(in.signed(), (int) in.signed()));
    }
    HashMap<String, Partition.Cut> cuts = new HashMap<>();
    for (int i = format >= 2 ? in.count() : 0; i > 0; i--) {
      cuts.put(in.string(), new Partition.Cut((int) in.signed(), in.string()));
    }
    int segments = in.count();
    OutboxSegments outbox = new OutboxSegments(segments);
    for (int i = segments; i > 0; i--) {
      outbox.append(in.signed(), new Segment(in.signed(), (int) in.signed(), in.signed()));
    }
    HashMap<String, Consumer> consumers = new HashMap<>();
    for (int i = in.count(); i > 0; i--) {
      Consumer c = Binary.readConsumer(in);
      consumers.put(c.key(), c);
    }
    HashMap<String, RowRule> rules = new HashMap<>();
    for (int i = in.count(); i > 0; i--) {
      rules.put(in.string(), new RowRule(in.string(), in.signed()));
    }
    HashMap<String, Long> rowEpochs = new HashMap<>();
    for (int i = in.count(); i > 0; i--) {
      rowEpochs.put(in.string(), in.signed());
    }
    DocumentIndex index = new DocumentIndex();
    for (int i = in.count(); i > 0; i--) {
      String collection = in.string();
      for (int k = in.count(); k > 0; k--) {
        String id = in.string();
        long revision = in.signed();
        long lastSeq = events - in.unsigned();
        long size = in.signed();
        index.put(collection, id, new DocumentIndex.Entry(revision, lastSeq, (int) size));
      }
    }
    return new PartitionState(
        index,
        nextSequence,
        outboxFirst,
        outboxBytes,
        events,
        receipts,
        spilledAt,
        latestAt,
        watermarks,
        partials,
        cuts,
        outbox,
        incarnation,
        eventBytes,
        mark,
        consumers,
        rules,
        rowEpochs);
  }
}
