package io.weir.protocol.cdc;

import io.weir.protocol.Lsn;
import java.time.Instant;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One committed source transaction, in commit order.
 *
 * @param commitLsn LSN of the commit record: the transaction's position; sinks skip any commit LSN
 *     at or below their checkpoint
 * @param endLsn LSN just past the commit record: what the slot may confirm once this transaction
 *     and every earlier one are durably applied
 * @param changes the changes in the order they were made; see {@link Changes} for the single-pass
 *     kind a large streamed transaction brings
 * @param schemaChanges tables whose shape changed compatibly (a column was added) since the
 *     previous transaction that used them; announced before {@code changes}
 * @param rowCount row changes (insert, update, delete) among {@code changes}, not counting
 *     truncates and messages; counted as the transaction was assembled, so nobody walks the changes
 *     a second time for it
 * @param rowsByTable {@code rowCount} per table shape
 */
public record Transaction(
    long xid,
    Lsn commitLsn,
    Lsn endLsn,
    Instant commitTime,
    Changes changes,
    List<TableSchema> schemaChanges,
    long rowCount,
    Map<TableSchema, Long> rowsByTable)
    implements CdcEvent {

  public Transaction {
    schemaChanges = List.copyOf(schemaChanges);
    rowsByTable = Map.copyOf(rowsByTable);
  }

  /** A transaction whose changes are held in memory; the row counts are taken from them. */
  public Transaction(
      long xid,
      Lsn commitLsn,
      Lsn endLsn,
      Instant commitTime,
      List<Change> changes,
      List<TableSchema> schemaChanges) {
    this(
        xid,
        commitLsn,
        endLsn,
        commitTime,
        Changes.of(changes),
        schemaChanges,
        rows(changes).values().stream().mapToLong(Long::longValue).sum(),
        rows(changes));
  }

  /** The table a row change touches, or null for truncates and messages. */
  public static TableSchema rowTable(Change c) {
    if (c instanceof Change.Insert i) {
      return i.table();
    }
    if (c instanceof Change.Update u) {
      return u.table();
    }
    if (c instanceof Change.Delete d) {
      return d.table();
    }
    return null;
  }

  private static Map<TableSchema, Long> rows(List<Change> changes) {
    Map<TableSchema, long[]> counts = new IdentityHashMap<>();
    for (Change c : changes) {
      TableSchema table = rowTable(c);
      if (table != null) {
        counts.computeIfAbsent(table, k -> new long[1])[0]++;
      }
    }
    Map<TableSchema, Long> out = new LinkedHashMap<>();
    counts.forEach((table, n) -> out.merge(table, n[0], Long::sum));
    return out;
  }

  @Override
  public String toString() {
    return "Transaction[xid="
        + xid
        + ", commitLsn="
        + commitLsn
        + ", changes="
        + changes.count()
        + "]";
  }
}
