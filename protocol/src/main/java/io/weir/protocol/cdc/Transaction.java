package io.weir.protocol.cdc;

import io.weir.protocol.Lsn;
import java.time.Instant;
import java.util.List;

/**
 * One committed source transaction, in commit order.
 *
 * @param commitLsn LSN of the commit record: the transaction's position; sinks skip any commit LSN
 *     at or below their checkpoint
 * @param endLsn LSN just past the commit record: what the slot may confirm once this transaction
 *     and every earlier one are durably applied
 * @param changes the changes in the order they were made
 * @param schemaChanges tables whose shape changed compatibly (a column was added) since the
 *     previous transaction that used them; announced before {@code changes}
 */
public record Transaction(
    long xid, Lsn commitLsn, Lsn endLsn, Instant commitTime, List<Change> changes, List<TableSchema> schemaChanges)
    implements CdcEvent {

  public Transaction {
    changes = List.copyOf(changes);
    schemaChanges = List.copyOf(schemaChanges);
  }

  /** Row changes (insert, update, delete), not counting truncates and messages. */
  public int rowCount() {
    int n = 0;
    for (Change c : changes) {
      if (c instanceof Change.Insert || c instanceof Change.Update || c instanceof Change.Delete) {
        n++;
      }
    }
    return n;
  }

  @Override
  public String toString() {
    return "Transaction[xid=" + xid + ", commitLsn=" + commitLsn + ", changes=" + changes.size() + "]";
  }
}
