package io.weir.sharding.partition;

import io.weir.sharding.partition.ConsumerProtocol.CommitBatch;
import io.weir.sharding.partition.ConsumerProtocol.ConfigureConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefusal;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefused;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.ConsumerProtocol.ReleaseConsumer;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.QuotaExceeded;
import io.weir.sharding.partition.PartitionProtocol.Write;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * How a partition answers its writes: each kind of {@link Write} with its own reply type, and the
 * refusals that answer a whole batch at once (the storage below its required copies, or behind what
 * the partition acknowledged, or its documents table failing at its lag bound). Row-rule changes
 * have no refusal: they are left to their sender's timeout and sent again.
 */
final class WriteReplies {
  private WriteReplies() {}

  /** Answers {@code w} with {@code reply}, the reply type its sender waits for. */
  static void answer(Write w, Object reply) {
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

  /** How many of {@code writes} {@link #refuse} answers. */
  static int refusable(List<Write> writes) {
    return (int) writes.stream().filter(WriteReplies::answerable).count();
  }

  /** Whether {@link #refuse} answers {@code w}: every write but a row-rule change. */
  static boolean answerable(Write w) {
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
  static List<Write> refuse(List<Write> writes, FrameReply frame, ConsumerRefused consumer) {
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
  static int quotaRefusals(List<Object> replies) {
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

  /**
   * Refuses {@code writes} because the storage keeps fewer copies than required ({@code below});
   * returns the row-rule changes, which go on.
   */
  static List<Write> refuseBelowCopies(List<Write> writes, StorageGate.Refusal below) {
    return refuse(
        writes,
        new PartitionProtocol.StorageRefused(below.copies(), below.required()),
        new ConsumerRefused(
            ConsumerRefusal.STORAGE_COPIES,
            "the storage keeps " + below.describe() + "; retry later"));
  }

  /**
   * Refuses {@code writes} because the journal ({@code events} long) lacks what the partition
   * acknowledged (through {@code acknowledged}).
   */
  static void refuseBehind(List<Write> writes, long events, long acknowledged) {
    refuse(
        writes,
        new PartitionProtocol.StorageBehind(events, acknowledged),
        new ConsumerRefused(
            ConsumerRefusal.STORAGE_BEHIND,
            "the partition's journal lacks writes it acknowledged; an operator must accept the"
                + " loss"));
  }

  /**
   * Refuses {@code writes} because the documents table is {@code lagEvents} events behind, as far
   * as it may be, and applying to it has failed {@code failures} times in a row; returns the
   * row-rule changes, which no refusal answers.
   */
  static List<Write> refuseTableFailed(List<Write> writes, long lagEvents, int failures) {
    return refuse(
        writes,
        new PartitionProtocol.TableApplyFailed(lagEvents, failures),
        new ConsumerRefused(
            ConsumerRefusal.TABLE_APPLY_FAILED,
            "the partition's documents table is as far behind as it may be and applying to it"
                + " keeps failing; retry later"));
  }
}
