package io.weir.sharding.cdc;

import io.weir.persistence.cdc.sink.SinkException;
import io.weir.protocol.Lsn;
import io.weir.sharding.partition.PartitionProtocol;
import io.weir.sharding.partition.PartitionProtocol.AlreadyApplied;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Gap;
import io.weir.sharding.partition.PartitionProtocol.Loaded;
import io.weir.sharding.partition.PartitionProtocol.QuotaExceeded;
import io.weir.sharding.partition.StorageGate;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Frames in flight within one call: bounded, and the first failure wins. A cluster member that
 * leaves while frames are in flight ends the wait at once (see {@link
 * PartitionChannel#membersLost}): the frames sent to partitions it hosted are lost, and waiting for
 * their asks to time out would stall the pipeline long after the partitions run elsewhere.
 */
final class FrameWindow {
  private static final Logger log = LoggerFactory.getLogger(PartitionSink.class);

  /** How often a wait looks whether a member left. */
  private static final long PROBE_MILLIS = 200;

  private final Semaphore permits;
  private final int size;
  private final AtomicReference<RuntimeException> failure = new AtomicReference<>();
  private final String pipeline;
  private final AtomicLong gaps;
  private final AtomicLong skipped;
  private final BooleanSupplier membersLost;

  /**
   * @param pipeline the pipeline's name, for the log
   * @param gaps counts the partitions' gap replies (the sink's figure)
   * @param skipped counts frames the partitions had applied already
   * @param membersLost true once a cluster member present when the window opened has left
   */
  FrameWindow(
      int size, String pipeline, AtomicLong gaps, AtomicLong skipped, BooleanSupplier membersLost) {
    this.size = size;
    this.permits = new Semaphore(size);
    this.pipeline = pipeline;
    this.gaps = gaps;
    this.skipped = skipped;
    this.membersLost = membersLost;
  }

  /** Takes a slot for one more frame, waiting while the window is full. */
  void acquire(Duration timeout) {
    RuntimeException f = failure.get();
    if (f != null) {
      throw f;
    }
    if (!take(1, timeout)) {
      throw SinkException.transientFailure("partitions did not answer in time", null);
    }
  }

  /** Throws the first failure of a frame answered so far, if any. */
  void throwIfFailed() {
    RuntimeException f = failure.get();
    if (f != null) {
      throw f;
    }
  }

  void doneAll(int partition, List<FrameReply> replies, Throwable error) {
    if (error != null || replies == null) {
      done(partition, null, error != null ? error : new IllegalStateException("no replies"));
      return;
    }
    try {
      for (FrameReply r : replies) {
        check(partition, r, null);
      }
    } finally {
      permits.release();
    }
  }

  void done(int partition, FrameReply reply, Throwable error) {
    try {
      check(partition, reply, error);
    } finally {
      permits.release();
    }
  }

  private void check(int partition, FrameReply reply, Throwable error) {
    if (error != null) {
      Throwable cause =
          error instanceof CompletionException && error.getCause() != null
              ? error.getCause()
              : error;
      fail(
          SinkException.transientFailure(
              "partition "
                  + partition
                  + " did not answer in time ("
                  + cause.getClass().getSimpleName()
                  + ")",
              null));
    } else if (reply instanceof Applied || reply instanceof Loaded) {
      // durable
    } else if (reply instanceof AlreadyApplied) {
      skipped.incrementAndGet();
    } else if (reply instanceof Gap && failure.get() != null) {
      // A frame before it in the same message was refused: the gap follows from that refusal.
    } else if (reply instanceof Gap g) {
      gaps.incrementAndGet();
      log.warn(
          "pipeline {}: partition {} missed a slice before commit {}; restarting from the confirmed position",
          pipeline,
          partition,
          Lsn.of(g.source().commitLsn()));
      fail(
          SinkException.transientFailure("partition " + partition + " missed a slice (gap)", null));
    } else if (reply instanceof PartitionProtocol.StorageRefused s) {
      fail(
          SinkException.paused(
              "storage-copies-insufficient",
              "partition "
                  + partition
                  + ": the storage keeps "
                  + new StorageGate.Refusal(s.copies(), s.required()).describe()
                  + "; paused until the copies are back"));
    } else if (reply instanceof PartitionProtocol.StorageBehind) {
      fail(
          SinkException.paused(
              "storage-behind",
              "partition "
                  + partition
                  + " is storage-behind (its journal lacks writes it acknowledged); paused"
                  + " until an operator accepts the loss"));
    } else if (reply instanceof PartitionProtocol.TableApplyFailed t) {
      fail(
          SinkException.paused(
              "table-apply-failed",
              "partition "
                  + partition
                  + ": its documents table is "
                  + t.lagEvents()
                  + " events behind and applying to it keeps failing; paused until it applies"
                  + " again"));
    } else if (reply instanceof QuotaExceeded q) {
      fail(
          SinkException.paused(
              "quota-exceeded",
              "partition "
                  + partition
                  + " outbox is full ("
                  + q.entries()
                  + " of "
                  + q.maxEntries()
                  + " entries, "
                  + q.bytes()
                  + " of "
                  + q.maxBytes()
                  + " bytes): paused until it is purged"));
    } else {
      fail(
          SinkException.permanent(
              "partition " + partition + " refused a change: " + describe(reply), null));
    }
  }

  private String describe(FrameReply reply) {
    if (reply instanceof PartitionProtocol.Rejected r) {
      return r.reason();
    }
    return reply.getClass().getSimpleName();
  }

  private void fail(RuntimeException e) {
    failure.compareAndSet(null, e);
  }

  /** Waits until every frame sent was answered; throws the first failure. */
  void awaitAll(Duration timeout) {
    if (!take(size, timeout)) {
      throw SinkException.transientFailure("partitions did not answer in time", null);
    }
    permits.release(size);
    RuntimeException f = failure.get();
    if (f != null) {
      throw f;
    }
  }

  /**
   * Takes {@code n} permits within the asks' timeout (plus a margin for their replies); false when
   * they did not come. Throws when a cluster member left in the meantime.
   */
  private boolean take(int n, Duration timeout) {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeout.toMillis() + 5_000);
    try {
      while (true) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        if (permits.tryAcquire(
            n, Math.min(left, TimeUnit.MILLISECONDS.toNanos(PROBE_MILLIS)), TimeUnit.NANOSECONDS)) {
          return true;
        }
        if (membersLost.getAsBoolean()) {
          log.info(
              "pipeline {}: a cluster member left while {} messages to partitions were unanswered;"
                  + " restarting from the confirmed position",
              pipeline,
              size - permits.availablePermits());
          throw SinkException.transientFailure(
              "a cluster member left while slices were in flight to partitions", null);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw SinkException.transientFailure("interrupted", e);
    }
  }
}
