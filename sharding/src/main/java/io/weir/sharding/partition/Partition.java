package io.weir.sharding.partition;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonProperty;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.CborSerializable;
import io.weir.protocol.Utf8;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.PartitionProtocol.Write;
import io.weir.sharding.partition.ReadProtocol.Document;
import io.weir.sharding.storage.AckMark;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Pattern;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.StashBuffer;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.serialization.SerializationExtension;

/**
 * One atomic partition: an event-sourced entity holding the index of its documents (ADR 0032: the
 * documents themselves live in the documents table it writes), the index of its outbox (the
 * mutation stream; entry payloads stay in the journal), idempotency receipts, per-source watermarks
 * and its projection consumers. {@link PartitionEntity} runs it as a child and coalesces writes in
 * front of it.
 *
 * <p>A frame ({@link ApplyFrame}) is checked whole before anything is written: a malformed frame,
 * one whose expected revisions do not match (each mutation sees the ones before it), one that would
 * overflow the outbox quota, or a CDC frame after a gap changes nothing. An accepted frame's outbox
 * entries, receipt and watermark move together. A {@link WriteBatch} checks its frames in order
 * ({@link WritePlan}, {@link ConsumerPlan}: each sees the accepted ones before it) and persists the
 * accepted ones as one journal event ({@link Written}): one write, so a crash leaves all of it or
 * none. Before images the plan does not find in memory are fetched from the documents table in one
 * query, and the batch is planned again ({@link BeforeImages}, {@link GroupCommit}).
 *
 * <p>After recovery the partition serves nothing until its documents table holds every event of the
 * recovered journal ({@link TableWriter}); reads then come from the table, merged with what it has
 * not applied yet ({@link PartitionReads}).
 *
 * <p>Snapshots hold the index and the rest, never bodies ({@link PartitionSnapshotSerializer}),
 * taken as the settings' {@link SnapshotPolicy} says. Journal events are never deleted on snapshot:
 * they are the outbox's payloads; purged ones go through the {@link JournalPruner}, as do snapshots
 * older than the two latest ({@link OutboxRetention}).
 *
 * <p>This class holds what a partition persists and is told: its journal events and their records,
 * the messages it sends itself, and the factories of its behavior. The behavior is {@link
 * PartitionBehavior}; the acknowledged mark and the storage check are {@link PartitionMarks}; the
 * answers and refusals of writes {@link WriteReplies}. The records stay nested here because their
 * binary names are the journal's manifests (ADR 0032).
 */
public final class Partition {

  /**
   * Bytes of documents one {@link ReadProtocol.GetDocuments} reply carries at most (besides the
   * first).
   */
  static final long REPLY_BYTES = 1L << 20;

  /** Bytes counted per outbox entry besides its images. */
  static final int ENTRY_OVERHEAD = 64;

  /** The persistence id of partition {@code n}: {@code weir-partition|n}. */
  public static PersistenceId persistenceId(int n) {
    return PersistenceId.of(PartitionEntity.TYPE_KEY.name(), Integer.toString(n));
  }

  /** Partition {@code partition} with these collaborators. */
  public static Behavior<Command> create(int partition, PartitionWiring wiring) {
    return Behaviors.setup(
        ctx -> {
          long started = System.nanoTime();
          if (!wiring.stateStore().enabled(partition)) {
            return new PartitionBehavior(partition, wiring, ctx, null, started);
          }
          // What waits here is stashed again by the event-sourced behavior while it starts: no
          // more than its stash takes (it fails the partition when it overflows).
          int capacity =
              Math.min(
                  RECOVERY_STASH,
                  ctx.getSystem()
                      .settings()
                      .config()
                      .getInt("pekko.persistence.typed.stash-capacity"));
          return Behaviors.withStash(
              capacity, stash -> recovering(ctx, stash, partition, wiring, started));
        });
  }

  /**
   * Sent by the partition to itself when the journal refuted the state its recovery read, so that
   * it stops even if nothing else comes.
   */
  enum Refuted implements Command {
    INSTANCE
  }

  /**
   * The state store saved the snapshot at {@code sequence} ({@code saved}), or did not ({@code
   * failure}: why, value-free; null with {@code saved} false: the journal does not hold that event
   * from this start of the partition).
   */
  record SnapshotSaved(long sequence, boolean saved, String failure) implements Command {}

  /**
   * Messages that wait while the partition's state is read with SQL, at most (and no more than
   * {@code pekko.persistence.typed.stash-capacity}); later ones are dropped, their senders retry.
   */
  static final int RECOVERY_STASH = 10_000;

