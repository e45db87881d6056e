package io.weir.node.cdc;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.persistence.cdc.sink.DeliverySink;
import io.weir.persistence.cdc.sink.SinkException;
import io.weir.persistence.cdc.snapshot.SnapshotChunk;
import io.weir.protocol.cdc.CdcMessage;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.ColumnKind;
import io.weir.protocol.pgoutput.TupleData;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
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
 * checkpoint store ({@link io.weir.persistence.cdc.sink.CheckpointedSink}): at-least-once, a crash
 * may repeat the last transaction. A line cut short by a crash is removed on the next delivery, so
 * the file holds only whole lines.
 *
 * <p>Line: {@code
 * {"xid":…,"commitLsn":"…","commitTime":"…","changes":[{"op":"insert","table":"s.t",
 * "row":{"col":"text"},"key":{…},"unchangedToast":[…]}]}}. Values are the source's text forms.
 * Snapshot rows: {@code {"snapshot":{"table":"s.t","first":true},"rows":[{…}]}} (see {@link
 * #deliverSnapshot}). The file holds row data by design; nothing from it is logged. Each line is
 * streamed to the file as the changes are read, so a transaction of any size (a spilled one
 * included) needs only a small buffer.
 */
public final class FileSink implements DeliverySink {
  private static final int BUFFER_BYTES = 64 * 1024;

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
  public CompletionStage<Void> deliverMessage(CdcMessage message) {
    ObjectNode line = json.createObjectNode();
    line.putObject("message")
        .put("lsn", message.lsn().toString())
        .put("prefix", message.prefix())
        .put("content", message.content());
    return append(line);
  }

  @Override
  public CompletionStage<Void> deliver(Transaction transaction) {
    return CompletableFuture.runAsync(
        () -> write(g -> writeTransaction(g, transaction)), blockingIo);
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
  public CompletionStage<Void> deliverSnapshot(SnapshotChunk chunk) {
    return CompletableFuture.runAsync(
        () ->
            write(
                g -> {
                  g.writeStartObject();
                  g.writeObjectFieldStart("snapshot");
                  g.writeStringField("table", chunk.table().qualifiedName());
                  g.writeBooleanField("first", chunk.firstForTable());
                  g.writeEndObject();
                  g.writeArrayFieldStart("rows");
                  for (TupleData row : chunk.rows()) {
                    g.writeStartObject();
                    for (int i = 0; i < row.size(); i++) {
                      String name = chunk.table().columns().get(i).name();
                      if (row.isNull(i)) {
                        g.writeNullField(name);
                      } else {
                        g.writeStringField(name, row.text(i));
                      }
                    }
                    g.writeEndObject();
                  }
                  g.writeEndArray();
                  g.writeEndObject();
                }),
        blockingIo);
  }

  private CompletionStage<Void> append(ObjectNode node) {
    return CompletableFuture.runAsync(() -> write(g -> json.writeTree(g, node)), blockingIo);
  }

  private interface LineWriter {
    void write(JsonGenerator g) throws IOException;
  }

  /**
   * Writes one line, streamed straight to the file through a small buffer: a transaction's changes
   * are read once as they are written (a spilled transaction is never held in memory, and no line
   * is built as one String). If anything fails half-way — the disk, or reading the changes — the
   * file is cut back to where the line began, so it still holds only whole lines.
   */
  private void write(LineWriter line) {
    FileChannel ch;
    long start;
    try {
      ch = channel();
      start = ch.position();
    } catch (IOException e) {
      closeQuietly();
      throw SinkException.transientFailure(
          "file sink could not write: " + e.getClass().getSimpleName(), null);
    }
    try {
      // Not closed: closing the stream would close the channel, which is kept between deliveries.
      OutputStream out = new BufferedOutputStream(Channels.newOutputStream(ch), BUFFER_BYTES);
      try (JsonGenerator g = json.getFactory().createGenerator(out)) {
        g.disable(JsonGenerator.Feature.AUTO_CLOSE_TARGET);
        line.write(g);
      }
      out.write('\n');
      out.flush();
      ch.force(false);
    } catch (IOException e) {
      cutBack(ch, start);
      throw SinkException.transientFailure(
          "file sink could not write: " + e.getClass().getSimpleName(), null);
    } catch (RuntimeException e) {
      cutBack(ch, start);
      throw e;
    }
  }

  /**
   * Removes a partly written line; if even that fails, the next open cuts it (see {@link
   * #truncatePartialLine}).
   */
  private void cutBack(FileChannel ch, long start) {
    try {
      ch.truncate(start);
      ch.position(start);
    } catch (IOException e) {
      closeQuietly();
    }
  }

  private synchronized FileChannel channel() throws IOException {
    if (channel == null) {
      if (path.getParent() != null) {
        Files.createDirectories(path.getParent());
      }
      channel =
          FileChannel.open(
              path, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.READ);
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

  private static void writeTransaction(JsonGenerator g, Transaction t) throws IOException {
    g.writeStartObject();
    g.writeNumberField("xid", t.xid());
    g.writeStringField("commitLsn", t.commitLsn().toString());
    g.writeStringField("commitTime", t.commitTime().toString());
    g.writeArrayFieldStart("changes");
    for (Change c : t.changes()) {
      g.writeStartObject();
      if (c instanceof Change.Insert i) {
        g.writeStringField("op", "insert");
        g.writeStringField("table", i.table().qualifiedName());
        row(g, "row", i.table(), i.newRow());
      } else if (c instanceof Change.Update u) {
        g.writeStringField("op", "update");
        g.writeStringField("table", u.table().qualifiedName());
        row(g, "row", u.table(), u.newRow());
        if (u.oldRow() != null) {
          row(g, "old", u.table(), u.oldRow());
        }
        g.writeArrayFieldStart("unchangedToast");
        for (String column : u.unchangedToastColumns()) {
          g.writeString(column);
        }
        g.writeEndArray();
      } else if (c instanceof Change.Delete d) {
        g.writeStringField("op", "delete");
        g.writeStringField("table", d.table().qualifiedName());
        row(g, "old", d.table(), d.oldRow());
      } else if (c instanceof Change.Truncate tr) {
        g.writeStringField("op", "truncate");
        g.writeArrayFieldStart("tables");
        for (TableSchema s : tr.tables()) {
          g.writeString(s.qualifiedName());
        }
        g.writeEndArray();
      } else if (c instanceof Change.Message m) {
        g.writeStringField("op", "message");
        g.writeStringField("prefix", m.prefix());
        g.writeBinaryField("content", m.content());
      }
      g.writeEndObject();
    }
    g.writeEndArray();
    g.writeEndObject();
  }

  private static void row(JsonGenerator g, String field, TableSchema table, TupleData tuple)
      throws IOException {
    g.writeObjectFieldStart(field);
    for (int i = 0; i < tuple.size(); i++) {
      String name = table.columns().get(i).name();
      if (tuple.isNull(i)) {
        g.writeNullField(name);
      } else if (!tuple.isUnchangedToast(i)) {
        if (tuple.kind(i) == ColumnKind.TEXT) {
          g.writeStringField(name, tuple.text(i));
        } else {
          g.writeNullField(name);
        }
      }
    }
    g.writeEndObject();
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
