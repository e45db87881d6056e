package io.weir.sharding.partition;

import com.fasterxml.jackson.annotation.JsonSubTypes;
import com.fasterxml.jackson.annotation.JsonTypeInfo;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.persistence.StorageSystem;
import io.weir.protocol.CborSerializable;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * Messages of a partition ({@link PartitionEntity} in front of the event-sourced {@link
 * Partition}). Every accepted {@link ApplyFrame} becomes one atomic frame in the partition's
 * journal: its document changes, outbox entries, receipt and source watermark are persisted
 * together or not at all. Frames that arrive while a write is in flight are written together (group
 * commit), each still checked and answered on its own.
 */
public final class PartitionProtocol {
  private PartitionProtocol() {}

  public sealed interface Command extends CborSerializable
      permits Write,
          GetDocument,
          GetDocuments,
          GetStatus,
          PurgeOutbox,
          PurgeConsumed,
          ReadConsumer,
          ReadChanges,
          GetAcls,
          ScanCollection,
          AcceptStorageLoss,
          Partition.WriteBatch,
          Partition.StorageChecked,
          Partition.RecoveryMarked,
          Partition.MarkRaised,
          Partition.StorageLossMarked,
          Partition.TableApplied,
          Partition.TableReady,
          Partition.BodiesFetched,
          Partition.Continue,
          PartitionEntity.Upgraded,
          PartitionEntity.BatchWritten,
          PartitionEntity.WriteTimedOut {}

  /** A command that writes: what the group commit coalesces. */
  @JsonTypeInfo(use = JsonTypeInfo.Id.NAME, property = "write")
  @JsonSubTypes({
    @JsonSubTypes.Type(value = ApplyFrame.class, name = "frame"),
    @JsonSubTypes.Type(value = ApplyFrames.class, name = "frames"),
    @JsonSubTypes.Type(value = LoadRows.class, name = "load"),
    @JsonSubTypes.Type(value = ConfigureConsumer.class, name = "configure-consumer"),
    @JsonSubTypes.Type(value = ReleaseConsumer.class, name = "release-consumer"),
    @JsonSubTypes.Type(value = CommitBatch.class, name = "commit-batch"),
    @JsonSubTypes.Type(value = SetRowRule.class, name = "set-row-rule")
  })
  public sealed interface Write extends Command
      permits ApplyFrame,
          ApplyFrames,
          LoadRows,
          ConfigureConsumer,
          ReleaseConsumer,
          CommitBatch,
          SetRowRule {}

  /** One change in a frame. */
  @JsonTypeInfo(use = JsonTypeInfo.Id.NAME, property = "kind")
  @JsonSubTypes({
    @JsonSubTypes.Type(value = Upsert.class, name = "upsert"),
    @JsonSubTypes.Type(value = Delete.class, name = "delete"),
    @JsonSubTypes.Type(value = Truncate.class, name = "truncate")
  })
  public sealed interface Mutation extends CborSerializable {
    String collection();
  }

  /**
   * Creates or replaces a document.
   *
   * @param body the document as a JSON object; never logged
   * @param expectedRevision the revision the document must have (0: must not exist); empty: any
   * @param keep top-level fields whose value is taken from the current document instead of {@code
   *     body} (a CDC row's unchanged TOAST columns); the partition refuses the frame when the
   *     document does not exist
   */
  public record Upsert(
      String collection, String id, String body, Optional<Long> expectedRevision, List<String> keep)
      implements Mutation {
    public Upsert {
      Objects.requireNonNull(collection, "collection");
      Objects.requireNonNull(id, "id");
      Objects.requireNonNull(body, "body");
      Objects.requireNonNull(expectedRevision, "expectedRevision");
      keep = keep == null ? List.of() : List.copyOf(keep);
    }

    public Upsert(String collection, String id, String body, Optional<Long> expectedRevision) {
      this(collection, id, body, expectedRevision, List.of());
    }

    @Override
    public String toString() {
      return "Upsert["
          + collection
          + ", bodyLength="
          + body.length()
          + ", keep="
          + keep.size()
          + "]";
    }
  }

  /** Deletes a document, leaving a tombstone (a deleted revision). */
  public record Delete(String collection, String id, Optional<Long> expectedRevision)
      implements Mutation {
    public Delete {
      Objects.requireNonNull(collection, "collection");
      Objects.requireNonNull(id, "id");
      Objects.requireNonNull(expectedRevision, "expectedRevision");
    }

    @Override
    public String toString() {
      return "Delete[" + collection + "]";
    }
  }

