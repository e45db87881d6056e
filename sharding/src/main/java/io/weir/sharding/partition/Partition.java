package io.weir.sharding.partition;

import io.weir.protocol.CborSerializable;
import io.weir.protocol.Utf8;
import io.weir.sharding.partition.PartitionProtocol.AlreadyApplied;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.BatchCommitted;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.CommitBatch;
import io.weir.sharding.partition.PartitionProtocol.ConfigureConsumer;
import io.weir.sharding.partition.PartitionProtocol.Conflict;
import io.weir.sharding.partition.PartitionProtocol.ConsumerConfigured;
import io.weir.sharding.partition.PartitionProtocol.ConsumerRefusal;
import io.weir.sharding.partition.PartitionProtocol.ConsumerRefused;
import io.weir.sharding.partition.PartitionProtocol.ConsumerReleased;
import io.weir.sharding.partition.PartitionProtocol.ConsumerReply;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.Document;
import io.weir.sharding.partition.PartitionProtocol.DocumentReply;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Gap;
import io.weir.sharding.partition.PartitionProtocol.GetDocument;
import io.weir.sharding.partition.PartitionProtocol.GetStatus;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.Loaded;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.PartitionStatus;
import io.weir.sharding.partition.PartitionProtocol.QuotaExceeded;
import io.weir.sharding.partition.PartitionProtocol.Rejected;
import io.weir.sharding.partition.PartitionProtocol.ReleaseConsumer;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Truncate;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.PartitionProtocol.Write;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.SnapshotAdapter;
import org.apache.pekko.persistence.typed.javadsl.CommandHandler;
import org.apache.pekko.persistence.typed.javadsl.Effect;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehavior;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;

/**
 * One atomic partition: an event-sourced entity holding its documents, the index of its outbox (the
 * mutation stream; entry payloads stay in the journal), idempotency receipts and per-source
 * watermarks. {@link PartitionEntity} runs it as a child and coalesces writes in front of it.
 *
 * <p>A frame ({@link ApplyFrame}) is checked whole before anything is written: a malformed frame,
 * one whose expected revisions do not match (each mutation sees the ones before it), one that would
 * overflow the outbox quota, or a CDC frame after a gap changes nothing. An accepted frame's outbox
 * entries, receipt and watermark move together. A {@link WriteBatch} checks its frames in order
 * (each sees the accepted ones before it) and persists the accepted ones as one journal event
 * ({@link Written}): one write, so a crash leaves all of it or none.
 *
 * <p>Snapshots keep recovery bounded: one after at least {@value #SNAPSHOT_EVERY} events and a
 * {@value #SNAPSHOT_STATE_DIVISOR}th of the state's size in event bytes ({@link #shouldSnapshot}).
 * Journal events are never deleted on snapshot: they are the outbox's payloads; purged ones go
 * through the {@link JournalPruner}, as do snapshots older than the two latest.
 */
