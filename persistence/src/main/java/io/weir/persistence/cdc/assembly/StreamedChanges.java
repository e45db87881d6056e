package io.weir.persistence.cdc.assembly;

import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.Changes;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.pgoutput.PgOutputDecoder;
import io.weir.protocol.pgoutput.PgOutputMessage;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The changes of a committed streamed transaction, decoded from its {@link SpillStore.Buffer} as
 * the sink reads them: the buffered Relation and change messages are replayed in order through a
 * table map of this transaction alone (never the run's decoder or guard, which have moved on),
 * changes of aborted subtransactions are skipped, and each change is built as the assembler built
 * it on arrival.
 *
 * <p>In memory: repeatable. Spilled: one pass, and the file is gone once the pipeline {@link
 * #release releases} the transaction after the sink call; a second pass, or any use after that,
 * throws {@link IllegalStateException} with a value-free message.
 */
public final class StreamedChanges implements Changes {
  private final long xid;
  private final SpillStore.Buffer buffer;
  private final long count;
  private final Map<Long, TableSchema> inherited;
  private final Set<Long> abortedSubXids;
  private final boolean messages;
  private final boolean repeatable;
  private final AtomicBoolean iterated = new AtomicBoolean();

  StreamedChanges(
      long xid,
      SpillStore.Buffer buffer,
      long count,
      Map<Long, TableSchema> inherited,
      Set<Long> abortedSubXids,
      boolean messages) {
    this.xid = xid;
    this.buffer = buffer;
    this.count = count;
    this.inherited = Map.copyOf(inherited);
    this.abortedSubXids = Set.copyOf(abortedSubXids);
    this.messages = messages;
    this.repeatable = !buffer.spilled();
  }

  @Override
  public long count() {
    return count;
  }

  @Override
  public boolean repeatable() {
    return repeatable;
  }

  /** Whether the transaction was read from disk. */
  public boolean spilled() {
    return !repeatable;
  }

  @Override
  public List<Change> asList() {
    if (!repeatable) {
      throw new IllegalStateException(
          "the changes of spilled transaction "
              + xid
              + " cannot be read as a list; iterate them once, during the sink call");
    }
    List<Change> out = new ArrayList<>();
    iterator().forEachRemaining(out::add);
    return List.copyOf(out);
  }

  @Override
  public Iterator<Change> iterator() {
    if (buffer.released()) {
      throw new IllegalStateException(
          "the changes of streamed transaction "
              + xid
              + " are no longer available: they are valid only during the sink call that received them");
    }
    if (!repeatable && !iterated.compareAndSet(false, true)) {
      throw new IllegalStateException(
          "the changes of spilled transaction "
              + xid
              + " were already read: they can be iterated only once, during the sink call");
    }
    SpillStore.Cursor cursor;
    try {
      cursor = buffer.cursor();
    } catch (IllegalStateException e) {
      throw new IllegalStateException(
          "the changes of streamed transaction "
              + xid
              + " are no longer available: they are valid only during the sink call that received them");
    }
    return new Replay(cursor);
  }

  /** Frees the memory or deletes the file; the pipeline calls it when the sink call completes. */
  public void release() {
    buffer.release();
  }

  @Override
  public String toString() {
    return "StreamedChanges[xid=" + xid + ", count=" + count + ", spilled=" + !repeatable + "]";
  }

  private final class Replay implements Iterator<Change> {
    private final SpillStore.Cursor cursor;
    private final Map<Long, TableSchema> tables = new HashMap<>();
    private Change next;
    private boolean done;

    Replay(SpillStore.Cursor cursor) {
      this.cursor = cursor;
    }

    @Override
    public boolean hasNext() {
      if (next == null && !done) {
        next = advance();
      }
      return next != null;
    }

    @Override
    public Change next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      Change c = next;
      next = null;
      return c;
    }

    private Change advance() {
      while (cursor.next()) {
        // Everything buffered came from inside a stream block, where these messages carry an xid.
        PgOutputMessage m =
            PgOutputDecoder.decodeMessage(cursor.array(), cursor.offset(), cursor.length(), true);
        if (m instanceof PgOutputMessage.Relation r) {
          tables.put(r.relationId(), SchemaGuard.toSchema(r));
          continue;
        }
        PgOutputMessage.Streamable s = (PgOutputMessage.Streamable) m;
        if (abortedSubXids.contains(s.streamXid().orElse(-1))) {
          continue;
        }
        if (m instanceof PgOutputMessage.LogicalMessage lm && (!messages || !lm.transactional())) {
          continue;
        }
        return TransactionAssembler.toChange(
            m,
            id -> {
              TableSchema t = tables.get(id);
              return TransactionAssembler.table(t != null ? t : inherited.get(id), id, m.type());
            });
      }
      done = true;
      cursor.close();
      return null;
    }
  }
}
