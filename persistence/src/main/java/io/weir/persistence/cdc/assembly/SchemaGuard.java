package io.weir.persistence.cdc.assembly;

import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.PgOutputMessage.Relation;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Tracks the shape of every published table from pgoutput Relation messages and decides whether a
 * new shape is safe to follow. Compatible: a column added at the end (outside the replica identity,
 * or under REPLICA IDENTITY FULL, where every column is in it). Incompatible, halting the pipeline
 * fail-closed: a column dropped or renamed, a column's type or type modifier changed, the replica
 * identity (or which columns form it) changed, the table renamed or moved. Reasons name the table
 * and column, never a value.
 *
 * <h2>Streamed transactions</h2>
 *
 * PostgreSQL sends a Relation message inside each streamed transaction before that transaction
 * first uses the table, with the shape the transaction sees; the message may arrive long before the
 * transaction commits, or belong to one that aborts. Such messages go to a {@link View} of their
 * transaction, never straight into the run's shapes: changes in the stream are read with the view's
 * shapes; at the Stream Commit ({@link #commit}) each of the view's shapes becomes the run's unless
 * a Relation message that arrived later already replaced it (as the server, too, considers the
 * shape sent once the streamed transaction commits, unless invalidated since); an abort drops the
 * view. A view judges each of its messages against the shape in effect for it (its own last one,
 * else the run's, else the recorded one) in arrival order, but an incompatible shape halts only if
 * the transaction commits: work that rolls back is never delivered, so it cannot hurt the sink.
 *
 * <p>Not thread-safe: one instance per stream run.
 */
public final class SchemaGuard {
  private final Map<Long, TableSchema> known = new HashMap<>();
  // Arrival order of the Relation message behind each known shape, to tell later from earlier.
  private final Map<Long, Long> knownSeq = new HashMap<>();
  private final Map<Long, TableSchema> recorded;
  private final List<TableSchema> unrecorded = new ArrayList<>();
  private long seq;

  /** A guard that knows nothing yet: every table's first shape is accepted. */
  public SchemaGuard() {
    this(Map.of());
  }

  /**
   * @param recorded shapes accepted in earlier runs ({@link RelationStore}): a table's first
   *     Relation in this run is judged against them, so changes made while the pipeline was stopped
   *     are caught too
   */
  public SchemaGuard(Map<Long, TableSchema> recorded) {
    this.recorded = Map.copyOf(recorded);
  }

  /**
   * Shapes accepted since the last call that no earlier run recorded, to persist once applied: the
   * last one per table (a transaction may change a table twice), in order of first appearance.
   */
  public List<TableSchema> drainUnrecorded() {
    Map<Long, TableSchema> last = new LinkedHashMap<>();
    for (TableSchema s : unrecorded) {
      last.put(s.relationId(), s);
    }
    unrecorded.clear();
    return List.copyOf(last.values());
  }

  /**
   * Accepts a Relation message of a transaction that is not streamed (it is being delivered whole,
   * so its shapes take effect at once).
   *
   * @return the new schema when it differs compatibly from the known one (to announce), empty when
   *     the table is new to this run or unchanged
   * @throws PipelineHaltException {@link HaltReason#SCHEMA_INCOMPATIBLE}
   */
  public Optional<TableSchema> accept(Relation relation) {
    TableSchema next = toSchema(relation);
    Verdict v = judge(known.get(relation.relationId()), next);
    known.put(relation.relationId(), next);
    knownSeq.put(relation.relationId(), ++seq);
    if (v != Verdict.SAME) {
      unrecorded.add(next);
    }
    return v == Verdict.CHANGED ? Optional.of(next) : Optional.empty();
  }

  private enum Verdict {
    NEW,
    SAME,
    CHANGED
  }

  /**
   * Judges {@code next} against {@code base} (the shape in effect), or against the recorded shape
   * when there is none.
   *
   * @return NEW when neither exists, SAME, or CHANGED (compatibly)
   * @throws PipelineHaltException {@link HaltReason#SCHEMA_INCOMPATIBLE}
   */
  private Verdict judge(TableSchema base, TableSchema next) {
    TableSchema previous = base;
    if (previous == null) {
      previous = recorded.get(next.relationId());
      if (previous == null) {
        for (TableSchema r : recorded.values()) {
          if (r.qualifiedName().equals(next.qualifiedName())) {
            throw halt(next.qualifiedName(), "was dropped and recreated (its OID changed)");
          }
        }
        return Verdict.NEW;
      }
    }
    if (previous.equals(next)) {
      return Verdict.SAME;
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
    // Under REPLICA IDENTITY FULL every column is part of the identity, an added one too: that is
    // no change of what identifies a row (the whole old row still does).
    boolean full = next.replicaIdentity() == ReplicaIdentity.FULL;
    for (int i = previous.columns().size(); i < next.columns().size(); i++) {
      if (next.columns().get(i).key() && !full) {
        throw halt(
            table, "added column " + next.columns().get(i).name() + " joined the replica identity");
      }
    }
    return Verdict.CHANGED;
  }

  /** The accepted schema of a relation, or null if no Relation message was seen for it. */
  public TableSchema schema(long relationId) {
    return known.get(relationId);
  }

  /** A new view for a streamed transaction. */
  public View view() {
    return new View();
  }

  /**
   * The streamed transaction committed: its shapes become the run's, except where a Relation
   * message that arrived after the view's already replaced them; they are recorded with it.
   *
   * @throws PipelineHaltException {@link HaltReason#SCHEMA_INCOMPATIBLE} if one of the view's
   *     shapes was incompatible
   */
  public void commit(View view) {
    if (view.incompatible != null) {
      throw view.incompatible;
    }
    view.shapes.forEach(
        (id, shape) -> {
          long at = view.seqs.get(id);
          if (knownSeq.getOrDefault(id, -1L) < at) {
            known.put(id, shape);
            knownSeq.put(id, at);
            TableSchema toRecord = view.toRecord.get(id);
            if (toRecord != null) {
              unrecorded.add(toRecord);
            }
          }
        });
  }

  /** The shapes one streamed transaction has sent so far; see the class comment. */
  public final class View {
    private final Map<Long, TableSchema> shapes = new LinkedHashMap<>();
    private final Map<Long, Long> seqs = new HashMap<>();
    private final Map<Long, TableSchema> toRecord = new HashMap<>();
    private final Map<Long, TableSchema> announced = new LinkedHashMap<>();
    private final Map<Long, TableSchema> inherited = new HashMap<>();
    private PipelineHaltException incompatible;

    private View() {}

    /** Accepts a Relation message of this streamed transaction; see the class comment. */
    public void accept(Relation relation) {
      TableSchema next = toSchema(relation);
      long id = relation.relationId();
      TableSchema base = shapes.containsKey(id) ? shapes.get(id) : known.get(id);
      Verdict v;
      try {
        v = judge(base, next);
      } catch (PipelineHaltException e) {
        if (incompatible == null) {
          incompatible = e; // halts at the Stream Commit, if it comes
        }
        v = Verdict.CHANGED;
      }
      shapes.put(id, next);
      seqs.put(id, ++seq);
      if (v != Verdict.SAME) {
        toRecord.put(id, next);
      }
      if (v == Verdict.CHANGED) {
        announced.put(id, next);
      }
    }

    /**
     * The shape of a relation as this transaction sees it now: its own, else the run's; null if
     * neither.
     */
    public TableSchema schema(long relationId) {
      TableSchema s = shapes.get(relationId);
      return s != null ? s : known.get(relationId);
    }

    /**
     * Takes the run's shape of a relation for this transaction, which used the relation without a
     * Relation message of its own (the server does not do that; this keeps reading deterministic if
     * it ever does). Does nothing if the run does not know the relation either.
     */
    public void inherit(long relationId) {
      TableSchema k = known.get(relationId);
      if (k != null && !shapes.containsKey(relationId)) {
        shapes.put(relationId, k);
        seqs.put(
            relationId, knownSeq.get(relationId)); // not later than the run's: never merged back
        inherited.put(relationId, k);
      }
    }

    /** Shapes taken by {@link #inherit}, by relation id. */
    public Map<Long, TableSchema> inherited() {
      return Map.copyOf(inherited);
    }

    /** Whether this transaction has sent a Relation message for the relation. */
    public boolean sent(long relationId) {
      return shapes.containsKey(relationId);
    }

    /** Shapes that changed compatibly in this transaction, to announce with it. */
    public List<TableSchema> announced() {
      return List.copyOf(announced.values());
    }
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
