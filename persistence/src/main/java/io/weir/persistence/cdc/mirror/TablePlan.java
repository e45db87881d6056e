package io.weir.persistence.cdc.mirror;

import io.weir.persistence.cdc.mirror.MirrorSql.Column;
import io.weir.persistence.cdc.mirror.MirrorSql.Equality;
import io.weir.persistence.cdc.mirror.TargetTable.TargetColumn;
import io.weir.persistence.cdc.sink.TableHandling;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * How one source table shape maps onto its target: each source column's target column (type for
 * casts, identity, generated), the target's key located among the source columns (or none), and the
 * SQL text per statement shape, built once and cached (a shape is the set of columns a row image
 * carries values for, unchanged TOAST columns dropping out of it; for a keyless target also which
 * columns of the old image are NULL).
 *
 * <p>What each kind of change needs is checked when that kind of statement is first asked for, not
 * when the plan is made: an insert-only table without a key takes inserts however its updates would
 * fare, and a delete needs only the columns it matches on. Refusals are permanent, typed ({@link
 * MirrorFailures}) and name columns, never values.
 */
final class TablePlan {
  private final TableSchema source;
  private final String qualifiedTarget;
  private final String what;

  /** Per source column: the target column, or null when the target lacks it. */
  private final TargetColumn[] targets;

  /** Every column of the target, in its order. */
  private final List<TargetColumn> targetColumns;

  private final List<String> keys;
  private final List<Column> keyColumns;
  private final int[] keyIndexes;
  private final boolean keyIsIdentity;
  private final int identityAlways; // source position of a GENERATED ALWAYS target column, or -1
  private final boolean identityIsKey;
  private final String keyKind;

  private final Map<BitSet, String> upserts = new ConcurrentHashMap<>();
  private final Map<BitSet, String> plainUpserts = new ConcurrentHashMap<>();
  private final Map<BitSet, String> keyedUpdates = new ConcurrentHashMap<>();
  private final Map<BitSet, String> keyedReplaces = new ConcurrentHashMap<>();
  private final Map<BitSet, String> oneDeletes = new ConcurrentHashMap<>();
  private final Map<List<BitSet>, String> oneUpdates = new ConcurrentHashMap<>();
  private final Map<List<BitSet>, String> oneReplaces = new ConcurrentHashMap<>();
  private volatile String deleteByKey;

  private TablePlan(
      TableSchema source,
      String qualifiedTarget,
      String what,
      TargetColumn[] targets,
      List<TargetColumn> targetColumns,
      List<String> keys,
      int[] keyIndexes,
      boolean keyIsIdentity,
      int identityAlways,
      String keyKind) {
    this.source = source;
    this.qualifiedTarget = qualifiedTarget;
    this.what = what;
    this.targets = targets;
    this.targetColumns = targetColumns;
    this.keys = keys;
    this.keyIndexes = keyIndexes;
    this.keyIsIdentity = keyIsIdentity;
    this.identityAlways = identityAlways;
    this.keyKind = keyKind;
    List<Column> kc = new ArrayList<>(keyIndexes.length);
    boolean identityInKey = false;
    for (int k : keyIndexes) {
      kc.add(targets[k].column());
      identityInKey |= k == identityAlways;
    }
    this.keyColumns = List.copyOf(kc);
    this.identityIsKey = identityInKey;
  }

