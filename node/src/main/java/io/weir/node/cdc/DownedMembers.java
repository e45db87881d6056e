package io.weir.node.cdc;

import io.weir.persistence.cdc.source.SlotHolders;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Subscribe;

/**
 * The cluster members this node saw removed after being downed (by the split-brain resolver or an
 * operator), by their unique id: a pipeline on this node may end such a member's walsender to take
 * its slot over ({@link SlotHolders}, ADR 0037). A member that left gracefully, or one removed
 * before this node started, is not listed: its walsender is left to {@code wal_sender_timeout}.
 */
public final class DownedMembers {
  /** Removed members kept, oldest dropped first: far more than a cluster's lifetime of downings. */
  private static final int KEPT = 1_000;

  private final Set<String> downed =
      Collections.synchronizedSet(
          Collections.newSetFromMap(
              new LinkedHashMap<String, Boolean>() {
                @Override
                protected boolean removeEldestEntry(Map.Entry<String, Boolean> eldest) {
                  return size() > KEPT;
                }
              }));
  private final String self;

  private DownedMembers(String self) {
    this.self = self;
  }

  /** Starts listening to the cluster's removals. */
  public static DownedMembers start(ActorSystem<?> system) {
    Cluster cluster = Cluster.get(system);
    DownedMembers members =
        new DownedMembers(Long.toUnsignedString(cluster.selfMember().uniqueAddress().longUid()));
    Behavior<ClusterEvent.MemberRemoved> listener =
        Behaviors.setup(
            ctx -> {
              cluster
                  .subscriptions()
                  .tell(Subscribe.create(ctx.getSelf(), ClusterEvent.MemberRemoved.class));
              return Behaviors.receiveMessage(
                  removed -> {
                    if (removed.previousStatus() == MemberStatus.down()) {
                      members.downed.add(
                          Long.toUnsignedString(removed.member().uniqueAddress().longUid()));
                    }
                    return Behaviors.same();
                  });
            });
    system.systemActorOf(listener, "weir-downed-members", Props.empty());
    return members;
  }

  /** This member's name on its replication connections, and which holders it may end. */
  public SlotHolders holders() {
    return new SlotHolders(self, downed::contains);
  }
}
