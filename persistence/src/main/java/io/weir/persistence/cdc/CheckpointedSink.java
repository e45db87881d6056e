package io.weir.persistence.cdc;

import io.weir.persistence.SafeErrors;
import io.weir.protocol.Lsn;
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
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Adapts a {@link DeliverySink} (no atomic checkpoint) to the pipeline with the library checkpoint
 * store: each transaction is delivered, then the checkpoint is written to PostgreSQL. The slot
 * confirms only what the store holds ({@link #durableThrough}).
 *
 * <p>Guarantee: at-least-once. A crash after a delivery and before its checkpoint write redelivers
 * that transaction — with {@code checkpointEvery = n}, at most the {@code n} transactions since the
 * last write. Transactions at or below the stored checkpoint are skipped.
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

  private String pipeline;
  private SlotIncarnation incarnation;
  private Lsn checkpointCommit = Lsn.INVALID;
  private volatile Lsn storedEnd = Lsn.INVALID;
  private Transaction lastUnstored;
  private int unstored;

  public CheckpointedSink(
      DeliverySink delivery,
      CheckpointStore store,
      Executor blockingIo,
      int maxRetries,
      Duration retryBackoff,
      int checkpointEvery) {
    if (maxRetries < 0 || checkpointEvery < 1) {
      throw new IllegalArgumentException("maxRetries must be >= 0 and checkpointEvery >= 1");
    }
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
  public CompletionStage<Void> onMessage(io.weir.protocol.cdc.CdcMessage message) {
    return delivery.deliverMessage(message);
  }

  @Override
  public CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context) {
    return CompletableFuture.supplyAsync(
        () -> {
          Optional<CheckpointStore.Stored> stored =
              withRetries(() -> store.read(context.pipeline()));
          synchronized (this) {
            pipeline = context.pipeline();
            incarnation = context.incarnation().orElse(null);
            lastUnstored = null;
            unstored = 0;
            checkpointCommit = stored.map(s -> s.checkpoint().commitLsn()).orElse(Lsn.INVALID);
            storedEnd = stored.map(CheckpointStore.Stored::endLsn).orElse(Lsn.INVALID);
          }
          return stored.map(CheckpointStore.Stored::checkpoint);
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
              synchronized (this) {
                lastUnstored = t;
                unstored++;
                if (unstored < checkpointEvery) {
                  return CompletableFuture.<Void>completedFuture(null);
                }
              }
              return CompletableFuture.runAsync(this::storeNow, blockingIo);
            },
            blockingIo);
  }

  private void storeNow() {
    Transaction t;
    SlotIncarnation inc;
    String name;
    synchronized (this) {
      t = lastUnstored;
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
      checkpointCommit = t.commitLsn();
      storedEnd = t.endLsn();
      if (lastUnstored == t) {
        lastUnstored = null;
        unstored = 0;
      }
    }
  }

  @Override
  public boolean supportsSnapshots() {
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
          withRetries(
              () -> {
                store.write(name, next);
                return null;
              });
          synchronized (this) {
            checkpointCommit = handOff;
            storedEnd = handOff;
            lastUnstored = null;
            unstored = 0;
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

  @Override
  public void close() {
    delivery.close();
  }
}
