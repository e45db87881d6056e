/**
 * What a destination implements ({@code ChangeSink}: tables it accepts, transactions, snapshot
 * chunks) and the wrapper that keeps a sink's checkpoint so a restart resumes after the last
 * acknowledged transaction ({@code CheckpointedSink}, {@code CheckpointStore}).
 */
package io.weir.persistence.cdc.sink;
