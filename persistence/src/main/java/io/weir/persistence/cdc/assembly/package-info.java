/**
 * Committed transactions assembled from decoded pgoutput messages ({@code TransactionAssembler}),
 * streamed in-progress transactions kept on disk beyond the memory budget ({@code SpillStore},
 * {@code StreamedChanges}), and the check of each relation message against the schema the sink
 * accepted ({@code SchemaGuard}, {@code RelationStore}).
 */
package io.weir.persistence.cdc.assembly;
