package io.weir.persistence;

import java.time.Instant;

/** What a node knows about its PostgreSQL: not yet probed, ready (schema migrated), or unavailable. */
public sealed interface StorageStatus {
  /** Instant this status was first observed. */
  Instant since();

  default boolean isReady() {
    return this instanceof Ready;
  }

  record Starting(Instant since) implements StorageStatus {}

  /** Reachable, schema migrated, journal table answering. */
  record Ready(Instant since, ClusterIdentity identity, String schemaVersion) implements StorageStatus {}

  /**
   * @param reason value-free description (exception classes and SQLState), see {@link SafeErrors}
   */
  record Unavailable(Instant since, String reason) implements StorageStatus {}
}
