package io.weir.persistence;

import java.time.Instant;
import java.util.UUID;

/**
 * The identity every node of one Weir cluster shares: generated once, kept in PostgreSQL.
 *
 * @param signingKey HMAC-SHA256 key for signed tokens; never part of {@link #toString()}
 * @param partitionCount the number of partitions P, fixed at the cluster's creation
 * @param restoreEpoch how many times schema {@code weir} was restored from a backup (ADR 0012)
 */
public record ClusterIdentity(
    UUID clusterId,
    String signingKid,
    byte[] signingKey,
    Instant createdAt,
    int partitionCount,
    int restoreEpoch) {
  public ClusterIdentity {
    signingKey = signingKey.clone();
  }

  public ClusterIdentity(
      UUID clusterId, String signingKid, byte[] signingKey, Instant createdAt, int partitionCount) {
    this(clusterId, signingKid, signingKey, createdAt, partitionCount, 0);
  }

  @Override
  public byte[] signingKey() {
    return signingKey.clone();
  }

  @Override
  public String toString() {
    return "ClusterIdentity[clusterId="
        + clusterId
        + ", signingKid="
        + signingKid
        + ", createdAt="
        + createdAt
        + ", partitionCount="
        + partitionCount
        + ", restoreEpoch="
        + restoreEpoch
        + "]";
  }
}