  /** Deletes every live document of a collection held by this partition (a source TRUNCATE). */
  public record Truncate(String collection) implements Mutation {
    public Truncate {
      Objects.requireNonNull(collection, "collection");
    }
  }

  /**
   * Where a CDC frame comes from.
   *
   * @param source the feeding pipeline's watermark key (pipeline name and slot incarnation)
   * @param commitLsn the source transaction's commit LSN (as its 64-bit value)
   * @param previousLsn the commit LSN of the previous slice this run sent to this partition, or the
   *     partition's watermark read when the run started: a partition whose watermark is below it
   *     has missed a slice and answers {@link Gap}
   * @param part which part of the slice this frame is, from 1 (a slice larger than the sender's
   *     bound goes as several parts, sent in order)
   * @param last whether this is the slice's last part; the watermark moves with it
   */
  public record SourcePosition(
      String source, long commitLsn, long previousLsn, int part, boolean last)
      implements CborSerializable {
    public SourcePosition {
      Objects.requireNonNull(source, "source");
      if (part < 1) {
        throw new IllegalArgumentException("parts count from 1");
      }
    }

    /** A whole slice with no predecessor check. */
    public SourcePosition(String source, long commitLsn) {
      this(source, commitLsn, 0, 1, true);
    }
  }

  /**
   * Applies {@code mutations} as one frame.
   *
   * @param commandId idempotency key of an API frame: the same id again returns the first receipt
   *     and changes nothing. CDC frames ({@code source} present) are deduplicated by watermark and
   *     keep no receipt.
   * @param source present for CDC frames
   */
  public record ApplyFrame(
      String commandId,
      List<Mutation> mutations,
      Optional<SourcePosition> source,
      ActorRef<FrameReply> replyTo)
      implements Write {
    public ApplyFrame {
      mutations = List.copyOf(mutations);
    }

    @Override
    public String toString() {
      return "ApplyFrame[mutations=" + mutations.size() + ", source=" + source + "]";
    }
  }

  /**
   * Several frames in one message, checked and applied in order exactly as if sent one by one (each
   * still atomic on its own); one {@link FramesReply} answers them all, in order. The CDC sink
   * sends a partition's slices of many transactions this way. The inner frames' {@code replyTo} is
   * unused.
   */
  public record ApplyFrames(List<ApplyFrame> frames, ActorRef<FramesReply> replyTo)
      implements Write {
    public ApplyFrames {
      frames = List.copyOf(frames);
    }

    @Override
    public String toString() {
      return "ApplyFrames[" + frames.size() + "]";
    }
  }

  /** The answers to an {@link ApplyFrames}, in the order of its frames. */
  public record FramesReply(List<FrameReply> replies) implements CborSerializable {}

  /**
   * Rows read by a snapshot of the source, upserted by id.
   *
   * @param reset collections whose documents in this partition are removed first, without outbox
   *     entries (the first rows of a table in an initial snapshot)
   * @param recordChanges false for an initial snapshot (documents without outbox history); true for
   *     an incremental one: a row that changes its document writes an outbox entry of kind {@code
   *     snapshot}, a row equal to it writes nothing
   */
  public record LoadRows(
      List<String> reset, List<Upsert> rows, boolean recordChanges, ActorRef<FrameReply> replyTo)
      implements Write {
    public LoadRows {
      reset = List.copyOf(reset);
      rows = List.copyOf(rows);
    }

    @Override
    public String toString() {
      return "LoadRows[rows="
          + rows.size()
          + ", reset="
          + reset.size()
          + ", recordChanges="
          + recordChanges
          + "]";
    }
  }

  /** Replies with a document's current revision and body, if it exists (tombstones included). */
  public record GetDocument(String collection, String id, ActorRef<DocumentReply> replyTo)
      implements Command {
    /** No id: ids are row values (primary keys). */
    @Override
    public String toString() {
      return "GetDocument[" + collection + "]";
    }
  }

  /**
   * Replies with up to {@code limit} documents of {@code collection} (tombstones included) whose id
   * sorts after {@code afterId} (null: from the first), in id order.
   */
  public record GetDocuments(
      String collection, String afterId, int limit, ActorRef<DocumentsReply> replyTo)
      implements Command {
    @Override
    public String toString() {
      return "GetDocuments[" + collection + ", limit=" + limit + "]";
    }
  }

  /**
   * @param more whether documents after the last one returned exist
   */
  public record DocumentsReply(List<Document> documents, boolean more)
      implements CborSerializable {}

