package io.weir.persistence;

import java.time.Instant;

/**
 * What a node knows about its PostgreSQL: not yet probed, ready (schema migrated), unavailable, or
 * refused.
 */
public sealed interface StorageStatus {
  /** Instant this status was first observed. */
  Instant since();

  default boolean isReady() {
    return this instanceof Ready;
  }

  record Starting(Instant since) implements StorageStatus {}

  /**
   * Reachable, schema migrated, journal table answering.
   *
   * @param copies on how many copies a commit is durable, as of the last probe
   */
  record Ready(Instant since, ClusterIdentity identity, String schemaVersion, StorageCopies copies)
      implements StorageStatus {
    public Ready(Instant since, ClusterIdentity identity, String schemaVersion) {
      this(since, identity, schemaVersion, StorageCopies.UNREAD);
    }

    /** The same status with the copies of a later probe (its {@code since} kept). */
    public Ready withCopies(StorageCopies now) {
      return new Ready(since, identity, schemaVersion, now);
    }
  }

  /**
   * @param reason value-free description (exception classes and SQLState), see {@link SafeErrors}
   */
  record Unavailable(Instant since, String reason) implements StorageStatus {}

  /**
   * Reachable, but this node must not run against it (its partition count differs from the
   * cluster's). Terminal: the monitor stops probing and the node shuts down.
   *
   * @param reason value-free, names the setting to change
   */
  record Refused(Instant since, String reason) implements StorageStatus {}
}
