package io.weir.node;

import io.weir.node.cdc.PipelineManager;
import io.weir.persistence.StorageCopies;
import io.weir.persistence.StorageStatus;
import io.weir.protocol.http.ClusterStatus;
import io.weir.protocol.http.PartitionsStatus;
import io.weir.protocol.http.Readiness;
import io.weir.sharding.partition.PartitionSharding;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SortedSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.ClusterEvent.CurrentClusterState;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;

/**
 * Read-only view of this node for the health and admin routes: readiness, membership and placement.
 */
public final class NodeView {
  private static final Duration ASK_TIMEOUT = Duration.ofSeconds(3);

  /**
   * For a node view without a pipeline manager (tests of the HTTP layer): no slot owner is known.
   */
  public static final Supplier<CompletionStage<PipelineManager.PipelineList>> NO_PIPELINES =
      () -> CompletableFuture.failedFuture(new IllegalStateException("no pipeline manager"));

  private final ActorSystem<?> system;
  private final Cluster cluster;
  private final Supplier<StorageStatus> storage;
  private final int partitions;
  private final Supplier<CompletionStage<PipelineManager.PipelineList>> pipelines;
  private final int requiredCopies;

  /**
   * @param pipelines asks the pipeline manager (a cluster singleton) for every pipeline's status
   */
  public NodeView(
      ActorSystem<?> system,
      Supplier<StorageStatus> storage,
      int partitions,
      Supplier<CompletionStage<PipelineManager.PipelineList>> pipelines) {
    this(system, storage, partitions, pipelines, 1);
  }

  /**
   * @param requiredCopies below this many durable copies of a commit the node is not ready
   */
  public NodeView(
      ActorSystem<?> system,
      Supplier<StorageStatus> storage,
      int partitions,
      Supplier<CompletionStage<PipelineManager.PipelineList>> pipelines,
      int requiredCopies) {
    this.requiredCopies = requiredCopies;
    this.system = system;
    this.cluster = Cluster.get(system);
    this.storage = storage;
    this.partitions = partitions;
    this.pipelines = pipelines;
  }

  /** Where the partitions run, as the shard regions report it (asks every region, 3 s at most). */
  public CompletionStage<PartitionsStatus> partitionsStatus() {
    return PartitionSharding.runningByNode(system, Duration.ofSeconds(3))
        .thenApply(
            byNode ->
                new PartitionsStatus(
                    partitions,
                    byNode.values().stream().mapToInt(Integer::intValue).sum(),
                    byNode));
  }

  /**
   * Ready when this node is an Up member of the cluster, its PostgreSQL journal answers, and a
   * commit there is durable on at least {@code weir.storage.required-copies} copies (unknown copies
   * pass only when one is required).
   */
  public Readiness readiness() {
    MemberStatus member = cluster.selfMember().status();
    StorageStatus store = storage.get();
    Map<String, String> checks = new LinkedHashMap<>();
    checks.put("cluster-member", statusName(member));
    checks.put("storage", storageName(store));
    boolean copiesOk = true;
    if (store instanceof StorageStatus.Ready ready) {
      StorageCopies copies = ready.copies();
      copiesOk = copies.known() ? copies.copies() >= requiredCopies : requiredCopies <= 1;
      checks.put(
          "storage-copies",
          (copies.known() ? Integer.toString(copies.copies()) : "unknown")
              + " of "
              + requiredCopies
              + " required");
      if (ready.system() != null) {
        checks.put("storage-system", ready.system().describe());
      }
    }
    return new Readiness(member == MemberStatus.up() && store.isReady() && copiesOk, checks);
  }

  /**
   * Membership as this node sees it, with each member's partitions (asked of every shard region)
   * and the slot owner (asked of the pipeline manager). Either ask may time out (after 3 s each):
   * the answer then says so (null partitions, null owner) instead of failing, since operators need
   * it most when a node is in trouble.
   */
  public CompletionStage<ClusterStatus> clusterStatus() {
    CurrentClusterState state = cluster.state();
    Set<Member> unreachable = state.getUnreachable();
    List<Address> addresses = new ArrayList<>();
    state.getMembers().forEach(m -> addresses.add(m.address()));
    CompletableFuture<Map<String, SortedSet<Integer>>> placement =
        PartitionSharding.placement(system, addresses, ASK_TIMEOUT).toCompletableFuture();
    // Not the pipeline manager's own ask timeout (10 s): when the member running it is lost, this
    // answer is the one an operator is waiting for.
    CompletableFuture<PipelineManager.PipelineList> slots =
        pipelines
            .get()
            .toCompletableFuture()
            .completeOnTimeout(null, ASK_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)
            .exceptionally(e -> null);
    return placement.thenCombine(
        slots,
        (byNode, list) -> {
          List<ClusterStatus.Member> members = new ArrayList<>();
          for (Member m : state.getMembers()) {
            String address = m.address().toString();
            SortedSet<Integer> running = byNode.get(address);
            List<ClusterStatus.Slot> owned =
                list == null || !list.owner().equals(address)
                    ? List.of()
                    : list.pipelines().stream()
                        .map(p -> new ClusterStatus.Slot(p.name(), p.slot(), p.state()))
                        .toList();
            members.add(
                new ClusterStatus.Member(
                    address,
                    statusName(m.status()),
                    m.getRoles().stream().sorted().toList(),
                    !unreachable.contains(m),
                    running == null ? null : List.copyOf(running),
                    owned));
          }
          members.sort(Comparator.comparing(ClusterStatus.Member::address));
          List<String> unreachableAddresses =
              unreachable.stream().map(m -> m.address().toString()).sorted().toList();
          Address leader = state.getLeader();
          String clusterId =
              storage.get() instanceof StorageStatus.Ready r
                  ? r.identity().clusterId().toString()
                  : null;
          return new ClusterStatus(
              clusterId,
              cluster.selfMember().address().toString(),
              leader == null ? null : leader.toString(),
              members,
              unreachableAddresses,
              list == null ? null : list.owner());
        });
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