  /**
   * Reclaims a contiguous prefix of the outbox: entries up to {@code through}, at most {@code
   * maxEntries} of them in one go (the reply says whether more were asked for). Entries already
   * purged are fine (nothing happens); purging entries not yet written is refused. The journal rows
   * holding purged entries are deleted once a snapshot covers them.
   */
  public record PurgeOutbox(long through, long maxEntries, ActorRef<PurgeReply> replyTo)
      implements Command {}

  /**
   * Automatic retention: purges through the lowest checkpoint of the active projection consumers,
   * at most {@code maxEntries} entries. A partition without an active consumer purges nothing (no
   * checkpoint says what was processed). Answered like {@link PurgeOutbox}.
   */
  public record PurgeConsumed(long maxEntries, ActorRef<PurgeReply> replyTo) implements Command {}

  /** The answer to {@link PurgeOutbox}. */
  @JsonTypeInfo(use = JsonTypeInfo.Id.NAME, property = "kind")
  @JsonSubTypes({
    @JsonSubTypes.Type(value = OutboxPurged.class, name = "purged"),
    @JsonSubTypes.Type(value = PurgeRefused.class, name = "refused")
  })
  public sealed interface PurgeReply extends CborSerializable {}

  /**
   * @param purged entries reclaimed by this request
   * @param more the request asked for more than {@code maxEntries}: ask again
   * @param pinned an active projection consumer's checkpoint stopped the purge short of what was
   *     asked (the entries after it are still to be processed)
   */
  public record OutboxPurged(
      long outboxFirst, long outboxNext, long purged, boolean more, boolean pinned)
      implements PurgeReply {
    public OutboxPurged(long outboxFirst, long outboxNext, long purged, boolean more) {
      this(outboxFirst, outboxNext, purged, more, false);
    }
  }

  /** The request asked to purge entries that do not exist yet. */
  public record PurgeRefused(String reason, long outboxFirst, long outboxNext)
      implements PurgeReply {}

  /** Replies with the partition's counters and watermarks. */
  public record GetStatus(ActorRef<PartitionStatus> replyTo) implements Command {}

  /** The answer to a {@link Write}. */
  @JsonTypeInfo(use = JsonTypeInfo.Id.NAME, property = "kind")
  @JsonSubTypes({
    @JsonSubTypes.Type(value = Applied.class, name = "applied"),
    @JsonSubTypes.Type(value = AlreadyApplied.class, name = "already-applied"),
    @JsonSubTypes.Type(value = Conflict.class, name = "conflict"),
    @JsonSubTypes.Type(value = Rejected.class, name = "rejected"),
    @JsonSubTypes.Type(value = Gap.class, name = "gap"),
    @JsonSubTypes.Type(value = QuotaExceeded.class, name = "quota-exceeded"),
    @JsonSubTypes.Type(value = StorageRefused.class, name = "storage-refused"),
    @JsonSubTypes.Type(value = StorageBehind.class, name = "storage-behind"),
    @JsonSubTypes.Type(value = Loaded.class, name = "loaded"),
    @JsonSubTypes.Type(value = KeyReused.class, name = "key-reused")
  })
  public sealed interface FrameReply extends CborSerializable {}

  /**
   * The frame was applied (or had been, for a retried command id: then {@code replayed}).
   *
   * @param firstSequence outbox sequence of the frame's first entry (the next sequence when the
   *     frame wrote no entry: a truncate of an empty collection)
   * @param revisions each mutation's resulting revision, in order (0 for a truncate)
   */
  public record Applied(
      String commandId, long firstSequence, List<Long> revisions, boolean replayed)
      implements FrameReply {}

  /**
   * A CDC frame at or below the partition's watermark for its source: already applied, nothing
   * done.
   */
  public record AlreadyApplied(SourcePosition source, long watermark) implements FrameReply {}

  /**
   * A CDC frame whose predecessor never arrived: the partition's watermark for the source is below
   * the frame's {@code previousLsn} (or a part of a split slice is missing). Nothing was applied;
   * the sender must restart from what it knows is durable.
   */
  public record Gap(SourcePosition source, long watermark) implements FrameReply {}

  /**
   * A mutation's expected revision did not match; nothing of the frame was applied.
   *
   * @param index the mutation at fault
   * @param actualRevision the document's revision (0: it does not exist)
   */
  public record Conflict(int index, long actualRevision) implements FrameReply {}

  /** A malformed frame; nothing was applied. The reason names no value. */
  public record Rejected(String reason) implements FrameReply {}

