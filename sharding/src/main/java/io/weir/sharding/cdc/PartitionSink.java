package io.weir.sharding.cdc;

import io.weir.persistence.cdc.PipelineContext;
import io.weir.persistence.cdc.TableVerdict;
import io.weir.persistence.cdc.sink.ChangeSink;
import io.weir.persistence.cdc.sink.CheckpointStore;
import io.weir.persistence.cdc.sink.SinkCheckpoint;
import io.weir.persistence.cdc.sink.SinkException;
import io.weir.persistence.cdc.sink.TableHandling;
import io.weir.persistence.cdc.snapshot.SnapshotChunk;
import io.weir.persistence.cdc.source.PublishedTable;
import io.weir.protocol.Lsn;
import io.weir.protocol.Utf8;
import io.weir.protocol.cdc.Change;
import io.weir.protocol.cdc.SlotIncarnation;
import io.weir.protocol.cdc.TableSchema;
import io.weir.protocol.cdc.Transaction;
import io.weir.protocol.pgoutput.OldTupleKind;
import io.weir.protocol.pgoutput.TupleData;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrames;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.FramesReply;
import io.weir.sharding.partition.PartitionProtocol.Gap;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Truncate;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The slot stage's sink into the partitions. Each transaction is split into one slice per partition
 * it touches (rows routed by {@code hash(collection, partition key) mod P}); slices go out in
 * commit order, each carrying the source (pipeline and slot incarnation), the commit LSN and the
 * commit LSN of the previous slice this run sent to the same partition (or that partition's
 * watermark when the run started), so a partition that missed a slice refuses the next one ({@link
 * Gap}) instead of moving past it. A slice larger than the configured bound goes as several parts;
 * the partition moves its watermark with the last.
 *
 * <p>{@link #apply} completes when every slice of its transactions is durable in its partition;
 * only then may the slot confirm them. Any refusal other than "already applied" fails the call: a
 * gap, a timeout or a full outbox transiently (the pipeline restarts from what the slot confirmed,
 * and partitions skip what they already hold), a malformed change permanently. The partitions'
 * watermarks are what makes redelivery harmless; the checkpoint row this sink keeps in {@code
 * cdc_checkpoint} records the initial snapshot's hand-off and incremental snapshot progress.
 */
public final class PartitionSink implements ChangeSink {
  private static final Logger log = LoggerFactory.getLogger(PartitionSink.class);

  /**
   * How tables become collections.
   *
   * @param collections table ({@code schema.table}) -> collection name; default the table's name
   * @param partitionKeys table -> the columns whose values route a row (default the document id
   *     columns); they must be replica identity columns, or a DELETE could not be routed
   * @param idColumns table -> the columns forming the document id (default the replica identity;
   *     required for REPLICA IDENTITY FULL tables)
   * @param maxSliceRows a slice with more rows goes as several parts
   * @param maxSliceBytes likewise for the bytes of its bodies
   * @param maxInFlight frames sent and not yet answered at most
   * @param askTimeout how long a partition may take to answer a frame
   */
  public record Settings(
      int partitions,
      Map<String, String> collections,
      Map<String, List<String>> partitionKeys,
      Map<String, List<String>> idColumns,
      int maxSliceRows,
      long maxSliceBytes,
      int maxInFlight,
      Duration askTimeout) {
    public Settings {
      collections = Map.copyOf(collections);
      partitionKeys = Map.copyOf(partitionKeys);
      idColumns = Map.copyOf(idColumns);
      if (partitions < 1 || maxSliceRows < 1 || maxSliceBytes < 1 || maxInFlight < 1) {
        throw new IllegalArgumentException("partition sink limits must be positive");
      }
      if (maxSliceBytes > MESSAGE_BYTES) {
        throw new IllegalArgumentException(
            "slice.max-bytes must be at most " + MESSAGE_BYTES + " (one message)");
      }
    }

    public static Settings defaults(int partitions) {
      return new Settings(
          partitions,
          Map.of(),
          Map.of(),
          Map.of(),
          5_000,
          MESSAGE_BYTES,
          512,
          Duration.ofSeconds(30));
    }
  }

  private final PartitionChannel channel;
  private final Settings settings;
  private final CheckpointStore store;
  private final ExecutorService worker;
  private final Map<TableSchema, TableRoute> routes = new IdentityHashMap<>();
  private final AtomicLong gaps = new AtomicLong();
  private final AtomicLong frames = new AtomicLong();
  private final AtomicLong skipped = new AtomicLong();

  private volatile String pipeline;
  private volatile SlotIncarnation incarnation;
  private volatile String source;

  /**
   * True once a cluster member of this run's start has left (taken at {@link #open}, for the whole
   * run: a window opened just after a removal could otherwise still send to the dead member's
   * shards and not notice).
   */
  private volatile BooleanSupplier membersLost = () -> false;

  /**
   * Per partition: the commit LSN of the last slice sent this run (or its watermark at open), valid
   * once its status below is taken.
   */
  private long[] previous;

  /**
   * Per partition: its status, asked at {@link #open} and taken when this run first sends it a
   * slice (then null), so that partitions still recovering (a removed member's, starting on the
   * survivors) hold back neither the pipeline's start nor the other partitions' slices: a call
   * holds the slices of a partition whose status has not come ({@link #held}) and sends them when
   * it comes.
   */
  private CompletableFuture<PartitionStatus>[] statuses;

  /** Per partition: frames of the current call not sent yet (one message carries many). */
  private final Map<Integer, List<ApplyFrame>> pending = new HashMap<>();

  private final Map<Integer, Integer> pendingMutations = new HashMap<>();
  private final Map<Integer, Long> pendingBytes = new HashMap<>();

  /**
   * Per partition: slices of the current call waiting for the partition's status (asked at {@link
   * #open}), so that one still starting does not hold back the others' frames.
   */
  private final Map<Integer, List<HeldSlice>> held = new LinkedHashMap<>();

  /** UTF-8 bytes of the bodies in {@link #held}. */
  private long heldBytes;

  /**
   * Bytes of bodies a call holds at most: past it, the call waits for the held partitions' statuses
   * and sends their slices before it routes on (a streamed transaction of gigabytes must not pile
   * up in the heap while partitions start). 16 MiB: sixteen messages' worth.
   */
  static final long HELD_MAX_BYTES = 16L << 20;

  /** How often waiting for held partitions' statuses looks whether a sent frame failed. */
  private static final long WAIT_PROBE_MILLIS = 200;

  /** Frames per message to one partition at most. */
  private static final int FRAMES_PER_MESSAGE = 64;

  /**
   * UTF-8 bytes of document bodies per message to one partition at most (or one row): messages to
   * partitions on other nodes must fit Pekko's frame ({@code
   * pekko.remote.artery.advanced.maximum-frame-size}, 8 MiB in Weir's reference.conf).
   */
  public static final long MESSAGE_BYTES = 1L << 20;

  /**
   * A single row whose document has more UTF-8 bytes than this cannot be sent: the pipeline halts.
   */
  public static final long MAX_ROW_BYTES = 2L << 20;

  public PartitionSink(PartitionChannel channel, Settings settings, CheckpointStore store) {
    this.channel = channel;
    this.settings = settings;
    this.store = store;
    this.worker =
        Executors.newSingleThreadExecutor(
            r -> {
              Thread t = new Thread(r, "weir-partition-sink");
              t.setDaemon(true);
              return t;
            });
  }

  /** Slices refused with a gap since this sink was created. */
  public long gaps() {
    return gaps.get();
  }

  /** Frames sent since this sink was created. */
  public long framesSent() {
    return frames.get();
  }

  /** Frames answered "already applied" (redeliveries after a restart). */
  public long framesSkipped() {
    return skipped.get();
  }

  /** The watermark key of a pipeline's slot incarnation in the partitions. */
  public static String sourceKey(String pipeline, SlotIncarnation incarnation) {
    return pipeline + "/" + incarnation.id();
  }

  @Override
  public boolean supportsSnapshots() {
    return true;
  }

  @Override
  public boolean storesSnapshotProgress() {
    return true;
  }

  @Override
  public CompletionStage<Optional<SinkCheckpoint>> open(PipelineContext context) {
    return CompletableFuture.supplyAsync(
        () -> {
          pipeline = context.pipeline();
          incarnation = context.incarnation().orElse(null);
          membersLost = channel.membersLost();
          // Each run announces its tables anew: forget the previous run's shapes.
          routes.clear();
          source = incarnation == null ? null : sourceKey(pipeline, incarnation);
          if (source != null) {
            @SuppressWarnings("unchecked")
            CompletableFuture<PartitionStatus>[] asks =
                new CompletableFuture[settings.partitions()];
            long deadline = System.nanoTime() + settings.askTimeout().toNanos();
            for (int p = 0; p < settings.partitions(); p++) {
              asks[p] = status(p, deadline);
            }
            statuses = asks;
            previous = new long[settings.partitions()];
          }
          try {
            return store.read(pipeline).map(CheckpointStore.Stored::checkpoint);
          } catch (SQLException e) {
            throw SinkException.transientFailure("could not read the pipeline's checkpoint", e);
          }
        },
        worker);
  }

  @Override
  public CompletionStage<Void> apply(List<Transaction> transactions) {
    return CompletableFuture.runAsync(
        () -> {
          requireOpen();
          // Left over only by a call that failed half-way: those transactions come again.
          pending.clear();
          pendingMutations.clear();
          pendingBytes.clear();
          held.clear();
          heldBytes = 0;
          FrameWindow window =
              new FrameWindow(settings.maxInFlight(), pipeline, gaps, skipped, membersLost);
          for (Transaction t : transactions) {
            route(t, window);
          }
          for (Integer p : List.copyOf(pending.keySet())) {
            flush(p, window);
          }
          releaseHeld(window);
          window.awaitAll(settings.askTimeout());
        },
        worker);
  }

  private void requireOpen() {
    if (source == null || statuses == null) {
      throw SinkException.permanent(
          "partition sink used before the slot incarnation is known", null);
    }
  }

  /** Splits one transaction into slices and sends them (parts as they fill up). */
  private void route(Transaction t, FrameWindow window) {
    Map<Integer, Slice> slices = new HashMap<>();
    for (Change c : t.changes()) {
      if (c instanceof Change.Truncate tr) {
        for (TableSchema table : tr.tables()) {
          TableRoute r = route(table);
          for (int p = 0; p < settings.partitions(); p++) {
            add(slices, p, new Truncate(r.collection()), 64, t, window);
          }
        }
      } else if (c instanceof Change.Insert i) {
        TableRoute r = route(i.table());
        String body = RowJson.body(i.table(), i.newRow(), null);
        add(
            slices,
            r.partition(i.newRow()),
            new Upsert(r.collection(), r.id(i.newRow()), body, Optional.empty()),
            Utf8.length(body),
            t,
            window);
      } else if (c instanceof Change.Update u) {
        TableRoute r = route(u.table());
        TupleData oldRow =
            u.oldKind() == OldTupleKind.NONE || u.oldRow() == null ? null : u.oldRow();
        // A key column stored out of line and left alone arrives as unchanged TOAST in the new row
        // and in full in the old key (or full old image): ids and partitions take it from there.
        String newId = r.id(u.newRow(), oldRow);
        int newPartition = r.partition(u.newRow(), oldRow);
        String oldId = oldRow == null ? newId : r.id(oldRow, null);
        int oldPartition = oldRow == null ? newPartition : r.partition(oldRow, null);
        boolean full = u.oldKind() == OldTupleKind.FULL;
        // Unchanged key columns come from the old key; the others, without a full old image, from
        // the current document.
        List<String> unchanged =
            full || oldRow == null
                ? u.unchangedToastColumns()
                : u.unchangedToastColumns().stream()
                    .filter(name -> !u.table().columns().get(u.table().indexOf(name)).key())
                    .toList();
        if (oldId.equals(newId) && oldPartition == newPartition) {
          String body = RowJson.body(u.table(), u.newRow(), oldRow, !full);
          add(
              slices,
              newPartition,
              new Upsert(
                  r.collection(), newId, body, Optional.empty(), full ? List.of() : unchanged),
              Utf8.length(body),
              t,
              window);
        } else {
          // The key changed: the document moves. Its unchanged TOAST values must come from a full
          // old image (key columns also from the old key).
          if (!unchanged.isEmpty() && u.oldKind() != OldTupleKind.FULL) {
            throw SinkException.permanent(
                "table "
                    + u.table().qualifiedName()
                    + ": a row whose key changed has unchanged "
                    + "TOAST columns and no full old image (set REPLICA IDENTITY FULL to move such rows)",
                null);
          }
          String body = RowJson.body(u.table(), u.newRow(), oldRow);
          add(
              slices,
              oldPartition,
              new Delete(r.collection(), oldId, Optional.empty()),
              64,
              t,
              window);
          add(
              slices,
              newPartition,
              new Upsert(r.collection(), newId, body, Optional.empty()),
              Utf8.length(body),
              t,
              window);
        }
      } else if (c instanceof Change.Delete d) {
        TableRoute r = route(d.table());
        add(
            slices,
            r.partition(d.oldRow()),
            new Delete(r.collection(), r.id(d.oldRow()), Optional.empty()),
            64,
            t,
            window);
      }
      // Transactional logical messages are not documents.
    }
    for (Map.Entry<Integer, Slice> e : slices.entrySet()) {
      send(e.getKey(), e.getValue(), t, true, window);
    }
  }

  private void add(
      Map<Integer, Slice> slices,
      int p,
      Mutation m,
      long bytes,
      Transaction t,
      FrameWindow window) {
    if (bytes > MAX_ROW_BYTES) {
      throw SinkException.permanent(
          "collection "
              + m.collection()
              + ": a row's document is larger than "
              + MAX_ROW_BYTES
              + " bytes, more than one message to a partition may carry",
          null);
    }
    Slice s = slices.computeIfAbsent(p, k -> new Slice());
    if (!s.mutations.isEmpty() && s.bytes + bytes > settings.maxSliceBytes()) {
      send(p, s, t, false, window); // before, so that a part stays within the bound (or is one row)
    }
    s.mutations.add(m);
    s.bytes += bytes;
    if (s.mutations.size() >= settings.maxSliceRows() || s.bytes >= settings.maxSliceBytes()) {
      send(p, s, t, false, window);
    }
  }

  private void send(int p, Slice s, Transaction t, boolean last, FrameWindow window) {
    if (!last && s.mutations.isEmpty()) {
      return;
    }
    long commit = t.commitLsn().asLong();
    s.part++;
    List<Mutation> mutations = List.copyOf(s.mutations);
    long bytes = s.bytes;
    s.mutations.clear();
    s.bytes = 0;
    if (heldBytes + bytes > HELD_MAX_BYTES) {
      releaseHeld(window); // bounded: wait for those partitions rather than hold more
    }
    List<HeldSlice> waiting = held.get(p);
    if (waiting == null && statuses[p] != null && !statuses[p].isDone()) {
      // Its watermark is not known yet (a partition still starting): the slices wait in order
      // while the partitions that answered get theirs.
      waiting = new ArrayList<>();
      held.put(p, waiting);
    }
    if (waiting != null) {
      waiting.add(new HeldSlice(commit, s.part, last, mutations, bytes));
      heldBytes += bytes;
      return;
    }
    queue(p, commit, s.part, last, mutations, bytes, window);
  }

  /** Queues one slice for partition {@code p} behind its earlier ones, sending when full. */
  private void queue(
      int p,
      long commit,
      int part,
      boolean last,
      List<Mutation> mutations,
      long bytes,
      FrameWindow window) {
    SourcePosition at = new SourcePosition(source, commit, previous(p), part, last);
    if (last) {
      previous[p] = commit;
    }
    if (pendingBytes.getOrDefault(p, 0L) + bytes > MESSAGE_BYTES) {
      flush(p, window); // keeps the message under the frame size; order is unchanged
    }
    pendingBytes.merge(p, bytes, Long::sum);
    // Queued behind the partition's earlier frames of this call, so order is kept.
    pending
        .computeIfAbsent(p, k -> new ArrayList<>())
        .add(new ApplyFrame(null, mutations, Optional.of(at), null));
    int queued = pendingMutations.merge(p, mutations.size(), Integer::sum);
    if (pending.get(p).size() >= FRAMES_PER_MESSAGE || queued >= settings.maxSliceRows()) {
      flush(p, window);
    }
  }

  /**
   * Sends the slices held for partitions whose status had not come when this call reached them,
   * each partition as soon as its status comes (the first to answer first), in their order. Called
   * once the call's routing is done, or during it when {@link #HELD_MAX_BYTES} would be passed.
   */
  private void releaseHeld(FrameWindow window) {
    while (!held.isEmpty()) {
      Integer ready = null;
      for (Integer p : held.keySet()) {
        if (statuses[p] == null || statuses[p].isDone()) {
          ready = p;
          break;
        }
      }
      if (ready == null) {
        // A frame already sent that failed, or a member that left (frames to its partitions are
        // lost), ends the call without waiting for the statuses.
        window.throwIfFailed();
        if (membersLost.getAsBoolean()) {
          throw SinkException.transientFailure(
              "a cluster member left while slices waited for partitions still starting", null);
        }
        try {
          statuses[held.keySet().iterator().next()].get(WAIT_PROBE_MILLIS, TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException e) {
          // a failed status: previous() below reports it, for its partition; else look again
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw SinkException.transientFailure("interrupted", e);
        }
        continue;
      }
      for (HeldSlice h : held.remove(ready)) {
        heldBytes -= h.bytes();
        queue(ready, h.commit(), h.part(), h.last(), h.mutations(), h.bytes(), window);
      }
      flush(ready, window);
    }
  }

  /** A slice waiting for its partition's status (see {@link #releaseHeld}). */
  private record HeldSlice(
      long commit, int part, boolean last, List<Mutation> mutations, long bytes) {
    @Override
    public String toString() {
      // Rows' values stay out of any text.
      return "HeldSlice[commit="
          + commit
          + ", part="
          + part
          + ", mutations="
          + mutations.size()
          + "]";
    }
  }

  /**
   * The commit LSN of the last slice this run sent to partition {@code p}; before the first, its
   * watermark for this run's source, waiting for the status asked at {@link #open} (a transient
   * failure when it was not answered within the ask timeout).
   */
  private long previous(int p) {
    if (statuses[p] != null) {
      PartitionStatus status = await(statuses[p], "reading partition " + p + "'s watermark");
      previous[p] = status.watermarks().getOrDefault(source, 0L);
      statuses[p] = null;
    }
    return previous[p];
  }

  /** Sends partition {@code p}'s queued frames as one message. */
  private void flush(int p, FrameWindow window) {
    List<ApplyFrame> batch = pending.remove(p);
    pendingMutations.remove(p);
    pendingBytes.remove(p);
    if (batch == null || batch.isEmpty()) {
      return;
    }
    window.acquire(settings.askTimeout());
    frames.addAndGet(batch.size());
    channel
        .<FramesReply>ask(p, replyTo -> new ApplyFrames(batch, replyTo), settings.askTimeout())
        .whenComplete(
            (reply, error) -> window.doneAll(p, reply == null ? null : reply.replies(), error));
  }

  @Override
  public CompletionStage<Void> applySnapshot(SnapshotChunk chunk) {
    return CompletableFuture.runAsync(
        () -> {
          requireOpen();
          TableRoute r = route(chunk.table());
          boolean reset = chunk.firstForTable() && !chunk.incremental();
          // An incremental snapshot's first chunk of a table empties nothing here: documents stay
          // and
          // rows that change one are recorded in the outbox.
          Map<Integer, List<Upsert>> byPartition = new HashMap<>();
          for (TupleData row : chunk.rows()) {
            byPartition
                .computeIfAbsent(r.partition(row), k -> new ArrayList<>())
                .add(
                    new Upsert(
                        r.collection(),
                        r.id(row),
                        RowJson.body(chunk.table(), row, null),
                        Optional.empty()));
          }
          FrameWindow window =
              new FrameWindow(settings.maxInFlight(), pipeline, gaps, skipped, membersLost);
          for (int p = 0; p < settings.partitions(); p++) {
            List<Upsert> rows = byPartition.getOrDefault(p, List.of());
            if (rows.isEmpty() && !reset) {
              continue;
            }
            int n = p;
            int from = 0;
            while (from == 0 || from < rows.size()) {
              // At most max-rows rows and MESSAGE_BYTES of bodies per message (at least one row).
              int to = from;
              long bytes = 0;
              while (to < rows.size()
                  && to - from < settings.maxSliceRows()
                  && (to == from || bytes + Utf8.length(rows.get(to).body()) <= MESSAGE_BYTES)) {
                if (Utf8.length(rows.get(to).body()) > MAX_ROW_BYTES) {
                  throw SinkException.permanent(
                      "collection "
                          + r.collection()
                          + ": a row's document is larger than "
                          + MAX_ROW_BYTES
                          + " bytes, more than one message to a partition may carry",
                      null);
                }
                bytes += Utf8.length(rows.get(to).body());
                to++;
              }
              List<Upsert> part = rows.subList(from, to);
              List<String> resetNow = reset && from == 0 ? List.of(r.collection()) : List.of();
              from = Math.max(to, 1);
              window.acquire(settings.askTimeout());
              channel
                  .<FrameReply>ask(
                      n,
                      replyTo -> new LoadRows(resetNow, part, chunk.incremental(), replyTo),
                      settings.askTimeout())
                  .whenComplete((reply, error) -> window.done(n, reply, error));
            }
          }
          window.awaitAll(settings.askTimeout());
          if (chunk.progress().isPresent()) {
            try {
              store.writeProgress(pipeline, incarnation, chunk.progress());
            } catch (SQLException e) {
              throw SinkException.transientFailure(
                  "could not store incremental snapshot progress", e);
            }
          }
        },
        worker);
  }

  @Override
  public CompletionStage<Void> completeSnapshot(Lsn handOff) {
    return CompletableFuture.runAsync(
        () -> {
          requireOpen();
          try {
            store.write(
                pipeline,
                new CheckpointStore.Stored(new SinkCheckpoint(incarnation, handOff), handOff));
          } catch (SQLException e) {
            throw SinkException.transientFailure(
                "could not store the snapshot hand-off checkpoint", e);
          }
        },
        worker);
  }

  @Override
  public CompletionStage<Optional<String>> snapshotProgress() {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return store.readProgress(pipeline);
          } catch (SQLException e) {
            throw SinkException.transientFailure("could not read incremental snapshot progress", e);
          }
        },
        worker);
  }

  @Override
  public void close() {
    // The worker stays: the pipeline opens this sink again after a restart.
  }

  /** Stops the worker thread; the sink is not used again. */
  public void shutdown() {
    worker.shutdownNow();
  }

  /** Each published table's collection and document id columns, or why it has none. */
  @Override
  public CompletionStage<List<TableVerdict>> check(List<PublishedTable> tables) {
    List<TableVerdict> out = new ArrayList<>();
    for (PublishedTable t : tables) {
      TableSchema table = t.schema();
      try {
        TableRoute r = TableRoute.of(table, settings);
        List<String> id = new ArrayList<>();
        for (int at : r.id()) {
          id.add(table.columns().get(at).name());
        }
        out.add(
            TableVerdict.handled(
                table.qualifiedName(),
                TableHandling.BY_DOCUMENT_ID,
                "collection " + r.collection() + ", document id from " + id));
      } catch (TableRoute.Refused refused) {
        out.add(TableVerdict.refused(table.qualifiedName(), refused.code, refused.getMessage()));
      }
    }
    return CompletableFuture.completedFuture(out);
  }

  /** Tables whose rows cannot become documents halt the pipeline at start. */
  @Override
  public boolean refusesTablesAtStart() {
    return true;
  }

  private TableRoute route(TableSchema table) {
    TableRoute r = routes.get(table);
    if (r == null) {
      try {
        r = TableRoute.of(table, settings);
      } catch (TableRoute.Refused refused) {
        throw SinkException.permanent(refused.getMessage(), null);
      }
      routes.put(table, r);
    }
    return r;
  }

  private static final class Slice {
    final List<Mutation> mutations = new ArrayList<>();
    long bytes;
    int part;
  }

  /**
   * Partition {@code p}'s status, asked again while unanswered until {@code deadline} (nanoTime): a
   * shard handed off between nodes drops the messages it buffered, and a member that died takes
   * what was sent to it, so one lost ask must not hold the pipeline's start for the whole ask
   * timeout. A status ask changes nothing: asking again is harmless. Unanswered asks only: each
   * attempt lasts its own timeout, so there are at most about seven.
   */
  private CompletableFuture<PartitionStatus> status(int p, long deadline) {
    long attempt =
        Math.min(
            deadline - System.nanoTime(),
            Math.max(settings.askTimeout().toNanos() / 6, Duration.ofMillis(500).toNanos()));
    return channel
        .status(p, Duration.ofNanos(Math.max(attempt, 1)))
        .toCompletableFuture()
        .handle(
            (s, e) -> {
              if (e == null) {
                return CompletableFuture.completedFuture(s);
              }
              Throwable cause =
                  e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
              // Only an ask that went unanswered is asked again (each attempt lasts its timeout);
              // one that failed at once (the region is shutting down) fails the start.
              return cause instanceof TimeoutException && deadline - System.nanoTime() > 0
                  ? status(p, deadline)
                  : CompletableFuture.<PartitionStatus>failedFuture(cause);
            })
        .thenCompose(f -> f);
  }

  private static <T> T await(CompletableFuture<T> f, String what) {
    try {
      return f.get();
    } catch (ExecutionException e) {
      throw SinkException.transientFailure(
          what + " failed (" + e.getCause().getClass().getSimpleName() + ")", null);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw SinkException.transientFailure("interrupted", e);
    }
  }
}
