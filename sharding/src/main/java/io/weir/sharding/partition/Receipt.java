package io.weir.sharding.partition;

import io.weir.sharding.partition.Partition.FrameApplied;
import io.weir.sharding.partition.Partition.OutboxEntry;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import java.util.ArrayList;
import java.util.List;

/**
 * What a keyed API frame was answered (ADR 0034): its command id (the caller's key and the request
 * it came with), its first outbox sequence, each mutation's revision, and when it was written. A
 * retry of the same request within the receipt's time is answered with it; the partition keeps the
 * latest in its heap and every one in the receipts table, written with the documents.
 *
 * @param atMillis the frame's evaluation time
 */
public record Receipt(String commandId, long firstSequence, List<Long> revisions, long atMillis) {
  public Receipt {
    revisions = List.copyOf(revisions);
  }

  /** The answer to a retry. */
  Applied replay() {
    return new Applied(commandId, firstSequence, revisions, true);
  }

  /** A receipt under its key (see {@link PartitionProtocol#receiptKey}). */
  public record Keyed(String key, Receipt receipt) {}

  /**
   * The receipts a journal event keeps, in order: one per frame whose command id keeps one, timed
   * by its first entry ({@code otherwise} when it has none).
   *
   * @param nextSequence the outbox's next sequence before the event
   */
  static List<Keyed> of(Partition.Written w, long nextSequence, long otherwise) {
    List<Keyed> out = new ArrayList<>();
    long next = nextSequence;
    for (FrameApplied f : w.frames()) {
      List<Long> revisions = new ArrayList<>(f.entries().size());
      for (OutboxEntry x : f.entries()) {
        revisions.add(x.revision());
      }
      long first = f.entries().isEmpty() ? next : f.entries().get(0).sequence();
      if (!f.entries().isEmpty()) {
        next = f.entries().get(f.entries().size() - 1).sequence() + 1;
      }
      if (f.commandId() != null && PartitionProtocol.keepsReceipt(f.commandId())) {
        long at = f.entries().isEmpty() ? otherwise : f.entries().get(0).evaluatedAtMillis();
        out.add(
            new Keyed(
                PartitionProtocol.receiptKey(f.commandId()),
                new Receipt(f.commandId(), first, revisions, at)));
      }
    }
    return out;
  }

  /** Counts only: command ids are derived from callers' keys. */
  @Override
  public String toString() {
    return "Receipt[firstSequence=" + firstSequence + ", at=" + atMillis + "]";
  }
}
