package io.weir.sharding.partition;

import io.weir.protocol.Utf8;
import io.weir.sharding.partition.Partition.Consumer;
import io.weir.sharding.partition.Partition.FrameApplied;
import io.weir.sharding.partition.Partition.OutboxEntry;
import io.weir.sharding.partition.Partition.PartProgress;
import io.weir.sharding.partition.Partition.Purged;
import io.weir.sharding.partition.Partition.RowRule;
import io.weir.sharding.partition.Partition.Segment;
import io.weir.sharding.partition.Partition.SnapshotMark;
import io.weir.sharding.partition.Partition.Written;
import io.weir.sharding.partition.ReadProtocol.Document;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;

/**
 * A partition's state, which is also its snapshot (ADR 0032): the {@link DocumentIndex} (no
 * bodies), the outbox's index (for each journal event, the first outbox sequence it holds, its
 * entry count and bytes: payloads stay in the journal), idempotency receipts, per-source watermarks
 * and split-slice progress, projection consumers, row rules and their epochs, and the partition's
 * incarnation. Changed in place by its named transitions ({@link #written}, {@link #purged}), only
 * from the event handler; a snapshot gets a {@link #copy}. The one exception is not state: the
 * row-visibility values a read remembers in the index's entries (ADR 0059), which no snapshot,
 * event or comparison of entries includes.
 */
public final class PartitionState {
  /**
   * How long receipts are kept and how many of them in the heap (ADR 0034): a setting, not part of
   * the state. Receipts older than {@code ttlMillis} are forgotten; past {@code heap} the oldest
   * leave the heap and stay in the receipts table only.
   */
  record ReceiptPolicy(long ttlMillis, int heap) {
    static final ReceiptPolicy DEFAULT = new ReceiptPolicy(24L * 3_600_000, 1_000);
  }

  /** The receipt policy (set by the partition from its settings; not part of a snapshot). */
  ReceiptPolicy receiptPolicy = ReceiptPolicy.DEFAULT;

  final DocumentIndex index;
  long nextSequence;
  long outboxFirst;
  long outboxBytes;
  long events;

  /** The latest receipts, oldest first. */
  final LinkedHashMap<String, Receipt> receipts;

  /**
   * The time of the newest receipt that left the heap before it expired: receipts up to it may be
   * in the receipts table only, so a retry not found in the heap looks there (0: none left).
   */
  long receiptsSpilledAt;

  /** The time of the newest receipt written (0: none). */
  long receiptsLatestAt;

  final HashMap<String, Long> watermarks;
  final HashMap<String, PartProgress> partials;

  /**
   * Per source, where the next part of the frame the partition is writing in parts starts (ADR
   * 0033); with {@code partials} saying which frame (commit LSN, sender parts in).
   */
  final HashMap<String, Partition.Cut> cuts;

  final OutboxSegments outbox;
  String incarnation;
  long eventBytes;
  final SnapshotMark mark;
  final HashMap<String, Consumer> consumers;
  final HashMap<String, RowRule> rules;
  final HashMap<String, Long> rowEpochs;

  PartitionState(
      DocumentIndex index,
      long nextSequence,
      long outboxFirst,
      long outboxBytes,
      long events,
      LinkedHashMap<String, Receipt> receipts,
      long receiptsSpilledAt,
      long receiptsLatestAt,
      HashMap<String, Long> watermarks,
      HashMap<String, PartProgress> partials,
      HashMap<String, Partition.Cut> cuts,
      OutboxSegments outbox,
      String incarnation,
      long eventBytes,
      SnapshotMark mark,
      HashMap<String, Consumer> consumers,
      HashMap<String, RowRule> rules,
      HashMap<String, Long> rowEpochs) {
    this.index = index;
    this.nextSequence = nextSequence;
    this.outboxFirst = outboxFirst;
    this.outboxBytes = outboxBytes;
    this.events = events;
    this.receipts = receipts;
    this.receiptsSpilledAt = receiptsSpilledAt;
    this.receiptsLatestAt = receiptsLatestAt;
    this.watermarks = watermarks;
    this.partials = partials;
    this.cuts = cuts;
    this.outbox = outbox;
    this.incarnation = incarnation;
    this.eventBytes = eventBytes;
    this.mark = mark;
    this.consumers = consumers;
    this.rules = rules;
    this.rowEpochs = rowEpochs;
  }

  static PartitionState empty() {
    return new PartitionState(
        new DocumentIndex(),
        1,
        1,
        0,
        0,
        new LinkedHashMap<>(),
        0,
        0,
        new HashMap<>(),
        new HashMap<>(),
        new HashMap<>(),
        new OutboxSegments(),
        null,
        0,
        new SnapshotMark(0, 0),
        new HashMap<>(),
        new HashMap<>(),
        new HashMap<>());
  }

