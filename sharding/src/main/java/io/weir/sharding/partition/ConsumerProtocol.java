package io.weir.sharding.partition;

import io.weir.protocol.CborSerializable;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.Write;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * Messages of a partition about its projection consumers: configuring and releasing a consumer,
 * reading its next batch and committing it with a signed receipt, and the answers. The consumer
 * commands that change state are {@link PartitionProtocol.Write}s, written with the partition's
 * group commit like any frame.
 */
public final class ConsumerProtocol {
  private ConsumerProtocol() {}

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
    /**
     * The partition's documents table is as far behind as it may be and applying to it keeps
     * failing ({@link PartitionProtocol.TableApplyFailed}): retry later.
     */
    TABLE_APPLY_FAILED,
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
}