  /** The partition's outbox is full (see {@link PartitionSettings}); nothing was applied. */
  public record QuotaExceeded(long entries, long bytes, long maxEntries, long maxBytes)
      implements FrameReply {}

  /**
   * An API frame whose idempotency key this partition has a receipt for, made by another request
   * (see {@link #receiptKey}): nothing was applied, and the first request's answer is not revealed.
   */
  public record KeyReused(boolean refused) implements FrameReply {
    public KeyReused() {
      this(true);
    }
  }

  /**
   * The part of an API frame's command id its receipt is found by. A command id {@code api2:<caller
   * key>:<request>} names the caller's idempotency key (hashed with its principal) and the request
   * it came with (a hash of the HTTP request): a frame with the same caller key and another request
   * is {@link KeyReused}. Any other command id is its own receipt key.
   */
  public static String receiptKey(String commandId) {
    if (commandId.startsWith(BOUND_COMMAND_PREFIX)) {
      int last = commandId.lastIndexOf(':');
      if (last > BOUND_COMMAND_PREFIX.length()) {
        return commandId.substring(0, last);
      }
    }
    return commandId;
  }

  /** Command ids bound to a caller and a request (see {@link #receiptKey}). */
  public static final String BOUND_COMMAND_PREFIX = "api2:";

  /**
   * Command ids of API frames nobody will retry (a write without an idempotency key): the partition
   * keeps no receipt for them, so they never push a keyed command's receipt out.
   */
  public static final String UNKEYED_COMMAND_PREFIX = "once:";

  /** Whether the partition keeps a receipt for an API frame with this command id. */
  public static boolean keepsReceipt(String commandId) {
    return !commandId.startsWith(UNKEYED_COMMAND_PREFIX);
  }

  /** The answer to {@link LoadRows}: how many rows changed their document. */
  public record Loaded(int changed) implements FrameReply {}

  /**
   * The storage keeps fewer durable copies of a commit than {@code weir.storage.required-copies}
   * ({@link StorageGate}); nothing was applied. Retry later.
   *
   * @param copies the copies now, -1 when unknown
   * @param required the copies required
   */
  public record StorageRefused(int copies, int required) implements FrameReply {}

  /**
   * The partition's journal lacks frames it acknowledged (a storage failover to a copy that was
   * behind, ADR 0036); nothing was applied. The partition writes nothing until an operator accepts
   * the loss ({@link AcceptStorageLoss}).
   *
   * @param journalTail the journal's highest sequence
   * @param acknowledged the highest sequence the partition acknowledged (0 when its mark names
   *     another incarnation)
   */
  public record StorageBehind(long journalTail, long acknowledged) implements FrameReply {}

  /**
   * A document as the partition holds it.
   *
   * @param body null for a tombstone; never logged
   * @param acl a tombstone's ACL (the row-visibility field of the deleted document, as JSON; null
   *     when the collection has no row rule or it is unknown); null for live documents, whose ACL
   *     is in their body. Never logged
   */
  public record Document(
      String collection, String id, long revision, String body, boolean deleted, String acl)
      implements CborSerializable {
    public Document(String collection, String id, long revision, String body, boolean deleted) {
      this(collection, id, revision, body, deleted, null);
    }

    @Override
    public String toString() {
      return "Document[" + collection + ", revision=" + revision + ", deleted=" + deleted + "]";
    }
  }

  /**
   * @param ruleVersion the version of the collection's row rule installed in the partition (0:
   *     none)
   */
  public record DocumentReply(Optional<Document> document, long ruleVersion)
      implements CborSerializable {
    public DocumentReply(Optional<Document> document) {
      this(document, 0);
    }
  }

  /**
   * @param documents documents held, tombstones included
   * @param outboxFirst first retained outbox sequence
   * @param outboxNext the sequence the next entry will get
   * @param outboxBytes bytes of the retained entries' images
   * @param journalEvents journal events written so far (the last sequence number)
   * @param watermarks per source: the highest fully applied commit LSN
   * @param consumers the projection consumers configured in this partition, released ones included
   */
  public record PartitionStatus(
      int partition,
      long documents,
      long outboxFirst,
      long outboxNext,
      long outboxBytes,
      long journalEvents,
      Map<String, Long> watermarks,
      List<ConsumerView> consumers,
      TableStatus table,
      StorageView storage)
      implements CborSerializable {
    public PartitionStatus {
      consumers = consumers == null ? List.of() : List.copyOf(consumers);
    }

    /** A status without the storage check (before ADR 0036, and while an old snapshot upgrades). */
    public PartitionStatus(
        int partition,
        long documents,
        long outboxFirst,
        long outboxNext,
        long outboxBytes,
        long journalEvents,
        Map<String, Long> watermarks,
        List<ConsumerView> consumers,
        TableStatus table) {
      this(
          partition,
          documents,
          outboxFirst,
          outboxNext,
          outboxBytes,
          journalEvents,
          watermarks,
          consumers,
          table,
          null);
    }

    public long outboxEntries() {
      return outboxNext - outboxFirst;
    }
  }

