/**
 * A CDC pipeline: the actor that owns one logical replication slot ({@code CdcPipeline}, driven by
 * {@code PipelineRunner}), its blocking connect ({@code ConnectPhase}), the stream of one run
 * ({@code DeliveryGraph}), the decision whether a failure halts or retries ({@code FailurePolicy}),
 * and the settings, status and metrics it shows.
 *
 * <p>The parts it drives have packages of their own: {@code source} (the replication connection and
 * the slot), {@code assembly} (committed transactions from pgoutput messages, the schema guard and
 * the spill), {@code snapshot} (initial and incremental snapshots) and {@code sink} (the contract a
 * destination implements, with its checkpoints); {@code mirror} is the PostgreSQL mirror sink.
 * Records sent between nodes ({@code PipelineStatus}, {@code SnapshotStatus}, {@code TableVerdict})
 * stay in this package: a class's name is its serialization manifest.
 */
package io.weir.persistence.cdc;
