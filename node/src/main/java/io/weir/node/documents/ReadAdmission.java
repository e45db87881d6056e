package io.weir.node.documents;

import io.weir.protocol.ErrorCode;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiFunction;
import java.util.function.Supplier;

/**
 * Admission of a node's reads (changes-feed pages, queries, live reads; projection batches): at
 * most {@code slots} run at once, one more is refused at once with 429 {@code busy} (retryable)
 * rather than queued behind the others, and each has a deadline after which its caller is answered
 * 503 {@code unavailable} (retryable). A slot is given back when the read itself ends, done or
 * failed (or thrown before it began), not when its caller gave up at the deadline: a read still
 * running past its deadline keeps its slot, so under a stalled database the reads in flight never
 * exceed the slots (later ones are refused {@code busy}), and the queue of the outbox reader's
 * threads stays bounded.
 */
public final class ReadAdmission {
  /** A read refused or timed out: the typed code and a value-free message. */
  public static class Refused extends RuntimeException {
    private final ErrorCode code;

    public Refused(ErrorCode code, String message) {
      super(message, null, false, false);
      this.code = code;
    }

    public ErrorCode code() {
      return code;
    }
  }

  private final Semaphore slots;
  private final Duration deadline;
  private final String what;
  private final BiFunction<ErrorCode, String, RuntimeException> refusal;

  /**
   * @param slots reads running at once at most (at least 1)
   * @param deadline how long one read may take
   * @param what the reads' name in messages, e.g. {@code "reads and queries"}
   * @param refusal the exception a refused or timed-out read fails with, from its code and message
   */
  public ReadAdmission(
      int slots,
      Duration deadline,
      String what,
      BiFunction<ErrorCode, String, RuntimeException> refusal) {
    if (slots < 1) {
      throw new IllegalArgumentException("a read admission needs at least one slot");
    }
    if (deadline.isNegative() || deadline.isZero()) {
      throw new IllegalArgumentException("a read admission's deadline must be positive");
    }
    this.slots = new Semaphore(slots);
    this.deadline = deadline;
    this.what = what;
    this.refusal = refusal;
  }

  /** With {@link Refused} as the refusal. */
  public ReadAdmission(int slots, Duration deadline, String what) {
    this(slots, deadline, what, Refused::new);
  }

  /** Slots free now (for status and tests). */
  public int available() {
    return slots.availablePermits();
  }

  /**
   * Runs {@code read} when a slot is free: its result, or the refusal ({@code busy}) without
   * running it when none is, or {@code unavailable} once it runs past the deadline.
   */
  public <T> CompletionStage<T> admit(Supplier<CompletionStage<T>> read) {
    if (!slots.tryAcquire()) {
      return CompletableFuture.failedFuture(
          refusal.apply(
              ErrorCode.BUSY, "too many " + what + " are running on this node; retry shortly"));
    }
    try {
      CompletableFuture<T> running = read.get().toCompletableFuture();
      running.whenComplete((v, e) -> slots.release());
      // A copy times out, not the read's own future (which others may share).
      return running
          .copy()
          .orTimeout(deadline.toMillis(), TimeUnit.MILLISECONDS)
          .exceptionally(
              e -> {
                Throwable t =
                    e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
                if (t instanceof TimeoutException) {
                  throw refusal.apply(
                      ErrorCode.UNAVAILABLE,
                      "the read did not finish within " + deadline.toSeconds() + " s; retry");
                }
                throw e instanceof RuntimeException r ? r : new CompletionException(e);
              });
    } catch (RuntimeException e) {
      slots.release();
      return CompletableFuture.failedFuture(e);
    }
  }
}
