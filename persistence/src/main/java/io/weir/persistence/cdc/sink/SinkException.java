package io.weir.persistence.cdc.sink;

/**
 * A sink's failure to apply transactions. The message is a value-free reason (which table, which
 * constraint class, which SQLState), never row data.
 */
public final class SinkException extends RuntimeException {
  private final boolean permanent;
  private final String code;

  private SinkException(String reason, boolean permanent, Throwable cause) {
    this(reason, permanent, cause, null);
  }

  private SinkException(String reason, boolean permanent, Throwable cause, String code) {
    super(reason, cause, false, false);
    this.permanent = permanent;
    this.code = code;
  }

  /**
   * A permanent refusal with a typed reason ({@code code}, e.g. {@code no-row-identity}) that a
   * sink's check reports as it is; {@code reason} is the value-free message.
   */
  public static SinkException refused(String code, String reason) {
    return new SinkException(reason, true, null, code);
  }

  /**
   * A passing refusal with a typed cause ({@code code}, e.g. {@code quota-exceeded}): the pipeline
   * pauses and tries again with backoff, and its status names the cause while it waits.
   */
  public static SinkException paused(String code, String reason) {
    return new SinkException(reason, false, null, code);
  }

  /** The typed reason of a {@link #refused} or {@link #paused} exception, else null. */
  public String code() {
    return code;
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
