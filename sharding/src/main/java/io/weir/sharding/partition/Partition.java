package io.weir.sharding.partition;

import io.weir.protocol.CborSerializable;
import io.weir.sharding.partition.PartitionProtocol.AlreadyApplied;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Command;
import io.weir.sharding.partition.PartitionProtocol.Conflict;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.Document;
import io.weir.sharding.partition.PartitionProtocol.DocumentReply;
import io.weir.sharding.partition.PartitionProtocol.GetDocument;
import io.weir.sharding.partition.PartitionProtocol.GetStatus;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.PartitionStatus;
import io.weir.sharding.partition.PartitionProtocol.Rejected;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.SnapshotAdapter;
import org.apache.pekko.persistence.typed.javadsl.CommandHandler;
import org.apache.pekko.persistence.typed.javadsl.Effect;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehavior;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;

/**
 * One atomic partition: an event-sourced entity holding its documents, the index of its outbox
 * (the mutation stream; entry payloads stay in the journal), idempotency receipts and per-slot
 * source watermarks.
 *
 * <p>A frame ({@link ApplyFrame}) is checked whole before anything is written: a malformed frame,
 * or one whose expected revisions do not match (each mutation sees the ones before it in the same
 * frame), changes nothing. An accepted frame is one journal event ({@link FrameApplied}) holding
 * every outbox entry, and with them the receipt and the watermark move, so a crash leaves either
 * all of it or none. A retried command id returns the first receipt; a CDC frame at or below the
 * watermark of its slot is acknowledged without effect.
 *
 * <p>Snapshots every {@value #SNAPSHOT_EVERY} events keep recovery bounded. Journal events are never
 * deleted on snapshot: they are the outbox's payloads (purging is explicit, a later step).
 */
public final class Partition extends EventSourcedBehavior<Command, Partition.FrameApplied, Partition.State> {
  public static final EntityTypeKey<Command> TYPE_KEY = EntityTypeKey.create(Command.class, "weir-partition");
  static final int SNAPSHOT_EVERY = 1000;
  /** Receipts kept for idempotent retries; the oldest are forgotten first. */
  static final int MAX_RECEIPTS = 10_000;

  private final int partition;

  /** The persistence id of partition {@code n}: {@code weir-partition|n}. */
  public static PersistenceId persistenceId(int n) {
    return PersistenceId.of(TYPE_KEY.name(), Integer.toString(n));
  }

  public static Partition create(int partition) {
    return new Partition(partition);
  }

  private Partition(int partition) {
    super(persistenceId(partition));
    this.partition = partition;
  }

  /**
   * One outbox entry.
   *
   * @param sequence the partition's monotonic outbox sequence
   * @param ordinal position inside its frame
   * @param kind {@code upsert} or {@code delete}
   * @param before the document body before (null when absent or a tombstone); never logged
   * @param after the body after (null for a delete); never logged
   */
  public record OutboxEntry(
      long sequence, int ordinal, String collection, String id, String kind, long revision, String before, String after,
      long evaluatedAtMillis) implements CborSerializable {
    @Override
    public String toString() {
      return "OutboxEntry[" + sequence + ", " + collection + ", " + kind + ", revision=" + revision + "]";
    }
  }

  /** The journal event of one accepted frame. */
  public record FrameApplied(String commandId, List<OutboxEntry> entries, Optional<SourcePosition> source)
      implements CborSerializable {
    @Override
    public String toString() {
      return "FrameApplied[entries=" + entries.size() + ", source=" + source + "]";
    }
  }

  /**
   * The entity's state (also its snapshot). Mutated in place by the event handler only; snapshots
   * get a copy (see {@link #snapshotAdapter()}).
   *
   * @param documents by {@code collection + '\0' + id}
   * @param events journal events so far: the sequence number of the last one
   * @param frames outbox sequence of each frame's first entry -> that frame's journal sequence number
   */
  public record State(
      HashMap<String, Document> documents,
      long nextSequence,
      long events,
      LinkedHashMap<String, Applied> receipts,
      HashMap<String, Long> watermarks,
      TreeMap<Long, Long> frames) implements CborSerializable {

    static State empty() {
      return new State(new HashMap<>(), 1, 0, new LinkedHashMap<>(), new HashMap<>(), new TreeMap<>());
    }

    /** A copy sharing no mutable collection with this state (documents and receipts are immutable). */
    State copy() {
      return new State(new HashMap<>(documents), nextSequence, events, new LinkedHashMap<>(receipts),
          new HashMap<>(watermarks), new TreeMap<>(frames));
    }

    Optional<Document> document(String collection, String id) {
      return Optional.ofNullable(documents.get(key(collection, id)));
    }

    State apply(FrameApplied e) {
      List<Long> revisions = new ArrayList<>();
      for (OutboxEntry x : e.entries()) {
        boolean deleted = x.kind().equals("delete");
        documents.put(key(x.collection(), x.id()), new Document(x.collection(), x.id(), x.revision(), x.after(), deleted));
        revisions.add(x.revision());
      }
      long first = e.entries().get(0).sequence();
      long events = this.events + 1;
      frames.put(first, events);
      receipts.put(e.commandId(), new Applied(e.commandId(), first, revisions, false));
      while (receipts.size() > MAX_RECEIPTS) {
        receipts.remove(receipts.keySet().iterator().next());
      }
      e.source().ifPresent(s -> watermarks.merge(s.slot(), s.commitLsn(), Math::max));
      return new State(documents, first + e.entries().size(), events, receipts, watermarks, frames);
    }
  }

