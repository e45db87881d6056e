package io.weir.node.cdc;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.persistence.cdc.DeliverySink;
import io.weir.persistence.cdc.SinkException;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.TupleData;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;

/**
 * Appends each transaction as one JSON line to a file and forces it to disk before the delivery
 * completes. It cannot store a checkpoint atomically with the line, so it runs under the library
 * checkpoint store ({@link io.weir.persistence.cdc.CheckpointedSink}): at-least-once, a crash may
 * repeat the last transaction. A line cut short by a crash is removed on the next delivery, so the
 * file holds only whole lines.
 *
 * <p>Line: {@code {"xid":…,"commitLsn":"…","commitTime":"…","changes":[{"op":"insert","table":"s.t",
 * "row":{"col":"text"},"key":{…},"unchangedToast":[…]}]}}. Values are the source's text forms.
 * Snapshot rows: {@code {"snapshot":{"table":"s.t","first":true},"rows":[{…}]}} (see {@link
 * #deliverSnapshot}). The file holds row data by design; nothing from it is logged.
 */
public final class FileSink implements DeliverySink {
  private final Path path;
  private final Executor blockingIo;
  private final ObjectMapper json = new ObjectMapper();
  private FileChannel channel;

  public FileSink(Path path, Executor blockingIo) {
    this.path = path;
    this.blockingIo = blockingIo;
  }

  @Override
  public boolean acceptsMessages() {
    return true;
  }

  /** A non-transactional message as a line {@code {"message":{"lsn","prefix","content"}}}. */
  @Override
  public CompletionStage<Void> deliverMessage(io.weir.protocol.cdc.CdcMessage message) {
    ObjectNode line = json.createObjectNode();
    line.putObject("message").put("lsn", message.lsn().toString()).put("prefix", message.prefix()).put("content", message.content());
    return append(line);
  }

  @Override
  public CompletionStage<Void> deliver(Transaction transaction) {
    return append(toJson(transaction));
  }

  @Override
  public boolean supportsSnapshots() {
    return true;
  }

  /**
   * Snapshot rows as one line {@code {"snapshot":{"table":"s.t","first":true},"rows":[{…}]}}; a
   * reader of the file discards what it holds of the table when {@code first} is true.
   */
  @Override
  public CompletionStage<Void> deliverSnapshot(io.weir.persistence.cdc.SnapshotChunk chunk) {
    ObjectNode line = json.createObjectNode();
    line.putObject("snapshot").put("table", chunk.table().qualifiedName()).put("first", chunk.firstForTable());
    ArrayNode rows = line.putArray("rows");
    for (TupleData row : chunk.rows()) {
      rows.add(row(chunk.table(), row));
    }
    return append(line);
  }

  private CompletionStage<Void> append(ObjectNode node) {
    return CompletableFuture.runAsync(() -> {
      try {
        byte[] line = json.writeValueAsBytes(node);
        FileChannel ch = channel();
        ByteBuffer buf = ByteBuffer.allocate(line.length + 1).put(line).put((byte) '\n').flip();
        while (buf.hasRemaining()) {
          ch.write(buf);
        }
        ch.force(false);
      } catch (IOException e) {
        closeQuietly();
        throw SinkException.transientFailure("file sink could not write: " + e.getClass().getSimpleName(), null);
      }
    }, blockingIo);
  }

  private synchronized FileChannel channel() throws IOException {
    if (channel == null) {
      if (path.getParent() != null) {
        Files.createDirectories(path.getParent());
      }
      channel = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.READ);
      truncatePartialLine(channel);
      channel.position(channel.size());
    }
    return channel;
  }

  /** A crash can leave half a line at the end; cut back to the last newline. */
  static void truncatePartialLine(FileChannel ch) throws IOException {
    long size = ch.size();
    long end = size;
    ByteBuffer one = ByteBuffer.allocate(1);
    while (end > 0) {
      one.clear();
      ch.read(one, end - 1);
      if (one.get(0) == '\n') {
        break;
      }
      end--;
    }
    if (end < size) {
      ch.truncate(end);
      ch.force(true);
    }
  }

  private ObjectNode toJson(Transaction t) {
    ObjectNode line = json.createObjectNode();
    line.put("xid", t.xid());
    line.put("commitLsn", t.commitLsn().toString());
    line.put("commitTime", t.commitTime().toString());
    ArrayNode changes = line.putArray("changes");
    for (Change c : t.changes()) {
      ObjectNode o = changes.addObject();
      if (c instanceof Change.Insert i) {
        o.put("op", "insert").put("table", i.table().qualifiedName());
        o.set("row", row(i.table(), i.newRow()));
      } else if (c instanceof Change.Update u) {
        o.put("op", "update").put("table", u.table().qualifiedName());
        o.set("row", row(u.table(), u.newRow()));
        if (u.oldRow() != null) {
          o.set("old", row(u.table(), u.oldRow()));
        }
        ArrayNode toast = o.putArray("unchangedToast");
        u.unchangedToastColumns().forEach(toast::add);
      } else if (c instanceof Change.Delete d) {
        o.put("op", "delete").put("table", d.table().qualifiedName());
        o.set("old", row(d.table(), d.oldRow()));
      } else if (c instanceof Change.Truncate tr) {
        o.put("op", "truncate");
        ArrayNode tables = o.putArray("tables");
        tr.tables().forEach(s -> tables.add(s.qualifiedName()));
      } else if (c instanceof Change.Message m) {
        o.put("op", "message").put("prefix", m.prefix()).put("content", m.content());
      }
    }
    return line;
  }

  private ObjectNode row(TableSchema table, TupleData tuple) {
    ObjectNode row = json.createObjectNode();
    for (int i = 0; i < tuple.size(); i++) {
      String name = table.columns().get(i).name();
      if (tuple.isNull(i)) {
        row.putNull(name);
      } else if (!tuple.isUnchangedToast(i)) {
        row.put(name, tuple.kind(i) == io.weir.protocol.pgoutput.ColumnKind.TEXT ? tuple.text(i) : null);
      }
    }
    return row;
  }

  private synchronized void closeQuietly() {
    if (channel != null) {
      try {
        channel.close();
      } catch (IOException ignored) {
        // Reopened on the next delivery.
      }
      channel = null;
    }
  }

  @Override
  public void close() {
    closeQuietly();
  }
}
