package io.weir.sharding.partition;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.weir.persistence.SafeErrors;
import io.weir.persistence.StorageSystem;
import io.weir.protocol.CborSerializable;
import io.weir.protocol.Utf8;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.CommitBatch;
import io.weir.sharding.partition.PartitionProtocol.ConfigureConsumer;
import io.weir.sharding.partition.PartitionProtocol.ConsumerRefusal;
import io.weir.sharding.partition.PartitionProtocol.ConsumerRefused;
import io.weir.sharding.partition.PartitionProtocol.ConsumerReply;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.Document;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.GetDocument;
import io.weir.sharding.partition.PartitionProtocol.GetStatus;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.QuotaExceeded;
import io.weir.sharding.partition.PartitionProtocol.ReleaseConsumer;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.PartitionProtocol.Write;
import io.weir.sharding.storage.AckMark;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.regex.Pattern;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.persistence.query.PersistenceQuery;
import org.apache.pekko.persistence.query.javadsl.CurrentEventsByPersistenceIdQuery;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.RecoveryCompleted;
import org.apache.pekko.persistence.typed.SnapshotAdapter;
import org.apache.pekko.persistence.typed.SnapshotCompleted;
import org.apache.pekko.persistence.typed.javadsl.CommandHandler;
import org.apache.pekko.persistence.typed.javadsl.Effect;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehavior;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;
import org.apache.pekko.persistence.typed.javadsl.SignalHandler;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One atomic partition: an event-sourced entity holding the index of its documents (ADR 0032: the
 * documents themselves live in the documents table it writes), the index of its outbox (the
 * mutation stream; entry payloads stay in the journal), idempotency receipts, per-source watermarks
 * and its projection consumers. {@link PartitionEntity} runs it as a child and coalesces writes in
 * front of it.
 *
 * <p>A frame ({@link ApplyFrame}) is checked whole before anything is written: a malformed frame,
 * one whose expected revisions do not match (each mutation sees the ones before it), one that would
 * overflow the outbox quota, or a CDC frame after a gap changes nothing. An accepted frame's outbox
 * entries, receipt and watermark move together. A {@link WriteBatch} checks its frames in order
 * ({@link WritePlan}, {@link ConsumerPlan}: each sees the accepted ones before it) and persists the
 * accepted ones as one journal event ({@link Written}): one write, so a crash leaves all of it or
 * none. Before images the plan does not find in memory are fetched from the documents table in one
 * query, and the batch is planned again.
 *
 * <p>After recovery the partition serves nothing until its documents table holds every event of the
 * recovered journal ({@link TableWriter}); reads then come from the table, merged with what it has
 * not applied yet ({@link PartitionReads}).
 *
 * <p>Snapshots hold the index and the rest, never bodies ({@link PartitionSnapshotSerializer}),
 * taken as the settings' {@link SnapshotPolicy} says ({@link #shouldSnapshot}). Journal events are
 * never deleted on snapshot: they are the outbox's payloads; purged ones go through the {@link
 * JournalPruner}, as do snapshots older than the two latest.
 */