  static String key(String collection, String id) {
    return collection + '\0' + id;
  }

  @Override
  public State emptyState() {
    return State.empty();
  }

  /**
   * The state's maps are mutated in place by the event handler, while the snapshot store serializes
   * a snapshot asynchronously: it gets a copy, taken on the entity's thread when the snapshot is
   * triggered (once per {@value #SNAPSHOT_EVERY} events).
   */
  @Override
  public SnapshotAdapter<State> snapshotAdapter() {
    return new SnapshotAdapter<>() {
      @Override
      public Object toJournal(State state) {
        return state.copy();
      }

      @Override
      public State fromJournal(Object from) {
        return (State) from;
      }
    };
  }

  @Override
  public RetentionCriteria retentionCriteria() {
    return RetentionCriteria.snapshotEvery(SNAPSHOT_EVERY, 2);
  }

  @Override
  public CommandHandler<Command, FrameApplied, State> commandHandler() {
    return newCommandHandlerBuilder()
        .forAnyState()
        .onCommand(ApplyFrame.class, this::onApplyFrame)
        .onCommand(GetDocument.class, (state, c) -> Effect().reply(c.replyTo(), new DocumentReply(state.document(c.collection(), c.id()))))
        .onCommand(GetStatus.class, (state, c) -> Effect().reply(c.replyTo(), new PartitionStatus(
            partition, state.documents().size(), state.frames().isEmpty() ? 1 : state.frames().firstKey(),
            state.nextSequence(), Map.copyOf(state.watermarks()))))
        .build();
  }

  private Effect<FrameApplied, State> onApplyFrame(State state, ApplyFrame frame) {
    if (frame.commandId() == null || frame.commandId().isEmpty() || frame.mutations().isEmpty()) {
      return Effect().reply(frame.replyTo(), new Rejected("a frame needs a command id and at least one mutation"));
    }
    Applied receipt = state.receipts().get(frame.commandId());
    if (receipt != null) {
      return Effect().reply(frame.replyTo(), new Applied(receipt.commandId(), receipt.firstSequence(), receipt.revisions(), true));
    }
    if (frame.source().isPresent()) {
      SourcePosition s = frame.source().get();
      Long mark = state.watermarks().get(s.slot());
      if (mark != null && Long.compareUnsigned(s.commitLsn(), mark) <= 0) {
        return Effect().reply(frame.replyTo(), new AlreadyApplied(s, mark));
      }
    }
    // Check the whole frame first; later mutations see the earlier ones.
    Map<String, Document> seen = new HashMap<>();
    List<OutboxEntry> entries = new ArrayList<>();
    long now = System.currentTimeMillis();
    for (int i = 0; i < frame.mutations().size(); i++) {
      Mutation m = frame.mutations().get(i);
      if (m.collection().isEmpty() || m.id().isEmpty()) {
        return Effect().reply(frame.replyTo(), new Rejected("mutation " + i + " has no collection or id"));
      }
      String k = key(m.collection(), m.id());
      Document current = seen.containsKey(k) ? seen.get(k) : state.documents().get(k);
      long revision = current == null ? 0 : current.revision();
      if (m.expectedRevision().isPresent() && m.expectedRevision().get() != revision) {
        return Effect().reply(frame.replyTo(), new Conflict(i, revision));
      }
      String before = current == null || current.deleted() ? null : current.body();
      Document next;
      if (m instanceof Upsert u) {
        next = new Document(u.collection(), u.id(), revision + 1, u.body(), false);
        entries.add(new OutboxEntry(state.nextSequence() + i, i, u.collection(), u.id(), "upsert", revision + 1, before, u.body(), now));
      } else {
        Delete d = (Delete) m;
        next = new Document(d.collection(), d.id(), revision + 1, null, true);
        entries.add(new OutboxEntry(state.nextSequence() + i, i, d.collection(), d.id(), "delete", revision + 1, before, null, now));
      }
      seen.put(k, next);
    }
    FrameApplied event = new FrameApplied(frame.commandId(), entries, frame.source());
    return Effect().persist(event).thenReply(frame.replyTo(), s -> s.receipts().get(frame.commandId()));
  }

  @Override
  public EventHandler<State, FrameApplied> eventHandler() {
    return newEventHandlerBuilder().forAnyState().onEvent(FrameApplied.class, State::apply).build();
  }
}
