package io.weir.persistence.cdc.source;

import io.weir.protocol.Lsn;
import java.nio.ByteBuffer;

/**
 * One XLogData payload as received: the WAL position it was sent at and the pgoutput bytes. {@code
 * toString()} shows the size only.
 */
public record WalMessage(Lsn lsn, ByteBuffer payload) {
  @Override
  public String toString() {
    return "WalMessage[lsn=" + lsn + ", bytes=" + payload.remaining() + "]";
  }
}