public final class Partition
    extends EventSourcedBehavior<Command, Partition.Event, PartitionState> {
  private static final Logger log = LoggerFactory.getLogger(Partition.class);

  /**
   * Bytes of documents one {@link PartitionProtocol.GetDocuments} reply carries at most (besides
   * the first).
   */
  static final long REPLY_BYTES = 1L << 20;

  /** Bytes counted per outbox entry besides its images. */
  static final int ENTRY_OVERHEAD = 64;

  /** Rounds of fetching before images one batch may take before the partition restarts. */
  static final int MAX_FETCH_ROUNDS = 3;

  private final int partition;
  private final PartitionWiring wiring;
  private final ActorRef<Command> self;
  private final TableWriter table;
  private final PartitionReads reads;
  private final Unapplied unapplied = new Unapplied();
  private final BodyCache cache;

  /** When this incarnation of the behavior was created: recovery time is measured from here. */
  private final long createdNanos = System.nanoTime();

  /**
   * Whether the documents table holds every recovered event and the storage check is over: reads
   * and writes may go.
   */
  private boolean ready;

  /** Whether the documents table holds every recovered event. */
  private boolean tableReady;

  /** Where the check of the journal against the acknowledged mark stands (ADR 0036). */
  enum StorageCheck {
    /** No marks are kept (tests, tools): nothing to check. */
    UNCHECKED("unchecked"),
    /** Recovered; reading the mark and waiting for the standbys. Serves nothing yet. */
    CHECKING("checking"),
    SERVING("serving"),
    /** The journal lacks frames this partition acknowledged: every write is refused. */
    BEHIND("storage-behind");

    final String wireName;

    StorageCheck(String wireName) {
      this.wireName = wireName;
    }
  }

  private StorageCheck storageCheck = StorageCheck.CHECKING;

  /** The storage the journal was checked against after recovery (null: unknown or not yet). */
  private StorageSystem checkedOn;

  /** The acknowledged mark as this partition last read or raised it. */
  private AckMark mark = AckMark.NONE;

  /** The before images fetched for the batch being planned, by document key. */
  private final HashMap<String, DocumentTable.Row> fetched = new HashMap<>();

  /** The receipts read from the receipts table for the batch being planned (empty: none). */
  private final HashMap<String, Optional<Receipt>> fetchedReceipts = new HashMap<>();

  /** Sequence numbers of the two latest snapshots this incarnation saved (0: none yet). */
  private volatile long latestSnapshot;

  private volatile long previousSnapshot;
  private final AtomicLong prunedThrough = new AtomicLong();
  private final AtomicBoolean pruning = new AtomicBoolean();

  /** The persistence id of partition {@code n}: {@code weir-partition|n}. */
  public static PersistenceId persistenceId(int n) {
    return PersistenceId.of(PartitionEntity.TYPE_KEY.name(), Integer.toString(n));
  }

  /** Partition {@code partition} with these collaborators. */
  public static Behavior<Command> create(int partition, PartitionWiring wiring) {
    return Behaviors.setup(ctx -> new Partition(partition, wiring, ctx));
  }

  /** A partition on the in-memory documents table with these limits (tests, tools). */
  public static Behavior<Command> create(int partition, PartitionSettings settings) {
    return create(partition, PartitionWiring.inMemory(settings));
  }

  /** A partition on the in-memory documents table with the default limits (tests, tools). */
  public static Behavior<Command> create(int partition) {
    return create(partition, PartitionSettings.DEFAULTS);
  }

  private Partition(int partition, PartitionWiring wiring, ActorContext<Command> ctx) {
    super(persistenceId(partition));
    this.partition = partition;
    this.wiring = wiring;
    this.self = ctx.getSelf();
    this.cache = new BodyCache(wiring.settings().bodyCacheBytes());
    CurrentEventsByPersistenceIdQuery journal =
        wiring.queryJournal() == null
            ? null
            : PersistenceQuery.get(ctx.getSystem())
                .getReadJournalFor(CurrentEventsByPersistenceIdQuery.class, wiring.queryJournal());
    this.table =
        new TableWriter(
            partition,
            wiring.table(),
            journal,
            ctx.getSystem(),
            through -> self.tell(new TableApplied(through)),
            () -> self.tell(TableReady.INSTANCE),
            wiring.observer(),
            wiring.settings().receiptTtlMillis());
    TableWriter writer = this.table;
    this.reads = new PartitionReads(partition, wiring.table(), writer::verify);
  }

  /** The documents table applied the events through {@code through}: waiting writes may go. */
  record TableApplied(long through) implements Command {}

  /** The documents table holds every recovered event: the partition may serve. */
  enum TableReady implements Command {
    INSTANCE
  }

  /** Writes coalesced by {@link PartitionEntity}; {@code done} hears when they are answered. */
  record WriteBatch(List<Write> writes, ActorRef<PartitionEntity.BatchWritten> done)
      implements Command {
    @Override
    public String toString() {
      return "WriteBatch[" + writes.size() + "]";
    }
  }

  /**
   * The before images the plan of a group commit's next event missed, read from the documents table
   * (or why not, as a value-free description): the event is planned again with them.
   */
  record BodiesFetched(
      List<DocumentTable.Row> rows,
      String failure,
      List<String> receiptKeys,
      List<Receipt.Keyed> receipts)
      implements Command {
    BodiesFetched {
      rows = rows == null ? List.of() : rows;
      receiptKeys = receiptKeys == null ? List.of() : receiptKeys;
      receipts = receipts == null ? List.of() : receipts;
    }

    @Override
    public String toString() {
      return "BodiesFetched[rows=" + rows.size() + ", receipts=" + receipts.size() + "]";
    }
  }

  /** A journal event of a partition. */
  public sealed interface Event extends CborSerializable permits Written, Purged {}

  /** Outbox entries up to {@code through} are purged: the retained outbox starts after it. */
  public record Purged(long through) implements Event {}

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
   * @param cut for a part of a CDC frame larger than a journal row may be (ADR 0033): where the
   *     next part starts; the source's watermark does not move. Null for a whole frame or its last
   *     part
   */
  public record FrameApplied(
      String commandId,
      List<OutboxEntry> entries,
      Optional<SourcePosition> source,
      List<String> reset,
      List<Document> loaded,
      Consumer consumer,
      List<String> fenced,
      RuleChange rule,
      Cut cut)
      implements CborSerializable {
    public FrameApplied {
      fenced = fenced == null ? List.of() : List.copyOf(fenced);
    }

    FrameApplied(
        String commandId,
        List<OutboxEntry> entries,
        Optional<SourcePosition> source,
        List<String> reset,
        List<Document> loaded,
        Consumer consumer,
        List<String> fenced,
        RuleChange rule) {
      this(commandId, entries, source, reset, loaded, consumer, fenced, rule, null);
    }

    FrameApplied(
        String commandId,
        List<OutboxEntry> entries,
        Optional<SourcePosition> source,
        List<String> reset,
        List<Document> loaded) {
      this(commandId, entries, source, reset, loaded, null, List.of(), null, null);
    }

    @Override
    public String toString() {
      return "FrameApplied[entries="
          + entries.size()
          + ", loaded="
          + loaded.size()
          + ", source="
          + source
          + (cut == null ? "" : ", cut at mutation " + cut.mutations())
          + "]";
    }
  }

  /**
   * Where a frame split into parts goes on (ADR 0033): its first {@code mutations} mutations are
   * applied, and of the next one, a truncate, the documents whose ids sort up to {@code afterId}
   * (null: none of it yet). Ids are row values: never logged.
   */
  public record Cut(int mutations, String afterId) implements CborSerializable {
    @Override
    public String toString() {
      return "Cut[mutations=" + mutations + "]";
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

    @JsonCreator
    public SnapshotMark(
        @JsonProperty("events") long events, @JsonProperty("eventBytes") long eventBytes) {
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
   * The partition's state and snapshot before ADR 0032, every document's body included (Jackson
   * CBOR). Never written any more and never recovered from: {@link LegacySnapshots} moves such a
   * snapshot's documents into the documents table and replaces it with a {@link PartitionState}
   * before the partition starts. The record stays so that its stored form keeps a decoder and a
   * fixture.
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
  }

  static String key(String collection, String id) {
    return collection + '\0' + id;
  }

  /** Collections one consumer filter names at most. */
  static final int MAX_FILTER_COLLECTIONS = 64;

  private static final Pattern CONSUMER_NAME = Pattern.compile("[A-Za-z0-9_.-]{1,64}");

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
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      ByteBuffer number = ByteBuffer.allocate(8);
      java.util.function.Consumer<String> text =
          t -> {
            byte[] b = t == null ? new byte[0] : t.getBytes(StandardCharsets.UTF_8);
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
      return HexFormat.of().formatHex(sha.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every JVM", e);
    }
  }

  @Override
  public PartitionState emptyState() {
    PartitionState s = PartitionState.empty();
    s.receiptPolicy = wiring.settings().receiptPolicy();
    return s;
  }

  /**
   * The state is changed in place by the event handler, while the snapshot store serializes a
   * snapshot asynchronously: it gets a copy, taken on the entity's thread when the snapshot is
   * triggered.
   */
  @Override
  public SnapshotAdapter<PartitionState> snapshotAdapter() {
    return new SnapshotAdapter<>() {
      @Override
      public Object toJournal(PartitionState state) {
        return state.copy();
      }

      @Override
      public PartitionState fromJournal(Object from) {
        PartitionState s = (PartitionState) from;
        s.receiptPolicy = wiring.settings().receiptPolicy();
        return s;
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

  /** As the settings' {@link SnapshotPolicy} says. */
  @Override
  public boolean shouldSnapshot(PartitionState state, Event event, long sequenceNr) {
    return wiring
        .settings()
        .snapshots()
        .due(state.mark, sequenceNr, state.eventBytes, state.snapshotEstimate());
  }

  @Override
  public CommandHandler<Command, Event, PartitionState> commandHandler() {
    return newCommandHandlerBuilder()
        .forAnyState()
        .onCommand(WriteBatch.class, (state, c) -> write(state, c.writes(), c.done()))
        .onCommand(ApplyFrame.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(LoadRows.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(
            PartitionProtocol.ApplyFrames.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(ConfigureConsumer.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(ReleaseConsumer.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(CommitBatch.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(PartitionProtocol.SetRowRule.class, (state, c) -> write(state, List.of(c), null))
        .onCommand(BodiesFetched.class, this::bodiesFetched)
        .onCommand(Continue.class, (state, c) -> proceed(state))
        .onCommand(TableApplied.class, (state, c) -> tableApplied(c.through()))
        .onCommand(
            TableReady.class,
            (state, c) -> {
              tableReady = true;
              return becomeReady();
            })
        .onCommand(StorageChecked.class, this::storageChecked)
        .onCommand(RecoveryMarked.class, this::recoveryMarked)
        .onCommand(MarkRaised.class, this::markRaised)
        .onCommand(PartitionProtocol.AcceptStorageLoss.class, this::acceptStorageLoss)
        .onCommand(StorageLossMarked.class, this::storageLossMarked)
        .onCommand(GetStatus.class, (state, c) -> Effect().reply(c.replyTo(), status(state)))
        .onCommand(
            GetDocument.class, (state, c) -> read(() -> reads.document(state, unapplied, cache, c)))
        .onCommand(
            PartitionProtocol.GetDocuments.class,
            (state, c) -> read(() -> reads.page(unapplied, c)))
        .onCommand(
            PartitionProtocol.GetAcls.class,
            (state, c) -> read(() -> reads.acls(state, unapplied, cache, c)))
        .onCommand(
            PartitionProtocol.ScanCollection.class,
            (state, c) -> read(() -> reads.scan(state, unapplied, c, () -> self.tell(c))))
        .onCommand(
            PartitionProtocol.ReadChanges.class,
            (state, c) -> Effect().reply(c.replyTo(), PartitionReads.changes(state, c)))
        .onCommand(
            PartitionProtocol.ReadConsumer.class,
            (state, c) -> Effect().reply(c.replyTo(), PartitionReads.span(state, c)))
        .onCommand(PartitionProtocol.PurgeOutbox.class, this::purge)
        .onCommand(
            PartitionProtocol.PurgeConsumed.class,
            (state, c) -> {
              long through = state.lowestCheckpoint().orElse(state.outboxFirst - 1);
              return purge(
                  state, new PartitionProtocol.PurgeOutbox(through, c.maxEntries(), c.replyTo()));
            })
        .build();
  }

  /**
   * After recovery: waits until the storage's standbys hold every commit the primary shows (a
   * commit whose synchronous wait was cancelled is on the primary alone), then reads the mark of
   * what this partition acknowledged, outside the journal's database (ADR 0036).
   */
  private void checkStorage() {
    wiring
        .gate()
        .settled()
        .thenCompose(settled -> wiring.marks().read(partition))
        .whenComplete(
            (m, error) ->
                self.tell(
                    new StorageChecked(
                        error == null ? m : null,
                        error == null ? null : SafeErrors.describe(error))));
  }

  /** The storage check after recovery is over ({@code failure}: why it failed, value-free). */
  record StorageChecked(AckMark mark, String failure) implements Command {}

  private Effect<Event, PartitionState> storageChecked(PartitionState state, StorageChecked c) {
    if (c.failure() != null) {
      // Fail closed: without the mark the journal cannot be shown to hold what was acknowledged.
      log.warn(
          "partition {}: the storage check after recovery failed ({}); recovering again",
          partition,
          c.failure());
      return Effect().stop();
    }
    mark = c.mark();
    checkedOn = wiring.gate().system();
    if (mark.aheadOf(state.incarnation, state.events)) {
      storageCheck = StorageCheck.BEHIND;
      log.error(
          "partition {}: storage-behind: its journal on {} ends at sequence {} but it acknowledged"
              + " {} on {}; it refuses writes until an operator accepts the loss (weir ctl"
              + " partitions accept-storage-loss {} --confirm)",
          partition,
          describe(checkedOn),
          state.events,
          acknowledged(state) > 0
              ? "sequence " + mark.sequence()
              : "a history the journal does not hold",
          describe(mark.storage()),
          partition);
      wiring.observer().storageBehind(partition, true);
    } else if (wiring.marks().enabled()
        && state.incarnation != null
        && acknowledged(state) < state.events) {
      // The journal holds events above the mark: a group commit whose raise failed (its writers
      // were not answered, and a retry is answered from its receipt) or events no raise covers
      // (purges). The storage settled, so they are on the required copies: mark them before
      // anything is answered, or a later loss of them would go unnoticed.
      AckMark to = tailMark(mark.epoch(), state);
      raise(to, failure -> new RecoveryMarked(to, failure));
      return Effect().none();
    } else {
      storageCheck = wiring.marks().enabled() ? StorageCheck.SERVING : StorageCheck.UNCHECKED;
    }
    return becomeReady();
  }

  /**
   * The mark was raised over the events recovered above it ({@code failure}: why not, value-free).
   */
  record RecoveryMarked(AckMark mark, String failure) implements Command {}

  private Effect<Event, PartitionState> recoveryMarked(PartitionState state, RecoveryMarked c) {
    if (c.failure() != null) {
      log.warn(
          "partition {}: the mark over its recovered journal could not be raised ({}); recovering"
              + " again",
          partition,
          c.failure());
      return Effect().stop();
    }
    mark = mark.max(c.mark());
    storageCheck = StorageCheck.SERVING;
    return becomeReady();
  }

  private static String describe(StorageSystem storage) {
    return storage == null ? "an unknown storage" : storage.describe();
  }

  /**
   * The highest journal sequence this partition acknowledged in its current incarnation, 0 when its
   * mark names another one (or none).
   */
  private long acknowledged(PartitionState s) {
    return Objects.equals(mark.incarnation(), s.incarnation) ? mark.sequence() : 0;
  }

  /** Serves once both the documents table and the storage check are done. */
  private Effect<Event, PartitionState> becomeReady() {
    if (ready || !tableReady || storageCheck == StorageCheck.CHECKING) {
      return Effect().none();
    }
    ready = true;
    wiring.observer().recovered(partition, System.nanoTime() - createdNanos);
    return Effect().unstashAll();
  }

  /**
   * A group commit's mark was kept ({@code failure}: why not, value-free).
   *
   * @param sequence the journal sequence the mark was raised to
   */
  record MarkRaised(long sequence, String failure, long startedNanos) implements Command {}

  private Effect<Event, PartitionState> markRaised(PartitionState state, MarkRaised c) {
    if (c.failure() != null) {
      // The commit is in the journal but cannot be shown to be marked: answer nothing, recover.
      log.error(
          "partition {}: the acknowledged mark could not be raised ({}); restarting the partition"
              + " without answering its writes",
          partition,
          c.failure());
      return Effect().stop();
    }
    wiring.observer().markRaised(partition, System.nanoTime() - c.startedNanos());
    Runnable advance = run == null ? null : run.afterMark;
    if (advance == null) {
      return Effect().none();
    }
    run.afterMark = null;
    advance.run();
    return run == null ? Effect().unstashAll() : Effect().none();
  }

  /** Raises the mark to the journal's tail, then answers the group commit ({@code advance}). */
  private void raiseMark(PartitionState s, Run r, Runnable advance) {
    AckMark to = tailMark(mark.epoch(), s);
    mark = mark.max(to);
    r.afterMark = advance;
    long started = System.nanoTime();
    raise(to, failure -> new MarkRaised(to.sequence(), failure, started));
  }

  /** A mark of epoch {@code epoch} at the journal's tail, on the storage the node sees now. */
  private AckMark tailMark(long epoch, PartitionState s) {
    return new AckMark(epoch, s.incarnation, s.events, wiring.gate().system());
  }

  /**
   * Raises the mark to {@code to} and tells this partition {@code done} of the failure's value-free
   * description (null once kept).
   */
  private void raise(AckMark to, Function<String, Command> done) {
    wiring
        .marks()
        .raise(partition, to)
        .whenComplete(
            (kept, error) ->
                self.tell(done.apply(error == null ? null : SafeErrors.describe(error))));
  }

  /**
   * An operator accepts that the storage lost what this partition acknowledged: a new incarnation
   * starts at the journal's tail, in a new epoch of the mark (ADR 0036).
   */
  private Effect<Event, PartitionState> acceptStorageLoss(
      PartitionState state, PartitionProtocol.AcceptStorageLoss c) {
    if (!ready || run != null) {
      return Effect().stash();
    }
    if (storageCheck != StorageCheck.BEHIND) {
      return Effect()
          .reply(
              c.replyTo(),
              new PartitionProtocol.StorageLossRefused(
                  "the partition is "
                      + storageCheck.wireName
                      + ", not storage-behind: its journal holds everything it acknowledged"));
    }
    long lost = acknowledged(state) > 0 ? mark.sequence() - state.events : 0;
    Written fresh = new Written(UUID.randomUUID().toString(), List.of());
    long bytesBefore = state.eventBytes;
    Map<String, String> rulesBefore = state.ruleFields();
    return Effect()
        .persist(fresh)
        .thenRun(
            s -> {
              persisted(s, fresh, rulesBefore, bytesBefore, List.of());
              AckMark next = tailMark(mark.epoch() + 1, s);
              wiring
                  .marks()
                  .raise(partition, next)
                  .whenComplete(
                      (done, error) -> {
                        if (error == null) {
                          self.tell(new StorageLossMarked(next, lost, c.replyTo()));
                        } else {
                          log.error(
                              "partition {}: the new incarnation's mark could not be kept ({});"
                                  + " it stays storage-behind until the loss is accepted again",
                              partition,
                              SafeErrors.describe(error));
                        }
                      });
            });
  }

  /** The new incarnation's mark is kept: the partition serves again. */
  record StorageLossMarked(
      AckMark mark, long lost, ActorRef<PartitionProtocol.StorageLossReply> replyTo)
      implements Command {}

  private Effect<Event, PartitionState> storageLossMarked(
      PartitionState state, StorageLossMarked c) {
    mark = mark.max(c.mark());
    storageCheck = wiring.marks().enabled() ? StorageCheck.SERVING : StorageCheck.UNCHECKED;
    wiring.observer().storageBehind(partition, false);
    log.warn(
        "partition {}: an operator accepted the storage's loss of {} acknowledged journal events;"
            + " a new incarnation starts at sequence {}",
        partition,
        c.lost(),
        state.events);
    c.replyTo()
        .tell(new PartitionProtocol.StorageLossAccepted(c.mark().epoch(), state.events, c.lost()));
    return Effect().unstashAll();
  }

  /** A read of documents: served once the documents table holds every recovered event. */
  private Effect<Event, PartitionState> read(Runnable serve) {
    if (!ready) {
      return Effect().stash();
    }
    serve.run();
    return Effect().none();
  }

  private PartitionProtocol.PartitionStatus status(PartitionState s) {
    return PartitionReads.status(
        partition,
        s,
        table.status(),
        new PartitionProtocol.StorageView(
            storageCheck.wireName,
            acknowledged(s),
            mark.epoch(),
            wiring.gate().copies(),
            checkedOn,
            mark.isNone() ? null : mark.storage()));
  }

  /**
   * The table applied the events through {@code through}: their documents leave the unapplied
   * changes for the cache, and writes that waited for the table's lag may go.
   */
  private Effect<Event, PartitionState> tableApplied(long through) {
    unapplied.applied(through, (key, p) -> cache.put(key, p.seq(), p.document()));
    if (run != null && !run.fetching && run.afterMark == null && !table.behind()) {
      self.tell(Continue.INSTANCE); // a run's next event may have waited for the table
    }
    return Effect().unstashAll();
  }

  private Effect<Event, PartitionState> purge(PartitionState s, PartitionProtocol.PurgeOutbox c) {
    long first = s.outboxFirst;
    long next = s.nextSequence;
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
              table.persisted(after.events, purged, 0);
              reportOutbox(after);
              c.replyTo()
                  .tell(
                      new PartitionProtocol.OutboxPurged(
                          after.outboxFirst, after.nextSequence, target - first + 1, more, pinned));
              prune(after);
            });
  }

  /**
   * Deletes journal rows that hold only purged entries (or none), that the older of the two latest
   * snapshots covers and that the documents table has applied, always keeping the last row. Runs in
   * the background; at most one deletion at a time; a failed one is tried again after the next
   * purge or snapshot.
   */
  private void prune(PartitionState s) {
    long limit =
        s.outbox.isEmpty() ? s.events - 1 : s.outbox.firstEntry().getValue().journalSequence() - 1;
    long through =
        Math.min(Math.min(Math.min(limit, previousSnapshot), s.events - 1), table.appliedThrough());
    if (through <= prunedThrough.get() || !pruning.compareAndSet(false, true)) {
      return;
    }
    wiring
        .pruner()
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
  public SignalHandler<PartitionState> signalHandler() {
    return newSignalHandlerBuilder()
        .onSignal(
            RecoveryCompleted.instance(),
            state -> {
              table.start(state.events, state.nextSequence);
              reportOutbox(state);
              checkStorage();
            })
        .onSignal(
            SnapshotCompleted.class,
            (state, completed) -> {
              previousSnapshot = latestSnapshot;
              latestSnapshot = completed.metadata().sequenceNr();
              if (previousSnapshot > 0) {
                wiring.pruner().deleteSnapshotsBefore(persistenceId().id(), previousSnapshot);
              }
              prune(state);
            })
        .build();
  }

  /** Before images of the event being planned: found in memory, and read from the table. */
  private int foundInMemory;

  private int readFromTable;

  /** The current version of a document for the plan: in memory, or fetched for this batch. */
  private Document find(PartitionState s, String collection, String id, DocumentIndex.Entry e) {
    Document d = PartitionReads.local(s, unapplied, cache, collection, id, e);
    if (d != null) {
      foundInMemory++;
      return d;
    }
    DocumentTable.Row row = fetched.get(key(collection, id));
    if (row == null || row.journalSeq() != e.lastSeq()) {
      return null;
    }
    readFromTable++;
    return PartitionReads.held(row, unapplied.view(collection).changes());
  }

  /**
   * A group commit being written (ADR 0033): usually one journal event, several when its writes do
   * not fit one row. Writes are answered in order as the events holding them are persisted.
   */
  private static final class Run {
    final List<Write> writes;
    final ActorRef<PartitionEntity.BatchWritten> done;

    /** The first write not answered yet. */
    int next;

    /** The answers so far to the frames of {@code writes.get(next)} when it is several frames. */
    List<FrameReply> frames = List.of();

    /** The frame of {@code writes.get(next)} being written in parts, or null. */
    WritePlan.Split split;

    /** Whether the run waits for before images from the documents table. */
    boolean fetching;

    /** What answers the persisted event once its mark is kept, or null (ADR 0036). */
    Runnable afterMark;

    int fetchRounds;

    Run(List<Write> writes, ActorRef<PartitionEntity.BatchWritten> done) {
      this.writes = writes;
      this.done = done;
    }
  }

  /** The group commit being written, or null: while there is one, other writes wait. */
  private Run run;

  /** The next event of the run may be planned. */
  enum Continue implements Command {
    INSTANCE
  }

  private Effect<Event, PartitionState> write(
      PartitionState state, List<Write> requested, ActorRef<PartitionEntity.BatchWritten> done) {
    if (!ready || run != null || table.behind()) {
      // Not recovered into the table yet, another group commit is being written, or the table is
      // too far behind: the write waits.
      return Effect().stash();
    }
    if (storageCheck == StorageCheck.BEHIND) {
      refuseBehind(state, requested);
      if (done != null) {
        done.tell(PartitionEntity.BatchWritten.INSTANCE);
      }
      return Effect().none();
    }
    List<Write> writes = admitted(requested);
    if (writes.isEmpty()) {
      if (done != null) {
        done.tell(PartitionEntity.BatchWritten.INSTANCE);
      }
      return Effect().none();
    }
    run = new Run(writes, done);
    return step(state);
  }

  private Effect<Event, PartitionState> bodiesFetched(PartitionState state, BodiesFetched c) {
    if (run == null || !run.fetching) {
      return Effect().none();
    }
    run.fetching = false;
    if (c.failure() != null) {
      log.warn(
          "partition {}: reading before images from the documents table failed ({}); planning"
              + " the writes again",
          partition,
          c.failure());
    }
    for (DocumentTable.Row row : c.rows()) {
      fetched.put(key(row.document().collection(), row.document().id()), row);
    }
    if (c.failure() == null) {
      c.receiptKeys().forEach(k -> fetchedReceipts.put(k, Optional.empty()));
      c.receipts().forEach(r -> fetchedReceipts.put(r.key(), Optional.of(r.receipt())));
    }
    return step(state);
  }

  /** Goes on with the run after an event that did not hold all of it. */
  private Effect<Event, PartitionState> proceed(PartitionState state) {
    if (run == null || run.fetching || run.afterMark != null) {
      // No run, or it waits for before images or for the mark of its last event (whose arrival
      // goes on with it): planning now would write the same writes again.
      return Effect().none();
    }
    if (table.behind()) {
      // The table's lag bounds a run's events too: the next one waits for it (the table's next
      // apply continues the run).
      return Effect().none();
    }
    return step(state);
  }

  /**
   * Plans the run's next event: persists it and answers the writes it completes, or first fetches
   * the before images it missed.
   */
  private Effect<Event, PartitionState> step(PartitionState state) {
    Run r = run;
    foundInMemory = 0;
    readFromTable = 0;
    WritePlan plan =
        new WritePlan(
            state,
            wiring.settings(),
            System.currentTimeMillis(),
            new WritePlan.Bodies() {
              @Override
              public Document find(String collection, String id, DocumentIndex.Entry e) {
                return Partition.this.find(state, collection, id, e);
              }

              @Override
              public Optional<Receipt> receipt(String key) {
                // An event not in the table yet holds the key's newest receipt outside the heap.
                Receipt pending = unapplied.receipt(key);
                return pending != null ? Optional.of(pending) : fetchedReceipts.get(key);
              }
            },
            r.split);
    ConsumerPlan consumers = new ConsumerPlan(plan);
    List<Runnable> answers = new ArrayList<>();
    List<Object> outcomes = new ArrayList<>();
    int next = r.next;
    List<FrameReply> frames = new ArrayList<>(r.frames);
    boolean stopped = false;
    while (next < r.writes.size() && !stopped) {
      Write w = r.writes.get(next);
      Object o;
      if (w instanceof PartitionProtocol.ApplyFrames fs) {
        o = null;
        while (frames.size() < fs.frames().size()) {
          Object each = plan.frame(fs.frames().get(frames.size()));
          if (each instanceof WritePlan.Stop) {
            o = each;
            break;
          }
          frames.add((FrameReply) each);
        }
        if (o == null) {
          o = new PartitionProtocol.FramesReply(List.copyOf(frames));
          frames = new ArrayList<>();
        }
      } else if (w instanceof ApplyFrame f) {
        o = plan.frame(f);
      } else if (w instanceof LoadRows l) {
        o = plan.load(l);
      } else if (w instanceof ConfigureConsumer c) {
        o = consumers.configure(c);
      } else if (w instanceof ReleaseConsumer c) {
        o = consumers.release(c);
      } else if (w instanceof PartitionProtocol.SetRowRule rule) {
        o = plan.setRule(rule);
      } else {
        o = consumers.commit((CommitBatch) w);
      }
      if (o instanceof WritePlan.Stop) {
        stopped = true;
      } else {
        outcomes.add(o);
        Object reply = o;
        answers.add(() -> answer(w, reply));
        next++;
      }
    }
    List<DocumentTable.Key> missing = plan.missing();
    List<String> missingReceipts = plan.missingReceipts();
    if (!missing.isEmpty() || !missingReceipts.isEmpty()) {
      if (++r.fetchRounds > MAX_FETCH_ROUNDS) {
        // The table does not hold what the index says it holds: restart from the journal rather
        // than write on a before image that cannot be proven.
        log.error(
            "partition {}: {} before images are still missing from the documents table after {}"
                + " reads; restarting the partition",
            partition,
            missing.size(),
            MAX_FETCH_ROUNDS);
        return Effect().stop();
      }
      r.fetching = true;
      wiring
          .table()
          .rows(partition, missing)
          .thenCombine(
              wiring.table().receipts(partition, missingReceipts),
              (rows, receipts) -> new BodiesFetched(rows, null, missingReceipts, receipts))
          .whenComplete(
              (fetchedNow, error) ->
                  self.tell(
                      error == null
                          ? fetchedNow
                          : new BodiesFetched(
                              List.of(), SafeErrors.describe(error), List.of(), List.of())));
      return Effect().none();
    }
    fetched.clear();
    fetchedReceipts.clear();
    r.fetchRounds = 0;
    if (foundInMemory + readFromTable > 0) {
      wiring.observer().beforeImages(partition, foundInMemory, readFromTable);
    }
    int refused = quotaRefusals(outcomes);
    if (refused > 0) {
      wiring.observer().quotaRefused(partition, refused);
    }
    int nextWrite = next;
    List<FrameReply> framesAfter = frames;
    WritePlan.Split split = plan.split();
    Runnable advance =
        () -> {
          answers.forEach(Runnable::run);
          r.next = nextWrite;
          r.frames = framesAfter;
          r.split = split;
          if (nextWrite < r.writes.size()) {
            self.tell(Continue.INSTANCE);
          } else {
            run = null;
            if (r.done != null) {
              r.done.tell(PartitionEntity.BatchWritten.INSTANCE);
            }
          }
        };
    if (plan.accepted.isEmpty()) {
      advance.run();
      return run == null ? Effect().unstashAll() : Effect().none();
    }
    String incarnation = state.incarnation != null ? null : UUID.randomUUID().toString();
    int accepted = plan.accepted.size();
    Written written = new Written(incarnation, plan.accepted);
    Map<String, String> rulesBefore = state.ruleFields();
    long bytesBefore = state.eventBytes;
    List<Receipt.Keyed> kept = Receipt.of(written, state.nextSequence, state.receiptsLatestAt);
    return Effect()
        .persist(written)
        .thenRun(
            s -> {
              persisted(s, written, rulesBefore, bytesBefore, kept);
              wiring.observer().persisted(partition, accepted);
              reportOutbox(s);
              if (wiring.marks().enabled()) {
                raiseMark(s, r, advance);
              } else {
                advance.run();
              }
            })
        .thenUnstashAll();
  }

  /**
   * A group commit is persisted: its document changes wait in memory for the table (and leave the
   * cache, whose versions they replace), and the table writer gets the event.
   */
  private void persisted(
      PartitionState s,
      Written written,
      Map<String, String> rulesBefore,
      long bytesBefore,
      List<Receipt.Keyed> kept) {
    List<DocumentChange> changes =
        DocumentChange.of(written, DocumentChange.RuleFields.over(new HashMap<>(rulesBefore)));
    for (DocumentChange change : changes) {
      if (change instanceof DocumentChange.Put p) {
        cache.remove(key(p.document().collection(), p.document().id()));
      } else if (change instanceof DocumentChange.Reset r) {
        cache.dropCollection(r.collection());
      } else {
        cache.dropCollection(((DocumentChange.ClearTombstoneAcls) change).collection());
      }
    }
    unapplied.add(s.events, changes);
    unapplied.addReceipts(s.events, kept);
    table.persisted(s.events, written, s.eventBytes - bytesBefore);
  }

  private static void answer(Write w, Object reply) {
    if (w instanceof ApplyFrame f) {
      f.replyTo().tell((FrameReply) reply);
    } else if (w instanceof PartitionProtocol.ApplyFrames fs) {
      fs.replyTo().tell((PartitionProtocol.FramesReply) reply);
    } else if (w instanceof LoadRows l) {
      l.replyTo().tell((FrameReply) reply);
    } else if (w instanceof ConfigureConsumer c) {
      c.replyTo().tell((ConsumerReply) reply);
    } else if (w instanceof ReleaseConsumer c) {
      c.replyTo().tell((ConsumerReply) reply);
    } else if (w instanceof PartitionProtocol.SetRowRule r) {
      r.replyTo().tell((PartitionProtocol.RowRuleReply) reply);
    } else {
      ((CommitBatch) w).replyTo().tell((ConsumerReply) reply);
    }
  }

  /**
   * The writes the storage gate lets through: all of them while the storage keeps the required
   * copies; otherwise only row-rule changes, every other write answered with a refusal at once.
   */
  private List<Write> admitted(List<Write> writes) {
    StorageGate.Refusal below = wiring.gate().refusal();
    if (below == null) {
      return writes;
    }
    // Counted before the replies: whoever sees a refusal sees it counted.
    wiring.observer().storageRefused(partition, refusable(writes));
    return refuse(
        writes,
        new PartitionProtocol.StorageRefused(below.copies(), below.required()),
        new ConsumerRefused(
            ConsumerRefusal.STORAGE_COPIES,
            "the storage keeps " + below.describe() + "; retry later"));
  }

  /**
   * Answers every write with the storage-behind refusal: nothing is written (ADR 0036). A row-rule
   * change has no refusal to answer with: unanswered, its sender times out and installs the rule
   * again once the partition serves.
   */
  private void refuseBehind(PartitionState state, List<Write> writes) {
    long acknowledged = acknowledged(state);
    wiring.observer().storageRefused(partition, refusable(writes));
    refuse(
        writes,
        new PartitionProtocol.StorageBehind(state.events, acknowledged),
        new ConsumerRefused(
            ConsumerRefusal.STORAGE_BEHIND,
            "the partition's journal lacks writes it acknowledged; an operator must accept the"
                + " loss"));
  }

  /** How many of {@code writes} {@link #refuse} answers. */
  private static int refusable(List<Write> writes) {
    return (int) writes.stream().filter(Partition::answerable).count();
  }

  /** Whether {@link #refuse} answers {@code w}: every write but a row-rule change. */
  private static boolean answerable(Write w) {
    return w instanceof ApplyFrame
        || w instanceof PartitionProtocol.ApplyFrames
        || w instanceof LoadRows
        || w instanceof ConfigureConsumer
        || w instanceof ReleaseConsumer
        || w instanceof CommitBatch;
  }

  /**
   * Answers frames and row loads with {@code frame}, consumer commands with {@code consumer}, and
   * returns what is left: the row-rule changes, which no refusal answers.
   */
  private static List<Write> refuse(
      List<Write> writes, FrameReply frame, ConsumerRefused consumer) {
    List<Write> rest = new ArrayList<>();
    for (Write w : writes) {
      if (!answerable(w)) {
        rest.add(w);
      } else if (w instanceof ApplyFrame f) {
        f.replyTo().tell(frame);
      } else if (w instanceof PartitionProtocol.ApplyFrames fs) {
        fs.replyTo()
            .tell(
                new PartitionProtocol.FramesReply(
                    Collections.<FrameReply>nCopies(fs.frames().size(), frame)));
      } else if (w instanceof LoadRows l) {
        l.replyTo().tell(frame);
      } else if (w instanceof ConfigureConsumer c) {
        c.replyTo().tell(consumer);
      } else if (w instanceof ReleaseConsumer c) {
        c.replyTo().tell(consumer);
      } else if (w instanceof CommitBatch c) {
        c.replyTo().tell(consumer);
      }
    }
    return rest;
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
  private void reportOutbox(PartitionState s) {
    long entries = s.nextSequence - s.outboxFirst;
    double use =
        Math.max(
            (double) entries / wiring.settings().maxOutboxEntries(),
            (double) s.outboxBytes / wiring.settings().maxOutboxBytes());
    wiring.observer().outbox(partition, entries, s.outboxBytes, use);
  }

  @Override
  public EventHandler<PartitionState, Event> eventHandler() {
    return newEventHandlerBuilder()
        .forAnyState()
        .onEvent(Written.class, (PartitionState state, Written w) -> state.written(w))
        .onEvent(Purged.class, (PartitionState state, Purged p) -> state.purged(p))
        .build();
  }
}
