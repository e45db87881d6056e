package io.weir.sharding.partition;

import com.fasterxml.jackson.annotation.JsonSubTypes;
import com.fasterxml.jackson.annotation.JsonTypeInfo;
import io.weir.persistence.StorageSystem;
import io.weir.protocol.CborSerializable;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerView;
import io.weir.sharding.partition.PartitionProtocol.Command;
import java.util.List;
import java.util.Map;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * A partition's status (counters, watermarks, storage copies, tables being loaded) and the
 * operator's acceptance of lost storage.
 */
public final class StatusProtocol {
  private StatusProtocol() {}

  /** Replies with the partition's counters and watermarks. */
  public record GetStatus(ActorRef<PartitionStatus> replyTo) implements Command {}

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
   * @param lagBytes the unapplied events' outbox images in UTF-8 bytes (writes wait past 64 MiB; 0
   *     from a node that predates it)
   */
  public record TableStatus(
      String state,
      long appliedThrough,
      long lagEvents,
      int failures,
      String lastError,
      long moved,
      long toMove,
      long lagBytes)
      implements CborSerializable {
    public TableStatus(
        String state, long appliedThrough, long lagEvents, int failures, String lastError) {
      this(state, appliedThrough, lagEvents, failures, lastError, 0, 0, 0);
    }
  }
}
