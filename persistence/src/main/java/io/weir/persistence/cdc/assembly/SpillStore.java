package io.weir.persistence.cdc.assembly;

import io.weir.persistence.Identifiers;
import io.weir.persistence.cdc.HaltReason;
import io.weir.persistence.cdc.PipelineHaltException;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Where one pipeline run keeps the raw pgoutput payloads of streamed transactions until they are
 * delivered: in memory while the run's memory bound allows, otherwise in a file per transaction
 * under {@code <spill directory>/<pipeline>/}.
 *
 * <p>Life of a {@link Buffer}: {@link #open} when a streamed transaction's first chunk arrives;
 * {@link Buffer#append} for each of its messages (on the stream thread); {@link Buffer#seal} at its
 * Stream Commit; {@link Buffer#cursor} by the sink (on the sink's thread), once if on disk; {@link
 * Buffer#release} when the sink call completes, on Stream Abort, or when the run ends ({@link
 * #close}) — which frees its memory and deletes its file. {@link #clean} removes files a crashed
 * run left behind; the pipeline calls it before each run.
 *
 * <p>Bounds: the memory of every buffer not yet released counts against {@code memoryBound}; a
 * buffer whose next message does not fit moves to disk (what it held in memory is written out and
 * freed). The bytes of every spill file not yet deleted count against {@code maxSpillBytes}; a
 * write past it throws {@link HaltReason#SPILL_LIMIT_EXCEEDED}. Without a spill directory nothing
 * goes to disk and the memory bound is not enforced here (the assembler bounds such transactions by
 * their change count).
 *
 * <p>Files hold row data: they are created readable by the owner only, and their names carry only
 * the xid. Record format: {@code int32 length, payload}.
 */
public final class SpillStore implements AutoCloseable {
  private static final String SUFFIX = ".spill";
  private static final int FIRST_PAGE = 4 * 1024;
  private static final int MAX_PAGE = 64 * 1024;
  private static final int IO_BUFFER = 64 * 1024;

  private final Path directory;
  private final long memoryBound;
  private final long maxSpillBytes;
  private final AtomicLong memory = new AtomicLong();
  private final AtomicLong disk = new AtomicLong();
  private final AtomicLong spilledTransactions = new AtomicLong();
  private final AtomicLong fileSeq = new AtomicLong();
  // Unique per store in this JVM: a finished run's late release must never hit a newer run's file
  // of the same xid (a transaction is streamed again after a restart).
  private static final AtomicLong RUNS = new AtomicLong();
  private final long run = RUNS.incrementAndGet();
  private final Set<Buffer> live = ConcurrentHashMap.newKeySet();
  private volatile boolean closed;

  /**
   * @param directory this pipeline's spill directory (created on first use), or null for none
   */
  public SpillStore(Path directory, long memoryBound, long maxSpillBytes) {
    this.directory = directory;
    this.memoryBound = memoryBound;
    this.maxSpillBytes = maxSpillBytes;
  }

  /**
   * This pipeline's directory under the configured spill directory.
   *
   * @throws PipelineHaltException {@link HaltReason#INVALID_IDENTIFIER} unless the pipeline name is
   *     an allow-listed identifier (it becomes a path element; this runs before the connect checks)
   */
  public static Path pipelineDirectory(Path spillDirectory, String pipeline) {
    if (!Identifiers.isValid(pipeline)) {
      throw new PipelineHaltException(
          HaltReason.INVALID_IDENTIFIER, "pipeline name " + Identifiers.SHAPE);
    }
    return spillDirectory.resolve(pipeline);
  }

  /**
   * Deletes spill files left in {@code directory} by an earlier run (one that crashed, or whose
   * last sink call outlived it). Only this store's own files ({@code *.spill}) are touched.
   *
   * @return how many were deleted
   */
  public static int clean(Path directory) throws IOException {
    if (directory == null || !Files.isDirectory(directory)) {
      return 0;
    }
    int n = 0;
    try (DirectoryStream<Path> files = Files.newDirectoryStream(directory, "*" + SUFFIX)) {
      for (Path f : files) {
        if (Files.deleteIfExists(f)) {
          n++;
        }
      }
    }
    return n;
  }

  /** A new, empty buffer for the streamed transaction {@code xid}. */
  public Buffer open(long xid) {
    if (closed) {
      throw new IllegalStateException("spill store of a finished run");
    }
    Buffer b = new Buffer(xid);
    live.add(b);
    return b;
  }

  /** Bytes of streamed payload held in memory now. */
  public long memoryInUse() {
    return memory.get();
  }

  /** Bytes in spill files now. */
  public long bytesOnDisk() {
    return disk.get();
  }

  /** Transactions that went to disk in this run. */
  public long spilledTransactions() {
    return spilledTransactions.get();
  }

  /** Releases every buffer: the run is over. Idempotent. */
  @Override
  public void close() {
    closed = true;
    for (Buffer b : List.copyOf(live)) {
      b.release();
    }
  }

  /** Reads a buffer's payloads in order; {@link #array()} is reused between records. */
  public interface Cursor extends AutoCloseable {
    /** Moves to the next payload; false at the end. */
    boolean next();

    byte[] array();

    int offset();

    int length();

    @Override
    void close();
  }

  /** The payloads of one streamed transaction. */
  public final class Buffer {
    private final long xid;
    // Stream thread until sealed; afterwards read-only.
    private List<Page> pages = new ArrayList<>();
    private long memoryHeld;
    private long records;
    private Path file;
    private DataOutputStream out;
    private long fileBytes;
    private boolean sealed;
    // Any thread.
    private volatile boolean released;
    private Cursor reading;

    private Buffer(long xid) {
      this.xid = xid;
    }

    public long xid() {
      return xid;
    }

    /** Whether the payloads are (partly or wholly) in a file. */
    public boolean spilled() {
      return file != null;
    }

    /** Payloads appended. */
    public long records() {
      return records;
    }

    /**
     * Appends one payload (its remaining bytes; the buffer's position is left as it was).
     *
     * @throws PipelineHaltException {@link HaltReason#SPILL_LIMIT_EXCEEDED} past the disk bound
     * @throws UncheckedIOException when a spill file cannot be written
     */
    public void append(ByteBuffer payload) {
      if (sealed || released) {
        throw new IllegalStateException("append to a sealed or released stream buffer");
      }
      int length = payload.remaining();
      int needed = Integer.BYTES + length;
      records++;
      if (file == null) {
        Page page = pages.isEmpty() ? null : pages.get(pages.size() - 1);
        if (page != null && page.bytes.length - page.used >= needed) {
          page.put(payload, length);
          return;
        }
        int size =
            Math.max(needed, page == null ? FIRST_PAGE : Math.min(MAX_PAGE, page.bytes.length * 2));
        if (directory != null) {
          long room = memoryBound - memory.get();
          if (room < needed) {
            moveToDisk(needed);
            write(payload, length);
            return;
          }
          size = (int) Math.min(size, room); // never allocate past the bound
        }
        page = new Page(new byte[size]);
        pages.add(page);
        memoryHeld += size;
        memory.addAndGet(size);
        page.put(payload, length);
        return;
      }
      write(payload, length);
    }

    private void moveToDisk(long next) {
      long inMemory = 0;
      for (Page p : pages) {
        inMemory += p.used;
      }
      requireDisk(inMemory + next);
      try {
        Files.createDirectories(directory);
        restrict(directory, "rwx------");
        Path f =
            directory.resolve("txn-" + xid + "-r" + run + "-" + fileSeq.incrementAndGet() + SUFFIX);
        try {
          Files.createFile(f);
        } catch (FileAlreadyExistsException e) {
          Files.delete(f);
          Files.createFile(f);
        }
        restrict(f, "rw-------");
        file = f;
        out =
            new DataOutputStream(
                new BufferedOutputStream(
                    Files.newOutputStream(f, StandardOpenOption.WRITE), IO_BUFFER));
        spilledTransactions.incrementAndGet();
        for (Page p : pages) {
          out.write(p.bytes, 0, p.used);
          fileBytes += p.used;
          disk.addAndGet(p.used);
        }
      } catch (IOException e) {
        throw new UncheckedIOException("cannot write a spill file", e);
      }
      pages = new ArrayList<>();
      memory.addAndGet(-memoryHeld);
      memoryHeld = 0;
    }

    private void write(ByteBuffer payload, int length) {
      requireDisk(Integer.BYTES + (long) length);
      try {
        out.writeInt(length);
        if (payload.hasArray()) {
          out.write(payload.array(), payload.arrayOffset() + payload.position(), length);
        } else {
          byte[] copy = new byte[length];
          payload.duplicate().get(copy);
          out.write(copy);
        }
      } catch (IOException e) {
        throw new UncheckedIOException("cannot write a spill file", e);
      }
      fileBytes += Integer.BYTES + length;
      disk.addAndGet(Integer.BYTES + (long) length);
    }

    private void requireDisk(long more) {
      long after = disk.get() + more;
      if (after > maxSpillBytes) {
        throw new PipelineHaltException(
            HaltReason.SPILL_LIMIT_EXCEEDED,
            "streamed transaction "
                + xid
                + " needs more than streaming.spill.max-bytes ("
                + maxSpillBytes
                + " bytes) on disk; "
                + disk.get()
                + " bytes are in spill files");
      }
    }

    /**
     * The transaction committed: no more appends; flushes its file. Synchronized, like {@link
     * #cursor}: what the stream thread appended is visible to the sink's thread that reads it.
     */
    public synchronized void seal() {
      if (sealed) {
        return;
      }
      sealed = true;
      if (out != null) {
        try {
          out.close();
        } catch (IOException e) {
          throw new UncheckedIOException("cannot write a spill file", e);
        } finally {
          out = null;
        }
      }
    }

    /**
     * Opens a cursor over the payloads in order. In memory: any number of times. On disk: once.
     *
     * @throws IllegalStateException after {@link #release()}, or for a second cursor over a file
     */
    public synchronized Cursor cursor() {
      if (!sealed) {
        throw new IllegalStateException("stream buffer read before its transaction committed");
      }
      if (released) {
        throw new IllegalStateException("stream buffer already released");
      }
      if (file == null) {
        return new MemoryCursor(pages);
      }
      if (reading != null) {
        throw new IllegalStateException("spill file already read");
      }
      try {
        reading = new FileCursor(Files.newInputStream(file));
      } catch (IOException e) {
        throw new UncheckedIOException("cannot read a spill file", e);
      }
      return reading;
    }

    /** Frees the memory and deletes the file; later cursors fail. Idempotent, any thread. */
    public synchronized void release() {
      if (released) {
        return;
      }
      released = true;
      live.remove(this);
      memory.addAndGet(-memoryHeld);
      memoryHeld = 0;
      pages = List.of();
      if (out != null) {
        try {
          out.close();
        } catch (IOException ignored) {
          // Deleted next.
        }
        out = null;
      }
      if (reading != null) {
        reading.close();
      }
      if (file != null) {
        try {
          Files.deleteIfExists(file);
        } catch (IOException ignored) {
          // The next run's clean() removes it.
        }
        disk.addAndGet(-fileBytes);
        fileBytes = 0;
      }
    }

    public boolean released() {
      return released;
    }
  }

  private static final class Page {
    final byte[] bytes;
    int used;

    Page(byte[] bytes) {
      this.bytes = bytes;
    }

    void put(ByteBuffer payload, int length) {
      ByteBuffer.wrap(bytes, used, Integer.BYTES + length).putInt(length).put(payload.duplicate());
      used += Integer.BYTES + length;
    }
  }

  private static void restrict(Path p, String permissions) {
    try {
      Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(permissions));
    } catch (UnsupportedOperationException | IOException e) {
      // Not a POSIX file system: the directory's own permissions apply.
    }
  }

  private static final class MemoryCursor implements Cursor {
    private final List<Page> pages;
    private int page;
    private int at;
    private byte[] array;
    private int offset;
    private int length;

    MemoryCursor(List<Page> pages) {
      this.pages = pages;
    }

    @Override
    public boolean next() {
      while (page < pages.size()) {
        Page p = pages.get(page);
        if (at < p.used) {
          int len = ByteBuffer.wrap(p.bytes).getInt(at);
          array = p.bytes;
          offset = at + Integer.BYTES;
          length = len;
          at = offset + len;
          return true;
        }
        page++;
        at = 0;
      }
      return false;
    }

    @Override
    public byte[] array() {
      return array;
    }

    @Override
    public int offset() {
      return offset;
    }

    @Override
    public int length() {
      return length;
    }

    @Override
    public void close() {}
  }

  private static final class FileCursor implements Cursor {
    private final DataInputStream in;
    private byte[] array = new byte[4096];
    private int length;
    private boolean closed;

    FileCursor(InputStream in) {
      this.in = new DataInputStream(new BufferedInputStream(in, IO_BUFFER));
    }

    @Override
    public synchronized boolean next() {
      if (closed) {
        throw new IllegalStateException("spill file closed: the sink call it belonged to is over");
      }
      try {
        int len;
        try {
          len = in.readInt();
        } catch (EOFException end) {
          close();
          return false;
        }
        if (len < 0) {
          throw new IOException("corrupt spill record");
        }
        if (array.length < len) {
          array = new byte[Math.max(len, array.length * 2)];
        }
        in.readFully(array, 0, len);
        length = len;
        return true;
      } catch (IOException e) {
        close();
        throw new UncheckedIOException("cannot read a spill file", e);
      }
    }

    @Override
    public byte[] array() {
      return array;
    }

    @Override
    public int offset() {
      return 0;
    }

    @Override
    public int length() {
      return length;
    }

    @Override
    public synchronized void close() {
      if (!closed) {
        closed = true;
        try {
          in.close();
        } catch (IOException ignored) {
          // Read-only; nothing lost.
        }
      }
    }
  }
}