  /**
   * The state was read (the reading closure holds it), or not ({@code failure}: why, value-free;
   * else null). The state itself never travels in a message.
   */
  record StateRead(String failure) implements Command {}

  /**
   * Why a state read failed, value-free: the store's own reason when it refused the journal (it
   * names sequence numbers only), else the exception classes and SQLState.
   */
  static String readFailure(Throwable error) {
    for (Throwable t = error; t != null; t = t.getCause()) {
      if (t instanceof StateStore.Unreadable u) {
        return u.getMessage();
      }
    }
    return SafeErrors.describe(error);
  }

  /**
   * Reads the state with the wiring's {@link StateStore} (ADR 0054), then becomes the event-sourced
   * behavior on it, Pekko's replay disabled; every message waits until then. A failed read stops
   * the partition: its parent stops with it, and the next message starts it again.
   */
  private static Behavior<Command> recovering(
      ActorContext<Command> ctx,
      StashBuffer<Command> stash,
      int partition,
      PartitionWiring wiring,
      long started) {
    AtomicReference<StateStore.Recovered> read = new AtomicReference<>();
    ctx.pipeToSelf(
        wiring
            .stateStore()
            .recover(
                partition,
                SerializationExtension.get(Adapter.toClassic(ctx.getSystem())),
                () -> PartitionBehavior.emptyState(wiring.settings()),
                s -> PartitionBehavior.fromSnapshot(s, wiring.settings()))
            .thenApply(
                recovered -> {
                  read.set(recovered);
                  return recovered;
                }),
        (recovered, error) -> new StateRead(error == null ? null : readFailure(error)));
    return Behaviors.receive(Command.class)
        .onMessage(
            StateRead.class,
            r -> {
              if (r.failure() != null) {
                ctx.getLog()
                    .error(
                        "partition {}: its snapshot and journal could not be read ({}); it starts"
                            + " again with its next message",
                        partition,
                        r.failure());
                return Behaviors.stopped();
              }
              if (read.get() != null) {
                ctx.getLog()
                    .debug(
                        "partition {}: read its snapshot at sequence {} and {} events after it in"
                            + " {} ms",
                        partition,
                        read.get().snapshotSequence(),
                        read.get().events(),
                        (System.nanoTime() - started) / 1_000_000);
              }
              if (read.get() == null) {
                ctx.getLog()
                    .info(
                        "partition {}: its journal's highest sequence number is not its latest"
                            + " snapshot's or last event's (rows deleted through the snapshot, or"
                            + " marked deleted); Pekko's replay recovers it",
                        partition);
              }
              // Null: the journal needs Pekko's replay (see StateStore#recover).
              return stash.unstashAll(
                  new PartitionBehavior(partition, wiring, ctx, read.get(), started));
            })
        .onAnyMessage(m -> PartitionEntity.stashOrDrop(ctx, stash, partition, "its recovery", m))
        .build();
  }

  /** A partition on the in-memory documents table with these limits (tests, tools). */
  public static Behavior<Command> create(int partition, PartitionSettings settings) {
    return create(partition, PartitionWiring.inMemory(settings));
  }

  /** A partition on the in-memory documents table with the default limits (tests, tools). */
  public static Behavior<Command> create(int partition) {
    return create(partition, PartitionSettings.DEFAULTS);
  }

  /** The documents table applied the events through {@code through}: waiting writes may go. */
  record TableApplied(long through) implements Command {}

  /** The documents table holds every recovered event: the partition may serve. */
  enum TableReady implements Command {
    INSTANCE
  }

  /**
   * An apply to the documents table failed (it is retried): the writes waiting for the table are
   * refused if it is at its lag bound ({@link TableWriter#refusing}).
   */
  enum TableFailing implements Command {
    INSTANCE
  }

  /**
   * The documents table refused writer {@code writer} (ADR 0060): when it is this incarnation's,
   * the partition stops and recovers from what the storage holds (an earlier incarnation's writer,
   * restarted in place, is ignored).
   */
  record TableFenced(long writer) implements Command {}

  /** Writes coalesced by {@link PartitionEntity}; {@code done} hears when they are answered. */
  record WriteBatch(List<Write> writes, ActorRef<PartitionEntity.BatchWritten> done)
      implements Command {
    @Override
    public String toString() {
      return "WriteBatch[" + writes.size() + "]";
    }
  }