public final class Partition
    extends EventSourcedBehavior<Command, Partition.Event, Partition.State> {
  static final int SNAPSHOT_EVERY = 1000;

  /**
   * A snapshot is taken once the journal written since the last one reaches this share of the
   * state's size (and at least {@value #SNAPSHOT_EVERY} events): recovery replays at most that
   * much, and snapshot writes cost at most this many times the events' bytes.
   */
  static final int SNAPSHOT_STATE_DIVISOR = 4;

  /** Bytes counted per document in the state-size estimate besides its strings. */
  static final int DOCUMENT_OVERHEAD = 64;

  /**
   * Bytes of documents one {@link PartitionProtocol.GetDocuments} reply carries at most (besides
   * the first).
   */
  static final long REPLY_BYTES = 1L << 20;

  /** Receipts kept for idempotent retries of API frames; the oldest are forgotten first. */
  static final int MAX_RECEIPTS = 10_000;

  /** Bytes counted per outbox entry besides its images. */
  static final int ENTRY_OVERHEAD = 64;

  private static final com.fasterxml.jackson.core.JsonFactory JSON =
      new com.fasterxml.jackson.core.JsonFactory();

  private final int partition;
  private final PartitionSettings settings;
  private final JournalPruner pruner;
  private final PartitionObserver observer;

  /** Keeps the documents table, or null without one. */
  private final TableWriter table;

  /** Whether the storage keeps enough copies for writes (set once, by the factory). */
  private StorageGate gate = StorageGate.OPEN;

  /** When this incarnation of the behavior was created: recovery time is measured from here. */
  private final long createdNanos = System.nanoTime();

  /** Sequence numbers of the two latest snapshots this incarnation saved (0: none yet). */
  private volatile long latestSnapshot;

  private volatile long previousSnapshot;
  private final java.util.concurrent.atomic.AtomicLong prunedThrough =
      new java.util.concurrent.atomic.AtomicLong();
  private final java.util.concurrent.atomic.AtomicBoolean pruning =
      new java.util.concurrent.atomic.AtomicBoolean();

  /** The persistence id of partition {@code n}: {@code weir-partition|n}. */
  public static PersistenceId persistenceId(int n) {
    return PersistenceId.of(PartitionEntity.TYPE_KEY.name(), Integer.toString(n));
  }

  public static Partition create(int partition, PartitionSettings settings, JournalPruner pruner) {
    return new Partition(partition, settings, pruner, PartitionObserver.NONE);
  }

  /**
   * As {@link #create(int, PartitionSettings, JournalPruner)}, reporting to {@code observer}
   * (metrics).
   */
  public static Partition create(
      int partition, PartitionSettings settings, JournalPruner pruner, PartitionObserver observer) {
    return new Partition(partition, settings, pruner, observer);
  }

  /**
   * A partition that keeps its documents in {@code table} too (the node's partitions; {@link
   * DocumentTable#NONE} gives the same partition as the other factories). The table is written
   * after each persist by a {@link TableWriter}, which needs the actor context.
   */
  public static org.apache.pekko.actor.typed.Behavior<Command> create(
      int partition,
      PartitionSettings settings,
      JournalPruner pruner,
      DocumentTable table,
      PartitionObserver observer) {
    return create(partition, settings, pruner, table, observer, StorageGate.OPEN);
  }

  /**
   * As {@link #create(int, PartitionSettings, JournalPruner, DocumentTable, PartitionObserver)},
   * writing only while {@code gate} lets it (the node's partitions: the storage's copies).
   */
  public static org.apache.pekko.actor.typed.Behavior<Command> create(
      int partition,
      PartitionSettings settings,
      JournalPruner pruner,
      DocumentTable table,
      PartitionObserver observer,
      StorageGate gate) {
    if (!table.enabled()) {
      Partition p = new Partition(partition, settings, pruner, observer);
      p.gate = gate;
      return p;
    }
    return org.apache.pekko.actor.typed.javadsl.Behaviors.setup(
        ctx -> {
          Partition p = new Partition(partition, settings, pruner, observer, table, ctx);
          p.gate = gate;
          return p;
        });
  }

  public static Partition create(int partition, PartitionSettings settings) {
    return new Partition(partition, settings, JournalPruner.NONE, PartitionObserver.NONE);
  }

  public static Partition create(int partition) {
    return new Partition(
        partition, PartitionSettings.DEFAULTS, JournalPruner.NONE, PartitionObserver.NONE);
  }

  private Partition(
      int partition, PartitionSettings settings, JournalPruner pruner, PartitionObserver observer) {
    super(persistenceId(partition));
    this.partition = partition;
    this.settings = settings;
    this.pruner = pruner;
    this.observer = observer;
    this.table = null;
  }

  private Partition(
      int partition,
      PartitionSettings settings,
      JournalPruner pruner,
      PartitionObserver observer,
      DocumentTable table,
      org.apache.pekko.actor.typed.javadsl.ActorContext<Command> ctx) {
    super(persistenceId(partition));
    this.partition = partition;
    this.settings = settings;
    this.pruner = pruner;
    this.observer = observer;
    ActorRef<Command> self = ctx.getSelf();
    this.table =
        new TableWriter(
            partition,
            table,
            org.apache.pekko.persistence.query.PersistenceQuery.get(ctx.getSystem())
                .getReadJournalFor(
                    org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal.class,
                    org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal.Identifier()),
            ctx.getSystem(),
            through -> self.tell(new TableApplied(through)),
            () -> self.tell(TableSeed.INSTANCE),
            observer);
  }

  /** The documents table applied the events through {@code through}: waiting writes may go. */
  record TableApplied(long through) implements Command {}

  /** The documents table asks for the documents to seed it from (see {@link TableWriter}). */
  enum TableSeed implements Command {
    INSTANCE
  }

  /** A journal event of a partition. */
  public sealed interface Event extends CborSerializable permits Written, Purged {}

  /** Outbox entries up to {@code through} are purged: the retained outbox starts after it. */
  public record Purged(long through) implements Event {}

  /** Writes coalesced by {@link PartitionEntity}; {@code done} hears when they are answered. */
  record WriteBatch(List<Write> writes, ActorRef<PartitionEntity.BatchWritten> done)
      implements Command {
    @Override
    public String toString() {
      return "WriteBatch[" + writes.size() + "]";
    }
  }

  /**
   * One outbox entry.
   *
   * @param sequence the partition's monotonic outbox sequence
   * @param ordinal position inside its frame
   * @param kind {@code upsert}, {@code delete} or {@code snapshot} (a row of an incremental
   *     snapshot)
   * @param revision the document's revision after the change
   * @param before the document body before (null when absent or a tombstone); never logged
   * @param after the body after (null for a delete); never logged
   * @param commitLsn the source commit LSN of a CDC frame; 0 for API frames
   */
  public record OutboxEntry(
      long sequence,
      int ordinal,
      String collection,
      String id,
      String kind,
      long revision,
      String before,
      String after,
      long evaluatedAtMillis,
      long commitLsn)
      implements CborSerializable {
    long bytes() {
      return ENTRY_OVERHEAD + Utf8.length(before) + Utf8.length(after);
    }

    @Override
    public String toString() {
      return "OutboxEntry["
          + sequence
          + ", "
          + collection
          + ", "
          + kind
          + ", revision="
          + revision
          + "]";
    }
  }

  /**
   * One accepted frame.
   *
   * @param commandId the API command id (receipt key); null for CDC frames and snapshot rows
   * @param reset collections whose documents are removed silently first (initial snapshot)
   * @param loaded documents set without outbox entries (initial snapshot rows)
   * @param consumer a projection consumer's new definition, checkpoint and receipts (a configure,
   *     release or committed batch); null for other frames
   * @param fenced collections whose row-visibility epoch this frame advances: it changed the ACL of
   *     an existing document (or re-seeded a collection that has a row rule)
   * @param rule a newly installed row-visibility rule (which also advances its collection's epoch)
   */
  public record FrameApplied(
      String commandId,
      List<OutboxEntry> entries,
      Optional<SourcePosition> source,
      List<String> reset,
      List<Document> loaded,
      Consumer consumer,
      List<String> fenced,
      RuleChange rule)
      implements CborSerializable {
    public FrameApplied {
      fenced = fenced == null ? List.of() : List.copyOf(fenced);
    }

    FrameApplied(
        String commandId,
        List<OutboxEntry> entries,
        Optional<SourcePosition> source,
        List<String> reset,
        List<Document> loaded) {
      this(commandId, entries, source, reset, loaded, null, List.of(), null);
    }

    @Override
    public String toString() {
      return "FrameApplied[entries="
          + entries.size()
          + ", loaded="
          + loaded.size()
          + ", source="
          + source
          + "]";
    }
  }

  /**
   * The journal event of one group commit.
   *
   * @param incarnation set by the partition's first event: identifies this partition's history
   */
  public record Written(String incarnation, List<FrameApplied> frames) implements Event {
    @Override
    public String toString() {
      return "Written[frames=" + frames.size() + "]";
    }
  }

  /**
   * Where the last snapshot was taken: its sequence number and the state's cumulative event bytes
   * then. Part of the state (and so of every snapshot), set when a snapshot is decided: after a
   * restart the policy goes on from the snapshot it recovered from.
   */
  public static final class SnapshotMark implements CborSerializable {
    public long events;
    public long eventBytes;

    @com.fasterxml.jackson.annotation.JsonCreator
    public SnapshotMark(
        @com.fasterxml.jackson.annotation.JsonProperty("events") long events,
        @com.fasterxml.jackson.annotation.JsonProperty("eventBytes") long eventBytes) {
      this.events = events;
      this.eventBytes = eventBytes;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof SnapshotMark m && m.events == events && m.eventBytes == eventBytes;
    }

    @Override
    public int hashCode() {
      return Long.hashCode(events) * 31 + Long.hashCode(eventBytes);
    }
  }

  /** Batch receipts a consumer keeps: retries of its latest batches are recognised by them. */
  static final int CONSUMER_RECEIPTS = 16;

  /**
   * A projection consumer generation (part of the state).
   *
   * @param startAfter the position before its first entry
   * @param checkpoint the last position it committed
   * @param reservationCut the retained beginning ({@code outboxFirst}) when it last used the
   *     progress reserve; -1 if never: it may use the reserve once per retained-prefix position
   * @param receipts its latest committed batches, newest last
   */
  public record Consumer(
      String name,
      long generation,
      List<String> collections,
      List<String> kinds,
      long startAfter,
      long checkpoint,
      boolean released,
      long reservationCut,
      List<PartitionProtocol.BatchReceipt> receipts)
      implements CborSerializable {
    public Consumer {
      collections = List.copyOf(collections);
      kinds = List.copyOf(kinds);
      receipts = receipts == null ? List.of() : List.copyOf(receipts);
    }

    String key() {
      return consumerKey(name, generation);
    }

    /**
     * This consumer as a frame records it (its new definition and checkpoint, with only the new
     * receipt of a commit: events do not repeat the older ones) applied to {@code previous}: a
     * commit's receipt joins the previous receipts (the latest {@value #CONSUMER_RECEIPTS} kept);
     * configure and release frames carry none, and leave none.
     */
    Consumer after(Consumer previous) {
      if (receipts.isEmpty() || previous == null) {
        return this;
      }
      List<PartitionProtocol.BatchReceipt> all = new ArrayList<>(previous.receipts());
      all.addAll(receipts);
      return withReceipts(all.subList(Math.max(0, all.size() - CONSUMER_RECEIPTS), all.size()));
    }

    Consumer withReceipts(List<PartitionProtocol.BatchReceipt> list) {
      return new Consumer(
          name,
          generation,
          collections,
          kinds,
          startAfter,
          checkpoint,
          released,
          reservationCut,
          list);
    }

    PartitionProtocol.ConsumerView view() {
      return new PartitionProtocol.ConsumerView(
          name, generation, collections, kinds, startAfter, checkpoint, released);
    }

    /** Names are identifiers, but stay out of logs anyway. */
    @Override
    public String toString() {
      return "Consumer[generation="
          + generation
          + ", checkpoint="
          + checkpoint
          + ", released="
          + released
          + "]";
    }
  }

  static String consumerKey(String name, long generation) {
    return name + '\0' + generation;
  }

  /** A collection's installed row-visibility rule: its ACL/owner field (null: none) and version. */
  public record RowRule(String field, long version) implements CborSerializable {}

  /** A row rule installed by a frame. */
  public record RuleChange(String collection, String field, long version)
      implements CborSerializable {}

  /** A split slice being applied: the commit LSN and how many of its parts are in. */
  public record PartProgress(long commitLsn, int done) implements CborSerializable {}

  /**
   * Where a run of outbox entries sits in the journal.
   *
   * @param journalSequence the sequence number of the event holding them
   */
  public record Segment(long journalSequence, int entries, long bytes)
      implements CborSerializable {}

  /**
   * The entity's state (also its snapshot). Mutated in place by the event handler only; snapshots
   * get a copy (see {@link #snapshotAdapter()}).
   *
   * @param documents by {@code collection + '\0' + id}
   * @param outboxFirst the first retained outbox sequence
   * @param outboxBytes bytes of the retained entries
   * @param events journal events so far: the sequence number of the last one
   * @param outbox first sequence of each event's entries -> where they are
   */
  public record State(
      HashMap<String, Document> documents,
      long nextSequence,
      long outboxFirst,
      long outboxBytes,
      long events,
      LinkedHashMap<String, Applied> receipts,
      HashMap<String, Long> watermarks,
      HashMap<String, PartProgress> partials,
      TreeMap<Long, Segment> outbox,
      String incarnation,
      long documentBytes,
      long eventBytes,
      SnapshotMark mark,
      HashMap<String, Consumer> consumers,
      HashMap<String, RowRule> rules,
      HashMap<String, Long> rowEpochs)
      implements CborSerializable {

    public State {
      consumers = consumers == null ? new HashMap<>() : consumers;
      rules = rules == null ? new HashMap<>() : rules;
      rowEpochs = rowEpochs == null ? new HashMap<>() : rowEpochs;
    }

    static State empty() {
      return new State(
          new HashMap<>(),
          1,
          1,
          0,
          0,
          new LinkedHashMap<>(),
          new HashMap<>(),
          new HashMap<>(),
          new TreeMap<>(),
          null,
          0,
          0,
          new SnapshotMark(0, 0),
          new HashMap<>(),
          new HashMap<>(),
          new HashMap<>());
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

    /** The lowest checkpoint of the active consumers, or empty without one: purges stop there. */
    Optional<Long> lowestCheckpoint() {
      return consumers.values().stream()
          .filter(c -> !c.released())
          .map(Consumer::checkpoint)
          .min(Long::compare);
    }

    /** Counts only: documents, receipts and watermarks hold row values and ids. */
    @Override
    public String toString() {
      return "State[documents="
          + documents.size()
          + ", outbox="
          + outboxFirst
          + ".."
          + nextSequence
          + ", events="
          + events
          + "]";
    }

    /**
     * A copy sharing no mutable collection with this state (documents and receipts are immutable).
     */
    State copy() {
      return new State(
          new HashMap<>(documents),
          nextSequence,
          outboxFirst,
          outboxBytes,
          events,
          new LinkedHashMap<>(receipts),
          new HashMap<>(watermarks),
          new HashMap<>(partials),
          new TreeMap<>(outbox),
          incarnation,
          documentBytes,
          eventBytes,
          new SnapshotMark(mark.events, mark.eventBytes),
          new HashMap<>(consumers),
          new HashMap<>(rules),
          new HashMap<>(rowEpochs));
    }

    Optional<Document> document(String collection, String id) {
      return Optional.ofNullable(documents.get(key(collection, id)));
    }

    long watermark(String source) {
      return watermarks.getOrDefault(source, 0L);
    }

    State apply(Event e) {
      return e instanceof Written w ? apply(w) : purge((Purged) e);
    }

    /** Whole segments up to {@code through} leave the index; the retained range starts after it. */
    State purge(Purged p) {
      long bytes = outboxBytes;
      while (!outbox.isEmpty()) {
        Map.Entry<Long, Segment> first = outbox.firstEntry();
        if (first.getKey() + first.getValue().entries() - 1 > p.through()) {
          break;
        }
        bytes -= first.getValue().bytes();
        outbox.pollFirstEntry();
      }
      return new State(
          documents,
          nextSequence,
          Math.max(outboxFirst, p.through() + 1),
          bytes,
          events + 1,
          receipts,
          watermarks,
          partials,
          outbox,
          incarnation,
          documentBytes,
          eventBytes,
          mark,
          consumers,
          rules,
          rowEpochs);
    }

    State apply(Written w) {
      long events = this.events + 1;
      long next = nextSequence;
      long bytes = outboxBytes;
      int entries = 0;
      long segmentBytes = 0;
      long segmentFirst = -1;
      long[] docBytes = {documentBytes};
      long written = eventBytes;
      for (DocumentChange c : DocumentChange.of(w, heapRules())) {
        docBytes[0] += applyTo(documents, c);
      }
      for (FrameApplied f : w.frames()) {
        for (Document d : f.loaded()) {
          written += size(d);
        }
        List<Long> revisions = new ArrayList<>();
        for (OutboxEntry x : f.entries()) {
          revisions.add(x.revision());
          if (segmentFirst < 0) {
            segmentFirst = x.sequence();
          }
          entries++;
          segmentBytes += x.bytes();
          written += x.bytes();
          next = x.sequence() + 1;
        }
        if (f.commandId() != null) {
          long first = f.entries().isEmpty() ? next : f.entries().get(0).sequence();
          if (PartitionProtocol.keepsReceipt(f.commandId())) {
            receipts.put(
                PartitionProtocol.receiptKey(f.commandId()),
                new Applied(f.commandId(), first, revisions, false));
          }
          while (receipts.size() > MAX_RECEIPTS) {
            receipts.remove(receipts.keySet().iterator().next());
          }
        }
        if (f.consumer() != null) {
          consumers.put(f.consumer().key(), f.consumer().after(consumers.get(f.consumer().key())));
        }
        for (String collection : f.fenced()) {
          rowEpochs.merge(collection, 1L, Long::sum);
        }
        if (f.rule() != null) {
          rowEpochs.merge(f.rule().collection(), 1L, Long::sum);
        }
        f.source()
            .ifPresent(
                s -> {
                  if (s.last()) {
                    watermarks.merge(
                        s.source(),
                        s.commitLsn(),
                        (a, b) -> Long.compareUnsigned(a, b) >= 0 ? a : b);
                    partials.remove(s.source());
                  } else {
                    partials.put(s.source(), new PartProgress(s.commitLsn(), s.part()));
                  }
                });
      }
      if (entries > 0) {
        outbox.put(segmentFirst, new Segment(events, entries, segmentBytes));
        bytes += segmentBytes;
      }
      String inc = incarnation != null ? incarnation : w.incarnation();
      return new State(
          documents,
          next,
          outboxFirst,
          bytes,
          events,
          receipts,
          watermarks,
          partials,
          outbox,
          inc,
          docBytes[0],
          written,
          mark,
          consumers,
          rules,
          rowEpochs);
    }

    /** The row rules as {@link DocumentChange#of} moves them: this state's own rule map. */
    private DocumentChange.RuleFields heapRules() {
      return new DocumentChange.RuleFields() {
        @Override
        public String field(String collection) {
          return ruleField(collection);
        }

        @Override
        public void set(RuleChange r) {
          rules.put(r.collection(), new RowRule(r.field(), r.version()));
        }
      };
    }

    /**
     * Applies {@code c} to a document map ({@code collection + '\0' + id} to document).
     *
     * @return how many bytes (as {@link #size} counts them) the map's documents grew by
     */
    static long applyTo(Map<String, Document> documents, DocumentChange c) {
      long[] delta = {0};
      if (c instanceof DocumentChange.Put p) {
        Document d = p.document();
        delta[0] += size(d) - size(documents.put(key(d.collection(), d.id()), d));
      } else if (c instanceof DocumentChange.Reset r) {
        documents
            .values()
            .removeIf(
                d -> {
                  boolean gone = d.collection().equals(r.collection());
                  if (gone) {
                    delta[0] -= size(d);
                  }
                  return gone;
                });
      } else {
        String collection = ((DocumentChange.ClearTombstoneAcls) c).collection();
        documents.replaceAll(
            (k, d) -> {
              if (d.deleted() && d.acl() != null && d.collection().equals(collection)) {
                Document cleared = new Document(d.collection(), d.id(), d.revision(), null, true);
                delta[0] += size(cleared) - size(d);
                return cleared;
              }
              return d;
            });
      }
      return delta[0];
    }

    /** Estimated bytes a document takes in a snapshot (0 for none). */
    static long size(Document d) {
      return d == null
          ? 0
          : DOCUMENT_OVERHEAD
              + Utf8.length(d.collection())
              + Utf8.length(d.id())
              + Utf8.length(d.body())
              + Utf8.length(d.acl());
    }
  }

  /**
   * The value of {@code body}'s top-level {@code field} as compact JSON: {@code "null"} when the
   * field is absent or the body is not an object; null when there is no field (no row rule) or no
   * body.
   */
  static String aclOf(String body, String field) {
    if (field == null || body == null) {
      return null;
    }
    try (com.fasterxml.jackson.core.JsonParser p = JSON.createParser(body)) {
      if (p.nextToken() != com.fasterxml.jackson.core.JsonToken.START_OBJECT) {
        return "null";
      }
      while (p.nextToken() == com.fasterxml.jackson.core.JsonToken.FIELD_NAME) {
        String name = p.currentName();
        p.nextToken();
        if (name.equals(field)) {
          java.io.StringWriter out = new java.io.StringWriter();
          try (com.fasterxml.jackson.core.JsonGenerator g = JSON.createGenerator(out)) {
            g.copyCurrentStructure(p);
          }
          return out.toString();
        }
        p.skipChildren();
      }
      return "null";
    } catch (IOException e) {
      return "null";
    }
  }

  static String key(String collection, String id) {
    return collection + '\0' + id;
  }

  /** Collections one consumer filter names at most. */
  static final int MAX_FILTER_COLLECTIONS = 64;

  private static final java.util.regex.Pattern CONSUMER_NAME =
      java.util.regex.Pattern.compile("[A-Za-z0-9_.-]{1,64}");

  public static boolean validConsumerName(String name) {
    return name != null && CONSUMER_NAME.matcher(name).matches();
  }

  /**
   * SHA-256 (hex) of a canonical encoding of projection effects: kind, collection, id, expected
   * revision and body of each, length-prefixed. Equal effects give equal digests whatever the
   * command id.
   */
  static String effectsDigest(List<Mutation> effects) {
    try {
      java.security.MessageDigest sha = java.security.MessageDigest.getInstance("SHA-256");
      java.nio.ByteBuffer number = java.nio.ByteBuffer.allocate(8);
      java.util.function.Consumer<String> text =
          t -> {
            byte[] b =
                t == null ? new byte[0] : t.getBytes(java.nio.charset.StandardCharsets.UTF_8);
            sha.update(number.clear().putLong(t == null ? -1 : b.length).array());
            sha.update(b);
          };
      for (Mutation m : effects) {
        text.accept(m instanceof Upsert ? "upsert" : m instanceof Delete ? "delete" : "truncate");
        text.accept(m.collection());
        if (m instanceof Upsert u) {
          text.accept(u.id());
          sha.update(number.clear().putLong(u.expectedRevision().orElse(-1L)).array());
          text.accept(u.body());
        } else if (m instanceof Delete d) {
          text.accept(d.id());
          sha.update(number.clear().putLong(d.expectedRevision().orElse(-1L)).array());
        }
      }
      return java.util.HexFormat.of().formatHex(sha.digest());
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every JVM", e);
    }
  }

  @Override
  public State emptyState() {
    return State.empty();
  }

  /**
   * The state's maps are mutated in place by the event handler, while the snapshot store serializes
   * a snapshot asynchronously: it gets a copy, taken on the entity's thread when the snapshot is
   * triggered.
   */
  @Override
  public SnapshotAdapter<State> snapshotAdapter() {
    return new SnapshotAdapter<>() {
      @Override
      public Object toJournal(State state) {
        return state.copy();
      }

      @Override
      public State fromJournal(Object from) {
        return (State) from;
      }
    };
  }

  /**
   * No count-based snapshots and no snapshot deletion by the plugin: {@link #shouldSnapshot}
   * decides when, and {@link #prune} deletes snapshots older than the two latest.
   */
  @Override
  public RetentionCriteria retentionCriteria() {
    return RetentionCriteria.disabled();
  }

  /**
   * Snapshot when at least {@value #SNAPSHOT_EVERY} events and at least a {@value
   * #SNAPSHOT_STATE_DIVISOR}th of the state's size in event bytes were written since the last
   * snapshot: a small partition snapshots every 1,000 events, a large one (a snapshot is the whole
   * partition in one row) only once enough was written to make replaying it cost as much.
   */
  @Override
  public boolean shouldSnapshot(State state, Event event, long sequenceNr) {
    SnapshotMark mark = state.mark();
    if (sequenceNr - mark.events >= SNAPSHOT_EVERY
        && state.eventBytes() - mark.eventBytes >= state.documentBytes() / SNAPSHOT_STATE_DIVISOR) {
      // Recorded in the state before the snapshot copies it.
      mark.events = sequenceNr;
      mark.eventBytes = state.eventBytes();
      return true;
    }
    return false;
  }

  @Override
  public CommandHandler<Command, Event, State> commandHandler() {
    return newCommandHandlerBuilder()
        .forAnyState()
        .onCommand(WriteBatch.class, (state, c) -> write(state, c.writes(), c.done()))
        .onCommand(TableApplied.class, (state, c) -> Effect().unstashAll())
        .onCommand(
            TableSeed.class,
            (state, c) -> {
              Map<String, String> fields = new HashMap<>();
              state.rules().forEach((k, v) -> fields.put(k, v.field()));
              table.seed(List.copyOf(state.documents().values()), fields, state.events());
              return Effect().none();
            })
        .onCommand(ApplyFrame.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(LoadRows.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(
            PartitionProtocol.ApplyFrames.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(
            GetDocument.class,
            (state, c) ->
                Effect()
                    .reply(
                        c.replyTo(),
                        new DocumentReply(
                            state.document(c.collection(), c.id()),
                            state.ruleVersion(c.collection()))))
        .onCommand(GetStatus.class, (state, c) -> Effect().reply(c.replyTo(), status(state)))
        .onCommand(
            PartitionProtocol.GetDocuments.class,
            (state, c) -> Effect().reply(c.replyTo(), documents(state, c)))
        .onCommand(PartitionProtocol.PurgeOutbox.class, this::purge)
        .onCommand(
            PartitionProtocol.PurgeConsumed.class,
            (state, c) -> {
              long through = state.lowestCheckpoint().orElse(state.outboxFirst() - 1);
              return purge(
                  state, new PartitionProtocol.PurgeOutbox(through, c.maxEntries(), c.replyTo()));
            })
        .onCommand(ConfigureConsumer.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(ReleaseConsumer.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(CommitBatch.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(
            PartitionProtocol.ReadConsumer.class,
            (state, c) -> Effect().reply(c.replyTo(), span(state, c)))
        .onCommand(PartitionProtocol.SetRowRule.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(
            PartitionProtocol.ReadChanges.class,
            (state, c) -> Effect().reply(c.replyTo(), changes(state, c)))
        .onCommand(
            PartitionProtocol.GetAcls.class,
            (state, c) -> Effect().reply(c.replyTo(), acls(state, c)))
        .onCommand(
            PartitionProtocol.ScanCollection.class,
            (state, c) -> Effect().reply(c.replyTo(), scan(state, c)))
        .build();
  }

  /** Journal events holding positions {@code from} to {@code to} (all retained). */
  private static List<Long> journalEvents(State s, long from, long to) {
    List<Long> events = new ArrayList<>();
    if (from <= to && from >= s.outboxFirst()) {
      Long floor = s.outbox().floorKey(from);
      for (Segment seg : s.outbox().subMap(floor == null ? from : floor, true, to, true).values()) {
        events.add(seg.journalSequence());
      }
    }
    return events;
  }

  private static PartitionProtocol.ChangesSpan changes(State s, PartitionProtocol.ReadChanges c) {
    long tail = s.nextSequence() - 1;
    long room = Math.max(1, c.maxEntries());
    long to = tail - c.after() > room ? c.after() + room : tail;
    return new PartitionProtocol.ChangesSpan(
        s.incarnation(),
        s.outboxFirst(),
        tail,
        s.rowEpoch(c.collection()),
        s.ruleVersion(c.collection()),
        journalEvents(s, c.after() + 1, to));
  }

  private static PartitionProtocol.Acls acls(State s, PartitionProtocol.GetAcls c) {
    String field = s.ruleField(c.collection());
    Map<String, String> out = new HashMap<>();
    for (String id : c.ids()) {
      s.document(c.collection(), id)
          .ifPresent(
              d -> {
                String acl = d.deleted() ? d.acl() : aclOf(d.body(), field);
                out.put(id, acl == null ? "null" : acl);
              });
    }
    return new PartitionProtocol.Acls(
        s.rowEpoch(c.collection()), s.ruleVersion(c.collection()), out);
  }

  private static PartitionProtocol.CollectionScan scan(
      State s, PartitionProtocol.ScanCollection c) {
    List<Document> out = new ArrayList<>();
    long bytes = 0;
    boolean tooLarge = false;
    // Without a rule field here (another rule version than the reader's node runs, which refuses
    // the answer) every document counts.
    String field = c.reader() == null ? null : s.ruleField(c.collection());
    for (Document d : s.documents().values()) {
      if (!d.deleted()
          && d.collection().equals(c.collection())
          && (field == null || c.reader().sees(aclOf(d.body(), field)))) {
        bytes += State.size(d);
        if (bytes > c.maxBytes()) {
          tooLarge = true;
          out.clear();
          break;
        }
        out.add(d);
      }
    }
    return new PartitionProtocol.CollectionScan(
        s.incarnation(),
        s.outboxFirst(),
        s.nextSequence() - 1,
        s.rowEpoch(c.collection()),
        s.ruleVersion(c.collection()),
        out,
        tooLarge);
  }

  private PartitionStatus status(State s) {
    List<PartitionProtocol.ConsumerView> consumers =
        s.consumers().values().stream()
            .map(Consumer::view)
            .sorted(
                java.util.Comparator.comparing(PartitionProtocol.ConsumerView::name)
                    .thenComparingLong(PartitionProtocol.ConsumerView::generation))
            .toList();
    return new PartitionStatus(
        partition,
        s.documents().size(),
        s.outboxFirst(),
        s.nextSequence(),
        s.outboxBytes(),
        s.events(),
        Map.copyOf(s.watermarks()),
        consumers,
        table == null ? null : table.status());
  }

  /** Where a consumer's next batch lies: the journal events holding its next entries. */
  private static ConsumerReply span(State s, PartitionProtocol.ReadConsumer c) {
    Consumer con = s.consumers().get(consumerKey(c.name(), c.generation()));
    if (con == null) {
      return new ConsumerRefused(
          ConsumerRefusal.NOT_FOUND, "no such consumer generation in this partition");
    }
    if (con.released()) {
      return new ConsumerRefused(
          ConsumerRefusal.TOKEN_INVALIDATED, "the consumer generation was released");
    }
    long from = con.checkpoint() + 1;
    long tail = s.nextSequence() - 1;
    long to =
        tail - con.checkpoint() > Math.max(1, c.maxEntries())
            ? con.checkpoint() + Math.max(1, c.maxEntries())
            : tail;
    List<Long> events = new ArrayList<>();
    if (from <= to) {
      if (from < s.outboxFirst()) {
        return new ConsumerRefused(
            ConsumerRefusal.HISTORY_UNAVAILABLE,
            "the consumer's next entries were purged",
            con.checkpoint(),
            -1,
            0);
      }
      Long floor = s.outbox().floorKey(from);
      for (Segment seg : s.outbox().subMap(floor == null ? from : floor, true, to, true).values()) {
        events.add(seg.journalSequence());
      }
    }
    return new PartitionProtocol.ConsumerSpan(
        s.incarnation(), con.view(), s.outboxFirst(), tail, events);
  }

  private static PartitionProtocol.DocumentsReply documents(
      State s, PartitionProtocol.GetDocuments c) {
    java.util.TreeMap<String, Document> sorted = new java.util.TreeMap<>();
    for (Document d : s.documents().values()) {
      if (d.collection().equals(c.collection())
          && (c.afterId() == null || d.id().compareTo(c.afterId()) > 0)) {
        sorted.put(d.id(), d);
      }
    }
    List<Document> out = new ArrayList<>();
    long bytes = 0;
    for (Document d : sorted.values()) {
      // A reply may cross nodes: at most the limit and about 1 MiB of bodies (at least one
      // document).
      if (out.size() == Math.max(1, c.limit())
          || (!out.isEmpty() && bytes + State.size(d) > REPLY_BYTES)) {
        return new PartitionProtocol.DocumentsReply(out, true);
      }
      out.add(d);
      bytes += State.size(d);
    }
    return new PartitionProtocol.DocumentsReply(out, false);
  }

  private Effect<Event, State> purge(State s, PartitionProtocol.PurgeOutbox c) {
    long first = s.outboxFirst();
    long next = s.nextSequence();
    if (c.through() >= next) {
      return Effect()
          .reply(
              c.replyTo(),
              new PartitionProtocol.PurgeRefused(
                  "the outbox ends at " + (next - 1) + "; entries after it cannot be purged",
                  first,
                  next));
    }
    long room = Math.max(1, c.maxEntries());
    long bounded =
        c.through() - (first - 1) > room
            ? first - 1 + room
            : c.through(); // no overflow for huge limits
    Optional<Long> pin = s.lowestCheckpoint();
    boolean pinned = pin.isPresent() && pin.get() < bounded;
    long target = pinned ? pin.get() : bounded;
    if (target < first) {
      return Effect()
          .reply(c.replyTo(), new PartitionProtocol.OutboxPurged(first, next, 0, false, pinned));
    }
    boolean more = !pinned && target < c.through();
    Purged purged = new Purged(target);
    return Effect()
        .persist(purged)
        .thenRun(
            after -> {
              if (table != null) {
                table.persisted(after.events(), purged, 0);
              }
              reportOutbox(after);
              c.replyTo()
                  .tell(
                      new PartitionProtocol.OutboxPurged(
                          after.outboxFirst(),
                          after.nextSequence(),
                          target - first + 1,
                          more,
                          pinned));
              prune(after);
            });
  }

  /**
   * Deletes journal rows that hold only purged entries (or none) and that the older of the two
   * latest snapshots covers, always keeping the last row. Runs in the background; at most one
   * deletion at a time; a failed one is tried again after the next purge or snapshot.
   */
  private void prune(State s) {
    long limit =
        s.outbox().isEmpty()
            ? s.events() - 1
            : s.outbox().firstEntry().getValue().journalSequence() - 1;
    // Events the documents table has not applied are still needed: after a crash it reads them.
    long through =
        Math.min(
            Math.min(Math.min(limit, previousSnapshot), s.events() - 1),
            table == null ? Long.MAX_VALUE : table.appliedThrough());
    if (through <= prunedThrough.get() || !pruning.compareAndSet(false, true)) {
      return;
    }
    pruner
        .deleteThrough(persistenceId().id(), through)
        .whenComplete(
            (rows, error) -> {
              if (error == null) {
                prunedThrough.accumulateAndGet(through, Math::max);
              }
              pruning.set(false);
            });
  }

  @Override
  public org.apache.pekko.persistence.typed.javadsl.SignalHandler<State> signalHandler() {
    return newSignalHandlerBuilder()
        .onSignal(
            org.apache.pekko.persistence.typed.RecoveryCompleted.instance(),
            state -> {
              if (table != null) {
                table.start(state.events());
              }
              observer.recovered(partition, System.nanoTime() - createdNanos);
              reportOutbox(state);
            })
        .onSignal(
            org.apache.pekko.persistence.typed.SnapshotCompleted.class,
            (state, completed) -> {
              previousSnapshot = latestSnapshot;
              latestSnapshot = completed.metadata().sequenceNr();
              if (previousSnapshot > 0) {
                pruner.deleteSnapshotsBefore(persistenceId().id(), previousSnapshot);
              }
              prune(state);
            })
        .build();
  }

  private Effect<Event, State> write(
      State state, List<Write> requested, ActorRef<PartitionEntity.BatchWritten> done) {
    if (table != null && table.behind()) {
      // The documents table is too far behind: the write waits until it catches up.
      return Effect().stash();
    }
    List<Write> writes = admitted(requested);
    if (writes.isEmpty()) {
      if (done != null) {
        done.tell(PartitionEntity.BatchWritten.INSTANCE);
      }
      return Effect().none();
    }
    Plan plan = new Plan(state, settings, System.currentTimeMillis());
    List<Object> replies = new ArrayList<>(writes.size());
    for (Write w : writes) {
      if (w instanceof ApplyFrame f) {
        replies.add(plan.frame(f));
      } else if (w instanceof PartitionProtocol.ApplyFrames fs) {
        List<FrameReply> each = new ArrayList<>(fs.frames().size());
        for (ApplyFrame f : fs.frames()) {
          each.add(plan.frame(f));
        }
        replies.add(new PartitionProtocol.FramesReply(each));
      } else if (w instanceof LoadRows l) {
        replies.add(plan.load(l));
      } else if (w instanceof ConfigureConsumer c) {
        replies.add(plan.configure(c));
      } else if (w instanceof ReleaseConsumer c) {
        replies.add(plan.release(c));
      } else if (w instanceof PartitionProtocol.SetRowRule r) {
        replies.add(plan.setRule(r));
      } else {
        replies.add(plan.commit((CommitBatch) w));
      }
    }
    Runnable answer =
        () -> {
          for (int i = 0; i < writes.size(); i++) {
            Write w = writes.get(i);
            if (w instanceof ApplyFrame f) {
              f.replyTo().tell((FrameReply) replies.get(i));
            } else if (w instanceof PartitionProtocol.ApplyFrames fs) {
              fs.replyTo().tell((PartitionProtocol.FramesReply) replies.get(i));
            } else if (w instanceof LoadRows l) {
              l.replyTo().tell((FrameReply) replies.get(i));
            } else if (w instanceof ConfigureConsumer c) {
              c.replyTo().tell((ConsumerReply) replies.get(i));
            } else if (w instanceof ReleaseConsumer c) {
              c.replyTo().tell((ConsumerReply) replies.get(i));
            } else if (w instanceof PartitionProtocol.SetRowRule r) {
              r.replyTo().tell((PartitionProtocol.RowRuleReply) replies.get(i));
            } else {
              ((CommitBatch) w).replyTo().tell((ConsumerReply) replies.get(i));
            }
          }
          if (done != null) {
            done.tell(PartitionEntity.BatchWritten.INSTANCE);
          }
        };
    int refused = quotaRefusals(replies);
    if (refused > 0) {
      observer.quotaRefused(partition, refused);
    }
    if (plan.accepted.isEmpty()) {
      answer.run();
      return Effect().none();
    }
    String incarnation = state.incarnation() != null ? null : UUID.randomUUID().toString();
    int frames = plan.accepted.size();
    Written written = new Written(incarnation, plan.accepted);
    return Effect()
        .persist(written)
        .thenRun(
            s -> {
              if (table != null) {
                table.persisted(s.events(), written, s.eventBytes() - state.eventBytes());
              }
              observer.persisted(partition, frames);
              reportOutbox(s);
              answer.run();
            });
  }

  /**
   * The writes the storage gate lets through: all of them while the storage keeps the required
   * copies; otherwise only row-rule changes, every other write answered with a refusal at once.
   */
  private List<Write> admitted(List<Write> writes) {
    StorageGate.Refusal below = gate.refusal();
    if (below == null) {
      return writes;
    }
    List<Write> admitted = new ArrayList<>();
    for (Write w : writes) {
      PartitionProtocol.StorageRefused refused =
          new PartitionProtocol.StorageRefused(below.copies(), below.required());
      ConsumerRefused consumer =
          new ConsumerRefused(
              ConsumerRefusal.STORAGE_COPIES,
              "the storage keeps " + below.describe() + "; retry later");
      if (w instanceof ApplyFrame f) {
        f.replyTo().tell(refused);
      } else if (w instanceof PartitionProtocol.ApplyFrames fs) {
        fs.replyTo()
            .tell(
                new PartitionProtocol.FramesReply(
                    java.util.Collections.<FrameReply>nCopies(fs.frames().size(), refused)));
      } else if (w instanceof LoadRows l) {
        l.replyTo().tell(refused);
      } else if (w instanceof ConfigureConsumer c) {
        c.replyTo().tell(consumer);
      } else if (w instanceof ReleaseConsumer c) {
        c.replyTo().tell(consumer);
      } else if (w instanceof CommitBatch c) {
        c.replyTo().tell(consumer);
      } else {
        admitted.add(w); // a row-rule change
      }
    }
    observer.storageRefused(partition, writes.size() - admitted.size());
    return admitted;
  }

  /**
   * Replies among {@code replies} (frames, frames of a multi-frame write, commits) refused by the
   * quota.
   */
  private static int quotaRefusals(List<Object> replies) {
    int n = 0;
    for (Object r : replies) {
      if (r instanceof QuotaExceeded) {
        n++;
      } else if (r instanceof PartitionProtocol.FramesReply fs) {
        for (FrameReply f : fs.replies()) {
          if (f instanceof QuotaExceeded) {
            n++;
          }
        }
      } else if (r instanceof ConsumerRefused c && c.refusal() == ConsumerRefusal.QUOTA_EXCEEDED) {
        n++;
      }
    }
    return n;
  }

  /** The retained outbox's size and quota use, for the observer. */
  private void reportOutbox(State s) {
    long entries = s.nextSequence() - s.outboxFirst();
    double use =
        Math.max(
            (double) entries / settings.maxOutboxEntries(),
            (double) s.outboxBytes() / settings.maxOutboxBytes());
    observer.outbox(partition, entries, s.outboxBytes(), use);
  }

  /**
   * Checks writes in order against the state plus what the batch accepted before them, building the
   * frames to persist. Nothing here touches the state.
   */
  private static final class Plan {
    private static final Document REMOVED = new Document("", "", 0, null, true);
    final State state;
    final PartitionSettings settings;
    final long now;
    final List<FrameApplied> accepted = new ArrayList<>();
    final HashMap<String, Document> docs = new HashMap<>();
    final HashMap<String, Long> watermarks = new HashMap<>();
    final HashMap<String, Optional<PartProgress>> partials = new HashMap<>();
    final HashMap<String, Applied> receipts = new HashMap<>();
    final HashMap<String, Consumer> consumers = new HashMap<>();
    final HashMap<String, RowRule> rules = new HashMap<>();
    long next;
    long bytes;

    Plan(State state, PartitionSettings settings, long now) {
      this.state = state;
      this.settings = settings;
      this.now = now;
      this.next = state.nextSequence();
      this.bytes = state.outboxBytes();
    }

    Document current(String k) {
      Document d = docs.containsKey(k) ? docs.get(k) : state.documents().get(k);
      return d == REMOVED ? null : d;
    }

    long watermark(String source) {
      return watermarks.containsKey(source) ? watermarks.get(source) : state.watermark(source);
    }

    String ruleField(String collection) {
      return rules.containsKey(collection)
          ? rules.get(collection).field()
          : state.ruleField(collection);
    }

    long ruleVersion(String collection) {
      return rules.containsKey(collection)
          ? rules.get(collection).version()
          : state.ruleVersion(collection);
    }

    /**
     * Whether writing {@code after} over {@code current} changes the document's ACL: a live
     * document whose ACL value differs, or a tombstone re-created with another ACL than the deleted
     * row's (a principal who saw the row must not miss its deletion, which the new ACL would hide).
     * Creating a document is not an ACL change.
     */
    boolean aclChanges(String collection, Document current, String after) {
      String field = ruleField(collection);
      if (field == null || current == null) {
        return false;
      }
      if (current.deleted()) {
        return current.acl() != null && !current.acl().equals(aclOf(after, field));
      }
      return !aclOf(current.body(), field).equals(aclOf(after, field));
    }

    PartitionProtocol.RowRuleReply setRule(PartitionProtocol.SetRowRule r) {
      if (r.version() <= ruleVersion(r.collection())) {
        return new PartitionProtocol.RowRuleReply(
            ruleVersion(r.collection()), state.rowEpoch(r.collection()), false);
      }
      long epoch = state.rowEpoch(r.collection()) + 1;
      for (FrameApplied f : accepted) {
        epoch +=
            f.fenced().stream().filter(r.collection()::equals).count()
                + (f.rule() != null && f.rule().collection().equals(r.collection()) ? 1 : 0);
      }
      rules.put(r.collection(), new RowRule(r.field(), r.version()));
      accepted.add(
          new FrameApplied(
              null,
              List.of(),
              Optional.empty(),
              List.of(),
              List.of(),
              null,
              List.of(),
              new RuleChange(r.collection(), r.field(), r.version())));
      return new PartitionProtocol.RowRuleReply(r.version(), epoch, true);
    }

    Optional<PartProgress> partial(String source) {
      return partials.containsKey(source)
          ? partials.get(source)
          : Optional.ofNullable(state.partials().get(source));
    }

    /** Live documents of a collection, in a stable order. */
    List<Document> live(String collection) {
      Set<String> keys = new HashSet<>();
      for (Map.Entry<String, Document> e : state.documents().entrySet()) {
        if (e.getValue().collection().equals(collection)) {
          keys.add(e.getKey());
        }
      }
      for (Map.Entry<String, Document> e : docs.entrySet()) {
        if (e.getValue() == REMOVED || e.getValue().collection().equals(collection)) {
          keys.add(e.getKey());
        }
      }
      List<Document> out = new ArrayList<>();
      for (String k : new java.util.TreeSet<>(keys)) {
        Document d = current(k);
        if (d != null && !d.deleted() && d.collection().equals(collection)) {
          out.add(d);
        }
      }
      return out;
    }

    FrameReply frame(ApplyFrame f) {
      boolean cdc = f.source().isPresent();
      if (!cdc) {
        if (f.commandId() == null || f.commandId().isEmpty()) {
          return new Rejected("an API frame needs a command id");
        }
        String key = PartitionProtocol.receiptKey(f.commandId());
        Applied receipt = receipts.containsKey(key) ? receipts.get(key) : state.receipts().get(key);
        if (receipt != null && !receipt.commandId().equals(f.commandId())) {
          return new PartitionProtocol.KeyReused();
        }
        if (receipt != null) {
          return new Applied(
              receipt.commandId(), receipt.firstSequence(), receipt.revisions(), true);
        }
      }
      if (f.mutations().isEmpty() && !cdc) {
        return new Rejected("a frame needs at least one mutation");
      }
      if (cdc) {
        SourcePosition s = f.source().get();
        long mark = watermark(s.source());
        Optional<PartProgress> partial = partial(s.source());
        if (Long.compareUnsigned(s.commitLsn(), mark) <= 0) {
          return new AlreadyApplied(s, mark);
        }
        if (partial.isPresent()
            && partial.get().commitLsn() == s.commitLsn()
            && s.part() <= partial.get().done()) {
          return new AlreadyApplied(s, mark);
        }
        boolean inOrder =
            s.part() == 1
                ? Long.compareUnsigned(mark, s.previousLsn()) >= 0
                : partial.isPresent()
                    && partial.get().commitLsn() == s.commitLsn()
                    && partial.get().done() == s.part() - 1;
        if (!inOrder) {
          return new Gap(s, mark);
        }
      }
      long commitLsn = f.source().map(SourcePosition::commitLsn).orElse(0L);
      Object evaluated = evaluate(f.mutations(), commitLsn, true);
      if (evaluated instanceof FrameReply refused) {
        return refused;
      }
      Evaluation ev = (Evaluation) evaluated;
      List<OutboxEntry> entries = ev.entries();
      List<Long> revisions = ev.revisions();
      long seq = ev.seqAfter();
      long frameBytes = ev.bytes();
      HashMap<String, Document> seen = ev.seen();
      FrameReply quota = quota(seq, frameBytes);
      if (quota != null) {
        return quota;
      }
      docs.putAll(seen);
      long first = next;
      next = seq;
      bytes += frameBytes;
      f.source()
          .ifPresent(
              s -> {
                if (s.last()) {
                  watermarks.put(s.source(), s.commitLsn());
                  partials.put(s.source(), Optional.empty());
                } else {
                  partials.put(s.source(), Optional.of(new PartProgress(s.commitLsn(), s.part())));
                }
              });
      String commandId = cdc ? null : f.commandId();
      Applied applied = new Applied(f.commandId(), first, List.copyOf(revisions), false);
      if (commandId != null && PartitionProtocol.keepsReceipt(commandId)) {
        receipts.put(PartitionProtocol.receiptKey(commandId), applied);
      }
      accepted.add(
          new FrameApplied(
              commandId,
              entries,
              f.source(),
              List.of(),
              List.of(),
              null,
              List.copyOf(ev.fenced()),
              null));
      return applied;
    }

    /** What a list of mutations writes, checked against the plan. */
    record Evaluation(
        List<OutboxEntry> entries,
        List<Long> revisions,
        long bytes,
        HashMap<String, Document> seen,
        long seqAfter,
        Set<String> fenced) {}

    /**
     * Checks {@code mutations} in order (each sees the ones before it) against the state plus this
     * plan: an {@link Evaluation} of the entries they would write, or the {@link Conflict} or
     * {@link Rejected} refusing them. Changes nothing.
     *
     * @param allowTruncate whether {@link Truncate} may appear (not in projection effects)
     */
    Object evaluate(List<Mutation> mutations, long commitLsn, boolean allowTruncate) {
      HashMap<String, Document> seen = new HashMap<>();
      List<OutboxEntry> entries = new ArrayList<>();
      List<Long> revisions = new ArrayList<>();
      Set<String> fenced = new java.util.TreeSet<>();
      long seq = next;
      long frameBytes = 0;
      for (int i = 0; i < mutations.size(); i++) {
        Mutation m = mutations.get(i);
        if (m instanceof Truncate t) {
          if (!allowTruncate) {
            return new Rejected("mutation " + i + " is a truncate, which is not allowed here");
          }
          for (Document d : live(t.collection())) {
            String k = key(d.collection(), d.id());
            Document cur = seen.containsKey(k) ? seen.get(k) : d;
            if (cur.deleted()) {
              continue;
            }
            OutboxEntry e =
                new OutboxEntry(
                    seq++,
                    entries.size(),
                    d.collection(),
                    d.id(),
                    "delete",
                    cur.revision() + 1,
                    cur.body(),
                    null,
                    now,
                    commitLsn);
            entries.add(e);
            frameBytes += e.bytes();
            seen.put(
                k,
                new Document(
                    d.collection(),
                    d.id(),
                    cur.revision() + 1,
                    null,
                    true,
                    aclOf(cur.body(), ruleField(d.collection()))));
          }
          // Documents this frame created before the truncate go as well.
          for (Map.Entry<String, Document> e : new ArrayList<>(seen.entrySet())) {
            Document d = e.getValue();
            if (!d.deleted() && d.collection().equals(t.collection())) {
              OutboxEntry x =
                  new OutboxEntry(
                      seq++,
                      entries.size(),
                      d.collection(),
                      d.id(),
                      "delete",
                      d.revision() + 1,
                      d.body(),
                      null,
                      now,
                      commitLsn);
              entries.add(x);
              frameBytes += x.bytes();
              seen.put(
                  e.getKey(),
                  new Document(
                      d.collection(),
                      d.id(),
                      d.revision() + 1,
                      null,
                      true,
                      aclOf(d.body(), ruleField(d.collection()))));
            }
          }
          revisions.add(0L);
          continue;
        }
        String collection = m.collection();
        String id = m instanceof Upsert u ? u.id() : ((Delete) m).id();
        Optional<Long> expected =
            m instanceof Upsert u ? u.expectedRevision() : ((Delete) m).expectedRevision();
        if (collection.isEmpty() || id.isEmpty()) {
          return new Rejected("mutation " + i + " has no collection or id");
        }
        String k = key(collection, id);
        Document cur = seen.containsKey(k) ? seen.get(k) : current(k);
        long revision = cur == null ? 0 : cur.revision();
        if (expected.isPresent() && expected.get() != revision) {
          return new Conflict(i, revision);
        }
        String before = cur == null || cur.deleted() ? null : cur.body();
        OutboxEntry e;
        if (m instanceof Upsert u) {
          String body = u.body();
          if (!u.keep().isEmpty()) {
            if (before == null) {
              return new Rejected(
                  "mutation "
                      + i
                      + " of collection "
                      + collection
                      + " keeps unchanged (TOAST) fields of a "
                      + "document this partition does not have; seed the collection with an initial snapshot, or use "
                      + "REPLICA IDENTITY FULL on its table");
            }
            body = merge(before, body, u.keep());
            if (body == null) {
              return new Rejected(
                  "mutation " + i + " keeps fields of a document that is not a JSON object");
            }
          }
          e =
              new OutboxEntry(
                  seq++,
                  entries.size(),
                  collection,
                  id,
                  "upsert",
                  revision + 1,
                  before,
                  body,
                  now,
                  commitLsn);
          seen.put(k, new Document(collection, id, revision + 1, body, false));
          if (aclChanges(collection, cur, body)) {
            fenced.add(collection);
          }
        } else {
          e =
              new OutboxEntry(
                  seq++,
                  entries.size(),
                  collection,
                  id,
                  "delete",
                  revision + 1,
                  before,
                  null,
                  now,
                  commitLsn);
          seen.put(
              k,
              new Document(
                  collection, id, revision + 1, null, true, aclOf(before, ruleField(collection))));
        }
        entries.add(e);
        frameBytes += e.bytes();
        revisions.add(revision + 1);
      }
      return new Evaluation(entries, revisions, frameBytes, seen, seq, fenced);
    }

    private Quota.Admission admit(long seqAfter, long frameBytes, boolean reserveAllowed) {
      return Quota.admit(
          settings,
          next - state.outboxFirst(),
          seqAfter - state.outboxFirst(),
          bytes + frameBytes,
          reserveAllowed);
    }

    private FrameReply quota(long seqAfter, long frameBytes) {
      if (admit(seqAfter, frameBytes, false) == Quota.Admission.REFUSED) {
        return new QuotaExceeded(
            next - state.outboxFirst(),
            bytes,
            settings.maxOutboxEntries(),
            settings.maxOutboxBytes());
      }
      return null;
    }

    Consumer consumer(String key) {
      return consumers.containsKey(key) ? consumers.get(key) : state.consumers().get(key);
    }

    /**
     * Accepts a consumer frame: {@code c} is the consumer afterwards; the event records it with
     * only {@code receipt} (the commit's new receipt, or none), see {@link Consumer#after}.
     */
    private void acceptConsumer(
        Consumer c,
        List<OutboxEntry> entries,
        PartitionProtocol.BatchReceipt receipt,
        Set<String> fenced) {
      consumers.put(c.key(), c);
      accepted.add(
          new FrameApplied(
              null,
              entries,
              Optional.empty(),
              List.of(),
              List.of(),
              c.withReceipts(receipt == null ? List.of() : List.of(receipt)),
              List.copyOf(fenced),
              null));
    }

    ConsumerReply configure(ConfigureConsumer c) {
      String invalid = invalidDefinition(c);
      if (invalid != null) {
        return new ConsumerRefused(ConsumerRefusal.INVALID, invalid);
      }
      List<String> collections = List.copyOf(new java.util.TreeSet<>(c.collections()));
      List<String> kinds = List.copyOf(new java.util.TreeSet<>(c.kinds()));
      Consumer existing = consumer(consumerKey(c.name(), c.generation()));
      if (existing != null) {
        if (existing.released()) {
          return new ConsumerRefused(
              ConsumerRefusal.RELEASED,
              "this consumer generation was released; configure a new generation or name");
        }
        boolean same =
            existing.collections().equals(collections)
                && existing.kinds().equals(kinds)
                && c.startAfter().map(a -> a == existing.startAfter()).orElse(true);
        return same
            ? new ConsumerConfigured(existing.view(), false)
            : new ConsumerRefused(
                ConsumerRefusal.IMMUTABLE,
                "this consumer generation exists with another definition; a new filter or start needs a new generation or name");
      }
      long active =
          java.util.stream.Stream.concat(
                  state.consumers().keySet().stream(), consumers.keySet().stream())
              .distinct()
              .map(this::consumer)
              .filter(x -> !x.released())
              .count();
      if (active >= settings.maxConsumers()) {
        return new ConsumerRefused(
            ConsumerRefusal.TOO_MANY,
            "this partition has "
                + settings.maxConsumers()
                + " active consumers already; release one first");
      }
      long retained = state.outboxFirst() - 1;
      long start = c.startAfter().orElse(retained);
      if (start < retained) {
        return new ConsumerRefused(
            ConsumerRefusal.HISTORY_UNAVAILABLE,
            "startAfter "
                + start
                + " was purged already; the retained history starts after "
                + retained);
      }
      if (start > next - 1) {
        return new ConsumerRefused(
            ConsumerRefusal.INVALID,
            "startAfter " + start + " is past the outbox's last position " + (next - 1));
      }
      Consumer created =
          new Consumer(
              c.name(), c.generation(), collections, kinds, start, start, false, -1, List.of());
      acceptConsumer(created, List.of(), null, Set.of());
      return new ConsumerConfigured(created.view(), true);
    }

    private static String invalidDefinition(ConfigureConsumer c) {
      if (!validConsumerName(c.name()) || c.generation() < 1) {
        return "a consumer is named by 1 to 64 of A-Z a-z 0-9 _ . - and a generation from 1";
      }
      if (c.collections().size() > MAX_FILTER_COLLECTIONS) {
        return "a consumer filter names at most " + MAX_FILTER_COLLECTIONS + " collections";
      }
      for (String collection : c.collections()) {
        if (collection == null || collection.isEmpty() || collection.length() > 128) {
          return "filter collections are 1 to 128 characters";
        }
      }
      for (String kind : c.kinds()) {
        if (!PartitionProtocol.ENTRY_KINDS.contains(kind)) {
          return "filter kinds are among " + PartitionProtocol.ENTRY_KINDS;
        }
      }
      return null;
    }

    ConsumerReply release(ReleaseConsumer c) {
      Consumer existing = consumer(consumerKey(c.name(), c.generation()));
      if (existing == null) {
        return new ConsumerRefused(
            ConsumerRefusal.NOT_FOUND, "no such consumer generation in this partition");
      }
      if (existing.released()) {
        return new ConsumerReleased(existing.view(), true);
      }
      Consumer released =
          new Consumer(
              existing.name(),
              existing.generation(),
              existing.collections(),
              existing.kinds(),
              existing.startAfter(),
              existing.checkpoint(),
              true,
              existing.reservationCut(),
              List.of());
      acceptConsumer(released, List.of(), null, Set.of());
      return new ConsumerReleased(released.view(), false);
    }

    /**
     * Commits a batch. In order: the consumer must exist and not be released and the incarnation
     * must match (fenced tokens); a batch already committed answers its receipt (same effects) or a
     * conflict (other effects); a batch read from another checkpoint is stale; then the effects are
     * checked like a frame, and the quota (or the progress reserve) applies.
     */
    ConsumerReply commit(CommitBatch c) {
      Consumer con = consumer(consumerKey(c.name(), c.generation()));
      if (con == null) {
        return new ConsumerRefused(
            ConsumerRefusal.NOT_FOUND, "no such consumer generation in this partition");
      }
      if (con.released()) {
        return new ConsumerRefused(
            ConsumerRefusal.TOKEN_INVALIDATED,
            "the consumer generation was released; its batch tokens are no longer accepted");
      }
      if (!c.incarnation().equals(state.incarnation())) {
        return new ConsumerRefused(
            ConsumerRefusal.TOKEN_INVALIDATED,
            "the batch was read from another incarnation of this partition");
      }
      String digest = effectsDigest(c.effects());
      for (PartitionProtocol.BatchReceipt r : con.receipts()) {
        if (r.start() == c.start() && r.end() == c.end()) {
          return r.effectsDigest().equals(digest)
              ? new BatchCommitted(r, con.checkpoint(), true)
              : new ConsumerRefused(
                  ConsumerRefusal.CONFLICT,
                  "this batch was committed with other effects",
                  con.checkpoint(),
                  -1,
                  0);
        }
      }
      if (c.start() != con.checkpoint()) {
        return new ConsumerRefused(
            ConsumerRefusal.STALE,
            "the consumer's checkpoint is no longer the batch's start; read a new batch",
            con.checkpoint(),
            -1,
            0);
      }
      if (c.end() > next - 1 || c.end() < c.start()) {
        return new ConsumerRefused(
            ConsumerRefusal.INVALID, "the batch ends past the outbox's last position");
      }
      if (c.start() == c.end() && !c.effects().isEmpty()) {
        return new ConsumerRefused(
            ConsumerRefusal.INVALID, "an empty tail batch cannot carry effects");
      }
      if (c.effects().size() > settings.maxEffects()) {
        return new ConsumerRefused(
            ConsumerRefusal.INVALID,
            "a batch carries at most " + settings.maxEffects() + " effects");
      }
      for (int i = 0; i < c.effects().size(); i++) {
        Mutation m = c.effects().get(i);
        boolean expects =
            m instanceof Upsert u
                ? u.expectedRevision().isPresent() && u.keep().isEmpty()
                : m instanceof Delete d && d.expectedRevision().isPresent();
        if (!expects) {
          return new ConsumerRefused(
              ConsumerRefusal.INVALID,
              "effect " + i + " must be an upsert or delete with an expected revision");
        }
      }
      if (c.start() == c.end()) {
        // An empty tail batch without effects: nothing to write.
        return new BatchCommitted(
            new PartitionProtocol.BatchReceipt(
                c.start(), c.end(), digest, c.commandId(), next, List.of(), now),
            con.checkpoint(),
            false);
      }
      Object evaluated = evaluate(c.effects(), 0, false);
      if (evaluated instanceof Conflict x) {
        return new ConsumerRefused(
            ConsumerRefusal.REVISION_CONFLICT,
            "effect " + x.index() + " expects another revision",
            con.checkpoint(),
            x.index(),
            x.actualRevision());
      }
      if (evaluated instanceof Rejected r) {
        return new ConsumerRefused(ConsumerRefusal.INVALID, r.reason());
      }
      Evaluation ev = (Evaluation) evaluated;
      long cut = con.reservationCut();
      boolean reserveAllowed = cut != state.outboxFirst();
      Quota.Admission admission = admit(ev.seqAfter(), ev.bytes(), reserveAllowed);
      if (admission == Quota.Admission.REFUSED) {
        return new ConsumerRefused(
            ConsumerRefusal.QUOTA_EXCEEDED,
            reserveAllowed
                ? "the outbox and its progress reserve are full; purge, then retry"
                : "the outbox is full and this consumer used the progress reserve since the last purge; purge, then retry",
            con.checkpoint(),
            -1,
            0);
      }
      if (admission == Quota.Admission.RESERVE) {
        cut = state.outboxFirst();
      }
      docs.putAll(ev.seen());
      long first = next;
      next = ev.seqAfter();
      bytes += ev.bytes();
      PartitionProtocol.BatchReceipt receipt =
          new PartitionProtocol.BatchReceipt(
              c.start(), c.end(), digest, c.commandId(), first, ev.revisions(), now);
      List<PartitionProtocol.BatchReceipt> receipts = new ArrayList<>(con.receipts());
      receipts.add(receipt);
      while (receipts.size() > CONSUMER_RECEIPTS) {
        receipts.remove(0);
      }
      Consumer moved =
          new Consumer(
              con.name(),
              con.generation(),
              con.collections(),
              con.kinds(),
              con.startAfter(),
              c.end(),
              false,
              cut,
              receipts);
      acceptConsumer(moved, ev.entries(), receipt, ev.fenced());
      return new BatchCommitted(receipt, c.end(), false);
    }

    FrameReply load(LoadRows l) {
      List<Document> loaded = new ArrayList<>();
      List<OutboxEntry> entries = new ArrayList<>();
      HashMap<String, Document> seen = new HashMap<>();
      for (String collection : l.reset()) {
        for (Document d : live(collection)) {
          seen.put(key(collection, d.id()), REMOVED);
        }
        for (Map.Entry<String, Document> e : state.documents().entrySet()) {
          if (e.getValue().collection().equals(collection)) {
            seen.put(e.getKey(), REMOVED);
          }
        }
        for (Map.Entry<String, Document> e : docs.entrySet()) {
          if (e.getValue() != REMOVED && e.getValue().collection().equals(collection)) {
            seen.put(e.getKey(), REMOVED);
          }
        }
      }
      long seq = next;
      long frameBytes = 0;
      int changed = 0;
      Set<String> fenced =
          new java.util.TreeSet<>(l.reset()); // re-seeded: any row may have changed
      if (!l.recordChanges()) {
        // Initial-snapshot rows change documents without outbox entries: no cursor could follow.
        l.rows().forEach(r -> fenced.add(r.collection()));
      }
      for (Upsert row : l.rows()) {
        if (row.collection().isEmpty() || row.id().isEmpty()) {
          return new Rejected("a snapshot row has no collection or id");
        }
        String k = key(row.collection(), row.id());
        Document cur = seen.containsKey(k) ? seen.get(k) : current(k);
        if (cur == REMOVED) {
          cur = null;
        }
        if (cur != null && !cur.deleted() && cur.body().equals(row.body())) {
          continue;
        }
        changed++;
        if (aclChanges(row.collection(), cur, row.body())) {
          fenced.add(row.collection());
        }
        long revision = cur == null ? 0 : cur.revision();
        Document d = new Document(row.collection(), row.id(), revision + 1, row.body(), false);
        seen.put(k, d);
        if (l.recordChanges()) {
          String before = cur == null || cur.deleted() ? null : cur.body();
          OutboxEntry e =
              new OutboxEntry(
                  seq++,
                  entries.size(),
                  row.collection(),
                  row.id(),
                  "snapshot",
                  revision + 1,
                  before,
                  row.body(),
                  now,
                  0);
          entries.add(e);
          frameBytes += e.bytes();
        } else {
          loaded.add(d);
        }
      }
      FrameReply quota = quota(seq, frameBytes);
      if (quota != null) {
        return quota;
      }
      if (changed == 0 && l.reset().isEmpty()) {
        return new Loaded(0);
      }
      docs.putAll(seen);
      next = seq;
      bytes += frameBytes;
      accepted.add(
          new FrameApplied(
              null, entries, Optional.empty(), l.reset(), loaded, null, List.copyOf(fenced), null));
      return new Loaded(changed);
    }
  }

  /**
   * {@code body} with the values of its top-level {@code keep} fields replaced by those fields'
   * values in {@code previous}, copied as text (numbers, nested JSON and spacing exactly as
   * stored); null if either is not a JSON object.
   */
  static String merge(String previous, String body, List<String> keep) {
    try {
      Map<String, int[]> from = spans(previous, keep);
      Map<String, int[]> into = spans(body, keep);
      if (from == null || into == null) {
        return null;
      }
      List<Map.Entry<String, int[]>> targets = new ArrayList<>(into.entrySet());
      targets.sort((a, b) -> Integer.compare(b.getValue()[0], a.getValue()[0])); // from the end
      StringBuilder out = new StringBuilder(body);
      for (Map.Entry<String, int[]> t : targets) {
        int[] source = from.get(t.getKey());
        if (source != null) {
          out.replace(t.getValue()[0], t.getValue()[1], previous.substring(source[0], source[1]));
        }
      }
      return out.toString();
    } catch (IOException e) {
      return null;
    }
  }

  /**
   * Where the values of the given top-level fields of a JSON object sit in its text; null if not an
   * object.
   */
  private static Map<String, int[]> spans(String json, List<String> fields) throws IOException {
    try (com.fasterxml.jackson.core.JsonParser p = JSON.createParser(json)) {
      if (p.nextToken() != com.fasterxml.jackson.core.JsonToken.START_OBJECT) {
        return null;
      }
      Map<String, int[]> out = new HashMap<>();
      while (p.nextToken() == com.fasterxml.jackson.core.JsonToken.FIELD_NAME) {
        String name = p.currentName();
        com.fasterxml.jackson.core.JsonToken value = p.nextToken();
        int start = (int) p.currentTokenLocation().getCharOffset();
        if (value.isStructStart()) {
          p.skipChildren();
        } else {
          p.finishToken();
        }
        int end = (int) p.currentLocation().getCharOffset();
        if (fields.contains(name)) {
          out.put(name, new int[] {start, end});
        }
      }
      return out;
    }
  }

  @Override
  public EventHandler<State, Event> eventHandler() {
    return newEventHandlerBuilder()
        .forAnyState()
        .onEvent(Written.class, (State state, Written w) -> state.apply(w))
        .onEvent(Purged.class, (State state, Purged p) -> state.purge(p))
        .build();
  }
}
