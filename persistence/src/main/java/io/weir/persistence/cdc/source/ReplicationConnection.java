package io.weir.persistence.cdc.source;

import io.weir.protocol.Lsn;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.postgresql.PGConnection;
import org.postgresql.PGProperty;
import org.postgresql.replication.LogSequenceNumber;
import org.postgresql.replication.PGReplicationStream;

/**
 * One pgjdbc logical replication connection streaming a slot, owned by a single IO thread of its
 * own ({@code weir-slot-<slot>}): every use of the pgjdbc stream happens on that thread, because
 * the stream is not thread-safe.
 *
 * <ul>
 *   <li>{@link #poll} reads what has arrived (up to a count), waiting a bounded time for the first
 *       message. It is only called when downstream asks: this is where backpressure reaches the
 *       server (the socket fills, the walsender waits).
 *   <li>{@link #acknowledge} records the end LSN of work downstream has durably committed; only
 *       that position is ever reported as flushed. It reaches the server promptly: a status update
 *       goes out when the acknowledged position moves, at most once per {@link
 *       #PROMPT_STATUS_INTERVAL} (the rest wait for that interval to pass), so a node that is
 *       killed again and again does not restart from the same position each time.
 *   <li>A keep-alive task sends a status update every {@code statusInterval} — also while
 *       downstream backpressures and nobody polls — so the server does not time the connection out.
 *   <li>Idle advancement: when the last data message read was a Commit (or Stream Commit) and it
 *       has been acknowledged (nothing open, nothing delivered and unacknowledged), the flushed
 *       position follows the server's WAL end from keep-alives, so a slot over quiet tables does
 *       not hold WAL. With streaming, a streamed transaction is open from its first Stream Start
 *       until its Stream Commit or top-level Stream Abort, also between its blocks; see {@link
 *       Tracker}.
 * </ul>
 */
public final class ReplicationConnection implements AutoCloseable {

  /** The shortest time between two status updates sent because the acknowledged position moved. */
  public static final Duration PROMPT_STATUS_INTERVAL = Duration.ofSeconds(1);

  private static final long PROMPT_NANOS = PROMPT_STATUS_INTERVAL.toNanos();

  private final Connection connection;
  private final PGReplicationStream stream;
  private final ScheduledExecutorService io;

  // Touched on the IO thread only.
  private long acked;
  private long lastStatusSent = System.nanoTime() - PROMPT_NANOS;
  private boolean promptStatusScheduled;
  private final Tracker tracker;
  private volatile long receivedMessages;

  // Read from any thread, for status.
  private volatile long confirmed;
  private volatile long serverPosition;
  private final long startPosition;

  private ReplicationConnection(
      Connection connection, PGReplicationStream stream, ScheduledExecutorService io, long start) {
    this.connection = connection;
    this.stream = stream;
    this.io = io;
    this.acked = start;
    this.confirmed = start;
    this.tracker = new Tracker(start);
    this.startPosition = start;
    this.serverPosition = start;
  }

  /** Server identity as reported by IDENTIFY_SYSTEM on a replication connection. */
  public record SystemIdentity(long systemIdentifier, int timeline, Lsn walPosition) {}

  /**
   * Opens a replication (walsender) connection in simple query mode, as the replication protocol
   * needs.
   */
  public static Connection openReplicationSession(SourceSettings source) throws SQLException {
    return openReplicationSession(source, 0);
  }

  /**
   * As {@link #openReplicationSession(SourceSettings)}, with the session's {@code
   * logical_decoding_work_mem} set to {@code decodingWorkMemKb} kB (0: the server's setting). The
   * walsender reads it when deciding to stream (or spill) a transaction; it is user-settable.
   */
  public static Connection openReplicationSession(SourceSettings source, int decodingWorkMemKb)
      throws SQLException {
    return openReplicationSession(source, decodingWorkMemKb, SlotHolders.APPLICATION);
  }