  /**
   * The before images the plan of a group commit's next event missed, read from the documents table
   * (or why not, as a value-free description): the event is planned again with them.
   */
  record BodiesFetched(
      List<DocumentTable.Row> rows,
      String failure,
      List<String> receiptKeys,
      List<Receipt.Keyed> receipts)
      implements Command {
    BodiesFetched {
      rows = rows == null ? List.of() : rows;
      receiptKeys = receiptKeys == null ? List.of() : receiptKeys;
      receipts = receipts == null ? List.of() : receipts;
    }

    @Override
    public String toString() {
      return "BodiesFetched[rows=" + rows.size() + ", receipts=" + receipts.size() + "]";
    }
  }

  /**
   * Read {@code read} (attempt {@code attempt}) of the table's receipts for the partition's receipt
   * filter (ADR 0057) is over: it read {@code receipts}, or failed ({@code failure}: why,
   * value-free).
   */
  record ReceiptsLoaded(long read, int receipts, String failure, int attempt) implements Command {}

  /**
   * Row-visibility values a read of the documents table found ({@link PartitionReads#acls}), to be
   * remembered in the index ({@link AclMemo}) for the versions it still holds, if the partition is
   * still incarnation {@code incarnation} and the rule still {@code ruleVersion}.
   */
  record AclsRead(String incarnation, String collection, long ruleVersion, List<AclRead> values)
      implements Command {
    @Override
    public String toString() {
      return "AclsRead[values=" + values.size() + "]"; // ids and values are row data
    }
  }

  /** A document's row-visibility value {@code acl} at journal sequence {@code lastSeq}. */
  record AclRead(String id, long lastSeq, String acl) {
    @Override
    public String toString() {
      return "AclRead[lastSeq=" + lastSeq + "]";
    }
  }

  /** Read the table's receipts into the receipt filter again: attempt {@code attempt}. */
  record LoadReceipts(int attempt) implements Command {}

  /** The storage check after recovery is over ({@code failure}: why it failed, value-free). */
  record StorageChecked(AckMark mark, String failure) implements Command {}

  /**
   * The mark was raised over the events recovered above it ({@code failure}: why not, value-free).
   */
  record RecoveryMarked(AckMark mark, String failure) implements Command {}

  /**
   * A group commit's mark was kept ({@code failure}: why not, value-free).
   *
   * @param sequence the journal sequence the mark was raised to
   */
  record MarkRaised(long sequence, String failure, long startedNanos) implements Command {}

  /** The new incarnation's mark is kept: the partition serves again. */
  record StorageLossMarked(
      AckMark mark, long lost, ActorRef<StatusProtocol.StorageLossReply> replyTo)
      implements Command {}

  /** The next event of the run may be planned. */
  enum Continue implements Command {
    INSTANCE
  }

  /** A journal event of a partition. */
  public sealed interface Event extends CborSerializable permits Written, Purged {}

  /** Outbox entries up to {@code through} are purged: the retained outbox starts after it. */
  public record Purged(long through) implements Event {}

  /**
   * One outbox entry.
   *
   * @param sequence the partition's monotonic outbox sequence
   * @param ordinal position inside its frame
   * @param kind {@code upsert}, {@code delete} or {@code snapshot} (a row of an incremental
   *     snapshot)
   * @param revision the document's revision after the change
   * @param before the document body before (null when absent or a tombstone); never logged
   * @param after the body after (null for a delete); never logged
   * @param commitLsn the source commit LSN of a CDC frame; 0 for API frames
   */
  public record OutboxEntry(
      long sequence,
      int ordinal,
      String collection,
      String id,
      String kind,
      long revision,
      String before,
      String after,
      long evaluatedAtMillis,
      long commitLsn)
      implements CborSerializable {
    long bytes() {
      return ENTRY_OVERHEAD + Utf8.length(before) + Utf8.length(after);
    }

    @Override
    public String toString() {
      return "OutboxEntry["
          + sequence
          + ", "
          + collection
          + ", "
          + kind
          + ", revision="
          + revision
          + "]";
    }
  }

