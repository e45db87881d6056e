/**
 * A decoder for PostgreSQL's {@code pgoutput} logical replication messages.
 *
 * <p>{@link io.weir.protocol.pgoutput.PgOutputDecoder} turns the payload of each XLogData frame
 * into a {@link io.weir.protocol.pgoutput.PgOutputMessage}; row images are {@link
 * io.weir.protocol.pgoutput.TupleData}, whose columns {@link io.weir.protocol.pgoutput.PgValues}
 * converts to Java objects by type OID on demand. Malformed input surfaces only as {@link
 * io.weir.protocol.pgoutput.PgOutputDecodeException}, whose text never contains input data, and no
 * {@code toString()} here prints row values.
 *
 * <p>Assumed connection settings: {@code client_encoding = UTF8} and {@code DateStyle = ISO} (as
 * pgjdbc and libpq's walreceiver set them).
 */
package io.weir.protocol.pgoutput;
