package io.weir.persistence.cdc.mirror;

import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.ColumnKind;
import io.weir.protocol.pgoutput.OldTupleKind;
import io.weir.protocol.pgoutput.TupleData;

/**
 * A row image as the mirror writes it: a new row whose unchanged-TOAST columns take their value
 * from the old image where the old image has one. An old image under REPLICA IDENTITY FULL carries
 * every column (the server inlines TOASTed values into it); an old key image carries the replica
 * identity columns (the server sends it also when a key column is stored out of line, precisely so
 * that the key is known). What neither has stays an unchanged-TOAST marker: the stored value.
 */
final class RowImage {
  private final TupleData row;
  private final TupleData donor; // null: nothing taken from the old image
  private final boolean[] fromDonor;

  private RowImage(TupleData row, TupleData donor, boolean[] fromDonor) {
    this.row = row;
    this.donor = donor;
    this.fromDonor = fromDonor;
  }

  static RowImage of(TupleData row) {
    return new RowImage(row, null, null);
  }

  /** {@code newRow} with its unchanged-TOAST columns filled from {@code oldRow} where it can. */
  static RowImage filled(
      TableSchema source, TupleData newRow, OldTupleKind oldKind, TupleData oldRow) {
    if (oldRow == null
        || oldKind == OldTupleKind.NONE
        || !newRow.hasUnchangedToast()
        || oldRow.size() != newRow.size()
        || source.columns().size() != newRow.size()) {
      return of(newRow);
    }
    boolean[] take = new boolean[newRow.size()];
    boolean any = false;
    for (int i = 0; i < take.length; i++) {
      if (newRow.isUnchangedToast(i)
          && oldRow.kind(i).hasData()
          && (oldKind == OldTupleKind.FULL || source.columns().get(i).key())) {
        take[i] = true;
        any = true;
      }
    }
    return any ? new RowImage(newRow, oldRow, take) : of(newRow);
  }

  private TupleData at(int column) {
    return fromDonor != null && fromDonor[column] ? donor : row;
  }

  int size() {
    return row.size();
  }

  ColumnKind kind(int column) {
    return at(column).kind(column);
  }

  boolean isNull(int column) {
    return at(column).isNull(column);
  }

  boolean isUnchangedToast(int column) {
    return at(column).isUnchangedToast(column);
  }

  boolean hasUnchangedToast() {
    for (int i = 0; i < row.size(); i++) {
      if (isUnchangedToast(i)) {
        return true;
      }
    }
    return false;
  }

  String text(int column) {
    return at(column).text(column);
  }

  byte[] bytes(int column) {
    return at(column).bytes(column);
  }

  int length(int column) {
    return at(column).length(column);
  }
}