  /**
   * One accepted frame.
   *
   * @param commandId the API command id (receipt key); null for CDC frames and snapshot rows
   * @param reset collections whose documents are removed silently first (initial snapshot)
   * @param loaded documents set without outbox entries (initial snapshot rows)
   * @param consumer a projection consumer's new definition, checkpoint and receipts (a configure,
   *     release or committed batch); null for other frames
   * @param fenced collections whose row-visibility epoch this frame advances: it changed the ACL of
   *     an existing document (or re-seeded a collection that has a row rule)
   * @param rule a newly installed row-visibility rule (which also advances its collection's epoch)
   * @param cut for a part of a CDC frame larger than a journal row may be (ADR 0033): where the
   *     next part starts; the source's watermark does not move. Null for a whole frame or its last
   *     part
   */
  public record FrameApplied(
      String commandId,
      List<OutboxEntry> entries,
      Optional<SourcePosition> source,
      List<String> reset,
      List<Document> loaded,
      Consumer consumer,
      List<String> fenced,
      RuleChange rule,
      Cut cut)
      implements CborSerializable {
    public FrameApplied {
      fenced = fenced == null ? List.of() : List.copyOf(fenced);
    }

    FrameApplied(
        String commandId,
        List<OutboxEntry> entries,
        Optional<SourcePosition> source,
        List<String> reset,
        List<Document> loaded,
        Consumer consumer,
        List<String> fenced,
        RuleChange rule) {
      this(commandId, entries, source, reset, loaded, consumer, fenced, rule, null);
    }

    FrameApplied(
        String commandId,
        List<OutboxEntry> entries,
        Optional<SourcePosition> source,
        List<String> reset,
        List<Document> loaded) {
      this(commandId, entries, source, reset, loaded, null, List.of(), null, null);
    }

    @Override
    public String toString() {
      return "FrameApplied[entries="
          + entries.size()
          + ", loaded="
          + loaded.size()
          + ", source="
          + source
          + (cut == null ? "" : ", cut at mutation " + cut.mutations())
          + "]";
    }
  }

  /**
   * Where a frame split into parts goes on (ADR 0033): its first {@code mutations} mutations are
   * applied, and of the next one, a truncate, the documents whose ids sort up to {@code afterId}
   * (null: none of it yet). Ids are row values: never logged.
   */
  public record Cut(int mutations, String afterId) implements CborSerializable {
    @Override
    public String toString() {
      return "Cut[mutations=" + mutations + "]";
    }
  }

  /**
   * The journal event of one group commit.
   *
   * @param incarnation set by the partition's first event: identifies this partition's history
   */
  public record Written(String incarnation, List<FrameApplied> frames) implements Event {
    @Override
    public String toString() {
      return "Written[frames=" + frames.size() + "]";
    }
  }

  /**
   * Where the last snapshot was taken: its sequence number and the state's cumulative event bytes
   * then. Part of the state (and so of every snapshot), set when a snapshot is decided: after a
   * restart the policy goes on from the snapshot it recovered from.
   */
  public static final class SnapshotMark implements CborSerializable {
    public long events;
    public long eventBytes;

    @JsonCreator
    public SnapshotMark(
        @JsonProperty("events") long events, @JsonProperty("eventBytes") long eventBytes) {
      this.events = events;
      this.eventBytes = eventBytes;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof SnapshotMark m && m.events == events && m.eventBytes == eventBytes;
    }

    @Override
    public int hashCode() {
      return Long.hashCode(events) * 31 + Long.hashCode(eventBytes);
    }
  }

  /** Batch receipts a consumer keeps: retries of its latest batches are recognised by them. */
  static final int CONSUMER_RECEIPTS = 16;

  /**
   * A projection consumer generation (part of the state).
   *
   * @param startAfter the position before its first entry
   * @param checkpoint the last position it committed
   * @param reservationCut the retained beginning ({@code outboxFirst}) when it last used the
   *     progress reserve; -1 if never: it may use the reserve once per retained-prefix position
   * @param receipts its latest committed batches, newest last
   */
  public record Consumer(
      String name,
      long generation,
      List<String> collections,
      List<String> kinds,
      long startAfter,
      long checkpoint,
      boolean released,
      long reservationCut,
      List<ConsumerProtocol.BatchReceipt> receipts)
      implements CborSerializable {
    public Consumer {
      collections = List.copyOf(collections);
      kinds = List.copyOf(kinds);
      receipts = receipts == null ? List.of() : List.copyOf(receipts);
    }

    String key() {
      return consumerKey(name, generation);
    }

    /**
     * This consumer as a frame records it (its new definition and checkpoint, with only the new
     * receipt of a commit: events do not repeat the older ones) applied to {@code previous}: a
     * commit's receipt joins the previous receipts (the latest {@value #CONSUMER_RECEIPTS} kept);
     * configure and release frames carry none, and leave none.
     */
    Consumer after(Consumer previous) {
      if (receipts.isEmpty() || previous == null) {
        return this;
      }
      List<ConsumerProtocol.BatchReceipt> all = new ArrayList<>(previous.receipts());
      all.addAll(receipts);
      return withReceipts(all.subList(Math.max(0, all.size() - CONSUMER_RECEIPTS), all.size()));
    }

    Consumer withReceipts(List<ConsumerProtocol.BatchReceipt> list) {
      return new Consumer(
          name,
          generation,
          collections,
          kinds,
          startAfter,
          checkpoint,
          released,
          reservationCut,
          list);
    }

    ConsumerProtocol.ConsumerView view() {
      return new ConsumerProtocol.ConsumerView(
          name, generation, collections, kinds, startAfter, checkpoint, released);
    }

    /** Names are identifiers, but stay out of logs anyway. */
    @Override
    public String toString() {
      return "Consumer[generation="
          + generation
          + ", checkpoint="
          + checkpoint
          + ", released="
          + released
          + "]";
    }
  }

