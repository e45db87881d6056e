package io.weir.node.continuous;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.continuous.spi.ContinuousProjector;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.ColumnKind;
import io.weir.protocol.pgoutput.OldTupleKind;
import io.weir.protocol.pgoutput.TupleData;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;

/**
 * Tier 2, the authoritative scoped delta: which result keys a transaction affects ({@link Keys}),
 * and whether the rows the base query returns for those keys decide the new top-N without a full
 * read ({@link #merge}).
 *
 * <p>The merge rule. Let C be the current result (the first N rows of the base, ordered), A the
 * affected keys, F the base's rows for A now (read as the subscriber, at a snapshot that includes
 * the transaction), U the rows of C whose keys are not in A (unchanged), and M = U + F ordered.
 * Every row outside C and A is unchanged and ranked after C's last row t. So:
 *
 * <ul>
 *   <li>if C held fewer than N rows, C was the whole base and M is the whole base now: the result
 *       is M's first N rows;
 *   <li>otherwise, if M has at least N rows and its N-th row ranks at or before t (t's values
 *       before the transaction), no outside row can rank before it: the result is M's first N rows;
 *   <li>otherwise a visible row left the result or fell behind t, and an outside row may take its
 *       place: only a full read can tell ({@code visible-row-left}, {@code rank-boundary}).
 * </ul>
 *
 * This admits everything the rules admit (a new candidate displacing the tail, a row
 * changing in place or improving its rank) and, exactly, a few more cases (a visible row falling
 * back while staying ahead of the tail, a row leaving while another enters ahead of the tail).
 * Fallback reasons are bounded names, never values.
 */
final class ScopedDelta {
  private ScopedDelta() {}

  /** A merge's outcome: the new result, or the reason a full read is needed. */
  record Outcome(List<ResultRow> result, FallbackReason fallback) {
    static Outcome full(FallbackReason reason) {
      return new Outcome(null, reason);
    }
  }

  static Outcome merge(
      List<ResultRow> current,
      Set<String> affected,
      List<ResultRow> fetched,
      int limit,
      ResultOrder order) {
    Set<String> seen = new HashSet<>();
    for (ResultRow r : fetched) {
      if (!affected.contains(r.keyText())) {
        return Outcome.full(FallbackReason.DELTA_OUTSIDE_AFFECTED);
      }
      if (!seen.add(r.keyText())) {
        return Outcome.full(FallbackReason.DUPLICATE_KEY);
      }
      if (nullKey(r)) {
        return Outcome.full(FallbackReason.NULL_KEY);
      }
    }
    List<ResultRow> merged = new ArrayList<>(current.size() + fetched.size());
    for (ResultRow r : current) {
      if (nullKey(r)) {
        return Outcome.full(
            FallbackReason.NULL_KEY); // an outer join's null side: a change elsewhere can remove it
      }
      if (!affected.contains(r.keyText())) {
        merged.add(r);
      }
    }
    merged.addAll(fetched);
    try {
      merged.sort(order);
      for (int i = 1; i < merged.size(); i++) {
        if (order.compare(merged.get(i - 1), merged.get(i)) >= 0) {
          return Outcome.full(FallbackReason.ORDER_NOT_COMPARABLE); // distinct keys must never tie
        }
      }
      if (current.size() < limit) {
        return new Outcome(List.copyOf(merged.subList(0, Math.min(limit, merged.size()))), null);
      }
      if (merged.size() < limit) {
        return Outcome.full(FallbackReason.VISIBLE_ROW_LEFT);
      }
      if (order.compare(merged.get(limit - 1), current.get(current.size() - 1)) > 0) {
        return Outcome.full(FallbackReason.RANK_BOUNDARY);
      }
    } catch (ResultOrder.Incomparable e) {
      return Outcome.full(FallbackReason.ORDER_NOT_COMPARABLE);
    }
    return new Outcome(List.copyOf(merged.subList(0, limit)), null);
  }