  // ---- Reading ----

  public String incarnation() {
    return incarnation;
  }

  public long nextSequence() {
    return nextSequence;
  }

  public long outboxFirst() {
    return outboxFirst;
  }

  public long outboxBytes() {
    return outboxBytes;
  }

  /** Journal events so far: the sequence number of the last one. */
  public long events() {
    return events;
  }

  public long eventBytes() {
    return eventBytes;
  }

  public SnapshotMark mark() {
    return mark;
  }

  public Map<String, Long> watermarks() {
    return watermarks;
  }

  public Map<String, Consumer> consumers() {
    return consumers;
  }

  public Map<String, Receipt> receipts() {
    return receipts;
  }

  /** The outbox's index as a sorted map (a copy). */
  public TreeMap<Long, Segment> outbox() {
    return outbox.toMap();
  }

  /** Documents held, tombstones included. */
  public long documents() {
    return index.size();
  }

  long rowEpoch(String collection) {
    return rowEpochs.getOrDefault(collection, 0L);
  }

  /** The installed row rule's field for {@code collection}, or null. */
  String ruleField(String collection) {
    RowRule r = rules.get(collection);
    return r == null ? null : r.field();
  }

  long ruleVersion(String collection) {
    RowRule r = rules.get(collection);
    return r == null ? 0 : r.version();
  }

  /** The row rules' fields, collection to field (a copy). */
  Map<String, String> ruleFields() {
    Map<String, String> out = new HashMap<>();
    rules.forEach(
        (c, r) -> {
          if (r.field() != null) {
            out.put(c, r.field());
          }
        });
    return out;
  }

  long watermark(String source) {
    return watermarks.getOrDefault(source, 0L);
  }

  /** The lowest checkpoint of the active consumers, or empty without one: purges stop there. */
  Optional<Long> lowestCheckpoint() {
    return consumers.values().stream()
        .filter(c -> !c.released())
        .map(Consumer::checkpoint)
        .min(Long::compare);
  }

  /**
   * Roughly the bytes this state takes in a snapshot: the snapshot policy compares the journal
   * written since the last snapshot with it.
   */
  long snapshotEstimate() {
    return index.snapshotEstimate()
        + outbox.size() * 12L
        + receipts.size() * 64L
        + consumers.size() * 256L;
  }

  // ---- Transitions ----

  /** The event at the next journal sequence: a group commit of accepted frames. */
  PartitionState written(Written w) {
    for (Receipt.Keyed r : Receipt.of(w, nextSequence, receiptsLatestAt)) {
      receipts.remove(r.key()); // a key's newest receipt is its latest
      receipts.put(r.key(), r.receipt());
      receiptsLatestAt = Math.max(receiptsLatestAt, r.receipt().atMillis());
    }
    keepReceipts();
    long seq = ++events;
    long bytes = 0;
    int entries = 0;
    long segmentFirst = -1;
    for (FrameApplied f : w.frames()) {
      for (String collection : f.reset()) {
        index.clear(collection);
      }
      for (Document d : f.loaded()) {
        index.put(d.collection(), d.id(), DocumentIndex.Entry.of(d.revision(), seq, d.body()));
        eventBytes += loadedBytes(d);
      }
      for (OutboxEntry x : f.entries()) {
        // The after image's UTF-8 length, counted once for the index and the entry's bytes (as
        // OutboxEntry.bytes() counts them): over 1 KB images this loop's largest cost in replay.
        long afterBytes = Utf8.length(x.after());
        index.put(
            x.collection(),
            x.id(),
            DocumentIndex.Entry.sized(
                x.revision(), seq, x.kind().equals("delete") || x.after() == null, afterBytes));
        if (segmentFirst < 0) {
          segmentFirst = x.sequence();
        }
        entries++;
        bytes += Partition.ENTRY_OVERHEAD + Utf8.length(x.before()) + afterBytes;
        nextSequence = x.sequence() + 1;
      }
      if (f.consumer() != null) {
        consumers.put(f.consumer().key(), f.consumer().after(consumers.get(f.consumer().key())));
      }
      for (String collection : f.fenced()) {
        rowEpochs.merge(collection, 1L, Long::sum);
      }
      if (f.rule() != null) {
        rowEpochs.merge(f.rule().collection(), 1L, Long::sum);
        rules.put(f.rule().collection(), new RowRule(f.rule().field(), f.rule().version()));
      }
      f.source()
          .ifPresent(
              s -> {
                if (f.cut() != null) {
                  // A part the partition cut: the sender's part is not in yet, the cut is.
                  partials.put(s.source(), new PartProgress(s.commitLsn(), s.part() - 1));
                  cuts.put(s.source(), f.cut());
                  return;
                }
                cuts.remove(s.source());
                if (s.last()) {
                  watermarks.merge(
                      s.source(), s.commitLsn(), (a, b) -> Long.compareUnsigned(a, b) >= 0 ? a : b);
                  partials.remove(s.source());
                } else {
                  partials.put(s.source(), new PartProgress(s.commitLsn(), s.part()));
                }
              });
    }
    if (entries > 0) {
      outbox.append(segmentFirst, new Segment(seq, entries, bytes));
      outboxBytes += bytes;
      eventBytes += bytes;
    }
    if (w.incarnation() != null) {
      // The first event names the incarnation; an accepted storage loss names the next (ADR 0036).
      incarnation = w.incarnation();
    }
    return this;
  }