  /**
   * As {@link #openReplicationSession(SourceSettings, int)}, with {@code application_name} {@code
   * applicationName} (a pipeline names its cluster member there: {@link SlotHolders}).
   */
  public static Connection openReplicationSession(
      SourceSettings source, int decodingWorkMemKb, String applicationName) throws SQLException {
    // Login, TLS (source.tls / weir.postgres.tls), timeouts: as every connection to the source.
    Properties props = source.properties(applicationName);
    if (decodingWorkMemKb > 0) {
      // A number only: nothing from configuration text reaches the startup packet.
      PGProperty.OPTIONS.set(props, "-c logical_decoding_work_mem=" + decodingWorkMemKb + "kB");
    }
    PGProperty.ASSUME_MIN_SERVER_VERSION.set(props, "10");
    PGProperty.REPLICATION.set(props, "database");
    PGProperty.PREFER_QUERY_MODE.set(props, "simple");
    return DriverManager.getConnection(source.url(), props);
  }

  public static SystemIdentity identifySystem(Connection replicationSession) throws SQLException {
    try (Statement s = replicationSession.createStatement();
        ResultSet rs = s.executeQuery("IDENTIFY_SYSTEM")) {
      rs.next();
      return new SystemIdentity(
          Long.parseUnsignedLong(rs.getString("systemid")),
          rs.getInt("timeline"),
          Lsn.parse(rs.getString("xlogpos")));
    }
  }

  /**
   * Starts streaming {@code slot} on an open replication session (which this object then owns).
   *
   * @param start position to resume from; the server starts at the slot's confirmed position when
   *     that is later, and sends only transactions committing after it
   */
  public static ReplicationConnection start(
      Connection replicationSession,
      String slot,
      List<String> publications,
      Lsn start,
      Duration statusInterval,
      boolean messages)
      throws SQLException {
    return start(replicationSession, slot, publications, start, statusInterval, messages, false);
  }

