package io.weir.persistence.cdc;

import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.PgOutputMessage.Relation;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Tracks the shape of every published table from pgoutput Relation messages and decides whether a
 * new shape is safe to follow. Compatible: a column added at the end. Incompatible, halting the
 * pipeline fail-closed: a column dropped or renamed, a column's type or type modifier changed, the
 * replica identity (or which columns form it) changed, the table renamed or moved. Reasons name
 * the table and column, never a value.
 *
 * <p>Not thread-safe: one instance per stream run.
 */
public final class SchemaGuard {
  private final Map<Long, TableSchema> known = new HashMap<>();
  private final Map<Long, TableSchema> recorded;
  private final List<TableSchema> unrecorded = new ArrayList<>();

  /** A guard that knows nothing yet: every table's first shape is accepted. */
  public SchemaGuard() {
    this(Map.of());
  }

  /**
   * @param recorded shapes accepted in earlier runs ({@link RelationStore}): a table's first
   *     Relation in this run is judged against them, so changes made while the pipeline was
   *     stopped are caught too
   */
  public SchemaGuard(Map<Long, TableSchema> recorded) {
    this.recorded = Map.copyOf(recorded);
  }

  /** Shapes accepted since the last call that no earlier run recorded; to persist once applied. */
  public List<TableSchema> drainUnrecorded() {
    List<TableSchema> out = List.copyOf(unrecorded);
    unrecorded.clear();
    return out;
  }

  /**
   * Accepts a Relation message.
   *
   * @return the new schema when it differs compatibly from the known one (to announce), empty when
   *     the table is new to this run or unchanged
   * @throws PipelineHaltException {@link HaltReason#SCHEMA_INCOMPATIBLE}
   */
  public Optional<TableSchema> accept(Relation relation) {
    TableSchema next = toSchema(relation);
    TableSchema previous = known.get(relation.relationId());
    boolean firstInRun = previous == null;
    if (firstInRun) {
      previous = recorded.get(relation.relationId());
      if (previous == null) {
        for (TableSchema r : recorded.values()) {
          if (r.qualifiedName().equals(next.qualifiedName())) {
            throw halt(next.qualifiedName(), "was dropped and recreated (its OID changed)");
          }
        }
        known.put(relation.relationId(), next);
        unrecorded.add(next);
        return Optional.empty();
      }
    }
    if (previous.equals(next)) {
      known.put(relation.relationId(), next);
      return Optional.empty();
    }
    String table = previous.qualifiedName();
    if (!previous.schema().equals(next.schema()) || !previous.table().equals(next.table())) {
      throw halt(table, "was renamed or moved to another schema");
    }
    if (previous.replicaIdentity() != next.replicaIdentity()) {
      throw halt(table, "changed its replica identity");
    }
    if (next.columns().size() < previous.columns().size()) {
      throw halt(table, "lost a column (dropped)");
    }
    for (int i = 0; i < previous.columns().size(); i++) {
      TableSchema.Column before = previous.columns().get(i);
      TableSchema.Column after = next.columns().get(i);
      if (!before.name().equals(after.name())) {
        throw halt(table, "column " + before.name() + " was dropped or renamed");
      }
      if (before.typeOid() != after.typeOid() || before.typeModifier() != after.typeModifier()) {
        throw halt(table, "column " + before.name() + " changed type");
      }
      if (before.key() != after.key()) {
        throw halt(table, "column " + before.name() + " changed replica identity membership");
      }
    }
    for (int i = previous.columns().size(); i < next.columns().size(); i++) {
      if (next.columns().get(i).key()) {
        throw halt(table, "added column " + next.columns().get(i).name() + " joined the replica identity");
      }
    }
    known.put(relation.relationId(), next);
    unrecorded.add(next);
    return Optional.of(next);
  }

  /** The accepted schema of a relation, or null if no Relation message was seen for it. */
  public TableSchema schema(long relationId) {
    return known.get(relationId);
  }

  static TableSchema toSchema(Relation r) {
    List<TableSchema.Column> columns = new ArrayList<>(r.columns().size());
    for (Relation.Column c : r.columns()) {
      columns.add(new TableSchema.Column(c.name(), c.typeOid(), c.typeModifier(), c.partOfKey()));
    }
    String schema = r.namespace().isEmpty() ? "pg_catalog" : r.namespace();
    return new TableSchema(r.relationId(), schema, r.name(), r.replicaIdentity(), columns);
  }

  private static PipelineHaltException halt(String table, String what) {
    return new PipelineHaltException(HaltReason.SCHEMA_INCOMPATIBLE, "table " + table + " " + what);
  }
}
