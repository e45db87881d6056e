package io.weir.persistence.cdc.mirror;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigValue;
import com.typesafe.config.ConfigValueType;
import io.weir.persistence.Identifiers;
import io.weir.persistence.SettingsException;
import io.weir.protocol.cdc.TableSchema;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Where {@link PostgresMirrorSink} writes.
 *
 * <p>A source table {@code s.t} mirrors into {@code <targetSchema>.t}, unless {@code tables} maps
 * its source name to another target table in the target schema. Two source tables of the same name
 * in different schemas need a mapping, or they write into one target.
 *
 * @param targetSchema schema of the target tables, the checkpoint table and the applied log; an
 *     allow-listed identifier ({@link Identifiers})
 * @param tables source table, as {@link TableSchema#qualifiedName()} ({@code schema.table},
 *     unquoted), to target table name (an allow-listed identifier) in {@code targetSchema}
 * @param checkpointTable the checkpoint table in {@code targetSchema} (an allow-listed identifier)
 * @param appliedLog whether each applied transaction also inserts {@code (pipeline, xid,
 *     commit_lsn)} into {@code <targetSchema>.}{@value #APPLIED_LOG_TABLE}, in the same database
 *     transaction: an audit trail, and the evidence the crash tests count duplicates from
 */
public record MirrorSettings(
    String targetSchema, Map<String, String> tables, String checkpointTable, boolean appliedLog) {

  /** The checkpoint table unless configured otherwise. */
  public static final String DEFAULT_CHECKPOINT_TABLE = "weir_mirror_checkpoint";

  /** The applied-transactions log, when {@link #appliedLog()} is on. */
  public static final String APPLIED_LOG_TABLE = "weir_mirror_applied";

  public MirrorSettings {
    Identifiers.require("mirror target schema", targetSchema);
    Identifiers.require("mirror checkpoint table", checkpointTable);
    if (checkpointTable.equals(APPLIED_LOG_TABLE)) {
      throw new IllegalArgumentException(
          "mirror checkpoint table must not be the applied log table");
    }
    Objects.requireNonNull(tables, "tables");
    for (Map.Entry<String, String> e : tables.entrySet()) {
      if (e.getKey() == null || e.getKey().indexOf('.') <= 0) {
        throw new IllegalArgumentException(
            "mirror table mapping keys must be source tables written schema.table");
      }
      Identifiers.require("mirror target table", e.getValue());
      if (e.getValue().equals(checkpointTable) || e.getValue().equals(APPLIED_LOG_TABLE)) {
        throw new IllegalArgumentException(
            "a mirror target table must not be the checkpoint table or the applied log table");
      }
    }
    tables = Map.copyOf(tables);
  }

  /**
   * Mirrors every table into {@code targetSchema} under its own name, default checkpoint table, no
   * applied log.
   */
  public static MirrorSettings of(String targetSchema) {
    return new MirrorSettings(targetSchema, Map.of(), DEFAULT_CHECKPOINT_TABLE, false);
  }

  /**
   * Reads a mirror sink's config subtree:
   *
   * <pre>
   * target-schema = "mirror"                    # required
   * checkpoint-table = "weir_mirror_checkpoint" # optional
   * applied-log = false                         # optional
   * tables { "public.orders" = "orders_copy" }  # optional; quote the source name
   * </pre>
   *
   * Errors name the key (relative to the subtree) and the expected shape, never the value.
   */
  public static MirrorSettings create(Config config) {
    String schema = string(config, "target-schema", null);
    if (schema == null) {
      throw new SettingsException("target-schema", "is required");
    }
    if (!Identifiers.isValid(schema)) {
      throw new SettingsException("target-schema", Identifiers.SHAPE);
    }
    String checkpoint = string(config, "checkpoint-table", DEFAULT_CHECKPOINT_TABLE);
    if (!Identifiers.isValid(checkpoint) || checkpoint.equals(APPLIED_LOG_TABLE)) {
      throw new SettingsException(
          "checkpoint-table", Identifiers.SHAPE + ", other than " + APPLIED_LOG_TABLE);
    }
    boolean log;
    try {
      log = config.hasPath("applied-log") && config.getBoolean("applied-log");
    } catch (ConfigException.WrongType e) {
      throw new SettingsException("applied-log", "must be true or false");
    }
    Map<String, String> tables = new HashMap<>();
    if (config.hasPath("tables")) {
      try {
        for (Map.Entry<String, ConfigValue> e : config.getObject("tables").entrySet()) {
          ConfigValue v = e.getValue();
          if (v.valueType() != ConfigValueType.STRING
              || e.getKey().indexOf('.') <= 0
              || !Identifiers.isValid((String) v.unwrapped())
              || v.unwrapped().equals(checkpoint)
              || v.unwrapped().equals(APPLIED_LOG_TABLE)) {
            throw new SettingsException(
                "tables",
                "must map quoted source names \"schema.table\" to target tables that "
                    + Identifiers.SHAPE.replaceFirst("^must ", "")
                    + " (not the checkpoint or applied log table)");
          }
          tables.put(e.getKey(), (String) v.unwrapped());
        }
      } catch (ConfigException.WrongType e) {
        throw new SettingsException("tables", "must be an object of source table to target table");
      }
    }
    return new MirrorSettings(schema, tables, checkpoint, log);
  }

  private static String string(Config config, String key, String fallback) {
    try {
      return config.hasPath(key) ? config.getString(key) : fallback;
    } catch (ConfigException.WrongType e) {
      throw new SettingsException(key, "must be a string");
    }
  }

  /**
   * A copy that mirrors {@code sourceQualifiedName} ({@code schema.table}) into {@code
   * targetTable}.
   */
  public MirrorSettings withTable(String sourceQualifiedName, String targetTable) {
    Map<String, String> copy = new HashMap<>(tables);
    copy.put(sourceQualifiedName, targetTable);
    return new MirrorSettings(targetSchema, copy, checkpointTable, appliedLog);
  }

  public MirrorSettings withCheckpointTable(String table) {
    return new MirrorSettings(targetSchema, tables, table, appliedLog);
  }

  public MirrorSettings withAppliedLog(boolean on) {
    return new MirrorSettings(targetSchema, tables, checkpointTable, on);
  }

  /**
   * The target table (in {@link #targetSchema()}) for a source table: its mapping, or else the
   * source table's own name. The latter comes from the source catalog and may be any identifier:
   * the sink quotes it.
   */
  public String targetTable(TableSchema source) {
    String mapped = tables.get(source.qualifiedName());
    return mapped != null ? mapped : source.table();
  }

  /**
   * The sink's own tables as {@code schema.table}: the checkpoint table and, if on, the applied
   * log. A publication must not stream them back into the mirror.
   */
  public List<String> bookkeepingTables() {
    return appliedLog
        ? List.of(targetSchema + "." + checkpointTable, targetSchema + "." + APPLIED_LOG_TABLE)
        : List.of(targetSchema + "." + checkpointTable);
  }
}