  /**
   * As above; {@code streaming} requests protocol version 2 with {@code streaming 'on'}, so the
   * server sends large in-progress transactions in Stream Start/Stop blocks before they end.
   */
  public static ReplicationConnection start(
      Connection replicationSession,
      String slot,
      List<String> publications,
      Lsn start,
      Duration statusInterval,
      boolean messages,
      boolean streaming)
      throws SQLException {
    var logical =
        replicationSession
            .unwrap(PGConnection.class)
            .getReplicationAPI()
            .replicationStream()
            .logical()
            .withSlotName(slot)
            .withSlotOption("proto_version", streaming ? 2 : 1)
            .withSlotOption("publication_names", String.join(",", publications))
            .withSlotOption("messages", messages);
    if (streaming) {
      logical = logical.withSlotOption("streaming", "on");
    }
    PGReplicationStream stream =
        logical
            .withStatusInterval((int) Math.max(1, statusInterval.toSeconds()), TimeUnit.SECONDS)
            .withStartPosition(LogSequenceNumber.valueOf(start.asLong()))
            .start();
    ScheduledExecutorService io =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "weir-slot-" + slot);
              t.setDaemon(true);
              return t;
            });
    ReplicationConnection rc =
        new ReplicationConnection(replicationSession, stream, io, start.asLong());
    long every = Math.max(200, statusInterval.toMillis());
    io.scheduleWithFixedDelay(rc::keepAlive, every, every, TimeUnit.MILLISECONDS);
    return rc;
  }

  /**
   * Reads up to {@code max} messages. Waits at most {@code maxWait} for the first; returns an empty
   * list when none arrived. Fails when the connection fails.
   */
  public CompletionStage<List<WalMessage>> poll(int max, Duration maxWait) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return read(max, maxWait);
          } catch (SQLException e) {
            throw new CompletionException(e);
          }
        },
        io);
  }

  private List<WalMessage> read(int max, Duration maxWait) throws SQLException {
    List<WalMessage> out = new ArrayList<>();
    long deadline = System.nanoTime() + maxWait.toNanos();
    long pause = 50_000; // 50 µs, growing while the stream is quiet
    while (true) {
      ByteBuffer buffer = stream.readPending();
      if (buffer != null) {
        long lsn = stream.getLastReceiveLSN().asLong();
        track(buffer);
        out.add(new WalMessage(Lsn.of(lsn), buffer));
        if (out.size() >= max) {
          return out;
        }
        continue;
      }
      serverPosition = Math.max(serverPosition, stream.getLastReceiveLSN().asLong());
      if (!out.isEmpty() || System.nanoTime() >= deadline) {
        return out;
      }
      LockSupport.parkNanos(pause);
      pause = Math.min(pause * 2, 5_000_000);
    }
  }

  private void track(ByteBuffer buffer) {
    receivedMessages++;
    tracker.track(buffer);
  }

  /**
   * What idle advancement needs to know about the data read so far, from each message's first
   * bytes: whether a transaction is open (Begin without its Commit; a streamed transaction from its
   * first Stream Start until its Stream Commit or top-level Stream Abort, also between its blocks)
   * and the end LSN of the last commit (Commit's, or a Stream Commit's whose transaction carried a
   * data message: an empty streamed transaction is not delivered) or non-transactional message.
   * Nothing else is decoded here; the pipeline's decoder checks the messages in full.
   */
  static final class Tracker {
    private static final int COMMIT_END_LSN_OFFSET =
        10; // 'C', int8 flags, int64 commit LSN, then end LSN
    private static final int STREAM_COMMIT_END_LSN_OFFSET =
        14; // 'c', int32 xid, int8 flags, int64 commit LSN, end LSN
    private static final int MESSAGE_LSN_OFFSET =
        2; // 'M', int8 flags, then int64 LSN (outside stream blocks)

    private long lastCommitEnd;
    private boolean openTransaction;
    private boolean inStreamBlock;
    private long blockXid;
    private final Set<Long> openStreams = new HashSet<>();
    // Streamed transactions that carried a data message: only those are delivered (PostgreSQL 15
    // streams transactions whose changes the publications filter out entirely, as empty blocks).
    private final Set<Long> streamsWithData = new HashSet<>();

    Tracker(long start) {
      this.lastCommitEnd = start;
    }

    void track(ByteBuffer buffer) {
      int at = buffer.position();
      int size = buffer.remaining();
      if (size == 0) {
        return;
      }
      switch (buffer.get(at)) {
        case 'B' -> openTransaction = true;
        case 'C' -> {
          if (size >= COMMIT_END_LSN_OFFSET + 8) {
            openTransaction = false;
            lastCommitEnd = buffer.getLong(at + COMMIT_END_LSN_OFFSET);
          }
        }
        case 'S' -> {
          if (size >= 1 + 4) {
            inStreamBlock = true;
            blockXid = xid(buffer, at + 1);
            openStreams.add(blockXid);
          }
        }
        case 'E' -> inStreamBlock = false;
        case 'c' -> {
          if (size >= STREAM_COMMIT_END_LSN_OFFSET + 8) {
            long xid = xid(buffer, at + 1);
            openStreams.remove(xid);
            if (streamsWithData.remove(xid)) {
              lastCommitEnd = buffer.getLong(at + STREAM_COMMIT_END_LSN_OFFSET);
            }
            // Without data it is not delivered (see TransactionAssembler): nothing to wait for.
          }
        }
        case 'A' -> {
          // A subtransaction's abort (subxid != xid) leaves its transaction open.
          if (size >= 1 + 4 + 4 && xid(buffer, at + 1) == xid(buffer, at + 5)) {
            openStreams.remove(xid(buffer, at + 1));
            streamsWithData.remove(xid(buffer, at + 1));
          }
        }
        case 'M' -> {
          if (inStreamBlock) {
            streamsWithData.add(blockXid);
          } else if (!openTransaction && size >= MESSAGE_LSN_OFFSET + 8) {
            // A non-transactional message: nothing may be confirmed past it until it is handled.
            lastCommitEnd = buffer.getLong(at + MESSAGE_LSN_OFFSET);
          }
        }
        case 'I', 'U', 'D', 'T' -> {
          if (inStreamBlock) {
            streamsWithData.add(blockXid);
          }
        }
        default -> {
          // Relations and the rest do not open or close anything.
        }
      }
    }

    private static long xid(ByteBuffer buffer, int at) {
      return buffer.getInt(at) & 0xFFFF_FFFFL;
    }

    /** Whether nothing is open and every commit read so far is acknowledged by {@code acked}. */
    boolean idle(long acked) {
      return !openTransaction
          && openStreams.isEmpty()
          && Long.compareUnsigned(acked, lastCommitEnd) >= 0;
    }

    /** Idle advancement moved the acknowledged position to {@code position}. */
    void advancedTo(long position) {
      lastCommitEnd = position;
    }

    int openStreams() {
      return openStreams.size();
    }
  }

  /** Downstream has durably committed every transaction up to the one ending at {@code endLsn}. */
  public void acknowledge(Lsn endLsn) {
    io.execute(
        () -> {
          if (Long.compareUnsigned(endLsn.asLong(), acked) > 0) {
            acked = endLsn.asLong();
            report(acked);
            sendStatusPromptly();
          }
        });
  }

  /**
   * Sends the status now if the last one went out at least {@link #PROMPT_STATUS_INTERVAL} ago,
   * else once that much has passed (one pending send at a time; it reports the position of then).
   */
  private void sendStatusPromptly() {
    if (promptStatusScheduled) {
      return;
    }
    long wait = lastStatusSent + PROMPT_NANOS - System.nanoTime();
    if (wait <= 0) {
      sendStatus();
      return;
    }
    promptStatusScheduled = true;
    try {
      io.schedule(
          () -> {
            promptStatusScheduled = false;
            sendStatus();
          },
          wait,
          TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException closing) {
      promptStatusScheduled = false;
    }
  }

  private void sendStatus() {
    try {
      stream.forceUpdateStatus();
      lastStatusSent = System.nanoTime();
    } catch (SQLException | RuntimeException e) {
      // The next poll sees the broken connection and fails the stream; nothing to do here.
    }
  }

  private void keepAlive() {
    try {
      long position = stream.getLastReceiveLSN().asLong();
      serverPosition = Math.max(serverPosition, position);
      long flush = acked;
      if (tracker.idle(acked) && Long.compareUnsigned(position, acked) > 0) {
        // Nothing open (no streamed transaction either), nothing unacknowledged: follow the server
        // so quiet slots release WAL.
        flush = position;
        acked = position;
        tracker.advancedTo(position);
      }
      report(flush);
      stream.forceUpdateStatus();
      lastStatusSent = System.nanoTime();
    } catch (SQLException | RuntimeException e) {
      // The next poll sees the broken connection and fails the stream; nothing to do here.
    }
  }

  private void report(long flushed) {
    LogSequenceNumber lsn = LogSequenceNumber.valueOf(flushed);
    stream.setFlushedLSN(lsn);
    stream.setAppliedLSN(lsn);
    confirmed = flushed;
  }

  /** Whether the server has sent anything (data or keep-alive) on this connection. */
  public boolean hasReceived() {
    return receivedMessages > 0 || Long.compareUnsigned(serverPosition, startPosition) > 0;
  }

  /** The position last reported to the server as flushed. */
  public Lsn confirmed() {
    return Lsn.of(confirmed);
  }

  /** The furthest WAL position the server has told us about (data or keep-alive). */
  public Lsn serverPosition() {
    return Lsn.of(serverPosition);
  }

  /** Closes the stream and connection on the IO thread, after a final status update. */
  @Override
  public void close() {
    CompletableFuture<Void> done =
        CompletableFuture.runAsync(
            () -> {
              try {
                stream.forceUpdateStatus();
              } catch (SQLException | RuntimeException ignored) {
                // Closing anyway.
              }
              try {
                stream.close();
              } catch (SQLException | RuntimeException ignored) {
                // Closing anyway.
              }
              try {
                connection.close();
              } catch (SQLException ignored) {
                // Closing anyway.
              }
            },
            io);
    try {
      done.get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      try {
        connection.close();
      } catch (SQLException ignored) {
        // Best effort.
      }
    } finally {
      io.shutdownNow();
    }
  }
}
