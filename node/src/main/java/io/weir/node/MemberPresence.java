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
import java.time.Instant;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;
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
 * closes the connection and PostgreSQL ends the session within milliseconds, seconds before the
 * failure detector marks the member unreachable. Every node looks at the members' sessions every
 * {@link #IDLE_LOOK} (every {@code interval} while a member is unreachable) on a thread of its own,
 * and downs a member whose session ended just before it became unreachable ({@link EndedSessions}).
 * The split-brain resolver still decides everything else (frozen, slow or cut-off members keep
 * their sessions) after {@code stable-after}.
 *
 * <p>This node's own session is only ever closed by a failure of the connection itself, never
 * because a look was slow: a node that stalls must not look dead to the others.
 */
final class MemberPresence {
  static final String NAME_PREFIX = "weir-member ";
  private static final Logger log = LoggerFactory.getLogger(MemberPresence.class);

  /** How often the sessions are looked at while every member is reachable. */
  private static final Duration IDLE_LOOK = Duration.ofSeconds(1);

  /**
   * How long before a member became unreachable its session may have been seen last: the failure
   * detector's pause plus the looks' spacing, with room for a loaded machine.
   */
  static final Duration WINDOW = Duration.ofSeconds(15);

  /**
   * How long before the first look that found a member unreachable its session must have been found
   * gone. A process that dies loses its session at once, and the failure detector marks it
   * unreachable 3.5 s or more later (Pekko's 3 s pause plus heartbeats; 3.7-4.4 s measured), while
   * this node finds the session gone within its 1 s spacing of looks: about 3 s of lead. A session
   * that ends while the member is already unreachable (frozen, say), or is found gone just before
   * this node's view of the membership catches up (gossip lags about 1 s), has less.
   */
  static final Duration LEAD = Duration.ofSeconds(2);

  /** A look that takes longer is cancelled (the session stays). */
  private static final int LOOK_TIMEOUT_SECONDS = 5;

  /**
   * A connection that does not answer for this long is given up (the session ends with it): far
   * beyond {@code stable-after}, so by then the resolver has decided about this node anyway.
   */
  private static final Duration SOCKET_TIMEOUT = Duration.ofSeconds(60);

  private static final String SESSIONS =
      "SELECT pg_catalog.pg_postmaster_start_time(), ARRAY(SELECT a.application_name"
          + " FROM pg_catalog.pg_stat_activity a WHERE a.datname = pg_catalog.current_database()"
          + " AND a.application_name LIKE 'weir-member %')";

  /**
   * {@code weir.cluster.ended-session-downing.*}.
   *
   * @param enabled whether this node holds its session and downs members whose session ended
   * @param interval how often the sessions are looked at while a member is unreachable
   * @param minUnreachable how long such a member must have been unreachable before it is downed
   */
  record Settings(boolean enabled, Duration interval, Duration minUnreachable) {
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
          v.positiveDuration(PREFIX + "min-unreachable"));
    }
  }

  /** One look's answer. */
  private record Look(Instant postmasterStarted, Set<Long> withSession) {}

  private final ActorSystem<?> system;
  private final PostgresSettings postgres;
  private final EndedSessions sessions;
  private final Counter downings;
  private final String name;

  /** Members this node told the cluster to down (each once). */
  private final Set<Long> downed = new HashSet<>();

  private volatile Connection own;
  private volatile boolean stopped;
  private long lastLook = Long.MIN_VALUE;
  private boolean warned;
  private boolean wasMember;
  private boolean opened;

  private MemberPresence(
      ActorSystem<?> system, PostgresSettings postgres, Settings settings, MeterRegistry registry) {
    this.system = system;
    this.postgres = postgres;
    this.sessions = new EndedSessions(settings.minUnreachable(), WINDOW, LEAD);
    this.downings =
        Counter.builder("weir.cluster.ended.session.downings")
            .description(
                "Members this node downed because their PostgreSQL session ended just before they became unreachable")
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
    log.info(
        "ended-session downing is on: this node's PostgreSQL session is named '{}'", presence.name);
    // A thread of its own: a look that waits for PostgreSQL holds up nothing else, and nothing
    // else holds up this node's own session.
    ScheduledExecutorService thread =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "weir-member-presence");
              t.setDaemon(true);
              return t;
            });
    thread.scheduleWithFixedDelay(
        presence::tickSafely, 0, settings.interval().toMillis(), TimeUnit.MILLISECONDS);
    system
        .getWhenTerminated()
        .thenRun(
            () -> {
              presence.stopped = true;
              thread.shutdownNow(); // a look under way ends; holdOwn closes what it opens after
              presence.closeOwn();
            });
  }

  /** A failure never ends the schedule (anything thrown would stop it for good). */
  private void tickSafely() {
    try {
      tick();
    } catch (VirtualMachineError e) {
      throw e;
    } catch (Throwable e) {
      if (!warned) {
        log.warn("ended-session downing: a look failed ({})", SafeErrors.describe(e));
        warned = true;
      }
    }
  }

  private void tick() {
    Cluster cluster = Cluster.get(system);
    MemberStatus selfStatus = cluster.selfMember().status();
    if (selfStatus == MemberStatus.down()
        || selfStatus == MemberStatus.exiting()
        || (selfStatus == MemberStatus.removed() && wasMember)) {
      closeOwn(); // downed, exiting or removed: nothing more to look at or to hold
      return;
    }
    // Before it joins, a node's own status is "removed" too.
    wasMember |= selfStatus != MemberStatus.removed();
    long started = System.nanoTime();
    if (unreachable(cluster.state()).isEmpty()
        && lastLook != Long.MIN_VALUE
        && started - lastLook < IDLE_LOOK.toNanos()) {
      return;
    }
    lastLook = started;
    Look look;
    try {
      Connection c = holdOwn();
      if (c == null) {
        return; // stopping
      }
      look = look(c);
      warned = false;
    } catch (SQLException e) {
      if (!warned) {
        log.warn(
            "ended-session downing: cannot look at the members' sessions ({}); the split-brain resolver still downs members",
            SafeErrors.describe(e));
        warned = true;
      }
      if (connectionLost(e)) {
        closeOwn(); // opened again at the next tick, not IDLE_LOOK later
        lastLook = Long.MIN_VALUE;
      }
      return;
    }
    long now = System.nanoTime();
    // The membership as it is when the look's answer arrived.
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
    boolean majority =
        cluster.selfMember().status() == MemberStatus.up()
            && EndedSessions.majority(reachable, all);
    for (Long uid :
        sessions.look(
            now, look.postmasterStarted(), look.withSession(), unreachable.keySet(), majority)) {
      if (!downed.add(uid)) {
        continue; // told already: the leader removes it once the others have seen it
      }
      Member m = unreachable.get(uid);
      log.warn(
          "member {} is unreachable and its PostgreSQL session ended before it became so (its process is gone): downing it (ADR 0051)",
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

  /**
   * Opens this node's session when there is none or its connection failed (pgjdbc closes a
   * connection whose socket failed). A new session means PostgreSQL may have ended every session (a
   * restart, a crash of one backend, a failover): what was seen before is forgotten.
   */
  private Connection holdOwn() throws SQLException {
    Connection c = own;
    if (c != null && !c.isClosed()) {
      return c;
    }
    boolean again = c != null || opened;
    closeOwn();
    c = Database.connect(postgres, name, SOCKET_TIMEOUT);
    own = c;
    if (stopped) {
      closeOwn(); // the node stopped while this connected
      return null;
    }
    opened = true;
    sessions.reset();
    if (again) {
      log.info(
          "ended-session downing: this node's session was opened again; sessions seen before are forgotten");
    }
    return c;
  }

  /**
   * Whether {@code e} says the session itself is gone (a connection failure, or the server ended
   * it: administrator command, shutdown): only then is this node's session opened again. A
   * cancelled or failed query keeps it.
   */
  static boolean connectionLost(SQLException e) {
    String state = e.getSQLState();
    return state != null && (state.startsWith("08") || state.startsWith("57P"));
  }

  private Look look(Connection c) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(SESSIONS)) {
      ps.setQueryTimeout(LOOK_TIMEOUT_SECONDS);
      try (ResultSet rs = ps.executeQuery()) {
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
        return new Look(started == null ? null : started.toInstant(), withSession);
      }
    }
  }

  private void closeOwn() {
    Connection c = own;
    own = null;
    if (c != null) {
      try {
        c.close();
      } catch (SQLException e) {
        log.debug("closing the member session: {}", SafeErrors.describe(e));
      }
    }
  }
}
