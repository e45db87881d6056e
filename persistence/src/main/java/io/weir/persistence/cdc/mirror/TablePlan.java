package io.weir.persistence.cdc.mirror;

import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * How one source table shape maps onto its target: the target's primary key located among the
 * source columns, and the SQL text per statement shape, built once and cached (a shape is the set
 * of columns a row image carries values for; unchanged TOAST columns drop out of it).
 */
final class TablePlan {
  private final TableSchema source;
  private final String qualifiedTarget;
  private final List<String> keys;
  private final int[] keyIndexes;
  private final String what;
  private final String fullUpsert;
  private final String deleteByKey;
  private final Map<BitSet, String> partialUpserts = new ConcurrentHashMap<>();
  private final Map<BitSet, String> keyedUpdates = new ConcurrentHashMap<>();

  private TablePlan(
      TableSchema source,
      String qualifiedTarget,
      List<String> keys,
      int[] keyIndexes,
      String what) {
    this.source = source;
    this.qualifiedTarget = qualifiedTarget;
    this.keys = keys;
    this.keyIndexes = keyIndexes;
    this.what = what;
    this.fullUpsert = MirrorSql.upsert(qualifiedTarget, source.columnNames(), keys);
    this.deleteByKey = MirrorSql.deleteByKey(qualifiedTarget, keys);
  }

  /**
   * Plans {@code source} against a target whose primary key is {@code targetKey}.
   *
   * @param what names the source and target tables for error messages
   * @throws io.weir.persistence.cdc.SinkException (permanent) if the target cannot mirror this
   *     table
   */
  static TablePlan plan(
      TableSchema source,
      String targetSchema,
      String targetTable,
      List<String> targetKey,
      String what) {
    if (targetKey.isEmpty()) {
      throw MirrorFailures.refused(what, "the target table has no primary key");
    }
    int[] indexes = new int[targetKey.size()];
    boolean nothing = source.replicaIdentity() == ReplicaIdentity.NOTHING;
    for (int i = 0; i < indexes.length; i++) {
      int at = source.indexOf(targetKey.get(i));
      if (at < 0) {
        throw MirrorFailures.refused(
            what, "a primary key column of the target table is not a column of the source table");
      }
      // Deletes and key-changing updates identify rows by the source's replica identity: a target
      // key column outside it would leave rows behind.
      if (!nothing && !source.columns().get(at).key()) {
        throw MirrorFailures.refused(
            what,
            "a primary key column of the target table is not part of the source table's replica identity");
      }
      indexes[i] = at;
    }
    return new TablePlan(
        source,
        MirrorSql.qualified(targetSchema, targetTable),
        List.copyOf(targetKey),
        indexes,
        what);
  }

  TableSchema source() {
    return source;
  }

  /** {@code "a change to s.t (target m.t)"}: for error messages. */
  String what() {
    return what;
  }

  /** Positions of the target's primary key columns among the source columns, in key order. */
  int[] keyIndexes() {
    return keyIndexes;
  }

  /** Upsert of a whole row: binds every source column in order. */
  String fullUpsert() {
    return fullUpsert;
  }

  /** Upsert of the columns in {@code present} (source positions), bound in column order. */
  String upsert(BitSet present) {
    if (present.cardinality() == source.columns().size()) {
      return fullUpsert;
    }
    return partialUpserts.computeIfAbsent(
        present, p -> MirrorSql.upsert(qualifiedTarget, names(p), keys));
  }

  /** Delete by the target's primary key: binds {@link #keyIndexes()} in order. */
  String deleteByKey() {
    return deleteByKey;
  }

  /**
   * UPDATE of the columns in {@code present} where the key is the old key: binds them, then the
   * key.
   */
  String updateByKey(BitSet present) {
    return keyedUpdates.computeIfAbsent(
        present, p -> MirrorSql.updateByKey(qualifiedTarget, names(p), keys));
  }

  private List<String> names(BitSet present) {
    List<String> names = new ArrayList<>(present.cardinality());
    for (int i = present.nextSetBit(0); i >= 0; i = present.nextSetBit(i + 1)) {
      names.add(source.columns().get(i).name());
    }
    return names;
  }
}
