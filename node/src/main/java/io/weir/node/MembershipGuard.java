package io.weir.node;

import io.weir.persistence.SafeErrors;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.sql.DataSource;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.JoinSeedNodes;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps a node that is the first of its seed nodes from forming a second cluster on the same
 * database. Pekko lets the first seed join itself when no other seed answers within {@code
 * seed-node-timeout}; restarted while the others are busy, it would start a cluster of its own,
 * with its own pipeline manager and partitions writing the same journal.
 *
 * <p>Every member holds a shared PostgreSQL advisory lock (one per Weir schema) on a connection of
 * its own for as long as it is Up. The first seed forms a cluster only when it can take that lock
 * exclusively, that is when no member of any cluster on this database is alive; otherwise it only
 * joins (itself last in the seed list) and checks again every few seconds. A SIGKILLed node's
 * connection closes and its lock goes with it; a partitioned one's lock stays until PostgreSQL
 * notices (TCP keepalive), which only delays forming a cluster, never allows a second one.
 */
final class MembershipGuard {
  private static final Logger log = LoggerFactory.getLogger(MembershipGuard.class);
  private static final Duration CHECK_EVERY = Duration.ofSeconds(3);

  /** First key of the advisory lock: "WEIR"; the second is the schema's hash. */
  private static final int LOCK_CLASS = 0x57454952;

  private final ActorSystem<?> system;
  private final DataSource dataSource;
  private final int lockKey;
  private final List<Address> seeds;
  private final AtomicBoolean formed = new AtomicBoolean();
  private boolean wasUp;
  private Connection held;

  private MembershipGuard(
      ActorSystem<?> system, DataSource dataSource, String schema, List<Address> seeds) {
    this.system = system;
    this.dataSource = dataSource;
    this.lockKey = schema.hashCode();
    this.seeds = List.copyOf(seeds);
  }

  /** Joins through {@code seeds} and, from then on, holds the membership lock while Up. */
  static void join(
      ActorSystem<?> system, DataSource dataSource, String schema, List<Address> seeds) {
    MembershipGuard guard = new MembershipGuard(system, dataSource, schema, seeds);
    Cluster cluster = Cluster.get(system);
    Address self = cluster.selfMember().address();
    if (!seeds.get(0).equals(self)) {
      cluster.manager().tell(new JoinSeedNodes(seeds));
    } else {
      // Join only (self last) until the lock shows no member is alive anywhere.
      List<Address> joinOnly = new ArrayList<>(seeds.subList(1, seeds.size()));
      joinOnly.add(self);
      cluster.manager().tell(new JoinSeedNodes(joinOnly));
    }
    system
        .scheduler()
        .scheduleWithFixedDelay(
            Duration.ZERO,
            CHECK_EVERY,
            () -> guard.tick(self),
            system
                .dispatchers()
                .lookup(DispatcherSelector.fromConfig("weir.blocking-io-dispatcher")));
  }

  private synchronized void tick(Address self) {
    MemberStatus status = Cluster.get(system).selfMember().status();
    try {
      if (status == MemberStatus.up() || status == MemberStatus.weaklyUp()) {
        wasUp = true;
        holdShared();
      } else if (wasUp) {
        // Leaving or removed (before it first joins, a node's own status is also "removed").
        release();
      } else if (seeds.get(0).equals(self) && !formed.get() && noMemberAlive()) {
        formed.set(true);
        log.info(
            "no member of a Weir cluster on this database is alive: this node (the first seed) may form the cluster");
        Cluster.get(system).manager().tell(new JoinSeedNodes(seeds));
      }
    } catch (SQLException e) {
      log.warn("cluster membership lock: {}", SafeErrors.describe(e));
      release();
    }
  }

  private void holdShared() throws SQLException {
    if (held != null && held.isValid(2)) {
      return;
    }
    release();
    Connection c = dataSource.getConnection();
    try (PreparedStatement ps = c.prepareStatement("SELECT pg_advisory_lock_shared(?, ?)")) {
      ps.setInt(1, LOCK_CLASS);
      ps.setInt(2, lockKey);
      ps.execute();
      held = c;
    } catch (SQLException e) {
      c.close();
      throw e;
    }
  }

  /** True when the membership lock can be taken exclusively: no live member holds it shared. */
  private boolean noMemberAlive() throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      boolean got;
      try (PreparedStatement ps = c.prepareStatement("SELECT pg_try_advisory_lock(?, ?)")) {
        ps.setInt(1, LOCK_CLASS);
        ps.setInt(2, lockKey);
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          got = rs.getBoolean(1);
        }
      }
      if (got) {
        try (PreparedStatement ps = c.prepareStatement("SELECT pg_advisory_unlock(?, ?)")) {
          ps.setInt(1, LOCK_CLASS);
          ps.setInt(2, lockKey);
          ps.execute();
        }
      }
      return got;
    }
  }

  private void release() {
    if (held != null) {
      try (PreparedStatement ps = held.prepareStatement("SELECT pg_advisory_unlock_shared(?, ?)")) {
        ps.setInt(1, LOCK_CLASS);
        ps.setInt(2, lockKey);
        ps.execute();
      } catch (SQLException e) {
        log.debug("releasing the membership lock: {}", SafeErrors.describe(e));
      }
      try {
        held.close();
      } catch (SQLException e) {
        log.debug("closing the membership lock connection: {}", SafeErrors.describe(e));
      }
      held = null;
    }
  }
}
