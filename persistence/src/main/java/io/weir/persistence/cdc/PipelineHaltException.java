package io.weir.persistence.cdc;

/** Stops a pipeline fail-closed with a typed reason and a value-free detail. */
public final class PipelineHaltException extends RuntimeException {
  private final HaltReason reason;

  public PipelineHaltException(HaltReason reason, String detail) {
    super(reason.wire() + ": " + detail, null, false, false);
    this.reason = reason;
  }

  public HaltReason reason() {
    return reason;
  }

  /** The detail without the reason prefix. */
  public String detail() {
    return getMessage().substring(reason.wire().length() + 2);
  }
}