  /**
   * Whether the partition's journal holds everything the partition acknowledged (ADR 0036).
   *
   * @param state {@code unchecked} (no acknowledged marks are kept: a node without a cluster, or
   *     tools), {@code checking} (recovered, reading its mark and waiting for the standbys; it
   *     serves nothing yet), {@code serving}, or {@code storage-behind} (the journal lacks frames
   *     the partition acknowledged: it refuses writes until an operator accepts the loss)
   * @param acknowledged the highest journal sequence known acknowledged (its mark), 0 when none
   * @param epoch how many storage losses were accepted for this partition
   * @param copies on how many copies a commit of the partition's storage is durable before it is
   *     acknowledged, as its node last read it; -1 when unknown
   * @param checkedOn the storage the partition checked its journal against when it recovered (null:
   *     unknown, or not checked)
   * @param acknowledgedOn the storage its mark's last acknowledged commit was written to (null:
   *     unknown, or nothing acknowledged)
   */
  public record StorageView(
      String state,
      long acknowledged,
      long epoch,
      int copies,
      StorageSystem checkedOn,
      StorageSystem acknowledgedOn)
      implements CborSerializable {
    /** A view without the storages. */
    public StorageView(String state, long acknowledged, long epoch, int copies) {
      this(state, acknowledged, epoch, copies, null, null);
    }
  }

  /**
   * Gives a partition halted {@code storage-behind} a new incarnation at its storage's tail: what
   * the storage lost stays lost, tokens and cursors of the old incarnation answer
   * token-invalidated, and writes go again (ADR 0036).
   */
  public record AcceptStorageLoss(ActorRef<StorageLossReply> replyTo) implements Command {}

  /** The answer to {@link AcceptStorageLoss}. */
  @JsonTypeInfo(use = JsonTypeInfo.Id.NAME, property = "kind")
  @JsonSubTypes({
    @JsonSubTypes.Type(value = StorageLossAccepted.class, name = "accepted"),
    @JsonSubTypes.Type(value = StorageLossRefused.class, name = "refused")
  })
  public sealed interface StorageLossReply extends CborSerializable {}

  /**
   * The partition has a new incarnation and serves again.
   *
   * @param epoch the new epoch of its acknowledged mark
   * @param journalTail the journal sequence its new incarnation starts at
   * @param lost how many acknowledged journal events the storage lost (0 when the mark named
   *     another incarnation: then the count is unknown)
   */
  public record StorageLossAccepted(long epoch, long journalTail, long lost)
      implements StorageLossReply {}

  /** Nothing changed: the partition is not behind its storage (the reason says why). */
  public record StorageLossRefused(String reason) implements StorageLossReply {}

  /**
   * Where a partition's documents table is (see {@link TableWriter}).
   *
   * @param state {@code upgrading} (an old snapshot's documents move into the table before the
   *     partition starts: {@code moved} of {@code toMove}), {@code starting} (catching up from the
   *     journal; the partition serves nothing yet), {@code running}, {@code table-apply-failed}
   *     (the last apply failed; retried with backoff, never skipped) or {@code storage-behind} (the
   *     table holds events the journal lost; the partition serves nothing)
   * @param appliedThrough the journal sequence through which the table holds the events
   * @param lagEvents persisted events not yet applied
   * @param failures failed applies in a row (retried with backoff, never skipped)
   * @param lastError the last failure's exception classes and SQLState, or null
   * @param moved while upgrading: documents moved so far
   * @param toMove while upgrading: documents to move in all (-1: not known yet)
   */
  public record TableStatus(
      String state,
      long appliedThrough,
      long lagEvents,
      int failures,
      String lastError,
      long moved,
      long toMove)
      implements CborSerializable {
    public TableStatus(
        String state, long appliedThrough, long lagEvents, int failures, String lastError) {
      this(state, appliedThrough, lagEvents, failures, lastError, 0, 0);
    }
  }

  // ---- Projection consumers ----