  /**
   * Plans {@code source} against {@code target}.
   *
   * @param what names the source and target tables for error messages
   * @throws io.weir.persistence.cdc.sink.SinkException (permanent) if a key column of the target is
   *     not a source column
   */
  static TablePlan plan(
      TableSchema source,
      String targetSchema,
      String targetTable,
      TargetTable target,
      String what) {
    int n = source.columns().size();
    TargetColumn[] targets = new TargetColumn[n];
    int identity = -1;
    for (int i = 0; i < n; i++) {
      targets[i] = target.columns().get(source.columns().get(i).name());
      if (targets[i] != null && targets[i].identityAlways()) {
        identity = i;
      }
    }
    int[] indexes = new int[target.key().size()];
    ReplicaIdentity ri = source.replicaIdentity();
    boolean covered = ri != ReplicaIdentity.NOTHING;
    for (int i = 0; i < indexes.length; i++) {
      int at = source.indexOf(target.key().get(i));
      if (at < 0) {
        throw MirrorFailures.refused(
            what,
            MirrorFailures.KEY_NOT_IN_SOURCE,
            "column "
                + target.key().get(i)
                + " of the target's "
                + target.keyKind()
                + " is not a column of the source table (or not in the publication's column"
                + " list): give the target the source's key");
      }
      // Deletes and updates identify rows by the source's replica identity: a target key column
      // outside it would leave rows behind (checked when an update or delete comes).
      covered &= ri == ReplicaIdentity.FULL || source.columns().get(at).key();
      indexes[i] = at;
    }
    return new TablePlan(
        source,
        MirrorSql.qualified(targetSchema, targetTable),
        what,
        targets,
        List.copyOf(target.columns().values()),
        List.copyOf(target.key()),
        indexes,
        covered,
        identity,
        target.keyKind());
  }

  TableSchema source() {
    return source;
  }

  /** {@code "a change to s.t (target m.t)"}: for error messages. */
  String what() {
    return what;
  }

  /** Whether the target has neither a replica identity index nor a primary key. */
  boolean keyless() {
    return keyIndexes.length == 0;
  }

  /** Positions of the target's key columns among the source columns, in key order. */
  int[] keyIndexes() {
    return keyIndexes;
  }

  /**
   * The source position of the target's GENERATED ALWAYS identity column when it is not part of the
   * key (its changes need a replace: no UPDATE may set it), else -1.
   */
  int guardedIdentity() {
    return identityAlways >= 0 && !identityIsKey ? identityAlways : -1;
  }

  /** Whether the target has a GENERATED ALWAYS identity column among the source's columns. */
  boolean hasIdentityAlways() {
    return identityAlways >= 0;
  }

  // ---------------------------------------------------------------------------------------------
  // checks

  /**
   * How this table's changes are applied when the publications send inserts and, if {@code
   * findsRows}, updates or deletes: checked as the first statement of each kind checks it, so a
   * refusal here is the one the stream would meet (thrown, typed).
   */
  TableHandling handling(boolean findsRows) {
    BitSet every = new BitSet();
    every.set(0, source.columns().size());
    requireWritable(every);
    if (keyless()) {
      if (!findsRows) {
        return TableHandling.INSERTS_ONLY;
      }
      requireFindableByOldImage(true);
      return TableHandling.BY_FULL_IMAGE;
    }
    if (findsRows) {
      requireKeyIsIdentity();
    }
    return "primary key".equals(keyKind)
        ? TableHandling.BY_PRIMARY_KEY
        : TableHandling.BY_IDENTITY_INDEX;
  }

  /** The target's key columns, for messages. */
  List<String> keys() {
    return keys;
  }

  /**
   * Before an update or delete by key: the target key must lie within the source's replica
   * identity, or the change cannot say which row it is about.
   */
  void requireKeyIsIdentity() {
    if (!keyIsIdentity) {
      throw MirrorFailures.refused(
          what,
          MirrorFailures.KEY_NOT_IDENTITY,
          "the target's "
              + keyKind
              + " has a column outside the source table's replica identity, so updates and deletes"
              + " do not say which target row they are about: give the target a primary key or"
              + " replica identity index on the source's replica identity columns, or set REPLICA"
              + " IDENTITY FULL on the source table");
    }
  }

