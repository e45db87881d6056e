package io.weir.persistence.cdc.mirror;

import io.weir.persistence.cdc.TableVerdict;
import io.weir.persistence.cdc.sink.SinkException;
import io.weir.persistence.cdc.sink.TableHandling;
import io.weir.persistence.cdc.source.PublishedTable;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.ColumnKind;
import io.weir.protocol.pgoutput.OldTupleKind;
import io.weir.protocol.pgoutput.ReplicaIdentity;
import io.weir.protocol.pgoutput.TupleData;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * How the mirror ({@link PostgresMirrorSink}) applies each change to its target tables, inside the
 * sink's transaction ({@link MirrorRun}), and how it plans a target.
 *
 * <h2>Changes</h2>
 *
 * The mirror applies what PostgreSQL's apply worker applies, finding rows the way it does (see
 * Targets), except that it upserts where the apply worker would fail on a row that is already there
 * (an insert) or skip an update whose row is missing.
 *
 * <ul>
 *   <li>Insert: {@code INSERT ... ON CONFLICT (key) DO UPDATE} of every non-key column, so a row
 *       that is already there (from a snapshot or a diverged target) is overwritten, not refused. A
 *       target without a key takes a plain {@code INSERT}.
 *   <li>Update: the same upsert of the new row. If the old image (REPLICA IDENTITY key or FULL)
 *       shows the target's key changed, the row under the old key is updated to the new values
 *       ({@code UPDATE ... WHERE old key}, one statement on its own), so that target columns the
 *       source does not send (a publication's column list) keep their values, as with the apply
 *       worker; without such a row the new row is upserted; a diverged target that already holds
 *       the new key refuses it (SQLState 23505). A target without a key updates one row equal to
 *       the FULL old image ({@code WHERE (tableoid, ctid) = (SELECT ... LIMIT 1)}: of equal
 *       duplicates any one is the row), or inserts the new row if none is.
 *   <li>Unchanged TOAST: a column the source update left untouched carries no value. Where the old
 *       image carries it (every column of a FULL image; a key column stored out of line, for which
 *       PostgreSQL sends the old key) the value is taken from there. Otherwise it is neither
 *       inserted nor set, so the stored value stays (a key-changing update moves the stored row);
 *       if no old row is there, the new row is upserted without those columns. An upsert that
 *       inserts a row the target lacked (the mirror started after the row was written) leaves them
 *       at their defaults: seed the target first if that matters.
 *   <li>GENERATED ALWAYS identity columns: inserted with {@code OVERRIDING SYSTEM VALUE} and never
 *       set by an UPDATE (PostgreSQL allows none to): a new value (the source ran {@code SET id =
 *       DEFAULT}) replaces the row in one statement ({@code WITH old AS (DELETE ... RETURNING ...)
 *       INSERT ... SELECT ... FROM old}), keeping its unchanged TOAST values. Outside the key, the
 *       upsert is guarded ({@code DO UPDATE ... WHERE target.id IS NOT DISTINCT FROM EXCLUDED.id})
 *       and runs alone, so its count shows a changed value; a FULL old image shows it directly.
 *   <li>Delete: by the target's key, with values from the old image; without a key, one row equal
 *       to the FULL old image.
 *   <li>Truncate: {@code TRUNCATE} of the mapped targets ({@code RESTART IDENTITY} if the source
 *       said so), never {@code CASCADE}: tables that reference a target are not the mirror's to
 *       empty, so such a truncate is refused (SQLState 0A000).
 *   <li>Transactional logical messages: ignored; a mirror has nowhere to put them.
 *   <li>Schema changes: the mirror never alters a target. Add a column to the target before the
 *       source, or changes that write it are refused ({@code target-column-missing}).
 * </ul>
 *
 * <h2>Targets</h2>
 *
 * A target table must exist. Its key is chosen as the apply worker chooses it: the replica identity
 * index if the target has {@code REPLICA IDENTITY USING INDEX}, else the primary key. Every key
 * column must be a source column; updates and deletes also need every key column in the source's
 * replica identity (or the source's replica identity FULL), since that is what they identify rows
 * by. A target with neither index takes inserts (an insert-only table) and, when the source is
 * REPLICA IDENTITY FULL, updates and deletes matched on every column of the old image: {@code c =
 * ?} with the column's default equality, {@code c IS NULL} for a NULL (for composites {@code IS NOT
 * DISTINCT FROM NULL}, since {@code IS NULL} is true of a composite of NULLs), json and xml as
 * text; a column without a default B-tree or hash equality refuses such updates and deletes. What
 * each kind of change needs is checked when it first comes (typed reasons, {@link MirrorFailures}).
 * The target is read from the catalog once per source table shape and cached until the next open.
 * Values are bound as untyped text (the pipeline decodes pgoutput in text mode; binary columns are
 * refused) and cast in the statement to the target column's type, named by schema and type name
 * from the catalog, quoted, without type modifier ({@code ?::"public"."pair"}): operators such as
 * {@code =} on composite keys resolve, and the column's own assignment applies the modifier.
 * Changes are read once, in order, and written as they come: a transaction read from a spill file
 * is never held in memory. Consecutive changes with the same statement shape go to the server as a
 * JDBC batch of at most 1000 statements or 2 MiB of values, which keeps their order; a repeated key
 * starts a new batch, so pgjdbc's {@code reWriteBatchedInserts} (multi-row INSERTs, markedly
 * faster) is safe to turn on for the target DataSource. Table, column and type names come from the
 * catalogs and are quoted; the configured names pass the identifier allow-list.
 */
