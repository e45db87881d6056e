package io.weir.persistence.cdc;

/**
 * A sink's failure to apply transactions. The message is a value-free reason (which table, which
 * constraint class, which SQLState), never row data.
 */
public final class SinkException extends RuntimeException {
  private final boolean permanent;

  private SinkException(String reason, boolean permanent, Throwable cause) {
    super(reason, cause, false, false);
    this.permanent = permanent;
  }

  /** The data is refused (constraint violation, missing target, incompatible type): halt. */
  public static SinkException permanent(String reason, Throwable cause) {
    return new SinkException(reason, true, cause);
  }

  /** A passing failure (timeout, lost connection, a partition moving): restart with backoff. */
  public static SinkException transientFailure(String reason, Throwable cause) {
    return new SinkException(reason, false, cause);
  }

  public boolean isPermanent() {
    return permanent;
  }
}
