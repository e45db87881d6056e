package io.weir.persistence.cdc.mirror;

import io.weir.persistence.SafeErrors;

/**
 * Stands in for an unexpected exception as the cause of a sink failure: its message is the class
 * chain of the original ({@link SafeErrors#describe}), never the original messages, which might
 * quote a value. The original stack trace is kept for debugging.
 */
public final class ScrubbedException extends RuntimeException {

  private ScrubbedException(String description) {
    super(description);
  }

  public static ScrubbedException of(Throwable original) {
    ScrubbedException scrubbed = new ScrubbedException(SafeErrors.describe(original));
    scrubbed.setStackTrace(original.getStackTrace());
    return scrubbed;
  }
}
