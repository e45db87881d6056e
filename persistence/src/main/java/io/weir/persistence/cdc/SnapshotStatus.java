package io.weir.persistence.cdc;

import io.weir.protocol.CborSerializable;

/**
 * Progress of a pipeline's snapshot, for operators. Value-free: table names and counts only.
 *
 * @param kind {@code initial} or {@code incremental}
 * @param state {@code running}, {@code done} or {@code failed} (a failed initial snapshot is
 *     restarted from the beginning with the pipeline)
 * @param tablesDone tables read completely
 * @param tablesTotal tables in the snapshot
 * @param rowsDone rows handed to the sink and applied
 * @param rowsEstimated rows expected, from the planner's statistics ({@code pg_class.reltuples}); 0
 *     when the tables were never analyzed
 * @param table the table being read, null between tables
 * @param elapsedMillis time since the snapshot started
 */
public record SnapshotStatus(
    String kind,
    String state,
    int tablesDone,
    int tablesTotal,
    long rowsDone,
    long rowsEstimated,
    String table,
    long elapsedMillis)
    implements CborSerializable {}
