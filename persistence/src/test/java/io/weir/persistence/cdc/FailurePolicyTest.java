package io.weir.persistence.cdc;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.persistence.cdc.sink.SinkException;
import io.weir.protocol.Lsn;
import io.weir.protocol.pgoutput.MessageType;
import io.weir.protocol.pgoutput.PgOutputDecodeException;
import java.net.ConnectException;
import java.security.cert.CertificateException;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import javax.net.ssl.SSLHandshakeException;
import org.junit.jupiter.api.Test;

/** The pipeline's halt-or-restart decisions, without PostgreSQL. */
class FailurePolicyTest {
  private static final Duration MIN = Duration.ofMillis(100);
  private static final Duration MAX = Duration.ofMillis(800);

  private static PipelineSettings settings() {
    return PipelineSettings.of("p", "s", List.of("pub")).toBuilder()
        .maxCommandRetries(3)
        .maxSinkRetries(2)
        .minBackoff(MIN)
        .maxBackoff(MAX)
        .handoverWindow(Duration.ofSeconds(10))
        .build();
  }

  private static FailurePolicy.Decision decide(
      FailurePolicy p, Throwable e, boolean fromSink, boolean flowing, Lsn acked) {
    return p.decide(e, fromSink, flowing, false, acked, 0);
  }

  @Test
  void typedRefusalsHaltAtOnce() {
    FailurePolicy p = new FailurePolicy(settings());
    assertThat(
            decide(
                p,
                new PipelineHaltException(HaltReason.SLOT_LOST, "gone"),
                false,
                true,
                Lsn.INVALID))
        .isEqualTo(new FailurePolicy.Halt(HaltReason.SLOT_LOST, "gone", false));
    assertThat(
            decide(
                p,
                new PgOutputDecodeException(
                    MessageType.BEGIN, 3, PgOutputDecodeException.Reason.TRUNCATED),
                false,
                true,
                Lsn.INVALID))
        .isInstanceOfSatisfying(
            FailurePolicy.Halt.class,
            h -> assertThat(h.reason()).isEqualTo(HaltReason.PROTOCOL_VIOLATION));
    assertThat(decide(p, SinkException.permanent("refused", null), true, true, Lsn.INVALID))
        .isInstanceOfSatisfying(
            FailurePolicy.Halt.class,
            h -> assertThat(h.reason()).isEqualTo(HaltReason.SINK_REJECTED));
  }

  @Test
  void aPoisonTransactionHaltsAfterTheSinkRetriesUnlessSomethingIsAcknowledgedBetween() {
    FailurePolicy p = new FailurePolicy(settings());
    SQLException poison = new SQLException("raised", "P0001");
    Lsn at = Lsn.parse("0/100");
    assertThat(decide(p, poison, true, true, at)).isInstanceOf(FailurePolicy.Restart.class);
    assertThat(decide(p, poison, true, true, at)).isInstanceOf(FailurePolicy.Restart.class);
    // Something was acknowledged: the next failure is the first at a new transaction.
    Lsn later = Lsn.parse("0/200");
    FailurePolicy.Decision d = decide(p, poison, true, true, later);
    assertThat(d).isInstanceOf(FailurePolicy.Restart.class);
    assertThat(d.sinkFailure()).isTrue();
    assertThat(decide(p, poison, true, true, later)).isInstanceOf(FailurePolicy.Restart.class);
    assertThat(decide(p, poison, true, true, later))
        .isInstanceOfSatisfying(
            FailurePolicy.Halt.class,
            h -> {
              assertThat(h.reason()).isEqualTo(HaltReason.SINK_FAILING);
              assertThat(h.why()).startsWith("3 failures in a row").contains("P0001");
              assertThat(h.sinkFailure()).isTrue();
            });
    // A transient SQLState from the sink is never a poison transaction.
    FailurePolicy q = new FailurePolicy(settings());
    for (int i = 0; i < 10; i++) {
      FailurePolicy.Decision t = decide(q, new SQLException("x", "40001"), true, true, at);
      assertThat(t).isInstanceOf(FailurePolicy.Restart.class);
      assertThat(t.sinkFailure()).isFalse();
    }
  }

