package io.weir.persistence.cdc.assembly;

/**
 * Published on the actor system's event stream when a pipeline halts because streamed transactions
 * needed more spill disk than {@code streaming.spill.max-bytes}: an alert for whoever subscribes
 * (the halt is also logged at ERROR and counted in {@code weir.cdc.alerts}). Value-free: the
 * pipeline's name and the configured bound.
 */
public record SpillLimitExceeded(String pipeline, long maxSpillBytes) {}
