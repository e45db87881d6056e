package io.weir.persistence.cdc.source;

import io.weir.persistence.cdc.HaltReason;

/** How a pipeline treats its slot at start. */
public enum StartMode {
  /**
   * Stream from now on: create the slot if this pipeline has no checkpoint yet; resume it when it
   * exists. A slot missing after a checkpoint was taken halts ({@link HaltReason#SLOT_LOST}).
   */
  GO_FORWARD,
  /** The slot must already exist; never create one. */
  RESUME,
  /**
   * Seed the sink first: create the slot with an exported snapshot, copy every published table at
   * that snapshot into the sink, store the hand-off checkpoint at the snapshot's consistent point,
   * then stream from there. Once the hand-off is stored this behaves like {@link #GO_FORWARD}. The
   * slot must not exist yet (the snapshot must come from the slot's own creation).
   */
  SNAPSHOT
}
