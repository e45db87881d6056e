package io.weir.persistence.cdc;

import io.weir.protocol.cdc.SlotIncarnation;
import java.util.Optional;

/**
 * What a sink learns when a pipeline opens it.
 *
 * @param pipeline the pipeline's name (a validated identifier): the key of the sink's checkpoint
 * @param incarnation the slot incarnation being resumed, or empty when the pipeline has none yet
 *     (the sink reports its checkpoint and the pipeline then creates or adopts the slot)
 */
public record PipelineContext(String pipeline, Optional<SlotIncarnation> incarnation) {}