  /** Mutation kinds an outbox entry can have, and so a consumer filter can name. */
  public static final List<String> ENTRY_KINDS = List.of("upsert", "delete", "snapshot");

  /**
   * Creates the projection consumer {@code name} at {@code generation}: an immutable identity with
   * its filters and start. Configuring the same identity again with the same filters (and no or the
   * same {@code startAfter}) answers the existing consumer; anything else about an existing
   * identity is refused ({@link ConsumerRefusal#IMMUTABLE}, or {@link ConsumerRefusal#RELEASED}
   * once released).
   *
   * @param collections entries of these collections are selected; empty: every collection
   * @param kinds entries of these kinds ({@link #ENTRY_KINDS}) are selected; empty: every kind
   * @param startAfter the position the consumer has already processed: a retained cut, from the
   *     last purged position to the outbox's last entry; empty: the retained beginning
   */
  public record ConfigureConsumer(
      String name,
      long generation,
      List<String> collections,
      List<String> kinds,
      Optional<Long> startAfter,
      ActorRef<ConsumerReply> replyTo)
      implements Write {
    public ConfigureConsumer {
      collections = List.copyOf(collections);
      kinds = List.copyOf(kinds);
      Objects.requireNonNull(startAfter, "startAfter");
    }

    @Override
    public String toString() {
      return "ConfigureConsumer[generation="
          + generation
          + ", collections="
          + collections.size()
          + "]";
    }
  }

  /**
   * Releases a consumer generation: it no longer holds back purges, and every batch token issued
   * for it is refused from now on. The identity cannot be configured again.
   */
  public record ReleaseConsumer(String name, long generation, ActorRef<ConsumerReply> replyTo)
      implements Write {
    @Override
    public String toString() {
      return "ReleaseConsumer[generation=" + generation + "]";
    }
  }

  /**
   * Replies with where a consumer's next batch lies: its checkpoint, the outbox's end and the
   * journal events holding up to {@code maxEntries} entries after the checkpoint (read from the
   * journal by the caller). Changes nothing.
   */
  public record ReadConsumer(
      String name, long generation, long maxEntries, ActorRef<ConsumerReply> replyTo)
      implements Command {
    @Override
    public String toString() {
      return "ReadConsumer[generation=" + generation + ", maxEntries=" + maxEntries + "]";
    }
  }

  /**
   * Commits a consumer's batch: applies {@code effects} (document upserts and deletes, each with
   * the revision it expects) and moves the checkpoint from {@code start} to {@code end}, with a
   * receipt, as one atomic frame. The caller has verified the batch token these fields come from.
   *
   * @param commandId the caller's command id, kept in the receipt; a retry of a committed batch is
   *     recognised by its positions and effects, whatever its command id
   * @param incarnation the partition incarnation the batch was read from
   */
  public record CommitBatch(
      String commandId,
      String name,
      long generation,
      String incarnation,
      long start,
      long end,
      List<Mutation> effects,
      ActorRef<ConsumerReply> replyTo)
      implements Write {
    public CommitBatch {
      effects = List.copyOf(effects);
    }

    @Override
    public String toString() {
      return "CommitBatch[generation="
          + generation
          + ", start="
          + start
          + ", end="
          + end
          + ", effects="
          + effects.size()
          + "]";
    }
  }

  /**
   * A consumer as its partition holds it.
   *
   * @param startAfter where it started (the position before its first entry)
   * @param checkpoint the last position it has committed
   * @param released whether it was released (it then pins nothing and its tokens are refused)
   */
  public record ConsumerView(
      String name,
      long generation,
      List<String> collections,
      List<String> kinds,
      long startAfter,
      long checkpoint,
      boolean released)
      implements CborSerializable {
    public ConsumerView {
      collections = List.copyOf(collections);
      kinds = List.copyOf(kinds);
    }
  }

  /**
   * The receipt of a committed batch.
   *
   * @param effectsDigest SHA-256 of the batch's canonical effects: a retry with other effects
   *     conflicts
   * @param firstSequence outbox sequence of the first effect's entry (the next sequence without
   *     effects)
   * @param revisions each effect's resulting revision
   */
  public record BatchReceipt(
      long start,
      long end,
      String effectsDigest,
      String commandId,
      long firstSequence,
      List<Long> revisions,
      long committedAtMillis)
      implements CborSerializable {
    public BatchReceipt {
      revisions = List.copyOf(revisions);
    }
  }

