package io.weir.node;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import io.weir.sharding.partition.PartitionSharding;
import java.util.List;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.ConfigValidation;
import org.apache.pekko.cluster.Invalid;
import org.apache.pekko.cluster.JoinConfigCompatChecker;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.Valid$;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Down;
import org.apache.pekko.cluster.typed.Subscribe;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The cluster has server members only (ADR 0028): protocol clients reach a node's gateway port and
 * are never members, because a member can address every actor of every node (partitions, sessions,
 * the cluster's own daemons) and Pekko does not authenticate the origin of a message.
 *
 * <p>Two checks keep a node that is not a server out, for a client configured the old way (role
 * {@code client}) or any other mistake; neither stops a process that lies about its roles, which is
 * why the cluster port must be reachable by server nodes only (mutual TLS with the cluster's own
 * CA, or the network):
 *
 * <ul>
 *   <li>{@link JoinCheck}: joining through seed nodes or bootstrap, a node whose {@code
 *       pekko.cluster.roles} lack {@code server} is refused before it becomes a member (its own log
 *       says that its configuration is incompatible);
 *   <li>{@link #watch}: every server downs a member without the server role as soon as it sees it
 *       (a node that joins by address skips the first check).
 * </ul>
 */
public final class ServerMembersOnly {
  private static final Logger log = LoggerFactory.getLogger(ServerMembersOnly.class);

  /** The only role a member may have. */
  public static final String ROLE = PartitionSharding.ROLE;

  private static final String ROLES = "pekko.cluster.roles";

  private ServerMembersOnly() {}

  /** Whether a joining node's configuration names the server role. */
  static boolean names(Config joining) {
    try {
      return joining.hasPath(ROLES) && joining.getStringList(ROLES).contains(ROLE);
    } catch (ConfigException e) {
      return false;
    }
  }

  /**
   * Pekko's join-time configuration check (registered in reference.conf), run by a member for a
   * node that asks to join through it and by the joining node for the member's answer.
   */
  public static final class JoinCheck extends JoinConfigCompatChecker {
    @Override
    public Seq<String> requiredKeys() {
      return CollectionConverters.asScala(List.of(ROLES)).toList();
    }

    @Override
    public ConfigValidation check(Config toCheck, Config actualConfig) {
      if (names(toCheck)) {
        return Valid$.MODULE$;
      }
      return new Invalid(
          CollectionConverters.asScala(
                  List.of(
                      "a Weir cluster has server members only: a node without the role "
                          + ROLE
                          + " may not join; protocol clients use a node's gateway port"
                          + " (docs/protocol-client.md)"))
              .toList());
    }
  }

  /** Starts, on this server node, the watch that downs members without the server role. */
  public static void watch(ActorSystem<?> system) {
    system.systemActorOf(watcher(), "weir-server-members-only", Props.empty());
  }

  private static Behavior<ClusterEvent.MemberEvent> watcher() {
    return Behaviors.setup(
        ctx -> {
          Cluster cluster = Cluster.get(ctx.getSystem());
          cluster
              .subscriptions()
              .tell(Subscribe.create(ctx.getSelf(), ClusterEvent.MemberEvent.class));
          return Behaviors.receiveMessage(
              event -> {
                Member member = event.member();
                if (!member.hasRole(ROLE)
                    && !(event instanceof ClusterEvent.MemberRemoved)
                    && member.status() != MemberStatus.down()) {
                  log.warn(
                      "a member without the {} role joined the cluster; downing it (clients use"
                          + " the gateway port, ADR 0028)",
                      ROLE);
                  cluster.manager().tell(new Down(member.address()));
                }
                return Behaviors.same();
              });
        });
  }
}
