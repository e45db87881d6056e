package io.weir.node;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.weir.persistence.ConfigValues;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SafeErrors;
import io.weir.persistence.SettingsException;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Down;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Ended-session downing (ADR 0051). Each node keeps a PostgreSQL session of its own, named {@code
 * weir-member <unique id>}, for as long as it runs; when its process dies the operating system
 * closes the connection and PostgreSQL ends the session within milliseconds. Every node looks at
 * the members' sessions every {@link #IDLE_LOOK} (every {@code interval} while a member is
 * unreachable), and downs an unreachable member whose session it saw and that has been gone for
 * {@code min-absence}, when its own side holds a majority ({@link EndedSessions}). The split-brain
 * resolver still decides everything else (frozen, slow or cut-off members keep their sessions)
 * after {@code stable-after}.
 */
final class MemberPresence {
  static final String NAME_PREFIX = "weir-member ";
  private static final Logger log = LoggerFactory.getLogger(MemberPresence.class);

  /** How often the sessions are looked at while every member is reachable. */
  private static final Duration IDLE_LOOK = Duration.ofSeconds(2);

  /** How long a look or a check of this node's own session may wait for PostgreSQL. */
  private static final Duration NETWORK_TIMEOUT = Duration.ofSeconds(10);

  private static final String SESSIONS =
      "SELECT pg_catalog.pg_postmaster_start_time(), ARRAY(SELECT a.application_name"
          + " FROM pg_catalog.pg_stat_activity a WHERE a.datname = pg_catalog.current_database()"
          + " AND a.application_name LIKE 'weir-member %')";

  /**
   * {@code weir.cluster.ended-session-downing.*}.
   *
   * @param enabled whether this node holds its session and downs members whose session ended
   * @param interval how often the sessions are looked at while a member is unreachable
   * @param minAbsence how long a member's session must have been gone before it is downed
   */
  record Settings(boolean enabled, Duration interval, Duration minAbsence) {
    private static final String PREFIX = "weir.cluster.ended-session-downing.";

    static Settings create(Config config) {
      ConfigValues v =
          new ConfigValues(config, Map.of(PREFIX + "enabled", "WEIR_ENDED_SESSION_DOWNING"));
      boolean enabled;
      try {
        enabled = config.getBoolean(PREFIX + "enabled");
      } catch (ConfigException e) {
        throw new SettingsException(
            PREFIX + "enabled", "must be on or off" + v.envHintOf(PREFIX + "enabled"));
      }
      return new Settings(
          enabled,
          v.positiveDuration(PREFIX + "interval"),
          v.positiveDuration(PREFIX + "min-absence"));
    }
  }

  private final ActorSystem<?> system;
  private final PostgresSettings postgres;
  private final EndedSessions sessions;
  private final Counter downings;
  private final String name;
  private Connection own;
  private long lastLook = Long.MIN_VALUE;
  private boolean warned;
  private boolean wasMember;

  /** Members this node told the cluster to down (each once). */
  private final Set<Long> downed = new HashSet<>();

  private MemberPresence(
      ActorSystem<?> system, PostgresSettings postgres, Settings settings, MeterRegistry registry) {
    this.system = system;
    this.postgres = postgres;
    this.sessions = new EndedSessions(settings.minAbsence());
    this.downings =
        Counter.builder("weir.cluster.ended.session.downings")
            .description(
                "Members this node downed because they were unreachable and their PostgreSQL session had ended")
            .register(registry);
    this.name =
        NAME_PREFIX
            + Long.toUnsignedString(Cluster.get(system).selfMember().uniqueAddress().longUid());
  }

  /** Holds this node's session and looks at the others' from now on, unless turned off. */
  static void start(
      ActorSystem<?> system, PostgresSettings postgres, Settings settings, MeterRegistry registry) {
    if (!settings.enabled()) {
      log.info("ended-session downing is off: only the split-brain resolver downs members");
      return;
    }
    MemberPresence presence = new MemberPresence(system, postgres, settings, registry);
    system
        .scheduler()
        .scheduleWithFixedDelay(
            Duration.ZERO,
            settings.interval(),
            presence::tick,
            system
                .dispatchers()
                .lookup(DispatcherSelector.fromConfig("weir.blocking-io-dispatcher")));
    system.getWhenTerminated().thenRun(presence::close);
  }