  static String consumerKey(String name, long generation) {
    return name + '\0' + generation;
  }

  /** A collection's installed row-visibility rule: its ACL/owner field (null: none) and version. */
  public record RowRule(String field, long version) implements CborSerializable {}

  /** A row rule installed by a frame. */
  public record RuleChange(String collection, String field, long version)
      implements CborSerializable {}

  /** A split slice being applied: the commit LSN and how many of its parts are in. */
  public record PartProgress(long commitLsn, int done) implements CborSerializable {}

  /**
   * Where a run of outbox entries sits in the journal.
   *
   * @param journalSequence the sequence number of the event holding them
   */
  public record Segment(long journalSequence, int entries, long bytes)
      implements CborSerializable {}

  /**
   * The partition's state and snapshot before ADR 0032, every document's body included (Jackson
   * CBOR). Never written any more and never recovered from: {@link LegacySnapshots} moves such a
   * snapshot's documents into the documents table and replaces it with a {@link PartitionState}
   * before the partition starts. The record stays so that its stored form keeps a decoder and a
   * fixture.
   */
  public record State(
      HashMap<String, Document> documents,
      long nextSequence,
      long outboxFirst,
      long outboxBytes,
      long events,
      LinkedHashMap<String, Applied> receipts,
      HashMap<String, Long> watermarks,
      HashMap<String, PartProgress> partials,
      TreeMap<Long, Segment> outbox,
      String incarnation,
      long documentBytes,
      long eventBytes,
      SnapshotMark mark,
      HashMap<String, Consumer> consumers,
      HashMap<String, RowRule> rules,
      HashMap<String, Long> rowEpochs)
      implements CborSerializable {

    public State {
      consumers = consumers == null ? new HashMap<>() : consumers;
      rules = rules == null ? new HashMap<>() : rules;
      rowEpochs = rowEpochs == null ? new HashMap<>() : rowEpochs;
    }
  }

  static String key(String collection, String id) {
    return collection + '\0' + id;
  }

  /** Collections one consumer filter names at most. */
  static final int MAX_FILTER_COLLECTIONS = 64;

  private static final Pattern CONSUMER_NAME = Pattern.compile("[A-Za-z0-9_.-]{1,64}");

  public static boolean validConsumerName(String name) {
    return name != null && CONSUMER_NAME.matcher(name).matches();
  }

  /**
   * SHA-256 (hex) of a canonical encoding of projection effects: kind, collection, id, expected
   * revision and body of each, length-prefixed. Equal effects give equal digests whatever the
   * command id.
   */
  static String effectsDigest(List<Mutation> effects) {
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      ByteBuffer number = ByteBuffer.allocate(8);
      for (Mutation m : effects) {
        digestText(
            sha,
            number,
            m instanceof Upsert ? "upsert" : m instanceof Delete ? "delete" : "truncate");
        digestText(sha, number, m.collection());
        if (m instanceof Upsert u) {
          digestText(sha, number, u.id());
          sha.update(number.clear().putLong(u.expectedRevision().orElse(-1L)).array());
          digestText(sha, number, u.body());
        } else if (m instanceof Delete d) {
          digestText(sha, number, d.id());
          sha.update(number.clear().putLong(d.expectedRevision().orElse(-1L)).array());
        }
      }
      return HexFormat.of().formatHex(sha.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every JVM", e);
    }
  }

  /** Adds {@code t} (null allowed) to {@code sha}, prefixed by its UTF-8 length (-1 for null). */
  private static void digestText(MessageDigest sha, ByteBuffer number, String t) {
    byte[] b = t == null ? new byte[0] : t.getBytes(StandardCharsets.UTF_8);
    sha.update(number.clear().putLong(t == null ? -1 : b.length).array());
    sha.update(b);
  }

  private Partition() {}
}