final class MirrorChanges {
  private final MirrorSettings settings;

  /** Plans per source table shape; a new shape (added column) gets a new plan. */
  private final Map<TableSchema, TablePlan> plans = new ConcurrentHashMap<>();

  MirrorChanges(MirrorSettings settings) {
    this.settings = settings;
  }

  /** Forgets every planned target: they may have changed while the pipeline was down. */
  void forgetTargets() {
    plans.clear();
  }

  /** A snapshot row: upserted like an insert. */
  void upsertRow(MirrorRun run, TablePlan plan, TupleData row) throws SQLException {
    requireWidth(plan, row);
    upsert(run, plan, RowImage.of(row), null);
  }

  /** Applies one change of a transaction (a logical message is ignored). */
  void apply(MirrorRun run, Change change) throws SQLException {
    if (change instanceof Change.Insert insert) {
      TablePlan plan = plan(run, insert.table());
      requireWidth(plan, insert.newRow());
      upsert(run, plan, RowImage.of(insert.newRow()), null);
    } else if (change instanceof Change.Update update) {
      update(run, update);
    } else if (change instanceof Change.Delete delete) {
      delete(run, delete);
    } else if (change instanceof Change.Truncate truncate) {
      truncate(run, truncate);
    }
    // Change.Message: a mirror has no place for logical decoding messages; ignored.
  }

  private void update(MirrorRun run, Change.Update update) throws SQLException {
    TablePlan plan = plan(run, update.table());
    run.context = plan.what();
    TupleData oldRow = update.oldKind() == OldTupleKind.NONE ? null : update.oldRow();
    requireWidth(plan, update.newRow());
    if (oldRow != null) {
      requireWidth(plan, oldRow);
    }
    // Unchanged TOAST columns whose value the old image carries (a FULL image, or a key column
    // stored out of line in a key image) are written from it.
    RowImage newRow = RowImage.filled(plan.source(), update.newRow(), update.oldKind(), oldRow);
    TupleData fullOld = update.oldKind() == OldTupleKind.FULL ? oldRow : null;
    if (plan.keyless()) {
      updateKeyless(run, plan, fullOld, newRow);
      return;
    }
    // Which target row: by its key, which the change only names if the key lies within the
    // source's replica identity.
    plan.requireKeyIsIdentity();
    if (oldRow != null) {
      RowImage old = RowImage.of(oldRow);
      if (keyChanged(plan, old, newRow)) {
        // As the apply worker does: the row found by its old key takes the new values, so that
        // target columns the source does not send (a publication's column list) and unchanged
        // TOAST values stay. A GENERATED ALWAYS identity column cannot be set by an UPDATE: such
        // rows are replaced, carrying those columns over. No row under the old key: upsert.
        requireKeyValues(plan, old, "the old row image");
        BitSet present = present(plan, newRow);
        boolean replace = plan.hasIdentityAlways();
        int moved =
            run.executeNow(
                replace ? plan.replaceByKey(present) : plan.updateByKey(present),
                plan.what(),
                ps -> {
                  if (replace) {
                    int next = bindKey(plan, ps, 1, old);
                    bindPresent(plan, ps, next, newRow, present);
                  } else {
                    int next = bindPresent(plan, ps, 1, newRow, present);
                    bindKey(plan, ps, next, old);
                  }
                });
        if (moved == 0) {
          upsert(run, plan, newRow, null);
        }
        return;
      }
    }
    upsert(run, plan, newRow, fullOld);
  }