  /**
   * Before an update or delete on a keyless target: the source must send the whole old row (REPLICA
   * IDENTITY FULL) and every column must be comparable.
   */
  void requireFindableByOldImage(boolean oldImageFull) {
    if (source.replicaIdentity() != ReplicaIdentity.FULL || !oldImageFull) {
      throw MirrorFailures.refused(
          what,
          MirrorFailures.NO_ROW_IDENTITY,
          "the target table has neither a primary key nor a replica identity index, and the"
              + " source table's replica identity is not FULL, so an update or delete carries"
              + " nothing to find the target row by: give the target a primary key or REPLICA"
              + " IDENTITY USING INDEX matching the source's replica identity, or set REPLICA"
              + " IDENTITY FULL on the source table (or publish only inserts of it)");
    }
    for (int i = 0; i < targets.length; i++) {
      TargetColumn t = targets[i];
      if (t == null) {
        throw missing(i);
      }
      if (t.equality() == Equality.NONE) {
        throw MirrorFailures.refused(
            what,
            MirrorFailures.NO_EQUALITY,
            "column "
                + t.name()
                + " of the target has a type without a default equality operator (B-tree or"
                + " hash), so rows cannot be found by their old image: give the target table a"
                + " primary key or a replica identity index");
      }
    }
  }

  private void requireWritable(BitSet present) {
    for (int i = present.nextSetBit(0); i >= 0; i = present.nextSetBit(i + 1)) {
      TargetColumn t = targets[i];
      if (t == null) {
        throw missing(i);
      }
      if (t.generated()) {
        throw MirrorFailures.refused(
            what,
            MirrorFailures.GENERATED_COLUMN,
            "column "
                + t.name()
                + " is a generated column of the target, which nothing may write, but the source"
                + " sends values for it: make it a plain column of the target, or leave it out of"
                + " the publication's column list");
      }
    }
  }

  private RuntimeException missing(int column) {
    return MirrorFailures.refused(
        what,
        MirrorFailures.COLUMN_MISSING,
        "column "
            + source.columns().get(column).name()
            + " of the source table is not a column of the target: add it to the target (ALTER"
            + " TABLE ... ADD COLUMN) before the source, as the mirror never changes target DDL");
  }

  // ---------------------------------------------------------------------------------------------
  // statements

  /**
   * Writing a new row with the columns in {@code present} (source positions, bound in column
   * order). Keyed: an upsert by the target key that never sets a GENERATED ALWAYS identity column;
   * with such a column outside the key ({@link #guardedIdentity()}) it updates only where that
   * column's stored value is the new one, so a 0 count means the row is there with another identity
   * value and must be replaced ({@link #replaceByKey}). Keyless: a plain INSERT.
   */
  String upsert(BitSet present) {
    return upserts.computeIfAbsent(
        present,
        p -> {
          requireWritable(p);
          List<Column> cols = columns(p);
          if (keyless()) {
            return MirrorSql.insert(qualifiedTarget, cols, overriding(p));
          }
          int g = guardedIdentity();
          return MirrorSql.upsert(
              qualifiedTarget,
              cols,
              keys,
              overriding(p),
              neverSet(),
              g >= 0 && p.get(g) ? targets[g].name() : null);
        });
  }

  /**
   * {@link #upsert} without the identity guard, for an update whose FULL old image shows that the
   * GENERATED ALWAYS identity column keeps its value. Keyed targets only.
   */
  String upsertKeepingIdentity(BitSet present) {
    return plainUpserts.computeIfAbsent(
        present,
        p -> {
          requireWritable(p);
          return MirrorSql.upsert(
              qualifiedTarget, columns(p), keys, overriding(p), neverSet(), null);
        });
  }

  /** Delete by the target key: binds {@link #keyIndexes()} in order. */
  String deleteByKey() {
    String sql = deleteByKey;
    if (sql == null) {
      requireKeyIsIdentity();
      sql = deleteByKey = MirrorSql.deleteByKey(qualifiedTarget, keyColumns);
    }
    return sql;
  }

  /**
   * UPDATE of the columns in {@code present} where the key is the old key: binds them, then the
   * key. Not for targets with a GENERATED ALWAYS identity column ({@link #replaceByKey}). The
   * caller has checked {@link #requireKeyIsIdentity()}.
   */
  String updateByKey(BitSet present) {
    return keyedUpdates.computeIfAbsent(
        present,
        p -> {
          requireWritable(p);
          return MirrorSql.updateByKey(qualifiedTarget, columns(p), keyColumns);
        });
  }

