package io.weir.sharding.partition;

import io.weir.sharding.storage.AcknowledgedMarks;
import java.util.Objects;
import java.util.concurrent.Executor;
import javax.sql.DataSource;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;

/**
 * What a partition is built with: its limits, where its documents live, what prunes its journal,
 * who observes it, whether it may write, what upgrades old snapshots, and which journal query
 * catches its documents table up at start.
 *
 * @param marks where the partition keeps the highest journal sequence it acknowledged, outside the
 *     journal's database ({@link AcknowledgedMarks#NONE}: nowhere, nothing checked)
 * @param stateStore where the partition reads its state at start and writes its snapshots ({@link
 *     StateStore#NONE}: Pekko's event replay and snapshot store)
 * @param queryJournal the plugin id of a read journal over the partitions' journal ({@code
 *     CurrentEventsByPersistenceIdQuery}), or null on a journal without one (then a documents table
 *     behind the journal at start cannot catch up and the partition does not serve)
 */
public record PartitionWiring(
    PartitionSettings settings,
    DocumentTable table,
    JournalPruner pruner,
    PartitionObserver observer,
    StorageGate gate,
    LegacySnapshots legacySnapshots,
    String queryJournal,
    AcknowledgedMarks marks,
    StateStore stateStore) {
  public PartitionWiring {
    Objects.requireNonNull(settings, "settings");
    Objects.requireNonNull(table, "table");
    Objects.requireNonNull(pruner, "pruner");
    Objects.requireNonNull(observer, "observer");
    Objects.requireNonNull(gate, "gate");
    Objects.requireNonNull(legacySnapshots, "legacySnapshots");
    Objects.requireNonNull(marks, "marks");
    Objects.requireNonNull(stateStore, "stateStore");
  }

  /**
   * Partitions on a fresh in-memory documents table, beside Pekko's in-memory journals (tests and
   * tools): nothing pruned, observed or gated, no old snapshots, no journal query, recovered by
   * Pekko's replay.
   */
  public static PartitionWiring inMemory(PartitionSettings settings) {
    return new PartitionWiring(
        settings,
        new InMemoryDocumentTable(),
        JournalPruner.NONE,
        PartitionObserver.NONE,
        StorageGate.OPEN,
        LegacySnapshots.NONE,
        null,
        AcknowledgedMarks.NONE,
        StateStore.NONE);
  }

  /**
   * Partitions on PostgreSQL: the documents table and old-snapshot upgrades on {@code documents}
   * (in {@code schema}, run on {@code io} and {@code upgrades}), the table caught up at start with
   * the JDBC journal's query, recovered with SQL ({@link SqlStateStore}, on {@code io}); nothing
   * pruned, observed or gated yet.
   */
  public static PartitionWiring jdbc(
      PartitionSettings settings,
      DataSource documents,
      String schema,
      Executor io,
      Executor upgrades) {
    return inMemory(settings)
        .withTable(new SqlDocumentTable(documents, schema, io, true))
        .withLegacySnapshots(new SqlLegacySnapshots(documents, schema, io, upgrades))
        .withQueryJournal(JdbcReadJournal.Identifier())
        .withStateStore(new SqlStateStore(documents, schema, io));
  }

  public PartitionWiring withSettings(PartitionSettings s) {
    return new PartitionWiring(
        s, table, pruner, observer, gate, legacySnapshots, queryJournal, marks, stateStore);
  }

  public PartitionWiring withTable(DocumentTable t) {
    return new PartitionWiring(
        settings, t, pruner, observer, gate, legacySnapshots, queryJournal, marks, stateStore);
  }

  public PartitionWiring withPruner(JournalPruner p) {
    return new PartitionWiring(
        settings, table, p, observer, gate, legacySnapshots, queryJournal, marks, stateStore);
  }

  public PartitionWiring withObserver(PartitionObserver o) {
    return new PartitionWiring(
        settings, table, pruner, o, gate, legacySnapshots, queryJournal, marks, stateStore);
  }

  public PartitionWiring withGate(StorageGate g) {
    return new PartitionWiring(
        settings, table, pruner, observer, g, legacySnapshots, queryJournal, marks, stateStore);
  }

  public PartitionWiring withLegacySnapshots(LegacySnapshots l) {
    return new PartitionWiring(
        settings, table, pruner, observer, gate, l, queryJournal, marks, stateStore);
  }

  public PartitionWiring withMarks(AcknowledgedMarks m) {
    return new PartitionWiring(
        settings, table, pruner, observer, gate, legacySnapshots, queryJournal, m, stateStore);
  }

  public PartitionWiring withQueryJournal(String pluginId) {
    return new PartitionWiring(
        settings, table, pruner, observer, gate, legacySnapshots, pluginId, marks, stateStore);
  }

  public PartitionWiring withStateStore(StateStore r) {
    return new PartitionWiring(
        settings, table, pruner, observer, gate, legacySnapshots, queryJournal, marks, r);
  }
}