  private synchronized void tick() {
    Cluster cluster = Cluster.get(system);
    MemberStatus selfStatus = cluster.selfMember().status();
    if (selfStatus == MemberStatus.down()
        || selfStatus == MemberStatus.exiting()
        || (selfStatus == MemberStatus.removed() && wasMember)) {
      close(); // downed, exiting or removed: nothing more to look at or to hold
      return;
    }
    // Before it joins, a node's own status is "removed" too.
    wasMember |= selfStatus != MemberStatus.removed();
    long now = System.nanoTime();
    if (unreachable(cluster.state()).isEmpty()
        && lastLook != Long.MIN_VALUE
        && now - lastLook < IDLE_LOOK.toNanos()) {
      return;
    }
    lastLook = now;
    try {
      holdOwn();
      look(now);
      warned = false;
    } catch (SQLException e) {
      if (!warned) {
        log.warn(
            "ended-session downing: cannot look at the members' sessions ({}); the split-brain resolver still downs members",
            SafeErrors.describe(e));
        warned = true;
      }
      close();
      return;
    }
    // The membership as it is after the look, which may have waited for PostgreSQL.
    ClusterEvent.CurrentClusterState state = cluster.state();
    Map<Long, Member> unreachable = unreachable(state);
    Set<Long> members = new HashSet<>();
    int all = 0;
    int reachable = 0;
    for (Member m : state.getMembers()) {
      members.add(m.uniqueAddress().longUid());
      if (m.status() == MemberStatus.up() || m.status() == MemberStatus.leaving()) {
        all++;
        if (!state.getUnreachable().contains(m)) {
          reachable++;
        }
      }
    }
    sessions.retain(members);
    downed.retainAll(members);
    if (unreachable.isEmpty() || cluster.selfMember().status() != MemberStatus.up()) {
      return;
    }
    for (Long uid :
        sessions.toDown(now, unreachable.keySet(), EndedSessions.majority(reachable, all))) {
      if (!downed.add(uid)) {
        continue; // told already: the leader removes it once the others have seen it
      }
      Member m = unreachable.get(uid);
      log.warn(
          "member {} is unreachable and its PostgreSQL session has ended (its process is gone): downing it (ADR 0051)",
          m.address());
      cluster.manager().tell(new Down(m.address()));
      downings.increment();
    }
  }

  /** Unreachable members that are not already down, exiting or removed, by unique id. */
  private static Map<Long, Member> unreachable(ClusterEvent.CurrentClusterState state) {
    Map<Long, Member> out = new HashMap<>();
    for (Member m : state.getUnreachable()) {
      if (m.status() != MemberStatus.down()
          && m.status() != MemberStatus.exiting()
          && m.status() != MemberStatus.removed()) {
        out.put(m.uniqueAddress().longUid(), m);
      }
    }
    return out;
  }

  private void holdOwn() throws SQLException {
    if (own != null && own.isValid(2)) {
      return;
    }
    close();
    Connection c = Database.connect(postgres, name);
    try {
      // A look never hangs on a server that stopped answering: the tick runs again later.
      c.setNetworkTimeout(Runnable::run, (int) NETWORK_TIMEOUT.toMillis());
    } catch (SQLException e) {
      c.close();
      throw e;
    }
    own = c;
  }

  private void look(long now) throws SQLException {
    try (PreparedStatement ps = own.prepareStatement(SESSIONS);
        ResultSet rs = ps.executeQuery()) {
      rs.next();
      Timestamp started = rs.getTimestamp(1);
      Set<Long> withSession = new HashSet<>();
      Array names = rs.getArray(2);
      for (Object n : (Object[]) names.getArray()) {
        Long member = EndedSessions.memberOf((String) n);
        if (member != null) {
          withSession.add(member);
        }
      }
      sessions.observe(now, started == null ? null : started.toInstant(), withSession);
    }
  }

  private synchronized void close() {
    if (own != null) {
      try {
        own.close();
      } catch (SQLException e) {
        log.debug("closing the member session: {}", SafeErrors.describe(e));
      }
      own = null;
    }
  }
}