  /**
   * Replaces the row with the (old) key by the columns in {@code present}, keeping the others
   * (unchanged TOAST, and target columns the source does not send) from the replaced row: binds the
   * key, then {@code present}. For rows whose GENERATED ALWAYS identity column gets a new value. A
   * caller replacing by an old key has checked {@link #requireKeyIsIdentity()}.
   */
  String replaceByKey(BitSet present) {
    return keyedReplaces.computeIfAbsent(
        present,
        p -> {
          requireWritable(p);
          List<String> kept = kept(p);
          return MirrorSql.replaceByKey(
              qualifiedTarget, columns(p), kept, keyColumns, overriding(p) || keepsIdentity(kept));
        });
  }

  /**
   * Deletes one row equal to the old image whose NULL columns are {@code nulls}; binds the rest.
   */
  String deleteOne(BitSet nulls) {
    return oneDeletes.computeIfAbsent(
        nulls, n -> MirrorSql.deleteOne(qualifiedTarget, MirrorSql.match(allColumns(), n)));
  }

  /**
   * Updates the columns in {@code present} of one row equal to the old image: binds {@code
   * present}, then the old image's non-NULL columns.
   */
  String updateOne(BitSet present, BitSet nulls) {
    return oneUpdates.computeIfAbsent(
        List.of(present, nulls),
        k -> {
          requireWritable(present);
          return MirrorSql.updateOne(
              qualifiedTarget, columns(present), MirrorSql.match(allColumns(), nulls));
        });
  }

  /**
   * Replaces one row equal to the old image by the columns in {@code present} (keeping the others):
   * binds the old image's non-NULL columns, then {@code present}.
   */
  String replaceOne(BitSet present, BitSet nulls) {
    return oneReplaces.computeIfAbsent(
        List.of(present, nulls),
        k -> {
          requireWritable(present);
          List<String> kept = kept(present);
          return MirrorSql.replaceOne(
              qualifiedTarget,
              columns(present),
              kept,
              MirrorSql.match(allColumns(), nulls),
              overriding(present) || keepsIdentity(kept));
        });
  }

  private boolean overriding(BitSet present) {
    return identityAlways >= 0 && present.get(identityAlways);
  }

  private Set<String> neverSet() {
    return identityAlways >= 0 ? Set.of(targets[identityAlways].name()) : Set.of();
  }

  /** Every source column's target column, for matching an old image (see {@link #deleteOne}). */
  private List<Column> allColumns() {
    List<Column> all = new ArrayList<>(targets.length);
    for (int i = 0; i < targets.length; i++) {
      if (targets[i] == null) {
        throw missing(i);
      }
      all.add(targets[i].column());
    }
    return all;
  }

  private List<Column> columns(BitSet present) {
    List<Column> cols = new ArrayList<>(present.cardinality());
    for (int i = present.nextSetBit(0); i >= 0; i = present.nextSetBit(i + 1)) {
      cols.add(targets[i].column());
    }
    return cols;
  }

  /**
   * The target columns a replace carries over from the replaced row: every one that is not written
   * from the new image (unchanged TOAST source columns, and target columns the source does not
   * send), but for generated ones, which the target computes.
   */
  private List<String> kept(BitSet present) {
    Set<String> written = new HashSet<>();
    for (int i = present.nextSetBit(0); i >= 0; i = present.nextSetBit(i + 1)) {
      written.add(targets[i].name());
    }
    List<String> kept = new ArrayList<>();
    for (TargetColumn t : targetColumns) {
      if (!t.generated() && !written.contains(t.name())) {
        kept.add(t.name());
      }
    }
    return kept;
  }

  private boolean keepsIdentity(List<String> kept) {
    for (TargetColumn t : targetColumns) {
      if (t.identityAlways() && kept.contains(t.name())) {
        return true;
      }
    }
    return false;
  }
}