  @Test
  void lostConnectivityIsWaitedOutAndTheBackOffDoublesToItsBound() {
    FailurePolicy p = new FailurePolicy(settings());
    List<Duration> waits = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      FailurePolicy.Decision d =
          decide(
              p,
              new SQLException("refused", "08001", new ConnectException()),
              false,
              false,
              Lsn.INVALID);
      assertThat(d).as("attempt %d", i).isInstanceOf(FailurePolicy.Restart.class);
      waits.add(((FailurePolicy.Restart) d).after());
    }
    assertThat(waits.subList(0, 5))
        .containsExactly(MIN, MIN.multipliedBy(2), MIN.multipliedBy(4), MAX, MAX);
    // A run that acknowledged something backs off from the bottom again.
    FailurePolicy.Decision d =
        p.decide(new SQLException("x", "08006"), false, true, true, Lsn.INVALID, 0);
    assertThat(((FailurePolicy.Restart) d).after()).isEqualTo(MIN);
  }

  @Test
  void failuresBeforeTheStreamIsEstablishedCountUntilTheRetriesAreExhausted() {
    FailurePolicy p = new FailurePolicy(settings());
    SQLException refused = new SQLException("no", "42501");
    for (int i = 0; i < 3; i++) {
      assertThat(decide(p, refused, false, false, Lsn.INVALID))
          .isInstanceOf(FailurePolicy.Restart.class);
    }
    assertThat(decide(p, refused, false, false, Lsn.INVALID))
        .isInstanceOfSatisfying(
            FailurePolicy.Halt.class,
            h -> {
              assertThat(h.reason()).isEqualTo(HaltReason.RETRIES_EXHAUSTED);
              assertThat(h.why()).startsWith("3 retries failed");
            });
    // A stream that was flowing starts the count again; an operator's start too.
    FailurePolicy q = new FailurePolicy(settings());
    for (int round = 0; round < 5; round++) {
      for (int i = 0; i < 3; i++) {
        assertThat(decide(q, refused, false, false, Lsn.INVALID))
            .isInstanceOf(FailurePolicy.Restart.class);
      }
      assertThat(decide(q, new SQLException("x", "08006"), false, true, Lsn.INVALID))
          .isInstanceOf(FailurePolicy.Restart.class);
    }
    p.started(); // the halted pipeline started again by an operator
    for (int i = 0; i < 3; i++) {
      assertThat(decide(p, refused, false, false, Lsn.INVALID))
          .isInstanceOf(FailurePolicy.Restart.class);
    }
  }

  @Test
  void aTlsConfigurationFailureCountsThoughItLooksLikeLostConnectivity() {
    FailurePolicy p = new FailurePolicy(settings());
    SSLHandshakeException handshake = new SSLHandshakeException("PKIX path building failed");
    handshake.initCause(new CertificateException("untrusted"));
    SQLException tls = new SQLException("ssl", "08006", handshake);
    FailurePolicy.Decision last = null;
    for (int i = 0; i < 4; i++) {
      last = decide(p, tls, false, false, Lsn.INVALID);
    }
    assertThat(last)
        .isInstanceOfSatisfying(
            FailurePolicy.Halt.class,
            h -> {
              assertThat(h.reason()).isEqualTo(HaltReason.RETRIES_EXHAUSTED);
              assertThat(h.why()).contains("TLS to the source");
            });
  }

  @Test
  void aSlotHeldByAnotherConsumerCountsOnlyAfterTheHandoverWindow() {
    FailurePolicy p = new FailurePolicy(settings());
    p.walSenderTimeout(Duration.ofSeconds(60)); // the window grows to 65 s
    SQLException busy = new SQLException("active", "55006");
    long s = 1_000_000_000L;
    long t0 = 1000 * s; // any nanoTime reading
    for (int i = 0; i < 50; i++) {
      FailurePolicy.Decision d = p.decide(busy, false, false, false, Lsn.INVALID, t0 + s * i);
      assertThat(d).as("second %d", i).isInstanceOf(FailurePolicy.Restart.class);
      assertThat(((FailurePolicy.Restart) d).described())
          .isEqualTo("slot s is active for another consumer");
    }
    // Past 65 s each failure counts: the fourth counted one halts.
    FailurePolicy.Decision d = null;
    for (int i = 66; i < 70; i++) {
      d = p.decide(busy, false, false, false, Lsn.INVALID, t0 + s * i);
    }
    assertThat(d)
        .isInstanceOfSatisfying(
            FailurePolicy.Halt.class,
            h -> assertThat(h.reason()).isEqualTo(HaltReason.RETRIES_EXHAUSTED));
  }
}
