package io.weir.protocol.http;

import java.util.List;

/**
 * Reply of {@code GET /admin/cluster}: the cluster membership as this node sees it, with where the
 * partitions run and which node owns the replication slots.
 *
 * @param clusterId Weir's cluster identity (from PostgreSQL), or null until storage is ready
 * @param self this node's cluster address
 * @param leader the current leader's address, or null while there is none
 * @param members every member with its status, roles, partitions and slots
 * @param unreachable addresses of members this node's failure detector marks unreachable
 * @param slotOwner address of the node running the pipelines (the one consumer of every slot), or
 *     null when the pipeline manager did not answer in time (for example during a handover)
 */
public record ClusterStatus(
    String clusterId,
    String self,
    String leader,
    List<Member> members,
    List<String> unreachable,
    String slotOwner) {
  public ClusterStatus {
    members = List.copyOf(members);
    unreachable = List.copyOf(unreachable);
  }

  /**
   * @param status Pekko member status, lower case: joining, weaklyup, up, leaving, exiting, down,
   *     removed
   * @param partitions the partitions running on this member, ascending; null when its shard region
   *     did not answer in time (unreachable or busy node)
   * @param slots the replication slots this member consumes (empty on every node but the slot
   *     owner)
   */
  public record Member(
      String address,
      String status,
      List<String> roles,
      boolean reachable,
      List<Integer> partitions,
      List<Slot> slots) {
    public Member {
      roles = List.copyOf(roles);
      partitions = partitions == null ? null : List.copyOf(partitions);
      slots = List.copyOf(slots);
    }
  }

  /**
   * A slot and its pipeline.
   *
   * @param pipeline the pipeline's name
   * @param slot the replication slot's name, null until the pipeline first started
   * @param state the pipeline's state (running, connecting, backoff, halted, stopped, ...)
   */
  public record Slot(String pipeline, String slot, String state) {}
}
