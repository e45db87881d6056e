package io.weir.protocol.http;

/**
 * Reply of {@code PUT} and {@code DELETE /v1/documents/{collection}/{id}}.
 *
 * @param revision the document's revision after the write (a delete's tombstone has one too)
 * @param deleted true for a delete
 * @param replayed true when the {@code Idempotency-Key} had been used before: this is the first
 *     reply again and nothing was written
 */
public record DocumentWritten(
    String collection, String id, long revision, boolean deleted, boolean replayed) {}