  /** Answers to consumer commands. */
  public sealed interface ConsumerReply extends CborSerializable
      permits ConsumerConfigured, ConsumerReleased, ConsumerSpan, BatchCommitted, ConsumerRefused {}

  /**
   * @param created false when the identity existed already with the same definition
   */
  public record ConsumerConfigured(ConsumerView consumer, boolean created)
      implements ConsumerReply {}

  /**
   * @param alreadyReleased the generation had been released before
   */
  public record ConsumerReleased(ConsumerView consumer, boolean alreadyReleased)
      implements ConsumerReply {}

  /**
   * Where a consumer's next batch lies.
   *
   * @param incarnation the partition's incarnation (bound into batch tokens)
   * @param outboxFirst the first retained position
   * @param tail the outbox's last position ({@code outboxNext - 1})
   * @param journalSequences the journal events holding the entries after the checkpoint, in order
   */
  public record ConsumerSpan(
      String incarnation,
      ConsumerView consumer,
      long outboxFirst,
      long tail,
      List<Long> journalSequences)
      implements ConsumerReply {
    public ConsumerSpan {
      journalSequences = List.copyOf(journalSequences);
    }
  }

  /**
   * A committed batch.
   *
   * @param alreadyProcessed this batch had been committed before with the same effects: nothing was
   *     written and {@code receipt} is the original one
   * @param checkpoint the consumer's checkpoint now
   */
  public record BatchCommitted(BatchReceipt receipt, long checkpoint, boolean alreadyProcessed)
      implements ConsumerReply {}

  /** Why a consumer command changed nothing. */
  public enum ConsumerRefusal {
    /** No such consumer generation in this partition. */
    NOT_FOUND,
    /** The consumer generation was released: its identity is spent. */
    RELEASED,
    /**
     * The batch token is fenced: its generation was released or the partition has another
     * incarnation.
     */
    TOKEN_INVALIDATED,
    /** The consumer exists with another definition; a new filter or start needs a new identity. */
    IMMUTABLE,
    /** The partition has its maximum of active consumers. */
    TOO_MANY,
    /** The requested start was purged already. */
    HISTORY_UNAVAILABLE,
    /** The checkpoint moved since the batch was read: read again. */
    STALE,
    /** The batch was committed before with other effects. */
    CONFLICT,
    /** An effect's expected revision does not match ({@code index}, {@code actualRevision}). */
    REVISION_CONFLICT,
    /** The outbox and the progress reserve are full: purge, then retry. */
    QUOTA_EXCEEDED,
    /** The storage keeps fewer copies of a commit than required ({@link StorageGate}). */
    STORAGE_COPIES,
    /** The partition's journal lacks frames it acknowledged (ADR 0036): an operator must act. */
    STORAGE_BEHIND,
    /** A malformed command (the reason says what, naming no value). */
    INVALID
  }

  /**
   * A refused consumer command; nothing changed.
   *
   * @param checkpoint the consumer's checkpoint when known, else -1
   * @param index the effect at fault for {@link ConsumerRefusal#REVISION_CONFLICT}, else -1
   * @param actualRevision the document's revision for {@link ConsumerRefusal#REVISION_CONFLICT}
   */
  public record ConsumerRefused(
      ConsumerRefusal refusal, String reason, long checkpoint, int index, long actualRevision)
      implements ConsumerReply {
    public ConsumerRefused(ConsumerRefusal refusal, String reason) {
      this(refusal, reason, -1, -1, 0);
    }
  }

  // ---- Row visibility and change reads ----

  /**
   * Installs {@code collection}'s row-visibility rule: the top-level field holding each document's
   * ACL or owner, or none ({@code field} null). Versions only move forward: a version at or below
   * the installed one changes nothing. A newer one advances the collection's row-visibility epoch,
   * fencing every change cursor read under the old rule.
   */
  public record SetRowRule(
      String collection, String field, long version, ActorRef<RowRuleReply> replyTo)
      implements Write {
    public SetRowRule {
      Objects.requireNonNull(collection, "collection");
    }
  }

  /**
   * @param changed whether this request installed the rule (false: that or a newer version was
   *     there)
   */
  public record RowRuleReply(long version, long rowEpoch, boolean changed)
      implements CborSerializable {}

  /**
   * Replies where the outbox entries after {@code after} lie (at most {@code maxEntries} of them),
   * with the partition's incarnation and {@code collection}'s row-visibility epoch and rule
   * version.
   */
  public record ReadChanges(
      String collection, long after, long maxEntries, ActorRef<ChangesSpan> replyTo)
      implements Command {}