  /**
   * An update of a target without a key: one row equal to the FULL old image takes the new values
   * (duplicates are equal: any one of them is the row); if none is there, the new row is inserted,
   * as an upsert would.
   */
  private void updateKeyless(MirrorRun run, TablePlan plan, TupleData fullOld, RowImage newRow)
      throws SQLException {
    plan.requireFindableByOldImage(fullOld != null);
    RowImage old = RowImage.of(fullOld);
    BitSet nulls = nullsOf(plan, old);
    BitSet present = present(plan, newRow);
    int g = plan.guardedIdentity();
    int changed;
    if (g >= 0 && present.get(g) && !sameValue(old, newRow, g)) {
      // A new GENERATED ALWAYS identity value: no UPDATE may write it, so replace the row.
      changed =
          run.executeNow(
              plan.replaceOne(present, nulls),
              plan.what(),
              ps -> {
                int next = bindMatch(plan, ps, 1, old);
                bindPresent(plan, ps, next, newRow, present);
              });
    } else {
      BitSet set = (BitSet) present.clone();
      if (g >= 0) {
        set.clear(g); // unchanged: not written (UPDATE may not set it)
      }
      if (set.isEmpty()) {
        return; // nothing the target could change
      }
      changed =
          run.executeNow(
              plan.updateOne(set, nulls),
              plan.what(),
              ps -> {
                int next = bindPresent(plan, ps, 1, newRow, set);
                bindMatch(plan, ps, next, old);
              });
    }
    if (changed == 0) {
      upsert(run, plan, newRow, null);
    }
  }

  private void delete(MirrorRun run, Change.Delete delete) throws SQLException {
    TablePlan plan = plan(run, delete.table());
    run.context = plan.what();
    requireWidth(plan, delete.oldRow());
    RowImage old = RowImage.of(delete.oldRow());
    if (!plan.keyless()) {
      deleteByKey(run, plan, old);
      return;
    }
    plan.requireFindableByOldImage(delete.oldKind() == OldTupleKind.FULL);
    BitSet nulls = nullsOf(plan, old);
    run.batch(
        plan.deleteOne(nulls), plan.what(), null, rowBytes(old), ps -> bindMatch(plan, ps, 1, old));
  }

  /**
   * Writes a new row: an upsert by the target key (a plain insert for a keyless target). With a
   * GENERATED ALWAYS identity column outside the key, the upsert runs alone and guarded (see {@link
   * TablePlan#upsert}) unless {@code fullOld} shows the column unchanged; a stored row with another
   * identity value is then replaced.
   */
  private void upsert(MirrorRun run, TablePlan plan, RowImage row, TupleData fullOld)
      throws SQLException {
    run.context = plan.what();
    BitSet present = present(plan, row);
    Object key = plan.keyless() ? null : keyOf(plan, row);
    int g = plan.guardedIdentity();
    if (g < 0 || !present.get(g)) {
      run.batch(
          plan.upsert(present),
          plan.what(),
          key,
          rowBytes(row),
          ps -> bindPresent(plan, ps, 1, row, present));
      return;
    }
    if (fullOld != null && sameValue(RowImage.of(fullOld), row, g)) {
      run.batch(
          plan.upsertKeepingIdentity(present),
          plan.what(),
          key,
          rowBytes(row),
          ps -> bindPresent(plan, ps, 1, row, present));
      return;
    }
    int written =
        run.executeNow(
            plan.upsert(present), plan.what(), ps -> bindPresent(plan, ps, 1, row, present));
    if (written == 0) {
      int replaced =
          run.executeNow(
              plan.replaceByKey(present),
              plan.what(),
              ps -> {
                int next = bindKey(plan, ps, 1, row);
                bindPresent(plan, ps, next, row, present);
              });
      if (replaced != 1) {
        throw SinkException.transientFailure(
            "mirror lost a row it was replacing in " + plan.what(), null);
      }
    }
  }

  private void deleteByKey(MirrorRun run, TablePlan plan, RowImage oldRow) throws SQLException {
    String sql = plan.deleteByKey();
    requireKeyValues(plan, oldRow, "the old row image");
    run.batch(sql, plan.what(), null, rowBytes(oldRow), ps -> bindKey(plan, ps, 1, oldRow));
  }

