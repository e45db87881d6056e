package io.weir.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import io.weir.persistence.testing.TestPostgres;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;
import org.awaitility.Awaitility;
import org.awaitility.core.ConditionTimeoutException;
import org.junit.jupiter.api.Test;

/**
 * Ended-session downing (ADR 0051) in a cluster of three node processes whose split-brain resolver
 * waits 60 s: a frozen member (SIGSTOP) is not downed, even when its PostgreSQL session is ended
 * while it is frozen; a killed member (SIGKILL) loses its session before it becomes unreachable,
 * and the two others down and remove it long before the resolver could.
 */
class EndedSessionDowningIT extends EndToEndTest {
  private static final org.slf4j.Logger LOG =
      org.slf4j.LoggerFactory.getLogger(EndedSessionDowningIT.class);
  private static final String DOWNING = "its PostgreSQL session ended before it became so";

  /** The resolver's stable-after here: a removal well before it is not the resolver's doing. */
  private static final Duration STABLE_AFTER = Duration.ofSeconds(60);

  /** Downing a killed member takes about 6 s here; 45 s survives a machine four times slower. */
  private static final Duration KILLED_REMOVED = Duration.ofSeconds(45);

  /** How long the frozen member stays frozen: several times the minimum absence (2 s). */
  private static final Duration FROZEN = Duration.ofSeconds(10);

  @Test
  void aKilledMemberIsDownedAtOnceAndAFrozenOneIsLeftToTheResolver() throws Exception {
    db = TestPostgres.server().freshDatabase("ended_sessions");
    int seed1 = NodeProcess.freePort();
    int seed2 = NodeProcess.freePort();
    String seeds = "127.0.0.1:" + seed1 + ",127.0.0.1:" + seed2;
    for (int i = 1; i <= 3; i++) {
      NodeProcess.Spec spec =
          new NodeProcess.Spec("ended-sessions-" + i)
              .database(db)
              .env("WEIR_SEED_NODES", seeds)
              .prop(
                  "pekko.cluster.split-brain-resolver.stable-after", STABLE_AFTER.toSeconds() + "s")
              .prop("pekko.cluster.min-nr-of-members", "3");
      if (i == 1) {
        spec.clusterPort(seed1);
      } else if (i == 2) {
        spec.clusterPort(seed2);
      }
      nodes.add(NodeProcess.start(spec));
    }
    awaitOrDump(
        START_UP,
        "every node should see 3 Up members and be ready",
        () -> {
          Set<String> all = new HashSet<>();
          nodes.forEach(n -> all.add(n.clusterAddress()));
          return nodes.stream()
              .allMatch(
                  n -> {
                    Map<String, String> members = n.memberStatuses();
                    return members.keySet().equals(all)
                        && members.values().stream().allMatch("up"::equals)
                        && n.ready();
                  });
        });
    NodeProcess victim = nodes.get(2);
    List<NodeProcess> survivors = nodes.subList(0, 2);

    // Frozen: unreachable, but its connection to PostgreSQL stays open, so its session does too.
    int[] logged = survivors.stream().mapToInt(n -> n.log().length()).toArray();
    victim.signal("STOP");
    long frozenAt = System.nanoTime();
    // From their logs: GET /admin/cluster may take seconds while a member is frozen.
    String marked = "Marking node as UNREACHABLE [Member(" + victim.clusterAddress() + ",";
    awaitOrDump(
        Duration.ofSeconds(60),
        "the survivors should mark the frozen member unreachable",
        () ->
            survivors.get(0).log().indexOf(marked, logged[0]) >= 0
                && survivors.get(1).log().indexOf(marked, logged[1]) >= 0);
    double unreachableAfter = (System.nanoTime() - frozenAt) / 1e9;
    // Its session ends while it is frozen (as if an operator ended it): an ending that comes after
    // the member became unreachable says nothing about its process. (The survivors look every
    // 0.5 s while a member is unreachable: 3 s of it lets each look at it before the ending.)
    String reachableAgain = "Marking node as REACHABLE [Member(" + victim.clusterAddress() + ",";
    holdsFor(
        Duration.ofSeconds(3),
        "the frozen member stays unreachable",
        () ->
            survivors.get(0).log().indexOf(reachableAgain, logged[0]) < 0
                && survivors.get(1).log().indexOf(reachableAgain, logged[1]) < 0);
    java.util.regex.Matcher session =
        java.util.regex.Pattern.compile("session is named '(weir-member \\d+)'")
            .matcher(victim.log());
    assertThat(session.find()).as("the victim logs its session's name").isTrue();
    try (java.sql.Connection c = db.connect();
        java.sql.PreparedStatement ps =
            c.prepareStatement(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    + " WHERE application_name = ?")) {
      ps.setString(1, session.group(1));
      try (java.sql.ResultSet rs = ps.executeQuery()) {
        rs.next();
        assertThat(rs.getInt(1)).as("the frozen member's session was ended").isEqualTo(1);
      }
    }
    holdsFor(
        FROZEN,
        "nobody downs the frozen member",
        () -> survivors.stream().noneMatch(n -> n.log().contains(DOWNING)));
    for (NodeProcess n : survivors) {
      assertThat(n.memberStatusesNow())
          .as(
              "%s keeps the frozen member (its session ended after it became unreachable)",
              n.name())
          .containsEntry(victim.clusterAddress(), "up");
      assertThat(n.log()).as("%s downed nobody", n.name()).doesNotContain(DOWNING);
    }
    victim.signal("CONT");
    awaitOrDump(
        Duration.ofSeconds(60),
        "the member should be reachable again once it runs",
        () -> nodes.stream().allMatch(n -> n.cluster().isPresent() && unreachable(n).isEmpty()));
    LOG.info(
        String.format(
            "frozen-member-kept: unreachable %.1f s after SIGSTOP, still a member %d s later",
            unreachableAfter, FROZEN.toSeconds()));

    // Running again, it opens a new session; the survivors must have seen it (they look every
    // second) before the kill, or they have no recent session to see end.
    awaitOrDump(
        Duration.ofSeconds(60),
        "the resumed member should open its session again",
        () -> sessions(session.group(1)) == 1);
    holdsFor(
        Duration.ofSeconds(3),
        "the resumed member keeps its session",
        () -> sessions(session.group(1)) == 1);
    // Killed: its session ends with the process, seconds before the failure detector marks it
    // unreachable; the survivors down and remove it.
    victim.kill();
    long killedAt = System.nanoTime();
    awaitOrDump(
        KILLED_REMOVED,
        "the survivors should remove the killed member well before stable-after",
        () ->
            survivors.stream()
                .allMatch(
                    n -> {
                      Map<String, String> members = n.memberStatuses();
                      return members.size() == 2
                          && !members.containsKey(victim.clusterAddress())
                          && n.ready();
                    }));
    double removedAfter = (System.nanoTime() - killedAt) / 1e9;
    assertThat(survivors.stream().anyMatch(n -> n.log().contains(DOWNING)))
        .as("a survivor downed the killed member for its ended session")
        .isTrue();
    LOG.info(
        String.format(
            "killed-member-removed: %.1f s after SIGKILL (stable-after %d s)",
            removedAfter, STABLE_AFTER.toSeconds()));
  }

