/**
 * Q1 queries: one collection, unordered, scalar, read-only; a JSON predicate AST and a projection
 * list, for one-shot and live queries over JSON documents.
 *
 * <p>{@link io.weir.protocol.query.Q1Query#parse} validates a query's wire form against {@link
 * io.weir.protocol.query.QueryLimits} and normalises it; the result evaluates documents ({@link
 * io.weir.protocol.query.Q1Query#matches}), projects them ({@link
 * io.weir.protocol.query.Q1Query#project}) and has a canonical JSON form and a SHA-256 fingerprint
 * under which equivalent queries coincide. A refused query surfaces only as {@link
 * io.weir.protocol.query.QueryException}, whose text never contains a literal or a document value,
 * and no {@code toString()} here prints a literal.
 */
package io.weir.protocol.query;
