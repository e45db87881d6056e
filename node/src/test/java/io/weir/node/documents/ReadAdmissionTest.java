package io.weir.node.documents;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.weir.protocol.ErrorCode;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** {@link ReadAdmission}: slots, the refusal beyond them, the deadline, slots given back. */
class ReadAdmissionTest {
  private final ReadAdmission admission =
      new ReadAdmission(2, Duration.ofSeconds(30), "test reads");

  @Test
  void aReadBeyondTheSlotsIsRefusedBusyWithoutRunning() throws Exception {
    CompletableFuture<String> first = new CompletableFuture<>();
    CompletableFuture<String> second = new CompletableFuture<>();
    CompletionStage<String> a = admission.admit(() -> first);
    CompletionStage<String> b = admission.admit(() -> second);
    AtomicInteger ran = new AtomicInteger();

    CompletionStage<String> c =
        admission.admit(
            () -> {
              ran.incrementAndGet();
              return CompletableFuture.completedFuture("c");
            });

    assertThat(ran).as("the refused read never runs").hasValue(0);
    assertThatThrownBy(() -> c.toCompletableFuture().get(1, TimeUnit.SECONDS))
        .isInstanceOf(ExecutionException.class)
        .cause()
        .isInstanceOfSatisfying(
            ReadAdmission.Refused.class,
            r -> {
              assertThat(r.code()).isEqualTo(ErrorCode.BUSY);
              assertThat(r.code().retryable()).isTrue();
              assertThat(r)
                  .hasMessage("too many test reads are running on this node; retry shortly");
            });

    first.complete("a");
    assertThat(a.toCompletableFuture().get(1, TimeUnit.SECONDS)).isEqualTo("a");
    assertThat(admission.available()).as("a finished read gives its slot back").isEqualTo(1);
    assertThat(admission.admit(() -> CompletableFuture.completedFuture("d")).toCompletableFuture())
        .succeedsWithin(Duration.ofSeconds(1))
        .isEqualTo("d");
    second.completeExceptionally(new IllegalStateException("failed read"));
    assertThatThrownBy(() -> b.toCompletableFuture().get(1, TimeUnit.SECONDS))
        .hasCauseInstanceOf(IllegalStateException.class);
    assertThat(admission.available()).as("a failed read gives its slot back").isEqualTo(2);
  }

  @Test
  void aReadThrowingBeforeItBeganGivesItsSlotBack() {
    CompletionStage<String> thrown =
        admission.admit(
            () -> {
              throw new IllegalArgumentException("no such read");
            });
    assertThat(thrown.toCompletableFuture()).isCompletedExceptionally();
    assertThat(admission.available()).isEqualTo(2);
  }

  @Test
  void aReadPastItsDeadlineIsUnavailableToItsCallerAndKeepsItsSlotUntilItEnds() throws Exception {
    ReadAdmission quick = new ReadAdmission(1, Duration.ofMillis(50), "test reads");
    CompletableFuture<String> never = new CompletableFuture<>();

    CompletionStage<String> read = quick.admit(() -> never);

    assertThatThrownBy(() -> read.toCompletableFuture().get(30, TimeUnit.SECONDS))
        .cause()
        .isInstanceOfSatisfying(
            ReadAdmission.Refused.class,
            r -> assertThat(r.code()).isEqualTo(ErrorCode.UNAVAILABLE));
    assertThat(never)
        .as("a future shared with others is not failed by one reader's deadline")
        .isNotDone();
    assertThat(quick.available())
        .as("a read still running past its deadline keeps its slot")
        .isZero();
    assertThat(quick.admit(() -> CompletableFuture.completedFuture("next")).toCompletableFuture())
        .as("so another read is refused busy meanwhile")
        .failsWithin(Duration.ofSeconds(1))
        .withThrowableOfType(ExecutionException.class)
        .withCauseInstanceOf(ReadAdmission.Refused.class);
    never.complete("late");
    assertThat(quick.available()).as("its slot is back once it ends").isEqualTo(1);
  }

  @Test
  void settingsOutOfRangeAreRefused() {
    assertThatThrownBy(() -> new ReadAdmission(0, Duration.ofSeconds(1), "x"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new ReadAdmission(1, Duration.ZERO, "x"))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