  /**
   * Whether the transaction cannot change the result, decided without a read: the result holds
   * {@code limit} rows, none of the affected keys is among them, and every inserted or updated row
   * of the key table has new ORDER BY values (its {@link Keys#orderValues}, plain columns of that
   * table) that rank strictly after the result's last row t. Then every result row is unchanged and
   * ranks at or before t, so no changed row, visible to the scope or not, passing the query's
   * filters or not, can be among the first {@code limit}. A tie with t, a value Java cannot order
   * exactly ({@link ResultOrder}), a key of another type than an integer, or anything the change
   * did not carry: undecided (false), and the scoped delta reads.
   */
  static boolean staysOut(
      List<ResultRow> current, int limit, Definition d, Keys keys, ResultOrder order) {
    if (order == null
        || current.size() < limit
        || current.isEmpty()
        || keys.fallback != null
        || !keys.lookupValues.isEmpty()
        || keys.impact.orderSources() == null // also for a transaction of deletes only
        || keys.orderValues == null
        || d.columnTypes() == null) {
      return false;
    }
    Set<String> affected = integerKeys(keys.impact, new ArrayList<>(keys.keys.values()));
    if (affected == null) {
      return false;
    }
    for (ResultRow r : current) {
      if (affected.contains(r.keyText()) || nullKey(r)) {
        return false; // a null key: a row no single row of the table gives (an outer join's side)
      }
    }
    ResultRow tail = current.get(current.size() - 1);
    try {
      for (List<String> values : keys.orderValues) {
        ObjectNode row = JsonNodeFactory.instance.objectNode();
        for (int i = 0; i < values.size(); i++) {
          String column = d.orderBy().get(i).column();
          JsonNode v = orderValue(d.columnTypes().get(d.columns().indexOf(column)), values.get(i));
          if (v == null) {
            return false;
          }
          row.set(column, v);
        }
        ResultRow candidate = new ResultRow("", JsonNodeFactory.instance.arrayNode(), row);
        if (order.compareOrder(candidate, tail) <= 0) {
          return false;
        }
      }
    } catch (ResultOrder.Incomparable e) {
      return false;
    }
    return true;
  }

  /**
   * A value of pgoutput's text form as {@link ScopeReader} reads the same value of a result column,
   * for the types whose text converts exactly; null for any other type.
   */
  private static JsonNode orderValue(String type, String text) {
    JsonNodeFactory f = JsonNodeFactory.instance;
    try {
      return switch (type) {
        case "int2", "int4", "int8", "serial", "bigserial", "oid" ->
            f.numberNode(Long.parseLong(text));
        case "numeric" ->
            switch (text) {
              case "NaN", "Infinity", "-Infinity" -> f.textNode(text);
              default -> f.numberNode(new BigDecimal(text));
            };
        case "float8" ->
            switch (text) {
              case "NaN", "Infinity", "-Infinity" -> f.textNode(text);
              default -> f.numberNode(Double.parseDouble(text));
            };
        default -> null; // float4 among them: pgjdbc may widen it differently from its text
      };
    } catch (NumberFormatException e) {
      return null;
    }
  }

  private static final Set<String> INTEGER_TYPES = Set.of("smallint", "integer", "bigint");

  /**
   * The key texts of {@code tuples} when every key column is an integer type (read back as JSON
   * numbers, the same as {@link ScopeReader} reads result rows), or null when a column is of
   * another type or a value does not parse (PostgreSQL then casts them).
   */
  static Set<String> integerKeys(Definition.Impact impact, List<List<String>> tuples) {
    for (String type : impact.castTypes()) {
      if (!INTEGER_TYPES.contains(type)) {
        return null;
      }
    }
    Set<String> out = new HashSet<>();
    for (List<String> tuple : tuples) {
      ArrayNode key = JsonNodeFactory.instance.arrayNode();
      for (String v : tuple) {
        try {
          key.add(Long.parseLong(v));
        } catch (NumberFormatException e) {
          return null;
        }
      }
      out.add(key.toString());
    }
    return out;
  }

  private static boolean nullKey(ResultRow r) {
    for (var k : r.key()) {
      if (k == null || k.isNull()) {
        return true;
      }
    }
    return false;
  }

  /**
   * The affected keys of one session in one transaction, collected change by change from the impact
   * rule: the changed row's source columns, old and new. Stops at the first change it cannot
   * account for exactly (then {@link #fallback} names why): a table without a rule, a truncate, a
   * value the message does not carry (unchanged TOAST, a key-only old image missing a non-key
   * source column), a null, more keys than the bound.
   */
  static final class Keys {
    private final Definition.Impact impact;
    private final Set<String> tables;
    private final int bound;

    /** Canonical text of a key tuple -> its values as text (pgoutput's text form). */
    final Map<String, List<String>> keys = new LinkedHashMap<>();

    /**
     * For each lookup rule, the joined table's column values (old and new, as text) whose key-table
     * rows are affected; their keys are read in the delta's transaction.
     */
    final Map<Definition.Lookup, Set<String>> lookupValues = new LinkedHashMap<>();

    private int lookupCount;
    FallbackReason fallback;

