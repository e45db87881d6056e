package io.weir.sharding.partition;

import io.weir.sharding.partition.ConsumerProtocol.CommitBatch;
import io.weir.sharding.partition.ConsumerProtocol.ConfigureConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ReleaseConsumer;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.Write;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * A group commit being written (ADR 0033): usually one journal event, several when its writes do
 * not fit one row. Writes are answered in order as the events holding them are persisted. Actor
 * thread only.
 */
final class GroupCommit {
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

  GroupCommit(List<Write> writes, ActorRef<PartitionEntity.BatchWritten> done) {
    this.writes = writes;
    this.done = done;
  }

  /**
   * What one event of the run holds: the replies to the writes it completes, how to answer them,
   * and where the run stands after it ({@code nextWrite}, and the replies so far to a write of
   * several frames the event completes only in part).
   */
  record Planned(
      List<Object> outcomes, List<Runnable> answers, int nextWrite, List<FrameReply> framesAfter) {}

  /**
   * Plans the writes from {@link #next} on into {@code plan}, each seeing the accepted ones before
   * it, until one does not fit this event ({@link WritePlan.Stop}).
   */
  Planned plan(WritePlan plan) {
    ConsumerPlan consumers = new ConsumerPlan(plan);
    List<Runnable> answers = new ArrayList<>();
    List<Object> outcomes = new ArrayList<>();
    int next = this.next;
    List<FrameReply> frames = new ArrayList<>(this.frames);
    boolean stopped = false;
    while (next < writes.size() && !stopped) {
      Write w = writes.get(next);
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
        answers.add(() -> WriteReplies.answer(w, reply));
        next++;
      }
    }
    return new Planned(outcomes, answers, next, frames);
  }

  /**
   * The event holding {@code planned} is persisted (and its mark kept): answers its writes and
   * moves past them. Returns whether the run is over; its sender is then told.
   */
  boolean advance(Planned planned, WritePlan.Split split) {
    planned.answers().forEach(Runnable::run);
    next = planned.nextWrite();
    frames = planned.framesAfter();
    this.split = split;
    if (next < writes.size()) {
      return false;
    }
    if (done != null) {
      done.tell(PartitionEntity.BatchWritten.INSTANCE);
    }
    return true;
  }
}
