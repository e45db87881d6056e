package io.weir.node;

import io.weir.persistence.StorageStatus;
import io.weir.protocol.http.ClusterStatus;
import io.weir.protocol.http.Readiness;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.ClusterEvent.CurrentClusterState;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;

/** Read-only view of this node for the health and admin routes: readiness and cluster membership. */
public final class NodeView {
  private final ActorSystem<?> system;
  private final Cluster cluster;
  private final Supplier<StorageStatus> storage;
  private final int partitions;

  public NodeView(ActorSystem<?> system, Supplier<StorageStatus> storage, int partitions) {
    this.system = system;
    this.cluster = Cluster.get(system);
    this.storage = storage;
    this.partitions = partitions;
  }

  /** Where the partitions run, as the shard regions report it (asks every region, 3 s at most). */
  public java.util.concurrent.CompletionStage<io.weir.protocol.http.PartitionsStatus> partitionsStatus() {
    return io.weir.sharding.partition.PartitionSharding.runningByNode(system, java.time.Duration.ofSeconds(3))
        .thenApply(byNode -> new io.weir.protocol.http.PartitionsStatus(
            partitions, byNode.values().stream().mapToInt(Integer::intValue).sum(), byNode));
  }

  /** Ready when this node is an Up member of the cluster and its PostgreSQL journal answers. */
  public Readiness readiness() {
    MemberStatus member = cluster.selfMember().status();
    StorageStatus store = storage.get();
    Map<String, String> checks = new LinkedHashMap<>();
    checks.put("cluster-member", statusName(member));
    checks.put("storage", storageName(store));
    return new Readiness(member == MemberStatus.up() && store.isReady(), checks);
  }

  public ClusterStatus clusterStatus() {
    CurrentClusterState state = cluster.state();
    Set<Member> unreachable = state.getUnreachable();
    List<ClusterStatus.Member> members = new ArrayList<>();
    for (Member m : state.getMembers()) {
      members.add(
          new ClusterStatus.Member(
              m.address().toString(), statusName(m.status()), List.copyOf(m.getRoles().stream().sorted().toList()),
              !unreachable.contains(m)));
    }
    members.sort(Comparator.comparing(ClusterStatus.Member::address));
    List<String> unreachableAddresses = unreachable.stream().map(m -> m.address().toString()).sorted().toList();
    Address leader = state.getLeader();
    String clusterId = storage.get() instanceof StorageStatus.Ready r ? r.identity().clusterId().toString() : null;
    return new ClusterStatus(
        clusterId, cluster.selfMember().address().toString(), leader == null ? null : leader.toString(), members,
        unreachableAddresses);
  }

  static String statusName(MemberStatus status) {
    return status.toString().toLowerCase(Locale.ROOT);
  }

  static String storageName(StorageStatus status) {
    if (status instanceof StorageStatus.Ready) {
      return "ready";
    }
    if (status instanceof StorageStatus.Refused) {
      return "refused";
    }
    return status instanceof StorageStatus.Unavailable ? "unavailable" : "starting";
  }
}