    /**
     * For each insert or update of the key table, the new row's values of the ORDER BY columns'
     * sources (pgoutput's text), or null when the impact has no such sources or a value is null or
     * not carried (unchanged TOAST): then {@link #staysOut} cannot decide.
     */
    List<List<String>> orderValues = new ArrayList<>();

    /**
     * For a session with a trusted projector (tier 1): the changes of the key table with complete
     * images, or null when none is collected or one lacked complete images ({@link #projectorGap}).
     */
    List<ContinuousProjector.RowChange> rowChanges;

    FallbackReason projectorGap;

    Keys(Definition.Impact impact, Set<String> tables, int bound) {
      this.impact = impact;
      this.tables = tables;
      this.bound = bound;
    }

    /** Also collects complete row images for a trusted projector. */
    Keys withRowChanges() {
      rowChanges = new ArrayList<>();
      return this;
    }

    private void rowChange(Change c, TableSchema table) {
      if (rowChanges == null) {
        return;
      }
      String kind;
      TupleData before = null;
      TupleData after = null;
      if (c instanceof Change.Insert ins) {
        kind = "insert";
        after = ins.newRow();
      } else if (c instanceof Change.Update up) {
        kind = "update";
        after = up.newRow();
        if (up.oldKind() != OldTupleKind.FULL) {
          projectorGap(
              FallbackReason.PROJECTOR_INCOMPLETE_TUPLE); // not REPLICA IDENTITY FULL (any more)
          return;
        }
        before = up.oldRow();
      } else if (c instanceof Change.Delete del) {
        kind = "delete";
        if (del.oldKind() != OldTupleKind.FULL) {
          projectorGap(FallbackReason.PROJECTOR_INCOMPLETE_TUPLE);
          return;
        }
        before = del.oldRow();
      } else {
        projectorGap(FallbackReason.PROJECTOR_UNCERTAIN);
        return;
      }
      Map<String, String> b = before == null ? null : image(before, table);
      Map<String, String> a = after == null ? null : image(after, table);
      if ((before != null && b == null) || (after != null && a == null)) {
        projectorGap(FallbackReason.PROJECTOR_INCOMPLETE_TUPLE); // unchanged TOAST or binary values
        return;
      }
      Set<String> changed = new TreeSet<>();
      for (var col : table.columns()) {
        String name = col.name();
        if (b == null || a == null || !Objects.equals(b.get(name), a.get(name))) {
          changed.add(name);
        }
      }
      rowChanges.add(new ContinuousProjector.RowChange(table.qualifiedName(), kind, b, a, changed));
    }

    private static Map<String, String> image(TupleData row, TableSchema table) {
      if (row.size() != table.columns().size()) {
        return null;
      }
      Map<String, String> out = new LinkedHashMap<>();
      for (int i = 0; i < row.size(); i++) {
        if (row.isNull(i)) {
          out.put(table.columns().get(i).name(), null);
        } else if (row.kind(i) == ColumnKind.TEXT) {
          out.put(table.columns().get(i).name(), row.text(i));
        } else {
          return null;
        }
      }
      return out;
    }

    private void projectorGap(FallbackReason reason) {
      if (projectorGap == null) {
        projectorGap = reason;
      }
      rowChanges = null;
    }

    void truncate(List<TableSchema> truncated) {
      for (TableSchema t : truncated) {
        if (tables.contains(t.qualifiedName())) {
          fail(FallbackReason.TRUNCATE);
        }
      }
    }

    void change(Change c, TableSchema table) {
      if (fallback != null || !tables.contains(table.qualifiedName())) {
        return;
      }
      if (!table.qualifiedName().equals(impact.table())) {
        Definition.Lookup lookup = impact.lookup(table.qualifiedName());
        if (lookup == null) {
          fail(FallbackReason.NO_IMPACT_RULE);
        } else {
          lookupChange(c, table, lookup);
        }
        return;
      }
      int[] cols = new int[impact.sourceColumns().size()];
      boolean allIdentity = true;
      for (int i = 0; i < cols.length; i++) {
        cols[i] = table.indexOf(impact.sourceColumns().get(i));
        if (cols[i] < 0) {
          fail(FallbackReason.UNKNOWN_SCHEMA);
          return;
        }
        allIdentity &= table.columns().get(cols[i]).key();
      }
      rowChange(c, table);
      if (c instanceof Change.Insert ins) {
        add(ins.newRow(), cols);
        orderValues(ins.newRow(), table);
      } else if (c instanceof Change.Update up) {
        add(up.newRow(), cols);
        orderValues(up.newRow(), table);
        if (up.oldKind() == OldTupleKind.FULL
            || (up.oldKind() == OldTupleKind.KEY && allIdentity)) {
          add(up.oldRow(), cols);
        } else if (!allIdentity) {
          // Without the old value of a source column outside the replica identity, the key the
          // row had before is unknown.
          fail(FallbackReason.INCOMPLETE_TUPLE);
        } // else: the identity did not change (no old key sent): the old key is the new key
      } else if (c instanceof Change.Delete del) {
        if (del.oldKind() == OldTupleKind.FULL || allIdentity) {
          add(del.oldRow(), cols);
        } else {
          fail(FallbackReason.INCOMPLETE_TUPLE);
        }
      } else {
        fail(FallbackReason.NO_IMPACT_RULE);
      }
    }