  /**
   * @param incarnation null while the partition has written nothing
   * @param tail the last outbox position (outboxFirst - 1 when empty)
   * @param rowEpoch how often the collection's row visibility changed in this partition
   * @param ruleVersion the installed row rule's version (0: none)
   * @param journalSequences the journal events holding the positions asked for; empty when they
   *     were purged ({@code after + 1 < outboxFirst})
   */
  public record ChangesSpan(
      String incarnation,
      long outboxFirst,
      long tail,
      long rowEpoch,
      long ruleVersion,
      List<Long> journalSequences)
      implements CborSerializable {}

  /** Replies with the current ACLs of documents of {@code collection} (tombstones keep theirs). */
  public record GetAcls(String collection, List<String> ids, ActorRef<Acls> replyTo)
      implements Command {
    @Override
    public String toString() {
      return "GetAcls[" + collection + ", ids=" + ids.size() + "]";
    }
  }

  /**
   * @param acls id -> the ACL field's value as JSON ({@code "null"} when absent or unknown); ids
   *     the partition does not hold are left out
   */
  public record Acls(long rowEpoch, long ruleVersion, Map<String, String> acls)
      implements CborSerializable {
    @Override
    public String toString() {
      return "Acls[rowEpoch=" + rowEpoch + ", entries=" + acls.size() + "]";
    }
  }

  /**
   * Replies, in one step, with every live document of {@code collection} that {@code reader} may
   * see and the outbox tail at that moment: a baseline and the position its changes start after.
   * More than {@code maxBytes} of those documents (counted like the state's size: with ids and
   * overhead) answers {@code tooLarge} and no documents; documents the reader may not see count for
   * nothing, so neither the answer nor the refusal depends on them.
   *
   * @param reader whose documents: null for every document (an administrator, or a collection
   *     without a row rule)
   */
  public record ScanCollection(
      String collection, long maxBytes, ScanReader reader, ActorRef<CollectionScan> replyTo)
      implements Command {
    /** A scan of every document. */
    public ScanCollection(String collection, long maxBytes, ActorRef<CollectionScan> replyTo) {
      this(collection, maxBytes, null, replyTo);
    }

    /** No principal id or groups. */
    @Override
    public String toString() {
      return "ScanCollection[" + collection + ", maxBytes=" + maxBytes + "]";
    }
  }

  /**
   * The reader of a {@link ScanCollection}, for the row rule installed in the partition: under an
   * {@code owner} rule a document is its when the field is its principal id; under an {@code acl}
   * rule when the field is an array listing its id or {@code "group:<name>"} of one of its groups.
   * A field that is missing or of another shape admits nobody (the node's projector, {@code
   * io.weir.node.auth.Access}, applies the same rule to every row it returns).
   *
   * @param principal the reader's principal id
   * @param groups the reader's groups
   * @param owner whether the rule is {@code owner} (otherwise {@code acl})
   */
  public record ScanReader(String principal, Set<String> groups, boolean owner)
      implements CborSerializable {
    public ScanReader {
      Objects.requireNonNull(principal, "principal");
      groups = groups == null ? Set.of() : Set.copyOf(groups);
    }

    /** Whether a document whose row-visibility field is {@code aclJson} (compact JSON) is its. */
    public boolean sees(String aclJson) {
      if (aclJson == null) {
        return false;
      }
      JsonNode acl;
      try {
        acl = JSON.readTree(aclJson);
      } catch (IOException e) {
        return false;
      }
      if (acl == null) {
        return false;
      }
      if (owner) {
        return acl.isTextual() && acl.textValue().equals(principal);
      }
      if (!acl.isArray()) {
        return false;
      }
      for (JsonNode entry : acl) {
        if (entry.isTextual()) {
          String e = entry.textValue();
          if (e.equals(principal)
              || (e.startsWith("group:") && groups.contains(e.substring("group:".length())))) {
            return true;
          }
        }
      }
      return false;
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    /** No principal id or groups. */
    @Override
    public String toString() {
      return "ScanReader[owner=" + owner + ", groups=" + groups.size() + "]";
    }
  }

  public record CollectionScan(
      String incarnation,
      long outboxFirst,
      long tail,
      long rowEpoch,
      long ruleVersion,
      List<Document> documents,
      boolean tooLarge)
      implements CborSerializable {
    @Override
    public String toString() {
      return "CollectionScan[documents="
          + documents.size()
          + ", tail="
          + tail
          + ", tooLarge="
          + tooLarge
          + "]";
    }
  }
}
