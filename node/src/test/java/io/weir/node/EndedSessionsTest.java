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
  private final EndedSessions sessions = new EndedSessions(Duration.ofSeconds(2));

  @Test
  void anUnreachableMemberWhoseSessionStaysGoneIsDownedAfterTheMinimumAbsence() {
    sessions.observe(0, PG, Set.of(1L, 2L, 3L));
    sessions.observe(1 * S, PG, Set.of(1L, 2L));
    assertThat(sessions.toDown(2 * S, Set.of(3L), true)).as("gone for 1 s only").isEmpty();
    sessions.observe(3 * S, PG, Set.of(1L, 2L));
    assertThat(sessions.toDown(3 * S, Set.of(3L), true)).containsExactly(3L);
  }

  @Test
  void aMemberWithItsSessionIsNeverDownedHoweverLongItIsUnreachable() {
    for (int i = 0; i < 10; i++) {
      sessions.observe(i * S, PG, Set.of(1L, 2L, 3L));
    }
    assertThat(sessions.toDown(10 * S, Set.of(3L), true)).isEmpty();
  }

  @Test
  void aReachableMemberWithoutItsSessionIsNotDowned() {
    sessions.observe(0, PG, Set.of(1L, 2L, 3L));
    sessions.observe(5 * S, PG, Set.of(1L, 2L));
    assertThat(sessions.toDown(6 * S, Set.of(), true)).isEmpty();
    assertThat(sessions.toDown(6 * S, Set.of(2L), true)).as("2 has its session").isEmpty();
  }

  @Test
  void aSessionNeverSeenIsNoEvidence() {
    sessions.observe(0, PG, Set.of(1L, 2L));
    sessions.observe(5 * S, PG, Set.of(1L, 2L));
    assertThat(sessions.toDown(6 * S, Set.of(3L), true)).isEmpty();
  }

  @Test
  void aMemberWhoseSessionCameBackIsNotDowned() {
    sessions.observe(0, PG, Set.of(1L, 3L));
    sessions.observe(1 * S, PG, Set.of(1L));
    sessions.observe(2 * S, PG, Set.of(1L, 3L));
    sessions.observe(3 * S, PG, Set.of(1L));
    assertThat(sessions.toDown(4 * S, Set.of(3L), true)).as("gone again only since 3 s").isEmpty();
  }

  @Test
  void aRestartOfPostgresqlEndsEverySessionAndIsNoEvidence() {
    sessions.observe(0, PG, Set.of(1L, 2L, 3L));
    Instant restarted = PG.plusSeconds(60);
    sessions.observe(1 * S, restarted, Set.of(1L));
    sessions.observe(10 * S, restarted, Set.of(1L));
    assertThat(sessions.toDown(10 * S, Set.of(2L, 3L), true)).isEmpty();
    // Once a member's session is seen in the new lifetime, its end counts again.
    sessions.observe(11 * S, restarted, Set.of(1L, 2L));
    sessions.observe(12 * S, restarted, Set.of(1L));
    sessions.observe(14 * S, restarted, Set.of(1L));
    assertThat(sessions.toDown(14 * S, Set.of(2L, 3L), true)).containsExactly(2L);
  }

  @Test
  void aMinorityDownsNobody() {
    sessions.observe(0, PG, Set.of(1L, 2L, 3L));
    sessions.observe(1 * S, PG, Set.of(1L));
    sessions.observe(5 * S, PG, Set.of(1L));
    assertThat(sessions.toDown(5 * S, Set.of(2L, 3L), false)).isEmpty();
    assertThat(sessions.toDown(5 * S, Set.of(2L, 3L), true)).containsExactlyInAnyOrder(2L, 3L);
  }

  @Test
  void removedMembersAreForgotten() {
    sessions.observe(0, PG, Set.of(1L, 3L));
    sessions.observe(1 * S, PG, Set.of(1L));
    sessions.retain(Set.of(1L));
    sessions.observe(5 * S, PG, Set.of(1L));
    assertThat(sessions.toDown(5 * S, Set.of(3L), true)).isEmpty();
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
            new MemberPresence.Settings(true, Duration.ofMillis(500), Duration.ofSeconds(2)));
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
                    config(Map.of("weir.cluster.ended-session-downing.min-absence", "0s"))))
        .isInstanceOfSatisfying(
            SettingsException.class,
            e -> assertThat(e.key()).isEqualTo("weir.cluster.ended-session-downing.min-absence"));
  }

  private static Config config(Map<String, Object> overrides) {
    return ConfigFactory.parseMap(overrides)
        .withFallback(ConfigFactory.parseResources("reference.conf"))
        .resolve(ConfigResolveOptions.noSystem());
  }
}