  private void truncate(MirrorRun run, Change.Truncate truncate) throws SQLException {
    Set<String> targets = new LinkedHashSet<>();
    List<String> names = new ArrayList<>();
    for (TableSchema table : truncate.tables()) {
      String target = settings.targetTable(table);
      if (targets.add(MirrorSql.qualified(settings.targetSchema(), target))) {
        names.add(settings.targetSchema() + "." + target);
      }
    }
    if (targets.isEmpty()) {
      return;
    }
    run.flush();
    run.context = "a truncate of " + String.join(", ", names);
    try (Statement s = run.connection.createStatement()) {
      s.execute(MirrorSql.truncate(List.copyOf(targets), truncate.restartIdentity()));
    }
  }

  /**
   * A published table's target read from the catalog and planned as the first change would plan it,
   * then checked for the kinds of change the publications send. Writes nothing.
   */
  TableVerdict check(Connection c, PublishedTable published) throws SQLException {
    TableSchema source = published.schema();
    String target = settings.targetTable(source);
    try {
      TablePlan plan = newPlan(c, source, target, what(source, target));
      // Without a replica identity PostgreSQL refuses the table's updates and deletes at the
      // source while they are published: only inserts can come.
      boolean identity =
          source.replicaIdentity() == ReplicaIdentity.FULL || source.keyIndexes().length > 0;
      TableHandling handling = plan.handling(published.findsRows() && identity);
      String into = "into " + settings.targetSchema() + "." + target;
      String detail =
          switch (handling) {
            case BY_PRIMARY_KEY -> into + ", rows found by its primary key " + plan.keys();
            case BY_IDENTITY_INDEX ->
                into + ", rows found by its replica identity index " + plan.keys();
            case BY_FULL_IMAGE ->
                into + " (no key), rows found by their whole old image (REPLICA IDENTITY FULL)";
            case INSERTS_ONLY ->
                into
                    + " (no key): plain inserts, as only inserts can come (only inserts are"
                    + " published, or the source has no replica identity)";
            default -> into;
          };
      return TableVerdict.handled(source.qualifiedName(), handling, detail);
    } catch (SinkException refused) {
      return TableVerdict.refused(
          source.qualifiedName(), MirrorFailures.code(refused), refused.getMessage());
    }
  }

  /**
   * The plan for a source table shape, reading the target from the catalog on first use (a new
   * shape, such as one with an added column, reads it again: the column was added to the target
   * first).
   */
  TablePlan plan(MirrorRun run, TableSchema source) throws SQLException {
    TablePlan plan = plans.get(source);
    if (plan != null) {
      return plan;
    }
    String target = settings.targetTable(source);
    String what = what(source, target);
    run.context = what;
    plan = newPlan(run.connection, source, target, what);
    plans.put(source, plan);
    return plan;
  }

  /** {@code "a change to s.t (target m.t)"}: what refusals name. */
  private String what(TableSchema source, String target) {
    return "a change to "
        + source.qualifiedName()
        + " (target "
        + settings.targetSchema()
        + "."
        + target
        + ")";
  }

  /** Reads the target from the catalog and plans {@code source} onto it (refusals thrown). */
  private TablePlan newPlan(Connection c, TableSchema source, String target, String what)
      throws SQLException {
    TargetTable table =
        TargetTable.read(c, settings.targetSchema(), target, what)
            .orElseThrow(
                () ->
                    MirrorFailures.refused(
                        what,
                        MirrorFailures.TARGET_MISSING,
                        "the target table does not exist: create it (the mirror never creates or"
                            + " changes target tables)"));
    return TablePlan.plan(source, settings.targetSchema(), target, table, what);
  }

  // ---------------------------------------------------------------------------------------------
  // row images

  private static void requireWidth(TablePlan plan, TupleData row) {
    if (row.size() != plan.source().columns().size()) {
      throw MirrorFailures.refused(
          plan.what(),
          MirrorFailures.MALFORMED_ROW,
          "a row image and the table schema disagree on the column count");
    }
  }

  private static void requireKeyValues(TablePlan plan, RowImage row, String image) {
    for (int k : plan.keyIndexes()) {
      if (row.isNull(k) || row.isUnchangedToast(k)) {
        throw MirrorFailures.refused(
            plan.what(),
            MirrorFailures.MISSING_VALUE,
            image + " carries no value for a key column of the target");
      }
    }
  }

  /** The value bytes of a row image: what binding it adds to a pending batch, roughly. */
  private static long rowBytes(RowImage row) {
    long n = 0;
    for (int i = 0; i < row.size(); i++) {
      n += row.length(i);
    }
    return n;
  }

