package io.weir.sharding.partition;

import io.weir.protocol.Utf8;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerView;
import java.util.ArrayList;
import java.util.List;

/**
 * Cuts a projection batch out of the entries after a consumer's checkpoint: entries are examined in
 * order; those the consumer's filter selects are returned while their payload (before and after
 * images, UTF-8 bytes) fits the byte budget; filtered entries are skipped but still move the
 * batch's through-position. The batch ends before the first selected entry that does not fit; if
 * that entry comes first, the answer is {@link BudgetExceeded}.
 */
public final class BatchSelection {
  private BatchSelection() {}

  public sealed interface Result permits Batch, BudgetExceeded {}

  /**
   * @param through the last position examined: the checkpoint a commit moves to
   * @param hasMore entries after {@code through} exist already
   */
  public record Batch(
      List<Partition.OutboxEntry> entries, long through, boolean hasMore, long bytes)
      implements Result {
    public Batch {
      entries = List.copyOf(entries);
    }
  }

  /** The first entry to deliver is larger than the byte budget. */
  public record BudgetExceeded(long position, long entryBytes, long maxBytes) implements Result {}

  /**
   * @param examined the entries after {@code checkpoint}, contiguous and in order (at most the
   *     examined-entries budget)
   * @param tail the outbox's last position
   */
  public static Result select(
      ConsumerView consumer,
      long checkpoint,
      List<Partition.OutboxEntry> examined,
      long tail,
      long maxBytes) {
    List<Partition.OutboxEntry> selected = new ArrayList<>();
    long through = checkpoint;
    long bytes = 0;
    for (Partition.OutboxEntry e : examined) {
      if (selects(consumer, e)) {
        long size = payloadBytes(e);
        if (bytes + size > maxBytes) {
          if (selected.isEmpty() && through == checkpoint) {
            return new BudgetExceeded(e.sequence(), size, maxBytes);
          }
          break;
        }
        selected.add(e);
        bytes += size;
      }
      through = e.sequence();
    }
    return new Batch(selected, through, through < tail, bytes);
  }

  public static boolean selects(ConsumerView consumer, Partition.OutboxEntry e) {
    return (consumer.collections().isEmpty() || consumer.collections().contains(e.collection()))
        && (consumer.kinds().isEmpty() || consumer.kinds().contains(e.kind()));
  }

  /** Bytes of an entry's images as UTF-8. */
  public static long payloadBytes(Partition.OutboxEntry e) {
    return utf8(e.before()) + utf8(e.after());
  }

  private static long utf8(String s) {
    return Utf8.length(s);
  }
}
