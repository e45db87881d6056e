package io.weir.sharding.storage;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.function.Supplier;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.cluster.ddata.DistributedData;
import org.apache.pekko.cluster.ddata.Replicator;
import org.apache.pekko.pattern.Patterns;

/**
 * {@link AcknowledgedMarks} in Pekko Distributed Data (ADR 0036, amended by ADR 0061). The
 * partitions' marks are kept in {@link MarkMap}s of {@value #BLOCK} consecutive partitions each
 * (partitions 0-63 in one map, 64-127 in the next, ...), each written to a majority of the
 * cluster's nodes and read from a majority. Keys start with {@value #KEY_PREFIX}; the node
 * configures them as durable ({@code pekko.cluster.distributed-data.durable.keys}), so every node
 * keeps its copies on disk and a whole-cluster restart keeps the marks.
 *
 * <p>Raises are group-committed: while an update of a map is in flight from this node, the raises
 * of that map's partitions wait and go together in the next update, and each raise completes when
 * an update holding it completes. A Distributed Data update costs a few hundred microseconds of CPU
 * across the nodes however small, so under load one update carries the marks of many partitions'
 * group commits; the fewer maps a node's partitions share, the more each update carries.
 *
 * <p>Releases before ADR 0061 kept the marks in 16 maps by partition mod 16 ({@link
 * #LEGACY_GROUPS}). A read takes the greater of a partition's mark there and in its block, so marks
 * raised before an upgrade still count; raises go to the blocks only.
 *
 * <p>Keys are scoped by the cluster's identity and restore epoch ({@code scope}): a restore from a
 * backup rewinds the journal on purpose and starts fresh marks, and a node whose disk held another
 * cluster's marks never reads them.
 */
public final class DistributedMarks implements AcknowledgedMarks {
  public static final String KEY_PREFIX = "weir-ack-";

  /** Partitions per map: the map travels whole in each update, so it stays small. */
  public static final int BLOCK = 64;

  /** Maps of the layout before ADR 0061 (partition mod 16), still read. */
  public static final int LEGACY_GROUPS = 16;

  private final ActorRef replicator;
  private final Supplier<String> scope;
  private final Duration timeout;

  /** The ask's own timeout: twice the replicator's (computed once: every flush asks). */
  private final Duration askTimeout;

  private final Map<Integer, Group> groups = new ConcurrentHashMap<>();

  /**
   * Where the replies' callbacks run: the actor system's dispatcher. A stage from {@code
   * Patterns.ask} runs even its non-async callbacks asynchronously, on the common fork-join pool,
   * which on a machine with two cores is a new thread per task (measured: about 250 µs of CPU per
   * mark).
   */
  private final Executor callbacks;

  /** One group's raises: those waiting for the next update, and whether one is in flight. */
  private static final class Group {
    Map<Integer, AckMark> pending = new HashMap<>();
    List<CompletableFuture<Void>> waiting = new ArrayList<>();
    boolean inFlight;
  }

  /**
   * @param scope the cluster id and restore epoch, or null while storage was never reached (then
   *     marks cannot be read or raised)
   * @param timeout how long a majority write or read may take before it fails
   */
  public DistributedMarks(ActorSystem<?> system, Supplier<String> scope, Duration timeout) {
    this.replicator = DistributedData.get(Adapter.toClassic(system)).replicator();
    this.scope = scope;
    this.timeout = timeout;
    this.askTimeout = timeout.multipliedBy(2);
    this.callbacks = system.executionContext();
  }

  /** The block of partitions whose map holds the partition's mark. */
  private static int block(int partition) {
    return Math.floorDiv(partition, BLOCK);
  }

  private String scope() {
    String s = scope.get();
    if (s == null) {
      throw new IllegalStateException("the cluster identity is not loaded yet");
    }
    return s;
  }

  /** The key of a block's map: {@code weir-ack-<scope>-b<block>}. */
  private MarkMap.MarkKey key(int block) {
    return new MarkMap.MarkKey(KEY_PREFIX + scope() + "-b" + block);
  }

  /** The key of the partition's map in the layout before ADR 0061. */
  private MarkMap.MarkKey legacyKey(int partition) {
    return new MarkMap.MarkKey(
        KEY_PREFIX + scope() + "-" + Math.floorMod(partition, LEGACY_GROUPS));
  }

  @Override
  public CompletionStage<AckMark> read(int partition) {
    MarkMap.MarkKey key;
    MarkMap.MarkKey legacy;
    try {
      key = key(block(partition));
      legacy = legacyKey(partition);
    } catch (IllegalStateException e) {
      return CompletableFuture.failedFuture(e);
    }
    return read(key, partition).thenCombine(read(legacy, partition), AckMark::max);
  }

  private CompletionStage<AckMark> read(MarkMap.MarkKey key, int partition) {
    return Patterns.ask(
            replicator, new Replicator.Get<>(key, new Replicator.ReadMajority(timeout)), askTimeout)
        .thenApplyAsync(
            reply -> {
              if (reply instanceof Replicator.GetSuccess<?> ok) {
                return ((MarkMap) ok.dataValue()).mark(partition);
              }
              if (reply instanceof Replicator.NotFound<?>) {
                return AckMark.NONE;
              }
              throw new IllegalStateException(
                  "the acknowledged mark could not be read from a majority of the nodes ("
                      + reply.getClass().getSimpleName()
                      + ")");
            },
            callbacks);
  }

  @Override
  public CompletionStage<Void> raise(int partition, AckMark mark) {
    int g = block(partition);
    Group group = groups.computeIfAbsent(g, b -> new Group());
    CompletableFuture<Void> done = new CompletableFuture<>();
    boolean send;
    synchronized (group) {
      group.pending.merge(partition, mark, AckMark::max);
      group.waiting.add(done);
      send = !group.inFlight;
      group.inFlight |= send;
    }
    if (send) {
      flush(g);
    }
    return done;
  }

  /** Sends one update with every raise of block {@code g} that waits, then the next, if any. */
  private void flush(int g) {
    Group group = groups.get(g);
    Map<Integer, AckMark> raises;
    List<CompletableFuture<Void>> waiting;
    synchronized (group) {
      if (group.pending.isEmpty()) {
        group.inFlight = false;
        return;
      }
      raises = group.pending;
      waiting = group.waiting;
      group.pending = new HashMap<>();
      group.waiting = new ArrayList<>();
    }
    CompletionStage<Object> update;
    try {
      update =
          Patterns.ask(
              replicator,
              new Replicator.Update<>(
                  key(g),
                  MarkMap.EMPTY,
                  new Replicator.WriteMajority(timeout),
                  Optional.empty(),
                  (MarkMap m) -> m.raise(raises)),
              askTimeout);
    } catch (IllegalStateException e) {
      update = CompletableFuture.failedFuture(e);
    }
    update.whenCompleteAsync(
        (reply, error) -> {
          Throwable failure = error;
          if (failure == null && !(reply instanceof Replicator.UpdateSuccess<?>)) {
            failure =
                new IllegalStateException(
                    "the acknowledged mark could not be written to a majority of the nodes ("
                        + reply.getClass().getSimpleName()
                        + ")");
          }
          for (CompletableFuture<Void> w : waiting) {
            if (failure == null) {
              w.complete(null);
            } else {
              w.completeExceptionally(failure);
            }
          }
          flush(g);
        },
        callbacks);
  }
}
