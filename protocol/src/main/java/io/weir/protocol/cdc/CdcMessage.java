package io.weir.protocol.cdc;

import io.weir.protocol.Lsn;

/**
 * A non-transactional logical decoding message ({@code pg_logical_emit_message(false, ...)}):
 * decoded as soon as it was written, whatever happens to the writing transaction. The content is
 * user bytes and never appears in {@code toString()}.
 *
 * @param lsn the message's WAL position
 */
public record CdcMessage(Lsn lsn, String prefix, byte[] content) implements CdcEvent {
  public CdcMessage {
    content = content.clone();
  }

  @Override
  public byte[] content() {
    return content.clone();
  }

  @Override
  public String toString() {
    return "CdcMessage[lsn="
        + lsn
        + ", prefixLength="
        + prefix.length()
        + ", contentLength="
        + content.length
        + "]";
  }
}
