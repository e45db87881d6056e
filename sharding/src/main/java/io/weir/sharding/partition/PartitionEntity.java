package io.weir.sharding.partition;

import io.weir.persistence.SafeErrors;
import io.weir.protocol.CborSerializable;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.Write;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.Terminated;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.StashBuffer;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;

/**
 * The sharded partition: group commit in front of the event-sourced {@link Partition} (its child).
 *
 * <p>Typed persistence persists each command on its own and stashes the rest while a write is in
 * flight, so one fsync per delivery would bound throughput. Here, writes that arrive while the
 * child is writing wait in a queue; when the child has answered, everything queued (up to {@link
 * PartitionSettings#maxBatchFrames()} frames and {@link PartitionSettings#maxBatchMutations()}
 * mutations) goes to it as one {@link Partition.WriteBatch}: one journal write. Reads go straight
 * to the child, which answers them in order with the writes it has processed.
 *
 * <p>Before the child starts, a snapshot written before ADR 0032 is upgraded ({@link
 * LegacySnapshots}); meanwhile every message waits here, and a status request is answered with the
 * upgrade's progress.
 *
 * <p>If the child stops (a journal failure), this entity stops too; queued writes get no answer and
 * their senders retry. The partition keeper (or the next message) starts it again, and recovery
 * decides what was written.
 */
public final class PartitionEntity extends AbstractBehavior<Command> {
  public static final EntityTypeKey<Command> TYPE_KEY =
      EntityTypeKey.create(Command.class, "weir-partition");

  /** Messages that wait while an old snapshot is upgraded, at most. */
  static final int UPGRADE_STASH = 10_000;

  /** The child has answered a batch. */
  public enum BatchWritten implements Command, CborSerializable {
    INSTANCE
  }

  /** The old-snapshot upgrade is over ({@code failure}: why it failed, value-free; else null). */
  record Upgraded(String failure) implements Command {}

  private final ActorRef<Command> store;
  private final PartitionSettings settings;
  private final ArrayDeque<Write> queue = new ArrayDeque<>();
  private boolean writing;

  /** Partition {@code partition} with these collaborators. */
  public static Behavior<Command> create(int partition, PartitionWiring wiring) {
    return Behaviors.setup(
        ctx -> {
          if (!wiring.gate().settingsChecked()) {
            // Not before the node's settings passed the cluster's record (StorageGate): stop; the
            // next message starts the partition again, and the keeper sends one every few seconds.
            ctx.getLog()
                .debug(
                    "partition {}: not started, this node's settings are not checked against the"
                        + " cluster's yet",
                    partition);
            return Behaviors.stopped();
          }
          return Behaviors.withStash(
              UPGRADE_STASH,
              stash ->
                  Behaviors.withTimers(timers -> upgrading(ctx, stash, timers, partition, wiring)));
        });
  }

  /** A partition on the in-memory documents table (tests, tools). */
  public static Behavior<Command> create(int partition, PartitionSettings settings) {
    return create(partition, PartitionWiring.inMemory(settings));
  }

  /**
   * Upgrades an old snapshot, if the partition has one, then becomes the entity: every message but
   * a status request waits until then.
   */
  private static Behavior<Command> upgrading(
      ActorContext<Command> ctx,
      StashBuffer<Command> stash,
      TimerScheduler<Command> timers,
      int partition,
      PartitionWiring wiring) {
    AtomicLongArray progress = new AtomicLongArray(new long[] {0, -1});
    ctx.pipeToSelf(
        wiring
            .legacySnapshots()
            .upgrade(
                partition,
                (moved, total) -> {
                  progress.set(0, moved);
                  progress.set(1, total);
                }),
        (upgraded, error) -> new Upgraded(error == null ? null : SafeErrors.describe(error)));
    return Behaviors.receive(Command.class)
        .onMessage(
            Upgraded.class,
            u -> {
              if (u.failure() != null) {
                ctx.getLog()
                    .error(
                        "partition {}: its old snapshot could not be upgraded ({}); it starts"
                            + " again with its next message",
                        partition,
                        u.failure());
                return Behaviors.stopped();
              }
              return stash.unstashAll(
                  new PartitionEntity(ctx, timers, partition, wiring.settings(), wiring));
            })
        .onMessage(
            GetStatus.class,
            s -> {
              s.replyTo()
                  .tell(
                      new StatusProtocol.PartitionStatus(
                          partition,
                          progress.get(0),
                          0,
                          0,
                          0,
                          0,
                          Map.of(),
                          List.of(),
                          new StatusProtocol.TableStatus(
                              "upgrading", 0, 0, 0, null, progress.get(0), progress.get(1), 0)));
              return Behaviors.same();
            })
        .onAnyMessage(m -> stashOrDrop(ctx, stash, partition, "its snapshot upgrade", m))
        .build();
  }

  /**
   * Keeps {@code m} for later while the partition waits for {@code waitingFor}; when the stash is
   * full, drops it with a warning (its sender times out and retries).
   */
  static Behavior<Command> stashOrDrop(
      ActorContext<Command> ctx,
      StashBuffer<Command> stash,
      int partition,
      String waitingFor,
      Command m) {
    if (stash.isFull()) {
      ctx.getLog()
          .warn(
              "partition {}: {} messages wait for {}; dropping a {}",
              partition,
              stash.capacity(),
              waitingFor,
              m.getClass().getSimpleName());
    } else {
      stash.stash(m);
    }
    return Behaviors.same();
  }

