package io.weir.sharding.cdc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import io.weir.persistence.cdc.sink.SinkException;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The partition sink's window of frames in flight: what ends a wait for their answers. */
class FrameWindowTest {
  private static final Duration ASK = Duration.ofSeconds(30);

  private final AtomicBoolean memberLeft = new AtomicBoolean();

  private FrameWindow window(int size) {
    return new FrameWindow(size, "p", new AtomicLong(), new AtomicLong(), memberLeft::get);
  }

  @Test
  void answeredFramesEndTheWait() {
    FrameWindow w = window(4);
    w.acquire(ASK);
    w.acquire(ASK);
    w.done(0, new Applied("c", 1, java.util.List.of(1L), false), null);
    w.done(1, new Applied("c", 1, java.util.List.of(1L), false), null);
    assertTimeoutPreemptively(Duration.ofSeconds(10), () -> w.awaitAll(ASK));
  }

  @Test
  void aMemberLeavingEndsTheWaitForFramesInFlightLongBeforeTheirAsksTimeOut() {
    FrameWindow w = window(4);
    w.acquire(ASK);
    leaveAfter(300);
    long started = System.nanoTime();
    assertTimeoutPreemptively(
        Duration.ofSeconds(10),
        () ->
            assertThatThrownBy(() -> w.awaitAll(ASK))
                .isInstanceOf(SinkException.class)
                .hasMessageContaining("a cluster member left"));
    assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(ASK);
  }

  @Test
  void aMemberLeavingEndsTheWaitForRoomInAFullWindow() {
    FrameWindow w = window(1);
    w.acquire(ASK);
    leaveAfter(300);
    assertTimeoutPreemptively(
        Duration.ofSeconds(10),
        () ->
            assertThatThrownBy(() -> w.acquire(ASK))
                .isInstanceOf(SinkException.class)
                .hasMessageContaining("a cluster member left"));
  }

  @Test
  void aMemberGoneIsNoReasonToFailACallWhoseFramesAreAnswered() {
    memberLeft.set(true);
    FrameWindow w = window(2);
    for (int i = 0; i < 5; i++) {
      w.acquire(ASK);
      w.done(i, new Applied("c", 1, java.util.List.of(1L), false), null);
    }
    assertTimeoutPreemptively(Duration.ofSeconds(10), () -> w.awaitAll(ASK));
  }

  /** Each typed refusal pauses the pipeline with its code (shown as its status' reason). */
  @Test
  void typedRefusalsPauseWithTheirCode() {
    java.util.Map<String, io.weir.sharding.partition.PartitionProtocol.FrameReply> refusals =
        java.util.Map.of(
            "quota-exceeded",
            new io.weir.sharding.partition.PartitionProtocol.QuotaExceeded(10, 100, 10, 1_000),
            "storage-copies-insufficient",
            new io.weir.sharding.partition.PartitionProtocol.StorageRefused(1, 2),
            "storage-behind",
            new io.weir.sharding.partition.PartitionProtocol.StorageBehind(5, 7),
            "table-apply-failed",
            new io.weir.sharding.partition.PartitionProtocol.TableApplyFailed(1_001, 3));
    refusals.forEach(
        (code, reply) -> {
          FrameWindow w = window(2);
          w.acquire(ASK);
          w.done(3, reply, null);
          assertThatThrownBy(() -> w.awaitAll(ASK))
              .as(code)
              .isInstanceOfSatisfying(
                  SinkException.class, e -> assertThat(e.code()).isEqualTo(code))
              .hasMessageContaining("partition 3");
        });
  }

  @Test
  void aFailedFrameIsThrownOnceAllAnswered() {
    FrameWindow w = window(2);
    w.acquire(ASK);
    w.done(3, null, new java.util.concurrent.TimeoutException());
    assertThatThrownBy(() -> w.awaitAll(ASK))
        .isInstanceOf(SinkException.class)
        .hasMessageContaining("partition 3 did not answer in time");
  }

  /** The member leaves {@code millis} from now (a scheduled flip of the probe, no sleeping). */
  private void leaveAfter(long millis) {
    java.util.concurrent.CompletableFuture.delayedExecutor(
            millis, java.util.concurrent.TimeUnit.MILLISECONDS, Runnable::run)
        .execute(() -> memberLeft.set(true));
  }
}
