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
   * @param system which storage the journal is written to (null before the first probe reads it)
   * @param generation changes whenever the storage was lost and reached again or its identity
   *     changed: partitions that recovered under another generation recover again (ADR 0036)
   */
  record Ready(
      Instant since,
      ClusterIdentity identity,
      String schemaVersion,
      StorageCopies copies,
      StorageSystem system,
      long generation)
      implements StorageStatus {
    public Ready(
        Instant since, ClusterIdentity identity, String schemaVersion, StorageCopies copies) {
      this(since, identity, schemaVersion, copies, null, 0);
    }

    public Ready(Instant since, ClusterIdentity identity, String schemaVersion) {
      this(since, identity, schemaVersion, StorageCopies.UNREAD);
    }

    /** The same status with the copies of a later probe (its {@code since} kept). */
    public Ready withCopies(StorageCopies now) {
      return new Ready(since, identity, schemaVersion, now, system, generation);
    }

    /** The same status with the storage identity of a later probe. */
    public Ready withSystem(StorageSystem now) {
      return new Ready(since, identity, schemaVersion, copies, now, generation);
    }

    /** The same status in storage generation {@code g}. */
    public Ready withGeneration(long g) {
      return new Ready(since, identity, schemaVersion, copies, system, g);
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