    private void orderValues(TupleData row, TableSchema table) {
      if (orderValues == null) {
        return;
      }
      if (impact.orderSources() == null) {
        orderValues = null;
        return;
      }
      List<String> values = new ArrayList<>(impact.orderSources().size());
      for (String column : impact.orderSources()) {
        int i = table.indexOf(column);
        if (i < 0 || i >= row.size() || row.isNull(i) || row.kind(i) != ColumnKind.TEXT) {
          orderValues = null;
          return;
        }
        values.add(row.text(i));
      }
      orderValues.add(values);
    }

    /** A change of a joined table with a lookup rule: its column's old and new values. */
    private void lookupChange(Change c, TableSchema table, Definition.Lookup lookup) {
      int col = table.indexOf(lookup.column());
      if (col < 0) {
        fail(FallbackReason.UNKNOWN_SCHEMA);
        return;
      }
      boolean identity = table.columns().get(col).key();
      if (c instanceof Change.Insert ins) {
        lookupValue(lookup, ins.newRow(), col);
      } else if (c instanceof Change.Update up) {
        lookupValue(lookup, up.newRow(), col);
        if (up.oldKind() == OldTupleKind.FULL || (up.oldKind() == OldTupleKind.KEY && identity)) {
          lookupValue(lookup, up.oldRow(), col);
        } else if (!identity) {
          fail(FallbackReason.INCOMPLETE_TUPLE); // the joined value the row had before is unknown
        } // else: the identity did not change, so neither did this column
      } else if (c instanceof Change.Delete del) {
        if (del.oldKind() == OldTupleKind.FULL || identity) {
          lookupValue(lookup, del.oldRow(), col);
        } else {
          fail(FallbackReason.INCOMPLETE_TUPLE);
        }
      } else {
        fail(FallbackReason.NO_IMPACT_RULE);
      }
    }

    private void lookupValue(Definition.Lookup lookup, TupleData row, int col) {
      if (fallback != null) {
        return;
      }
      if (row == null || col >= row.size()) {
        fail(row == null ? FallbackReason.INCOMPLETE_TUPLE : FallbackReason.UNKNOWN_SCHEMA);
        return;
      }
      if (row.isNull(col)) {
        return; // a null joins no row: nothing of the result depends on it
      }
      if (row.kind(col) != ColumnKind.TEXT) {
        fail(FallbackReason.INCOMPLETE_TUPLE);
        return;
      }
      if (lookupValues.computeIfAbsent(lookup, l -> new LinkedHashSet<>()).add(row.text(col))
          && ++lookupCount > bound) {
        fail(FallbackReason.BUDGET_EXCEEDED);
      }
    }

    /** Whether nothing was collected: no key and no lookup value. */
    boolean empty() {
      return keys.isEmpty() && lookupValues.isEmpty();
    }

    private void add(TupleData row, int[] cols) {
      if (fallback != null || row == null) {
        if (row == null) {
          fail(FallbackReason.INCOMPLETE_TUPLE);
        }
        return;
      }
      List<String> values = new ArrayList<>(cols.length);
      for (int col : cols) {
        if (col >= row.size()) {
          fail(FallbackReason.UNKNOWN_SCHEMA);
          return;
        }
        if (row.isNull(col)) {
          fail(FallbackReason.NULL_KEY);
          return;
        }
        if (row.kind(col) != ColumnKind.TEXT) {
          fail(FallbackReason.INCOMPLETE_TUPLE); // unchanged TOAST or binary: no text value to bind
          return;
        }
        values.add(row.text(col));
      }
      keys.putIfAbsent(String.join("\u0000", values), values);
      if (keys.size() > bound) {
        fail(FallbackReason.BUDGET_EXCEEDED);
      }
    }

    private void fail(FallbackReason reason) {
      if (fallback == null) {
        fallback = reason;
        keys.clear();
        lookupValues.clear();
      }
    }
  }
}
