package io.weir.sharding.partition;

import com.fasterxml.jackson.annotation.JsonSubTypes;
import com.fasterxml.jackson.annotation.JsonTypeInfo;
import io.weir.protocol.CborSerializable;
import io.weir.sharding.partition.ConsumerProtocol.CommitBatch;
import io.weir.sharding.partition.ConsumerProtocol.ConfigureConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ReadConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ReleaseConsumer;
import io.weir.sharding.partition.ReadProtocol.GetAcls;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.ReadProtocol.GetDocuments;
import io.weir.sharding.partition.ReadProtocol.ReadChanges;
import io.weir.sharding.partition.ReadProtocol.ScanCollection;
import io.weir.sharding.partition.StatusProtocol.AcceptStorageLoss;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
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
          Partition.TableFenced,
          Partition.TableFailing,
          Partition.BodiesFetched,
          Partition.ReceiptsLoaded,
          Partition.AclsRead,
          Partition.LoadReceipts,
          Partition.Continue,
          Partition.StateRead,
          Partition.Refuted,
          Partition.SnapshotSaved,
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
    @JsonSubTypes.Type(value = TableApplyFailed.class, name = "table-apply-failed"),
    @JsonSubTypes.Type(value = Loaded.class, name = "loaded"),
    @JsonSubTypes.Type(value = KeyReused.class, name = "key-reused")
  })
  // The permits clause keeps the order the serialization fixtures' samples were made in: a reply
  // added later goes last.
  public sealed interface FrameReply extends CborSerializable
      permits Applied,
          AlreadyApplied,
          Gap,
          Conflict,
          Rejected,
          QuotaExceeded,
          KeyReused,
          Loaded,
          StorageRefused,
          StorageBehind,
          TableApplyFailed {}

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
   * The partition's documents table is as far behind its journal as it may be ({@code lagEvents}
   * events unapplied) and applying to it keeps failing: nothing was applied. The partition writes
   * again once an apply succeeds (it is retried with backoff, never skipped); retry later.
   *
   * @param lagEvents persisted events not yet applied to the table
   * @param failures failed applies in a row
   */
  public record TableApplyFailed(long lagEvents, int failures) implements FrameReply {}

  // ---- Row visibility ----

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
}
