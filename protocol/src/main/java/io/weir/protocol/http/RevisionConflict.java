package io.weir.protocol.http;

import io.weir.protocol.ErrorCode;

/**
 * Error body of a document write whose expected revision ({@code If-Match}) did not match: an
 * {@link ErrorBody} plus the document's revision.
 *
 * @param actualRevision the document's current revision (0: it does not exist)
 */
public record RevisionConflict(
    String error, String message, boolean retryable, long actualRevision) {
  public static RevisionConflict of(long actualRevision) {
    return new RevisionConflict(
        ErrorCode.CONFLICT.wire(),
        "the document's revision does not match If-Match",
        ErrorCode.CONFLICT.retryable(),
        actualRevision);
  }
}
