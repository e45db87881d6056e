/**
 * Snapshots of the published tables: the initial copy at the slot's exported snapshot ({@code
 * InitialSnapshot}, {@code CopyText}) and the incremental, chunked snapshot taken while the stream
 * runs, whose chunks are reconciled with the changes between their watermarks ({@code
 * IncrementalSnapshot}, {@code ChunkRead}, {@code XidHistory}).
 */
package io.weir.persistence.cdc.snapshot;
