package io.weir.persistence.cdc.source;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

/** Idle advancement's view of the stream: which messages open and close transactions. */
class ReplicationTrackerTest {

  private static ByteBuffer begin() {
    return ByteBuffer.allocate(21).put((byte) 'B').putLong(0).putLong(0).putInt(1).flip();
  }

  private static ByteBuffer commit(long end) {
    return ByteBuffer.allocate(26)
        .put((byte) 'C')
        .put((byte) 0)
        .putLong(end - 8)
        .putLong(end)
        .putLong(0)
        .flip();
  }

  private static ByteBuffer streamStart(int xid) {
    return ByteBuffer.allocate(6).put((byte) 'S').putInt(xid).put((byte) 1).flip();
  }

  private static ByteBuffer streamStop() {
    return ByteBuffer.allocate(1).put((byte) 'E').flip();
  }

  private static ByteBuffer streamCommit(int xid, long end) {
    return ByteBuffer.allocate(30)
        .put((byte) 'c')
        .putInt(xid)
        .put((byte) 0)
        .putLong(end - 8)
        .putLong(end)
        .putLong(0)
        .flip();
  }

  private static ByteBuffer streamAbort(int xid, int subXid) {
    return ByteBuffer.allocate(9).put((byte) 'A').putInt(xid).putInt(subXid).flip();
  }

  /** An insert inside a stream block: 'I', xid, relation id, 'N', tuple. */
  private static ByteBuffer streamedInsert(int xid) {
    return ByteBuffer.allocate(14)
        .put((byte) 'I')
        .putInt(xid)
        .putInt(16384)
        .put((byte) 'N')
        .putShort((short) 0)
        .flip();
  }

  @Test
  void anOpenStreamedTransactionHoldsIdleAdvancementUntilItsStreamCommitIsAcknowledged() {
    ReplicationConnection.Tracker t = new ReplicationConnection.Tracker(100);
    assertThat(t.idle(100)).as("nothing read yet").isTrue();
    t.track(streamStart(700));
    t.track(streamedInsert(700));
    t.track(streamStop());
    assertThat(t.idle(100)).as("a streamed transaction is open between its blocks").isFalse();
    // An ordinary transaction commits while the streamed one is open.
    t.track(begin());
    t.track(commit(200));
    assertThat(t.idle(200))
        .as("the streamed transaction is still open after an interleaved commit")
        .isFalse();
    t.track(streamAbort(700, 701));
    assertThat(t.idle(200)).as("a subtransaction's abort leaves the transaction open").isFalse();
    t.track(streamStart(700));
    t.track(streamStop());
    t.track(streamCommit(700, 300));
    assertThat(t.idle(200)).as("the Stream Commit's end LSN must be acknowledged first").isFalse();
    assertThat(t.idle(300)).as("acknowledged through the Stream Commit's end LSN").isTrue();
  }

  @Test
  void aTopLevelStreamAbortClosesTheTransaction() {
    ReplicationConnection.Tracker t = new ReplicationConnection.Tracker(100);
    t.track(streamStart(800));
    t.track(streamStop());
    t.track(streamStart(801));
    t.track(streamStop());
    assertThat(t.openStreams()).isEqualTo(2);
    t.track(streamAbort(800, 800));
    assertThat(t.idle(100)).as("another streamed transaction is still open").isFalse();
    t.track(streamAbort(801, 801));
    assertThat(t.idle(100))
        .as("aborted transactions deliver nothing, so nothing waits for an acknowledgement")
        .isTrue();
  }

  @Test
  void xidsAreUnsigned() {
    ReplicationConnection.Tracker t = new ReplicationConnection.Tracker(100);
    t.track(streamStart(0xF000_0001));
    t.track(streamedInsert(0xF000_0001));
    t.track(streamStop());
    t.track(streamCommit(0xF000_0001, 150));
    assertThat(t.idle(149)).isFalse();
    assertThat(t.idle(150)).isTrue();
  }

  @Test
  void aStreamedTransactionWithoutDataIsNotWaitedFor() {
    // PostgreSQL 15 streams large transactions whose changes no publication takes as empty blocks;
    // the assembler does not deliver them, so no acknowledgement will come.
    ReplicationConnection.Tracker t = new ReplicationConnection.Tracker(100);
    t.track(streamStart(600));
    t.track(streamStop());
    assertThat(t.idle(100)).isFalse();
    t.track(streamCommit(600, 200));
    assertThat(t.idle(100)).isTrue();
  }

  @Test
  void aTransactionalMessageInsideAStreamBlockIsNotAPositionToConfirm() {
    ReplicationConnection.Tracker t = new ReplicationConnection.Tracker(100);
    t.track(streamStart(900));
    // 'M', xid, flags (transactional), LSN ...: inside a block the xid comes first.
    t.track(
        ByteBuffer.allocate(20)
            .put((byte) 'M')
            .putInt(900)
            .put((byte) 1)
            .putLong(5000)
            .put((byte) 0)
            .putShort((short) 0)
            .flip());
    t.track(streamStop());
    t.track(streamAbort(900, 900));
    assertThat(t.idle(100))
        .as("the message's bytes must not be read as a non-transactional message's LSN")
        .isTrue();
  }
}
