package io.weir.node.auth;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The shared helper behind reloads after unknown tokens or key ids and the freshness checks. */
class CoalescedRunsTest {
  /** A task whose runs the test completes by hand, counted. */
  private static final class Runs {
    final List<CompletableFuture<Integer>> started = new ArrayList<>();

    synchronized CompletionStage<Integer> start() {
      CompletableFuture<Integer> run = new CompletableFuture<>();
      started.add(run);
      return run;
    }

    synchronized int count() {
      return started.size();
    }

    synchronized CompletableFuture<Integer> get(int i) {
      return started.get(i);
    }
  }

  @Test
  void aCrowdSharesOneRunAndNoTwoRunAtOnce() throws Exception {
    Runs runs = new Runs();
    CoalescedRuns<Integer> c = new CoalescedRuns<>(runs::start, Duration.ZERO);
    CompletableFuture<Integer> first = c.next().toCompletableFuture();
    List<CompletableFuture<Integer>> crowd = new ArrayList<>();
    for (int i = 0; i < 100; i++) {
      crowd.add(c.next().toCompletableFuture());
    }
    assertThat(runs.count()).as("one run under way; the crowd waits for the next").isEqualTo(1);
    runs.get(0).complete(1);
    assertThat(first.get(5, TimeUnit.SECONDS)).isEqualTo(1);
    assertThat(runs.count()).as("the crowd's run starts once the first ended").isEqualTo(2);
    runs.get(1).complete(2);
    for (CompletableFuture<Integer> f : crowd) {
      assertThat(f.get(5, TimeUnit.SECONDS)).as("a run that started after they asked").isEqualTo(2);
    }
    assertThat(runs.count()).isEqualTo(2);
  }

  @Test
  void startedSinceJoinsTheRunUnderWayOnlyIfItStartedLateEnough() throws Exception {
    Runs runs = new Runs();
    AtomicInteger clock = new AtomicInteger(1_000);
    CoalescedRuns<Integer> c = new CoalescedRuns<>(runs::start, Duration.ZERO, clock::get);
    CompletableFuture<Integer> first = c.next().toCompletableFuture(); // starts at 1000
    clock.set(1_500);
    CompletableFuture<Integer> joins = c.startedSince(900).toCompletableFuture();
    CompletableFuture<Integer> waits = c.startedSince(1_001).toCompletableFuture();
    assertThat(runs.count()).isEqualTo(1);
    runs.get(0).complete(1);
    assertThat(first.get(5, TimeUnit.SECONDS)).isEqualTo(1);
    assertThat(joins.get(5, TimeUnit.SECONDS)).as("the run under way started in time").isEqualTo(1);
    assertThat(waits).as("the run under way started too early: the next one").isNotDone();
    assertThat(runs.count()).isEqualTo(2);
    runs.get(1).complete(2);
    assertThat(waits.get(5, TimeUnit.SECONDS)).isEqualTo(2);
  }

  @Test
  void runsStartAtLeastTheGapApart() throws Exception {
    AtomicInteger count = new AtomicInteger();
    CoalescedRuns<Integer> c =
        new CoalescedRuns<>(
            () -> CompletableFuture.completedFuture(count.incrementAndGet()),
            Duration.ofMillis(300));
    long t0 = System.nanoTime();
    assertThat(c.next().toCompletableFuture().get(5, TimeUnit.SECONDS)).isEqualTo(1);
    CompletableFuture<Integer> second = c.next().toCompletableFuture();
    CompletableFuture<Integer> third = c.next().toCompletableFuture();
    assertThat(second.get(5, TimeUnit.SECONDS)).isEqualTo(2);
    assertThat(third.get(5, TimeUnit.SECONDS)).as("shared with the second").isEqualTo(2);
    assertThat(System.nanoTime() - t0)
        .as("the second run started no sooner than the gap after the first")
        .isGreaterThanOrEqualTo(Duration.ofMillis(300).toNanos());
  }

  @Test
  void aFailedRunFailsItsCallersAndTheNextOneRuns() throws Exception {
    AtomicInteger count = new AtomicInteger();
    CoalescedRuns<Integer> c =
        new CoalescedRuns<>(
            () -> {
              if (count.incrementAndGet() == 1) {
                throw new java.util.concurrent.RejectedExecutionException("shutting down");
              }
              return CompletableFuture.completedFuture(count.get());
            },
            Duration.ZERO);
    assertThat(c.next().toCompletableFuture()).failsWithin(Duration.ofSeconds(5));
    assertThat(c.next().toCompletableFuture().get(5, TimeUnit.SECONDS)).isEqualTo(2);
  }

  @Test
  void aCallerTimingOutLeavesTheOthersWaiting() throws Exception {
    Runs runs = new Runs();
    CoalescedRuns<Integer> c = new CoalescedRuns<>(runs::start, Duration.ZERO);
    CompletableFuture<Integer> impatient =
        c.next().toCompletableFuture().orTimeout(10, TimeUnit.MILLISECONDS);
    CompletableFuture<Integer> patient =
        c.startedSince(System.nanoTime() - 1_000_000_000L).toCompletableFuture();
    assertThat(impatient)
        .failsWithin(Duration.ofSeconds(5))
        .withThrowableOfType(java.util.concurrent.ExecutionException.class)
        .withCauseInstanceOf(TimeoutException.class);
    assertThat(patient).isNotDone();
    runs.get(0).complete(7);
    assertThat(patient.get(5, TimeUnit.SECONDS)).isEqualTo(7);
  }
}
