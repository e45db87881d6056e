package io.weir.persistence.cdc;

import io.weir.persistence.SafeErrors;
import io.weir.persistence.cdc.sink.SinkException;
import io.weir.protocol.Lsn;
import io.weir.protocol.pgoutput.PgOutputDecodeException;
import java.time.Duration;

/**
 * What a pipeline does when its stream fails: halt with a typed reason, or restart from the
 * confirmed position after a back-off. Pure: it sees the error and what the run achieved, keeps the
 * counters that bound the retries, and decides; the pipeline actor ({@link CdcPipeline}) acts.
 *
 * <ul>
 *   <li>A {@link PipelineHaltException}, an undecodable pgoutput message ({@code
 *       protocol-violation}) or a permanent {@link SinkException} ({@code sink-rejected}) halt at
 *       once.
 *   <li>A poison transaction: the sink fails with a non-transient SQLState while nothing is
 *       acknowledged in between; past {@code maxSinkRetries} in a row it halts ({@code
 *       sink-failing}).
 *   <li>"Slot active for another consumer" (55006) is retried without counting for the handover
 *       window (a crashed owner's walsender lingers up to {@code wal_sender_timeout}), then counts.
 *   <li>Otherwise a failure before the stream was established counts unless it is lost connectivity
 *       (an unreachable server is waited out); a TLS configuration failure always counts (retrying
 *       does not fix a certificate). Past {@code maxCommandRetries} counted failures in a row it
 *       halts ({@code retries-exhausted}); a stream that was flowing starts the count again.
 *   <li>The back-off doubles from {@code minBackoff} to {@code maxBackoff}, back to the bottom
 *       after a run that acknowledged something.
 * </ul>
 */
final class FailurePolicy {
  /** What to do; {@code sinkFailure}: the failure counted as one of a poison transaction. */
  sealed interface Decision {
    boolean sinkFailure();
  }

  record Halt(HaltReason reason, String why, boolean sinkFailure) implements Decision {}

  /** Restart after {@code after}; {@code described} is the failure, value-free. */
  record Restart(Duration after, String described, boolean sinkFailure) implements Decision {}

  private final PipelineSettings settings;
  private int failedCycles;

  /** Counted sink failures in a row with nothing acknowledged in between. */
  private int sinkFailures;

  /** The acknowledged position at the last counted sink failure. */
  private Lsn sinkFailedAt = Lsn.INVALID;

  private long slotBusySince;
  private Duration backoff;
  private volatile Duration handover;

  FailurePolicy(PipelineSettings settings) {
    this.settings = settings;
    this.backoff = settings.minBackoff();
    this.handover = settings.handoverWindow();
  }

  /** An operator started the pipeline: every count starts again. */
  void started() {
    failedCycles = 0;
    sinkFailures = 0;
    slotBusySince = 0;
    backoff = settings.minBackoff();
  }

  /** The pipeline was dropped: what it knew of failing transactions goes with its slot. */
  void dropped() {
    sinkFailedAt = Lsn.INVALID;
    sinkFailures = 0;
  }

  /** A stream is running: the slot is no longer held by another consumer. */
  void streaming() {
    slotBusySince = 0;
  }

  /**
   * The handover window for the source's {@code wal_sender_timeout}: at least that and 5 s, so a
   * crashed owner's walsender has ended before "slot active" counts.
   */
  void walSenderTimeout(Duration timeout) {
    Duration min = timeout.plusSeconds(5);
    handover = settings.handoverWindow().compareTo(min) < 0 ? min : settings.handoverWindow();
  }

  /**
   * @param error the failure, unwrapped
   * @param fromSink the sink's own call failed
   * @param wasFlowing the stream had been established
   * @param progressed the run acknowledged something
   * @param acknowledged the highest position any run of the pipeline acknowledged
   * @param nowNanos {@link System#nanoTime()}
   */
  Decision decide(
      Throwable error,
      boolean fromSink,
      boolean wasFlowing,
      boolean progressed,
      Lsn acknowledged,
      long nowNanos) {
    if (wasFlowing) {
      failedCycles = 0;
    }
    if (progressed) {
      backoff = settings.minBackoff(); // progress was made: back off from the bottom again
    }
    if (error instanceof PipelineHaltException halt) {
      return new Halt(halt.reason(), halt.detail(), false);
    }
    if (error instanceof PgOutputDecodeException decode) {
      return new Halt(HaltReason.PROTOCOL_VIOLATION, decode.getMessage(), false);
    }
    if (error instanceof SinkException sinkError && sinkError.isPermanent()) {
      return new Halt(HaltReason.SINK_REJECTED, sinkError.getMessage(), false);
    }
    String described =
        error instanceof SinkException s ? s.getMessage() : SafeErrors.describe(error);
    String sqlState = SafeErrors.sqlState(error);
    boolean sinkFailure = false;
    if (fromSink && wasFlowing && sqlState != null && !CdcPipeline.isTransientSqlState(sqlState)) {
      // A poison transaction: the database refuses it the same way on every redelivery (a
      // trigger's RAISE, an index row too large, an internal error) while the slot holds WAL.
      sinkFailure = true;
      sinkFailures = acknowledged.equals(sinkFailedAt) ? sinkFailures + 1 : 1;
      sinkFailedAt = acknowledged;
      if (sinkFailures > settings.maxSinkRetries()) {
        return new Halt(
            HaltReason.SINK_FAILING,
            sinkFailures
                + " failures in a row at the first transaction after "
                + acknowledged
                + " (SQLState "
                + sqlState
                + "); last error: "
                + described,
            true);
      }
    }
    boolean counted;
    if ("55006".equals(sqlState)) {
      if (slotBusySince == 0) {
        slotBusySince = nowNanos;
      }
      counted = Duration.ofNanos(nowNanos - slotBusySince).compareTo(handover) > 0;
      described = "slot " + settings.slot() + " is active for another consumer";
    } else {
      slotBusySince = 0;
      // A TLS failure looks like lost connectivity to pgjdbc (SQLState 08xxx), but retrying does
      // not fix certificates: it counts, so the pipeline halts (retries-exhausted) saying why.
      SafeErrors.TlsFailure tls = SafeErrors.tlsFailure(error);
      if (tls != null) {
        described =
            "TLS to the source: " + tls.description() + "; check source.tls (or weir.postgres.tls)";
      }
      boolean configuration = tls != null && tls.isConfiguration();
      counted = (configuration || !SafeErrors.isConnectivity(error)) && !wasFlowing;
    }
    if (counted && ++failedCycles > settings.maxCommandRetries()) {
      return new Halt(
          HaltReason.RETRIES_EXHAUSTED,
          failedCycles - 1 + " retries failed; last error: " + described,
          sinkFailure);
    }
    Duration after = backoff;
    Duration doubled = backoff.multipliedBy(2);
    backoff = doubled.compareTo(settings.maxBackoff()) > 0 ? settings.maxBackoff() : doubled;
    return new Restart(after, described, sinkFailure);
  }
}