  /**
   * A batch not answered in this long is presumed lost (the child's stash can drop commands when it
   * overflows): the entity stops, and the next message or the keeper starts it again from the
   * journal. Senders of the queued writes time out and retry.
   */
  static final Duration WRITE_TIMEOUT = Duration.ofSeconds(60);

  enum WriteTimedOut implements Command, CborSerializable {
    INSTANCE
  }

  private final TimerScheduler<Command> timers;
  private final int partition;
  private final PartitionObserver observer;
  private final StorageGate gate;

  /** The storage's generation when the child started recovering (ADR 0036). */
  private final long generation;

  private PartitionEntity(
      ActorContext<Command> ctx,
      TimerScheduler<Command> timers,
      int partition,
      PartitionSettings settings,
      PartitionWiring wiring) {
    super(ctx);
    this.timers = timers;
    this.settings = settings;
    this.partition = partition;
    this.observer = wiring.observer();
    this.gate = wiring.gate();
    this.generation = gate.generation();
    this.store = ctx.spawn(Partition.create(partition, wiring), "store");
    ctx.watch(store);
  }

  @Override
  public Receive<Command> createReceive() {
    return newReceiveBuilder()
        .onMessage(ApplyFrame.class, this::enqueue)
        .onMessage(LoadRows.class, this::enqueue)
        .onMessage(PartitionProtocol.ApplyFrames.class, this::enqueue)
        .onMessage(ConsumerProtocol.ConfigureConsumer.class, this::enqueue)
        .onMessage(ConsumerProtocol.ReleaseConsumer.class, this::enqueue)
        .onMessage(ConsumerProtocol.CommitBatch.class, this::enqueue)
        .onMessage(ConsumerProtocol.ReadConsumer.class, this::forward)
        .onMessage(PartitionProtocol.SetRowRule.class, this::enqueue)
        .onMessage(ReadProtocol.ReadChanges.class, this::forward)
        .onMessage(StatusProtocol.AcceptStorageLoss.class, this::forward)
        .onMessage(ReadProtocol.GetAcls.class, this::forward)
        .onMessage(ReadProtocol.ScanCollection.class, this::forward)
        .onMessageEquals(BatchWritten.INSTANCE, this::onWritten)
        .onMessageEquals(
            WriteTimedOut.INSTANCE,
            () -> {
              getContext()
                  .getLog()
                  .warn(
                      "a partition write was not answered within {}; restarting the partition",
                      WRITE_TIMEOUT);
              return Behaviors.stopped();
            })
        .onMessage(ReadProtocol.GetDocument.class, this::forward)
        .onMessage(GetStatus.class, this::forward)
        .onMessage(ReadProtocol.GetDocuments.class, this::forward)
        .onMessage(PartitionProtocol.PurgeOutbox.class, this::forward)
        .onMessage(PartitionProtocol.PurgeConsumed.class, this::forward)
        .onSignal(Terminated.class, t -> Behaviors.stopped())
        // Its metrics leave this node with it: a partition that moved is reported by its new node
        // only.
        .onSignal(
            PostStop.class,
            s -> {
              observer.stopped(partition);
              return this;
            })
        .build();
  }

  private Behavior<Command> forward(Command c) {
    if (storageChanged()) {
      return Behaviors.stopped();
    }
    store.tell(c);
    return this;
  }

  /**
   * Whether the storage was lost and reached again, or changed its identity, since the child
   * recovered: then the child's state may be ahead of what the storage holds, and the entity stops
   * so that the next message (or the keeper) recovers it from the storage, where the acknowledged
   * mark is checked (ADR 0036). The message at hand is not answered; its sender retries.
   */
  private boolean storageChanged() {
    if (gate.generation() == generation) {
      return false;
    }
    getContext()
        .getLog()
        .info(
            "partition {}: its storage was reconnected or changed since it recovered; recovering"
                + " again before it serves",
            partition);
    return true;
  }

  private Behavior<Command> enqueue(Write w) {
    if (storageChanged()) {
      return Behaviors.stopped();
    }
    queue.add(w);
    if (!writing) {
      flush();
    }
    return this;
  }

  private Behavior<Command> onWritten() {
    writing = false;
    timers.cancel(WriteTimedOut.INSTANCE);
    if (!queue.isEmpty()) {
      flush();
    }
    return this;
  }

  private void flush() {
    List<Write> batch = new ArrayList<>();
    int mutations = 0;
    while (!queue.isEmpty() && batch.size() < settings.maxBatchFrames()) {
      int size = size(queue.peek());
      if (!batch.isEmpty() && mutations + size > settings.maxBatchMutations()) {
        break;
      }
      batch.add(queue.poll());
      mutations += size;
    }
    writing = true;
    timers.startSingleTimer(WriteTimedOut.INSTANCE, WRITE_TIMEOUT);
    store.tell(new Partition.WriteBatch(batch, getContext().getSelf().narrow()));
  }

  private static int size(Write w) {
    if (w instanceof ApplyFrame f) {
      return f.mutations().size();
    }
    if (w instanceof PartitionProtocol.ApplyFrames fs) {
      int n = 0;
      for (ApplyFrame f : fs.frames()) {
        n += f.mutations().size();
      }
      return n;
    }
    if (w instanceof LoadRows l) {
      return l.rows().size();
    }
    if (w instanceof ConsumerProtocol.CommitBatch c) {
      return Math.max(1, c.effects().size());
    }
    return 1;
  }
}