  /** The target key of a row image, for telling whether a pending upsert batch already has it. */
  private static Object keyOf(TablePlan plan, RowImage row) {
    int[] keys = plan.keyIndexes();
    if (keys.length == 1) {
      return keyPart(row, keys[0]);
    }
    List<Object> values = new ArrayList<>(keys.length);
    for (int k : keys) {
      values.add(keyPart(row, k));
    }
    return values;
  }

  /** The column's bytes, compared by content; an empty list for a column without bytes. */
  private static Object keyPart(RowImage row, int column) {
    return row.kind(column).hasData() ? ByteBuffer.wrap(row.bytes(column)) : List.of();
  }

  /** Whether the target key differs between the images; unchanged TOAST counts as unchanged. */
  private static boolean keyChanged(TablePlan plan, RowImage oldRow, RowImage newRow) {
    for (int k : plan.keyIndexes()) {
      if (!sameValue(oldRow, newRow, k)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Same kind and bytes in both images; an unchanged TOAST marker on either side counts as same.
   */
  private static boolean sameValue(RowImage a, RowImage b, int column) {
    ColumnKind before = a.kind(column);
    ColumnKind after = b.kind(column);
    if (before == ColumnKind.UNCHANGED_TOAST || after == ColumnKind.UNCHANGED_TOAST) {
      return true;
    }
    return before == after
        && (!before.hasData() || Arrays.equals(a.bytes(column), b.bytes(column)));
  }

  /**
   * Columns that carry a value (all but unchanged TOAST the old image could not fill); every key
   * column must be among them.
   */
  private static BitSet present(TablePlan plan, RowImage row) {
    BitSet present = new BitSet(row.size());
    for (int i = 0; i < row.size(); i++) {
      if (!row.isUnchangedToast(i)) {
        present.set(i);
      }
    }
    for (int k : plan.keyIndexes()) {
      if (!present.get(k)) {
        throw MirrorFailures.refused(
            plan.what(),
            MirrorFailures.MISSING_VALUE,
            "a key column of the target arrived as unchanged TOAST, and no old key image carries"
                + " its value");
      }
    }
    return present;
  }

  /** The NULL columns of an old image used to find a row of a keyless target. */
  private static BitSet nullsOf(TablePlan plan, RowImage old) {
    BitSet nulls = new BitSet(old.size());
    for (int i = 0; i < old.size(); i++) {
      if (old.isUnchangedToast(i)) {
        throw MirrorFailures.refused(
            plan.what(),
            MirrorFailures.MISSING_VALUE,
            "the old row image lacks a column's value (unchanged TOAST), so the row cannot be"
                + " found by it: give the target table a primary key or a replica identity index");
      }
      if (old.isNull(i)) {
        nulls.set(i);
      }
    }
    return nulls;
  }

  private static int bindPresent(
      TablePlan plan, PreparedStatement ps, int first, RowImage row, BitSet present)
      throws SQLException {
    int param = first;
    for (int i = present.nextSetBit(0); i >= 0; i = present.nextSetBit(i + 1)) {
      bind(plan, ps, param++, row, i);
    }
    return param;
  }

  private static int bindKey(TablePlan plan, PreparedStatement ps, int first, RowImage row)
      throws SQLException {
    int param = first;
    for (int k : plan.keyIndexes()) {
      bind(plan, ps, param++, row, k);
    }
    return param;
  }

  /** Binds the non-NULL columns of an old image, as {@link MirrorSql#match} expects them. */
  private static int bindMatch(TablePlan plan, PreparedStatement ps, int first, RowImage old)
      throws SQLException {
    int param = first;
    for (int i = 0; i < old.size(); i++) {
      if (!old.isNull(i)) {
        bind(plan, ps, param++, old, i);
      }
    }
    return param;
  }

  /** Binds one column as untyped text: the statement casts it to the target column's type. */
  private static void bind(
      TablePlan plan, PreparedStatement ps, int param, RowImage row, int column)
      throws SQLException {
    switch (row.kind(column)) {
      case NULL -> ps.setNull(param, Types.OTHER);
      case TEXT -> ps.setObject(param, row.text(column), Types.OTHER);
      case BINARY ->
          throw MirrorFailures.refused(
              plan.what(),
              MirrorFailures.MALFORMED_ROW,
              "a column arrived in binary format; the mirror needs the pipeline's text format");
      case UNCHANGED_TOAST ->
          throw MirrorFailures.refused(
              plan.what(),
              MirrorFailures.MISSING_VALUE,
              "an unchanged TOAST column has no value to write");
    }
  }
}
