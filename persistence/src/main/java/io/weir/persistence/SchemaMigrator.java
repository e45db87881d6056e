package io.weir.persistence;

import javax.sql.DataSource;
import org.flywaydb.core.Flyway;
import org.flywaydb.core.api.MigrationInfo;
import org.flywaydb.core.api.output.MigrateResult;

/**
 * Creates or migrates Weir's schema (journal, snapshots, cluster identity) with versioned Flyway
 * migrations from {@code classpath:db/migration}. Safe to run from several nodes at once: Flyway
 * serialises concurrent migrations with a PostgreSQL advisory lock.
 */
public final class SchemaMigrator {
  private SchemaMigrator() {}

  /** Migrates and returns the schema version now in force. */
  public static String migrate(DataSource dataSource, String schema) {
    Identifiers.require("schema name", schema);
    Flyway flyway =
        Flyway.configure(SchemaMigrator.class.getClassLoader())
            .dataSource(dataSource)
            .schemas(schema)
            .defaultSchema(schema)
            .createSchemas(true)
            .locations("classpath:db/migration")
            .load();
    MigrateResult result = flyway.migrate();
    MigrationInfo current = flyway.info().current();
    return current != null ? current.getVersion().getVersion() : result.targetSchemaVersion;
  }
}