  /**
   * Forgets receipts older than the policy's time (by the newest receipt's time, so replaying the
   * journal forgets the same ones), and moves the oldest out of the heap past its count: they stay
   * in the receipts table.
   */
  void keepReceipts() {
    long horizon = receiptsLatestAt - receiptPolicy.ttlMillis();
    var oldest = receipts.values().iterator();
    while (oldest.hasNext()) {
      Receipt r = oldest.next();
      if (r.atMillis() < horizon) {
        oldest.remove();
      } else if (receipts.size() > receiptPolicy.heap()) {
        receiptsSpilledAt = Math.max(receiptsSpilledAt, r.atMillis());
        oldest.remove();
      } else {
        break;
      }
    }
  }

  /**
   * Whether a receipt not in the heap may be in the receipts table: one left the heap (past its
   * count) recently enough not to have expired at {@code nowMillis}.
   */
  boolean receiptsSpilledSince(long nowMillis) {
    return receiptsSpilledAt > 0 && receiptsSpilledAt >= nowMillis - receiptPolicy.ttlMillis();
  }

  /** Bytes a loaded (initial snapshot) document counts for in the journal written. */
  static long loadedBytes(Document d) {
    return 64
        + Utf8.length(d.collection())
        + Utf8.length(d.id())
        + Utf8.length(d.body())
        + Utf8.length(d.acl());
  }

  /**
   * Whole segments up to {@code through} leave the outbox index; the retained range starts after.
   */
  PartitionState purged(Purged p) {
    events++;
    while (!outbox.isEmpty()) {
      Segment first = outbox.first();
      if (outbox.firstPosition() + first.entries() - 1 > p.through()) {
        break;
      }
      outboxBytes -= first.bytes();
      outbox.removeFirst();
    }
    outboxFirst = Math.max(outboxFirst, p.through() + 1);
    return this;
  }

  PartitionState apply(Partition.Event e) {
    return e instanceof Written w ? written(w) : purged((Purged) e);
  }

  /** A copy sharing no mutable collection with this state (entries and receipts are immutable). */
  PartitionState copy() {
    return new PartitionState(
        index.copy(),
        nextSequence,
        outboxFirst,
        outboxBytes,
        events,
        new LinkedHashMap<>(receipts),
        receiptsSpilledAt,
        receiptsLatestAt,
        new HashMap<>(watermarks),
        new HashMap<>(partials),
        new HashMap<>(cuts),
        outbox.copy(),
        incarnation,
        eventBytes,
        new SnapshotMark(mark.events, mark.eventBytes),
        new HashMap<>(consumers),
        new HashMap<>(rules),
        new HashMap<>(rowEpochs));
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof PartitionState s
        && s.index.equals(index)
        && s.nextSequence == nextSequence
        && s.outboxFirst == outboxFirst
        && s.outboxBytes == outboxBytes
        && s.events == events
        && s.receipts.equals(receipts)
        && List.copyOf(s.receipts.keySet()).equals(List.copyOf(receipts.keySet()))
        && s.receiptsSpilledAt == receiptsSpilledAt
        && s.receiptsLatestAt == receiptsLatestAt
        && s.watermarks.equals(watermarks)
        && s.partials.equals(partials)
        && s.cuts.equals(cuts)
        && s.outbox.equals(outbox)
        && Objects.equals(s.incarnation, incarnation)
        && s.eventBytes == eventBytes
        && s.mark.equals(mark)
        && s.consumers.equals(consumers)
        && s.rules.equals(rules)
        && s.rowEpochs.equals(rowEpochs);
  }

  @Override
  public int hashCode() {
    return Objects.hash(index, nextSequence, events, incarnation);
  }

  /** Counts only: receipts, watermarks and the index hold ids and names. */
  @Override
  public String toString() {
    return "PartitionState[documents="
        + index.size()
        + ", outbox="
        + outboxFirst
        + ".."
        + nextSequence
        + ", events="
        + events
        + "]";
  }
}
