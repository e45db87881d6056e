package io.weir.node;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.weir.persistence.SettingsException;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class EndedSessionsTest {
  private static final long S = 1_000_000_000L;
  private static final Instant PG = Instant.parse("2026-12-06T00:00:00Z");
  private static final Set<Long> ALL = Set.of(1L, 2L, 3L);
  private static final Set<Long> NONE = Set.of();
  private final EndedSessions sessions =
      new EndedSessions(Duration.ofSeconds(1), Duration.ofSeconds(15), MemberPresence.LEAD);

  /** Looks every 1 s with everyone's session and nobody unreachable, from 0 to {@code until}. */
  private void healthyUntil(long until) {
    for (long t = 0; t <= until; t++) {
      assertThat(sessions.look(t * S, PG, ALL, NONE, true)).isEmpty();
    }
  }

  @Test
  void aMemberWhoseSessionEndedBeforeItBecameUnreachableIsDownedAfterTheMinimum() {
    healthyUntil(4);
    // Killed at 5: its session is gone at the look of 6, the failure detector marks it at 9.
    assertThat(sessions.look(6 * S, PG, Set.of(1L, 2L), NONE, true)).isEmpty();
    assertThat(sessions.look(8 * S, PG, Set.of(1L, 2L), NONE, true)).isEmpty();
    assertThat(sessions.look(9 * S, PG, Set.of(1L, 2L), Set.of(3L), true))
        .as("unreachable for 0 s")
        .isEmpty();
    assertThat(sessions.look(9 * S + S / 2, PG, Set.of(1L, 2L), Set.of(3L), true)).isEmpty();
    assertThat(sessions.look(10 * S, PG, Set.of(1L, 2L), Set.of(3L), true)).containsExactly(3L);
  }

  @Test
  void aSessionFoundGoneLessThanTheLeadBeforeTheMemberBecameUnreachableIsNoEvidence() {
    healthyUntil(4);
    // The member became unreachable at about 6 and someone ended its session then: a survivor's
    // looks see the session gone at 6.5 and the member unreachable at 7.
    assertThat(sessions.look(6 * S + S / 2, PG, Set.of(1L, 2L), NONE, true)).isEmpty();
    for (long t = 7; t < 60; t++) {
      assertThat(sessions.look(t * S, PG, Set.of(1L, 2L), Set.of(3L), true)).isEmpty();
    }
  }

  @Test
  void aSessionEndedEarlyInAFreezeButLessThanTheLeadBeforeItIsUnreachableIsNoEvidence() {
    healthyUntil(4);
    // Frozen at 5; its session is ended at 6.2 (found gone at 6.5); the failure detector marks it
    // unreachable at 8 (a view that lags), 1.5 s after.
    assertThat(sessions.look(6 * S + S / 2, PG, Set.of(1L, 2L), NONE, true)).isEmpty();
    assertThat(sessions.look(7 * S + S / 2, PG, Set.of(1L, 2L), NONE, true)).isEmpty();
    for (long t = 8; t < 60; t++) {
      assertThat(sessions.look(t * S, PG, Set.of(1L, 2L), Set.of(3L), true)).isEmpty();
    }
  }

  @Test
  void aFrozenMemberKeepsItsSessionAndIsNeverDowned() {
    healthyUntil(4);
    for (long t = 6; t < 60; t++) {
      assertThat(sessions.look(t * S, PG, ALL, Set.of(3L), true)).isEmpty();
    }
  }

  @Test
  void aSessionEndedWhileTheMemberWasAlreadyUnreachableIsNoEvidence() {
    healthyUntil(4);
    assertThat(sessions.look(6 * S, PG, ALL, Set.of(3L), true)).isEmpty();
    // Frozen, and then someone ends its connection (pg_terminate_backend).
    for (long t = 7; t < 60; t++) {
      assertThat(sessions.look(t * S, PG, Set.of(1L, 2L), Set.of(3L), true)).isEmpty();
    }
  }

  @Test
  void aSessionGoneLongBeforeTheMemberBecameUnreachableIsNoEvidence() {
    healthyUntil(4);
    // The member lost its session at 5 and could not open another (it runs on without one).
    for (long t = 6; t <= 30; t += 2) {
      assertThat(sessions.look(t * S, PG, Set.of(1L, 2L), NONE, true)).isEmpty();
    }
    for (long t = 31; t < 60; t++) {
      assertThat(sessions.look(t * S, PG, Set.of(1L, 2L), Set.of(3L), true))
          .as("last seen 26 s before it became unreachable")
          .isEmpty();
    }
  }

  @Test
  void aMemberReachableAgainWithoutItsSessionIsAliveAndNotDownedLater() {
    healthyUntil(4);
    assertThat(sessions.look(6 * S, PG, Set.of(1L, 2L), NONE, true)).isEmpty();
    assertThat(sessions.look(7 * S, PG, Set.of(1L, 2L), Set.of(3L), true)).isEmpty();
    // Reachable again: a process that answers heartbeats is not dead, session or not.
    assertThat(sessions.look(7 * S + S / 2, PG, Set.of(1L, 2L), NONE, true)).isEmpty();
    for (long t = 8; t < 20; t++) {
      assertThat(sessions.look(t * S, PG, Set.of(1L, 2L), Set.of(3L), true)).isEmpty();
    }
    // With its session back, a later death counts again.
    assertThat(sessions.look(20 * S, PG, ALL, NONE, true)).isEmpty();
    assertThat(sessions.look(22 * S, PG, Set.of(1L, 2L), NONE, true)).isEmpty();
    assertThat(sessions.look(25 * S, PG, Set.of(1L, 2L), Set.of(3L), true)).isEmpty();
    assertThat(sessions.look(26 * S, PG, Set.of(1L, 2L), Set.of(3L), true)).containsExactly(3L);
  }

  @Test
  void aSessionNeverSeenIsNoEvidence() {
    for (long t = 0; t <= 6; t += 2) {
      assertThat(sessions.look(t * S, PG, Set.of(1L, 2L), NONE, true)).isEmpty();
    }
    for (long t = 7; t < 30; t++) {
      assertThat(sessions.look(t * S, PG, Set.of(1L, 2L), Set.of(3L), true)).isEmpty();
    }
  }

  @Test
  void aRestartOfPostgresqlEndsEverySessionAndIsNoEvidence() {
    healthyUntil(4);
    Instant restarted = PG.plusSeconds(60);
    assertThat(sessions.look(6 * S, restarted, Set.of(1L), NONE, true)).isEmpty();
    for (long t = 7; t < 30; t++) {
      assertThat(sessions.look(t * S, restarted, Set.of(1L), Set.of(2L, 3L), true)).isEmpty();
    }
  }

  @Test
  void aResetForgetsWhatWasSeen() {
    // This node opened its own session again (a crash restart of PostgreSQL keeps its start time).
    healthyUntil(4);
    sessions.reset();
    assertThat(sessions.look(6 * S, PG, Set.of(1L), NONE, true)).isEmpty();
    for (long t = 7; t < 30; t++) {
      assertThat(sessions.look(t * S, PG, Set.of(1L), Set.of(2L, 3L), true)).isEmpty();
    }
  }

  @Test
  void aMinorityDownsNobodyAndAMajorityMustHoldInTwoLooksInARow() {
    healthyUntil(4);
    assertThat(sessions.look(6 * S, PG, Set.of(1L), NONE, true)).isEmpty();
    for (long t = 9; t < 20; t++) {
      assertThat(sessions.look(t * S, PG, Set.of(1L), Set.of(2L, 3L), false)).isEmpty();
    }
    assertThat(sessions.look(20 * S, PG, Set.of(1L), Set.of(2L, 3L), true))
        .as("the first look with a majority")
        .isEmpty();
    assertThat(sessions.look(21 * S, PG, Set.of(1L), Set.of(2L, 3L), true))
        .containsExactlyInAnyOrder(2L, 3L);
  }

  @Test
  void removedMembersAreForgotten() {
    healthyUntil(4);
    assertThat(sessions.look(6 * S, PG, Set.of(1L, 2L), NONE, true)).isEmpty();
    sessions.retain(Set.of(1L, 2L));
    for (long t = 9; t < 20; t++) {
      assertThat(sessions.look(t * S, PG, Set.of(1L, 2L), Set.of(3L), true)).isEmpty();
    }
  }

  @Test
  void majorityIsMoreThanHalf() {
    assertThat(EndedSessions.majority(2, 3)).isTrue();
    assertThat(EndedSessions.majority(1, 2)).as("a tie").isFalse();
    assertThat(EndedSessions.majority(2, 4)).as("a tie").isFalse();
    assertThat(EndedSessions.majority(3, 5)).isTrue();
    assertThat(EndedSessions.majority(1, 1)).isTrue();
    assertThat(EndedSessions.majority(0, 0)).isFalse();
  }

  @Test
  void onlyMemberSessionNamesAreRead() {
    assertThat(EndedSessions.memberOf("weir-member 18446744073709551615")).isEqualTo(-1L);
    assertThat(EndedSessions.memberOf("weir-member 42")).isEqualTo(42L);
    assertThat(EndedSessions.memberOf("weir-member ")).isNull();
    assertThat(EndedSessions.memberOf("weir-member 18446744073709551616")).isNull();
    assertThat(EndedSessions.memberOf("weir-member 4x")).isNull();
    assertThat(EndedSessions.memberOf("weir-replication 42")).isNull();
    assertThat(EndedSessions.memberOf("weir")).isNull();
    assertThat(EndedSessions.memberOf(null)).isNull();
  }

  @Test
  void settingsAreReadAndBadOnesRefusedByName() {
    MemberPresence.Settings defaults = MemberPresence.Settings.create(config(Map.of()));
    assertThat(defaults)
        .isEqualTo(
            new MemberPresence.Settings(true, Duration.ofMillis(500), Duration.ofSeconds(1)));
    assertThat(
            MemberPresence.Settings.create(
                    config(Map.of("weir.cluster.ended-session-downing.enabled", "off")))
                .enabled())
        .isFalse();
    assertThatThrownBy(
            () ->
                MemberPresence.Settings.create(
                    config(Map.of("weir.cluster.ended-session-downing.enabled", "sometimes"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.cluster.ended-session-downing.enabled"))
        .hasMessageContaining("WEIR_ENDED_SESSION_DOWNING");
    assertThatThrownBy(
            () ->
                MemberPresence.Settings.create(
                    config(Map.of("weir.cluster.ended-session-downing.min-unreachable", "0s"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e ->
                assertThat(e.key())
                    .isEqualTo("weir.cluster.ended-session-downing.min-unreachable"));
  }

  private static Config config(Map<String, Object> overrides) {
    return ConfigFactory.parseMap(overrides)
        .withFallback(ConfigFactory.parseResources("reference.conf"))
        .resolve(ConfigResolveOptions.noSystem());
  }

  @Test
  void onlyAConnectionFailureOrAnEndedSessionOpensTheSessionAgain() {
    assertThat(MemberPresence.connectionLost(new java.sql.SQLException("x", "57P01"))).isTrue();
    assertThat(MemberPresence.connectionLost(new java.sql.SQLException("x", "08006"))).isTrue();
    assertThat(MemberPresence.connectionLost(new java.sql.SQLException("x", "57014")))
        .as("a cancelled (timed-out) look")
        .isFalse();
    assertThat(MemberPresence.connectionLost(new java.sql.SQLException("x", "42501"))).isFalse();
    assertThat(MemberPresence.connectionLost(new java.sql.SQLException("x"))).isFalse();
  }
}
