package io.weir.sharding.partition;

import com.typesafe.config.Config;
import io.weir.persistence.Database;
import io.weir.persistence.PostgresSettings;
import io.weir.persistence.SchemaMigrator;
import io.weir.persistence.testing.TestPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Partitions as the node builds them on PostgreSQL, for integration tests: the documents table
 * ({@link SqlDocumentTable}), old-snapshot upgrades ({@link SqlLegacySnapshots}) and the JDBC
 * journal's query to catch the table up at start, on a pool and executor of their own.
 */
final class JdbcPartitions implements AutoCloseable {
  final Database database;
  private final ExecutorService io = Executors.newFixedThreadPool(4);
  private final ExecutorService moves = Executors.newFixedThreadPool(2);

  /** On the database {@code config} names; its schema is migrated first. */
  JdbcPartitions(Config config, String poolName) {
    database = Database.create(PostgresSettings.create(config), poolName);
    SchemaMigrator.migrate(database.dataSource(), "weir");
  }

  SqlDocumentTable table() {
    return new SqlDocumentTable(database.dataSource(), "weir", io);
  }

  PartitionWiring wiring(PartitionSettings settings) {
    return PartitionWiring.jdbc(settings, database.dataSource(), "weir", io, moves);
  }

  PartitionWiring wiring() {
    return wiring(PartitionSettings.DEFAULTS);
  }

  /** The journal rows of partition {@code partition} in {@code db}. */
  static long journalRows(TestPostgres.TestDatabase db, int partition) {
    try (Connection c = db.connect();
        ResultSet rs =
            c.createStatement()
                .executeQuery(
                    "SELECT count(*) FROM weir.event_journal WHERE persistence_id = 'weir-partition|"
                        + partition
                        + "'")) {
      rs.next();
      return rs.getLong(1);
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void close() {
    io.shutdownNow();
    moves.shutdownNow();
    database.close();
  }
}
