package io.weir.protocol.http;

import java.util.Map;

/**
 * Reply of {@code GET /admin/partitions}: the cluster's partitions and where they run.
 *
 * @param count the cluster's partition count P
 * @param running partitions currently running in the cluster (P when all are up)
 * @param byNode running partitions per node address
 */
public record PartitionsStatus(int count, int running, Map<String, Integer> byNode) {
  public PartitionsStatus {
    byNode = Map.copyOf(byNode);
  }
}
