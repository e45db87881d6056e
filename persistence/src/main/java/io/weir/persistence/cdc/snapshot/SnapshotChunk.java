package io.weir.persistence.cdc.snapshot;

import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.TupleData;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * Rows of one table read from a snapshot rather than from the WAL: a batch of an initial snapshot,
 * or one chunk of an incremental snapshot. A sink upserts them by primary key.
 *
 * @param table the table's shape as read from the catalog at the snapshot (the same shape a
 *     pgoutput Relation message would announce)
 * @param firstForTable this is the first chunk of {@code table} in this snapshot: the sink must
 *     empty its copy of the table before applying the rows. A redo of the snapshot after a crash
 *     starts again with such a chunk, which is what makes the redo safe
 * @param rows row images in the table's column order, text format, no unchanged-TOAST columns
 * @param progress incremental snapshots only: an opaque token the sink stores atomically with the
 *     rows and reports back from {@link ChangeSink#snapshotProgress}, so a restart resumes after
 *     the last applied chunk; empty for initial snapshots
 * @param incremental whether the chunk belongs to an incremental snapshot (taken while streaming)
 *     rather than the initial snapshot
 */
public record SnapshotChunk(
    TableSchema table,
    boolean firstForTable,
    List<TupleData> rows,
    Optional<String> progress,
    boolean incremental) {

  public SnapshotChunk {
    Objects.requireNonNull(table, "table");
    rows = List.copyOf(rows);
    Objects.requireNonNull(progress, "progress");
  }

  @Override
  public String toString() {
    return "SnapshotChunk["
        + table.qualifiedName()
        + ", first="
        + firstForTable
        + ", rows="
        + rows.size()
        + "]";
  }
}
