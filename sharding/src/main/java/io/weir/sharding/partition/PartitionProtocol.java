package io.weir.sharding.partition;

import com.fasterxml.jackson.annotation.JsonSubTypes;
import com.fasterxml.jackson.annotation.JsonTypeInfo;
import io.weir.protocol.CborSerializable;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * Messages of a partition entity ({@link Partition}). Every accepted {@link ApplyFrame} becomes one
 * atomic frame in the partition's journal: its document changes, outbox entries, receipt and source
 * watermark are persisted together or not at all.
 */
public final class PartitionProtocol {
  private PartitionProtocol() {}

  public sealed interface Command extends CborSerializable {}

  /** One change to one document. */
  @JsonTypeInfo(use = JsonTypeInfo.Id.NAME, property = "kind")
  @JsonSubTypes({@JsonSubTypes.Type(value = Upsert.class, name = "upsert"), @JsonSubTypes.Type(value = Delete.class, name = "delete")})
  public sealed interface Mutation extends CborSerializable {
    String collection();

    String id();

    /** The revision the document must have for the change to apply; empty: any (or none). */
    Optional<Long> expectedRevision();
  }

  /**
   * Creates or replaces a document.
   *
   * @param body the document as JSON text; never logged
   */
  public record Upsert(String collection, String id, String body, Optional<Long> expectedRevision) implements Mutation {
    public Upsert {
      Objects.requireNonNull(collection, "collection");
      Objects.requireNonNull(id, "id");
      Objects.requireNonNull(body, "body");
      Objects.requireNonNull(expectedRevision, "expectedRevision");
    }

    @Override
    public String toString() {
      return "Upsert[" + collection + ", bodyLength=" + body.length() + "]";
    }
  }

  /** Deletes a document, leaving a tombstone (a deleted revision). */
  public record Delete(String collection, String id, Optional<Long> expectedRevision) implements Mutation {
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

  /**
   * Where a frame comes from when a CDC pipeline feeds it: the slot and the commit LSN (as its
   * 64-bit value) of the source transaction. The partition skips a frame at or below its watermark
   * for that slot.
   */
  public record SourcePosition(String slot, long commitLsn) implements CborSerializable {}

  /**
   * Applies {@code mutations} as one frame.
   *
   * @param commandId idempotency key: the same id again returns the first receipt and changes nothing
   * @param source present for CDC frames
   */
  public record ApplyFrame(
      String commandId, List<Mutation> mutations, Optional<SourcePosition> source, ActorRef<FrameReply> replyTo)
      implements Command {
    public ApplyFrame {
      mutations = List.copyOf(mutations);
    }

    @Override
    public String toString() {
      return "ApplyFrame[mutations=" + mutations.size() + ", source=" + source + "]";
    }
  }

  /** Replies with a document's current revision and body, if it exists (tombstones included). */
  public record GetDocument(String collection, String id, ActorRef<DocumentReply> replyTo) implements Command {}

  /** Replies with the partition's counters and watermarks. */
  public record GetStatus(ActorRef<PartitionStatus> replyTo) implements Command {}

  /** The answer to {@link ApplyFrame}. */
  @JsonTypeInfo(use = JsonTypeInfo.Id.NAME, property = "kind")
  @JsonSubTypes({
    @JsonSubTypes.Type(value = Applied.class, name = "applied"),
    @JsonSubTypes.Type(value = AlreadyApplied.class, name = "already-applied"),
    @JsonSubTypes.Type(value = Conflict.class, name = "conflict"),
    @JsonSubTypes.Type(value = Rejected.class, name = "rejected")
  })
  public sealed interface FrameReply extends CborSerializable {}

  /**
   * The frame was applied (or had been, for a retried command id: then {@code replayed}).
   *
   * @param firstSequence outbox sequence of the frame's first entry
   * @param revisions each mutation's resulting revision, in order
   */
  public record Applied(String commandId, long firstSequence, List<Long> revisions, boolean replayed)
      implements FrameReply {}

  /** A CDC frame at or below the partition's watermark for its slot: already applied, nothing done. */
  public record AlreadyApplied(SourcePosition source, long watermark) implements FrameReply {}

  /**
   * A mutation's expected revision did not match; nothing of the frame was applied.
   *
   * @param index the mutation at fault
   * @param actualRevision the document's revision (0: it does not exist)
   */
  public record Conflict(int index, long actualRevision) implements FrameReply {}

  /** A malformed frame (empty, or a mutation without a collection or id); nothing was applied. */
  public record Rejected(String reason) implements FrameReply {}

  /**
   * A document as the partition holds it.
   *
   * @param body null for a tombstone; never logged
   */
  public record Document(String collection, String id, long revision, String body, boolean deleted)
      implements CborSerializable {
    @Override
    public String toString() {
      return "Document[" + collection + ", revision=" + revision + ", deleted=" + deleted + "]";
    }
  }

  public record DocumentReply(Optional<Document> document) implements CborSerializable {}

  /**
   * @param outboxFirst first retained outbox sequence (1 when nothing was purged)
   * @param outboxNext the sequence the next entry will get
   */
  public record PartitionStatus(
      int partition, long documents, long outboxFirst, long outboxNext, java.util.Map<String, Long> watermarks)
      implements CborSerializable {}
}
