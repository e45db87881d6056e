package io.weir.persistence.cdc;

/** How a pipeline treats its slot at start. */
public enum StartMode {
  /**
   * Stream from now on: create the slot if this pipeline has no checkpoint yet; resume it when it
   * exists. A slot missing after a checkpoint was taken halts ({@link HaltReason#SLOT_LOST}).
   */
  GO_FORWARD,
  /** The slot must already exist; never create one. */
  RESUME
}
