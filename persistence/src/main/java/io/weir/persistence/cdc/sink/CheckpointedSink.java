package io.weir.persistence.cdc.sink;

import io.weir.persistence.SafeErrors;
import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineContext;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.persistence.cdc.snapshot.SnapshotChunk;
import io.weir.protocol.Lsn;
import io.weir.protocol.cdc.CdcMessage;
import io.weir.protocol.cdc.SlotIncarnation;
import io.weir.protocol.cdc.Transaction;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Adapts a {@link DeliverySink} (no atomic checkpoint) to the pipeline with the library checkpoint
 * store: each transaction is delivered, then the checkpoint is written to PostgreSQL. The slot
 * confirms only what the store holds ({@link #durableThrough}).
 *
 * <p>Guarantee: at-least-once. A crash after a delivery and before its checkpoint write redelivers
 * that transaction — with {@code checkpointEvery = n}, at most the {@code n} transactions since the
 * last write. Transactions at or below the stored checkpoint are skipped. A checkpoint is written
 * after {@code n} delivered transactions or {@code maxDelay} after the first one not yet stored,
 * whichever comes first, so on a quiet stream the last transactions do not stay unstored (pinning
 * the slot and coming again after a restart); the pipeline learns of a write made on the timer from
 * {@link #durableNow}.
 *
 * <p>Store faults: transient ones (connection, timeouts) are retried {@code maxRetries} times
 * {@code retryBackoff} apart, then the pipeline halts ({@link HaltReason#CHECKPOINT_STORE_FAILED});
 * permanent ones (a missing table, a schema mismatch: SQLState classes 42, 22, 23) halt at once.
 * Batch delivery ({@code batch.max-transactions > 1}) is refused with this sink.
 */
public final class CheckpointedSink implements ChangeSink {
  private static final Logger log = LoggerFactory.getLogger(CheckpointedSink.class);

  private final DeliverySink delivery;
  private final CheckpointStore store;
  private final Executor blockingIo;
  private final int maxRetries;
  private final Duration retryBackoff;
  private final int checkpointEvery;
  private final Executor delayed;

  /** Serializes checkpoint writes: one at a time, each storing the latest delivered transaction. */
  private final Object storeLock = new Object();

  /** Store calls retried after a transient fault, since this sink was made. */
  private final AtomicLong storeRetries = new AtomicLong();

  /** A store failure on the timer, reported by the next {@link #apply} or {@link #durableNow}. */
  private volatile RuntimeException delayedFailure;

  private String pipeline;
  private SlotIncarnation incarnation;
  private Lsn checkpointCommit = Lsn.INVALID;
  private volatile Lsn storedEnd = Lsn.INVALID;
  // Guarded by this. The last delivered transaction not yet stored, the number of deliveries so
  // far, that number when the stored checkpoint's transaction was delivered, and whether a
  // max-delay timer is due.
  private Transaction lastUnstored;
  private long deliveredCount;
  private long storedCount;
  private boolean timerPending;

  /**
   * Guarded by this. Bumped when the pipeline opens this sink again, stops streaming or forgets its
   * checkpoint: a max-delay timer or a write of an older generation then stores nothing, so a run
   * that is over never writes behind the next one (or behind a drop).
   */
  private long generation;

  /** The longest a delivered transaction waits for its checkpoint when none is configured. */
  public static final Duration DEFAULT_MAX_DELAY = Duration.ofSeconds(1);

  /**
   * @param checkpointEvery write the checkpoint after this many delivered transactions
   * @param maxDelay or this long after the first delivered transaction not yet stored (positive)
   */
  public CheckpointedSink(
      DeliverySink delivery,
      CheckpointStore store,
      Executor blockingIo,
      int maxRetries,
      Duration retryBackoff,
      int checkpointEvery,
      Duration maxDelay) {
    if (maxRetries < 0 || checkpointEvery < 1 || maxDelay.isZero() || maxDelay.isNegative()) {
      throw new IllegalArgumentException(
          "maxRetries must be >= 0, checkpointEvery >= 1 and maxDelay positive");
    }
    this.delayed =
        CompletableFuture.delayedExecutor(maxDelay.toNanos(), TimeUnit.NANOSECONDS, blockingIo);
    this.delivery = delivery;
    this.store = store;
    this.blockingIo = blockingIo;
    this.maxRetries = maxRetries;
    this.retryBackoff = retryBackoff;
    this.checkpointEvery = checkpointEvery;
  }

  @Override
  public boolean supportsBatches() {
    return false;
  }

  @Override
  public boolean acceptsMessages() {
    return delivery.acceptsMessages();
  }

  @Override
  public CompletionStage<Void> onMessage(CdcMessage message) {
    return delivery.deliverMessage(message);
  }

  @Override
  public CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context) {
    return CompletableFuture.supplyAsync(
        () -> {
          // After any write of an earlier run (storeLock), which can then no longer start one.
          synchronized (storeLock) {
            newGeneration();
            Optional<CheckpointStore.Stored> stored =
                withRetries(() -> store.read(context.pipeline()));
            synchronized (this) {
              pipeline = context.pipeline();
              incarnation = context.incarnation().orElse(null);
              delayedFailure = null;
              checkpointCommit = stored.map(s -> s.checkpoint().commitLsn()).orElse(Lsn.INVALID);
              storedEnd = stored.map(CheckpointStore.Stored::endLsn).orElse(Lsn.INVALID);
            }
            return stored.map(CheckpointStore.Stored::checkpoint);
          }
        },
        blockingIo);
  }

  /** Ends the current generation: its pending timer and unstored deliveries are dropped. */
  private synchronized long newGeneration() {
    generation++;
    timerPending = false;
    lastUnstored = null;
    storedCount = deliveredCount;
    return generation;
  }

  /**
   * The pipeline stopped or halted: what was delivered and not yet stored is delivered again after
   * the next open (at-least-once); a timer due now writes nothing.
   */
  @Override
  public void streamStopped() {
    newGeneration();
  }

  /**
   * The pipeline is being dropped: waits for a checkpoint write in progress to end, so none lands
   * after Weir deletes the pipeline's checkpoint row.
   */
  @Override
  public CompletionStage<Void> forget(String pipeline) {
    return CompletableFuture.runAsync(
        () -> {
          synchronized (storeLock) {
            newGeneration();
          }
        },
        blockingIo);
  }

  @Override
  public CompletionStage<Void> apply(List<Transaction> transactions) {
    CompletionStage<Void> chain = CompletableFuture.completedFuture(null);
    for (Transaction t : transactions) {
      chain = chain.thenCompose(v -> applyOne(t));
    }
    return chain;
  }

  private CompletionStage<Void> applyOne(Transaction t) {
    RuntimeException failed = delayedFailure;
    if (failed != null) {
      return CompletableFuture.failedFuture(failed);
    }
    synchronized (this) {
      if (incarnation == null) {
        return CompletableFuture.failedFuture(
            SinkException.permanent(
                "checkpointed sink used before the slot incarnation is known", null));
      }
      if (checkpointCommit.isValid() && t.commitLsn().compareTo(checkpointCommit) <= 0) {
        return CompletableFuture.completedFuture(null); // delivered before a crash and checkpointed
      }
    }
    return delivery
        .deliver(t)
        .thenComposeAsync(
            v -> {
              long gen;
              synchronized (this) {
                lastUnstored = t;
                deliveredCount++;
                if (deliveredCount - storedCount < checkpointEvery) {
                  startTimer();
                  return CompletableFuture.<Void>completedFuture(null);
                }
                gen = generation;
              }
              return CompletableFuture.runAsync(() -> storeNow(gen), blockingIo);
            },
            blockingIo);
  }

  /** Starts the max-delay timer unless one is due. Called holding this. */
  private void startTimer() {
    if (!timerPending) {
      timerPending = true;
      long gen = generation;
      delayed.execute(() -> storeOnTimer(gen));
    }
  }

  /**
   * The max-delay timer of generation {@code gen}: stores what is still unstored (nothing if a
   * count write came first, or the generation is over).
   */
  private void storeOnTimer(long gen) {
    synchronized (this) {
      if (gen != generation) {
        return;
      }
      timerPending = false;
    }
    try {
      storeNow(gen);
    } catch (RuntimeException e) {
      synchronized (this) {
        if (gen == generation) {
          delayedFailure = e;
        }
      }
    }
  }

  /** Stores the last delivered transaction, if generation {@code gen} is still current. */
  private void storeNow(long gen) {
    synchronized (storeLock) {
      Transaction t;
      long count;
      SlotIncarnation inc;
      String name;
      synchronized (this) {
        if (gen != generation) {
          return;
        }
        t = lastUnstored;
        count = deliveredCount;
        inc = incarnation;
        name = pipeline;
      }
      if (t == null) {
        return;
      }
      CheckpointStore.Stored next =
          new CheckpointStore.Stored(new SinkCheckpoint(inc, t.commitLsn()), t.endLsn());
      withRetries(
          () -> {
            store.write(name, next);
            return null;
          });
      synchronized (this) {
        if (gen != generation) {
          return; // stopped meanwhile: the next open reads what the store holds
        }
        checkpointCommit = t.commitLsn();
        storedEnd = t.endLsn();
        storedCount = count;
        if (deliveredCount == count) {
          lastUnstored = null;
        } else {
          // Delivered while this write ran: they wait at most max-delay too.
          startTimer();
        }
      }
    }
  }

  @Override
  public boolean supportsSnapshots() {
    return delivery.supportsSnapshots();
  }

  /** The progress goes to the library checkpoint store, beside the checkpoint. */
  @Override
  public boolean storesSnapshotProgress() {
    return delivery.supportsSnapshots();
  }

  @Override
  public CompletionStage<Void> applySnapshot(SnapshotChunk chunk) {
    return delivery
        .deliverSnapshot(chunk)
        .thenRunAsync(
            () -> {
              if (chunk.progress().isPresent()) {
                String name;
                SlotIncarnation inc;
                synchronized (this) {
                  name = pipeline;
                  inc = incarnation;
                }
                withRetries(
                    () -> {
                      store.writeProgress(name, inc, chunk.progress());
                      return null;
                    });
              }
            },
            blockingIo);
  }

  /** Stores the hand-off checkpoint: the delivery sink has everything the snapshot holds. */
  @Override
  public CompletionStage<Void> completeSnapshot(Lsn handOff) {
    return CompletableFuture.runAsync(
        () -> {
          SlotIncarnation inc;
          String name;
          synchronized (this) {
            inc = incarnation;
            name = pipeline;
          }
          if (inc == null) {
            throw SinkException.permanent(
                "checkpointed sink used before the slot incarnation is known", null);
          }
          CheckpointStore.Stored next =
              new CheckpointStore.Stored(new SinkCheckpoint(inc, handOff), handOff);
          synchronized (storeLock) {
            withRetries(
                () -> {
                  store.write(name, next);
                  return null;
                });
            synchronized (this) {
              checkpointCommit = handOff;
              storedEnd = handOff;
              lastUnstored = null;
              storedCount = deliveredCount;
            }
          }
        },
        blockingIo);
  }

  @Override
  public CompletionStage<Optional<String>> snapshotProgress() {
    return CompletableFuture.supplyAsync(
        () -> {
          String name;
          synchronized (this) {
            name = pipeline;
          }
          return withRetries(() -> store.readProgress(name));
        },
        blockingIo);
  }

  /** The slot may confirm only what the store holds. */
  @Override
  public Lsn durableThrough(List<Transaction> applied) {
    return storedEnd;
  }

  /** What the store holds now, also after a write on the max-delay timer. */
  @Override
  public Lsn durableNow() {
    RuntimeException failed = delayedFailure;
    if (failed != null) {
      throw failed;
    }
    return storedEnd;
  }

  private interface StoreCall<T> {
    T call() throws SQLException;
  }

  private <T> T withRetries(StoreCall<T> call) {
    for (int attempt = 0; ; attempt++) {
      try {
        return call.call();
      } catch (SQLException e) {
        String state = e.getSQLState() == null ? "" : e.getSQLState();
        if (state.startsWith("42") || state.startsWith("22") || state.startsWith("23")) {
          throw new PipelineHaltException(
              HaltReason.CHECKPOINT_STORE_FAILED,
              "checkpoint store refused the write: " + SafeErrors.describe(e));
        }
        if (attempt >= maxRetries) {
          throw new PipelineHaltException(
              HaltReason.CHECKPOINT_STORE_FAILED,
              "checkpoint store failed " + (attempt + 1) + " times: " + SafeErrors.describe(e));
        }
        storeRetries.incrementAndGet();
        log.warn(
            "checkpoint store failed ({}); retry {} of {}",
            SafeErrors.describe(e),
            attempt + 1,
            maxRetries);
        try {
          TimeUnit.MILLISECONDS.sleep(retryBackoff.toMillis());
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          throw new PipelineHaltException(
              HaltReason.CHECKPOINT_STORE_FAILED,
              "interrupted while retrying the checkpoint store");
        }
      }
    }
  }

  /** How many store calls were retried after a transient fault (a counter for metrics). */
  public long storeRetries() {
    return storeRetries.get();
  }

  @Override
  public void close() {
    delivery.close();
  }
}