  /**
   * Waits while {@code condition} holds for {@code period} (checked every 250 ms); fails, with the
   * nodes' logs, if it stops holding before the period ends or a slow machine cannot check it in
   * time.
   */
  private void holdsFor(Duration period, String what, BooleanSupplier condition) {
    try {
      Awaitility.await(what)
          .during(period)
          .atMost(period.plus(Duration.ofSeconds(30)))
          .pollInterval(Duration.ofMillis(250))
          .until(condition::getAsBoolean);
    } catch (ConditionTimeoutException e) {
      nodes.forEach(n -> LOG.error("log of {}:\n{}", n.name(), n.log()));
      throw e;
    }
  }

  /** How many sessions PostgreSQL has with this application name. */
  private int sessions(String applicationName) {
    try (java.sql.Connection c = db.connect();
        java.sql.PreparedStatement ps =
            c.prepareStatement(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = ?")) {
      ps.setString(1, applicationName);
      try (java.sql.ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getInt(1);
      }
    } catch (java.sql.SQLException e) {
      return -1;
    }
  }

  private static Set<String> unreachable(NodeProcess n) {
    Set<String> out = new HashSet<>();
    n.cluster().ifPresent(c -> c.path("unreachable").forEach(u -> out.add(u.asText())));
    return out;
  }

  private void awaitOrDump(Duration atMost, String what, BooleanSupplier condition) {
    try {
      Awaitility.await(what)
          .atMost(atMost)
          .pollInterval(Duration.ofMillis(250))
          .until(condition::getAsBoolean);
    } catch (ConditionTimeoutException e) {
      nodes.forEach(n -> LOG.error("log of {}:\n{}", n.name(), n.log()));
      throw e;
    }
  }
}
