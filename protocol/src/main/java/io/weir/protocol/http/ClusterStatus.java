package io.weir.protocol.http;

import java.util.List;

/**
 * Reply of {@code GET /admin/cluster}: the cluster membership as this node sees it.
 *
 * @param clusterId Weir's cluster identity (from PostgreSQL), or null until storage is ready
 * @param self this node's cluster address
 * @param leader the current leader's address, or null while there is none
 * @param members every member with its status and roles
 * @param unreachable addresses of members this node's failure detector marks unreachable
 */
public record ClusterStatus(
    String clusterId, String self, String leader, List<Member> members, List<String> unreachable) {
  public ClusterStatus {
    members = List.copyOf(members);
    unreachable = List.copyOf(unreachable);
  }

  /**
   * @param status Pekko member status, lower case: joining, weaklyup, up, leaving, exiting, down, removed
   */
  public record Member(String address, String status, List<String> roles, boolean reachable) {
    public Member {
      roles = List.copyOf(roles);
    }
  }
}
