package io.weir.sharding.partition;

import io.weir.sharding.partition.Partition.Consumer;
import io.weir.sharding.partition.Partition.Cut;
import io.weir.sharding.partition.Partition.FrameApplied;
import io.weir.sharding.partition.Partition.OutboxEntry;
import io.weir.sharding.partition.Partition.PartProgress;
import io.weir.sharding.partition.Partition.RowRule;
import io.weir.sharding.partition.Partition.RuleChange;
import io.weir.sharding.partition.PartitionProtocol.AlreadyApplied;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Gap;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.Loaded;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.QuotaExceeded;
import io.weir.sharding.partition.PartitionProtocol.Rejected;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.Document;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * Checks a group commit's writes in order against the partition's state plus what the plan accepted
 * before them, building the frames to persist (ADR 0007). Nothing here touches the state.
 *
 * <p>A document's current body (the before image of an outbox entry, the value an unchanged TOAST
 * field keeps, the row-visibility value a write may change) is not in the state: {@link Bodies}
 * finds it among the unapplied changes, the cache or the rows fetched for this batch. When it does
 * not, the plan goes on with a stand-in and records the document in {@link #missing()}: the
 * partition then fetches all of them from the documents table in one query and plans the batch
 * again (ADR 0032). A plan with missing documents is never persisted.
 *
 * <p>A plan is one journal event, bounded by {@link PartitionSettings#partEntries()} and {@link
 * PartitionSettings#partBytes()} (ADR 0033): a write that does not fit after others waits for the
 * next event ({@link Stop#FULL}); a CDC frame that does not fit alone is written in parts, each
 * event taking as much of it as fits and recording where the next part starts ({@link Stop#PART}).
 * Any other write that does not fit alone is refused.
 */
final class WritePlan {
  /** Why planning stopped before a write was answered: the event is full. */
  enum Stop {
    /** Nothing of the write was taken: it goes first in the next event. */
    FULL,
    /** A part of the frame was taken; the next event goes on with it. */
    PART
  }

  /**
   * A frame written in parts by this run of the partition: its first entry's sequence and the
   * revisions of the mutations done so far (0 for a truncate).
   */
  record Split(ApplyFrame frame, long firstSequence, List<Long> revisions) {}

  /** Where the plan finds a document's current version. */
  interface Bodies {
    /**
     * The document as of its index entry {@code e}, or null when its body (or a tombstone's
     * row-visibility value) is not at hand.
     *
     * @param key the document's {@link Partition#key}
     */
    Document find(String collection, String id, String key, DocumentIndex.Entry e);

    /**
     * The receipt under {@code key} from the receipts table (empty: it has none), or null when it
     * was not read yet.
     */
    Optional<Receipt> receipt(String key);
  }

  static final Document REMOVED = new Document("", "", 0, null, true);

  final PartitionState state;
  final PartitionSettings settings;
  final long now;
  private final Bodies bodies;
  final List<FrameApplied> accepted = new ArrayList<>();
  final HashMap<String, Document> docs = new HashMap<>();
  private final HashMap<String, Long> watermarks = new HashMap<>();
  private final HashMap<String, Optional<PartProgress>> partials = new HashMap<>();
  private final HashMap<String, Cut> cuts = new HashMap<>();
  private final HashMap<String, Receipt> receipts = new HashMap<>();
  private final LinkedHashSet<String> missingReceipts = new LinkedHashSet<>();
  final HashMap<String, Consumer> consumers = new HashMap<>();
  private final HashMap<String, RowRule> rules = new HashMap<>();
  private final LinkedHashSet<DocumentTable.Key> missing = new LinkedHashSet<>();
  long next;
  long bytes;

  /** Entries and bytes the accepted frames put in this event. */
  private long eventEntries;

  private long eventBytes;

  /** The frame this run was writing in parts when the plan began, or null. */
  private final Split prior;

  /** The frame this plan left in parts, or null. */
  private Split split;

  WritePlan(
      PartitionState state, PartitionSettings settings, long now, Bodies bodies, Split prior) {
    this.state = state;
    this.settings = settings;
    this.now = now;
    this.bodies = bodies;
    this.prior = prior;
    this.next = state.nextSequence;
    this.bytes = state.outboxBytes;
  }

  WritePlan(PartitionState state, PartitionSettings settings, long now, Bodies bodies) {
    this(state, settings, now, bodies, null);
  }

  /** The frame this plan left in parts (to go on with in the next event), or null. */
  Split split() {
    return split;
  }

  /** Whether the event has room for {@code entries} more entries of {@code bytes}. */
  boolean fits(long entries, long bytes) {
    return eventEntries + entries <= settings.partEntries()
        && eventBytes + bytes <= settings.partBytes();
  }

  /** Whether {@code entries} of {@code bytes} are more than one event holds at all. */
  boolean tooLarge(long entries, long bytes) {
    return entries > settings.partEntries() || bytes > settings.partBytes();
  }

  /**
   * Whether the event has room for {@code entries} more entries of {@code bytes} by the journal
   * row's bound alone: a projection batch's entries are bounded by the quota and its progress
   * reserve ({@link Quota}) instead of a part's bound.
   */
  boolean fitsRow(long entries, long bytes) {
    return eventEntries + entries <= settings.maxFrameEntries()
        && eventBytes + bytes <= settings.maxFrameBytes();
  }

  /** Accepts a frame into the event. */
  void accept(FrameApplied f) {
    long bytes = 0;
    for (OutboxEntry e : f.entries()) {
      bytes += e.bytes();
    }
    accept(f, bytes);
  }

  /**
   * Accepts a frame whose entries take {@code entryBytes} (as {@link OutboxEntry#bytes()} counts
   * them, summed) into the event.
   */
  void accept(FrameApplied f, long entryBytes) {
    assert entryBytes == f.entries().stream().mapToLong(OutboxEntry::bytes).sum()
        : "a frame's entry bytes were counted wrong";
    accepted.add(f);
    eventEntries += f.entries().size();
    eventBytes += entryBytes;
    for (Document d : f.loaded()) {
      eventBytes += PartitionState.loadedBytes(d);
    }
  }

  /** Documents whose current version the plan needed and did not find: fetch, then plan again. */
  List<DocumentTable.Key> missing() {
    return List.copyOf(missing);
  }

  /** Receipt keys the plan needed from the receipts table: fetch, then plan again. */
  List<String> missingReceipts() {
    return List.copyOf(missingReceipts);
  }

  /**
   * The receipt a retry under {@code key} is answered with, or null: the plan's own, the heap's, or
   * (when some left the heap before they expired) the receipts table's; never an expired one.
   */
  private Receipt receipt(String key) {
    Receipt r = receipts.containsKey(key) ? receipts.get(key) : state.receipts.get(key);
    if (r == null && state.receiptsSpilledSince(now)) {
      Optional<Receipt> stored = bodies.receipt(key);
      if (stored == null) {
        missingReceipts.add(key); // the plan goes on as if there were none; it is planned again
      } else {
        r = stored.orElse(null);
      }
    }
    return r == null || r.atMillis() < now - state.receiptPolicy.ttlMillis() ? null : r;
  }

  /** The document as the plan sees it now (null: absent), finding its body if it exists. */
  Document current(String collection, String id) {
    return current(collection, id, Partition.key(collection, id));
  }

  /** {@link #current(String, String)} with the document's {@link Partition#key} built already. */
  Document current(String collection, String id, String k) {
    if (docs.containsKey(k)) {
      Document d = docs.get(k);
      return d == REMOVED ? null : d;
    }
    DocumentIndex.Entry e = state.index.get(collection, id);
    return e == null ? null : found(collection, id, k, e);
  }

  /**
   * The document of index entry {@code e} (the plan has not changed it): its body found in memory
   * or fetched, else a stand-in with the right revision while it is missing.
   */
  Document found(String collection, String id, String k, DocumentIndex.Entry e) {
    Document d = bodies.find(collection, id, k, e);
    if (d == null) {
      missing.add(new DocumentTable.Key(collection, id));
      // A stand-in with the right revision: the plan goes on to find every missing document.
      return new Document(collection, id, e.revision(), e.deleted() ? null : "{}", e.deleted());
    }
    return d;
  }

  long watermark(String source) {
    return watermarks.containsKey(source) ? watermarks.get(source) : state.watermark(source);
  }

  String ruleField(String collection) {
    return rules.containsKey(collection)
        ? rules.get(collection).field()
        : state.ruleField(collection);
  }

  long ruleVersion(String collection) {
    return rules.containsKey(collection)
        ? rules.get(collection).version()
        : state.ruleVersion(collection);
  }

  /**
   * Whether writing {@code after} over {@code current} changes the document's ACL: a live document
   * whose ACL value differs, or a tombstone re-created with another ACL than the deleted row's (a
   * principal who saw the row must not miss its deletion, which the new ACL would hide). Creating a
   * document is not an ACL change.
   */
  boolean aclChanges(String collection, Document current, String after) {
    String field = ruleField(collection);
    if (field == null || current == null) {
      return false;
    }
    if (current.deleted()) {
      return current.acl() != null && !current.acl().equals(JsonFields.aclOf(after, field));
    }
    return !JsonFields.aclOf(current.body(), field).equals(JsonFields.aclOf(after, field));
  }

  PartitionProtocol.RowRuleReply setRule(PartitionProtocol.SetRowRule r) {
    if (r.version() <= ruleVersion(r.collection())) {
      return new PartitionProtocol.RowRuleReply(
          ruleVersion(r.collection()), state.rowEpoch(r.collection()), false);
    }
    long epoch = state.rowEpoch(r.collection()) + 1;
    for (FrameApplied f : accepted) {
      epoch +=
          f.fenced().stream().filter(r.collection()::equals).count()
              + (f.rule() != null && f.rule().collection().equals(r.collection()) ? 1 : 0);
    }
    rules.put(r.collection(), new RowRule(r.field(), r.version()));
    accept(
        new FrameApplied(
            null,
            List.of(),
            Optional.empty(),
            List.of(),
            List.of(),
            null,
            List.of(),
            new RuleChange(r.collection(), r.field(), r.version())));
    return new PartitionProtocol.RowRuleReply(r.version(), epoch, true);
  }

  Optional<PartProgress> partial(String source) {
    return partials.containsKey(source)
        ? partials.get(source)
        : Optional.ofNullable(state.partials.get(source));
  }

  /**
   * Plans a frame: its reply, or {@link Stop#FULL} when it goes first in the next event, or {@link
   * Stop#PART} when the event took a part of it.
   */
  Object frame(ApplyFrame f) {
    boolean cdc = f.source().isPresent();
    if (!cdc) {
      if (f.commandId() == null || f.commandId().isEmpty()) {
        return new Rejected("an API frame needs a command id");
      }
      String key = PartitionProtocol.receiptKey(f.commandId());
      Receipt receipt = receipt(key);
      if (receipt != null && !receipt.commandId().equals(f.commandId())) {
        return new PartitionProtocol.KeyReused();
      }
      if (receipt != null) {
        return receipt.replay();
      }
    }
    if (f.mutations().isEmpty() && !cdc) {
      return new Rejected("a frame needs at least one mutation");
    }
    Cut start = null;
    if (cdc) {
      SourcePosition s = f.source().get();
      long mark = watermark(s.source());
      Optional<PartProgress> partial = partial(s.source());
      if (Long.compareUnsigned(s.commitLsn(), mark) <= 0) {
        return new AlreadyApplied(s, mark);
      }
      if (partial.isPresent()
          && partial.get().commitLsn() == s.commitLsn()
          && s.part() <= partial.get().done()) {
        return new AlreadyApplied(s, mark);
      }
      Cut cut = cuts.containsKey(s.source()) ? cuts.get(s.source()) : state.cuts.get(s.source());
      boolean resumed =
          cut != null
              && partial.isPresent()
              && partial.get().commitLsn() == s.commitLsn()
              && partial.get().done() == s.part() - 1;
      boolean inOrder =
          resumed
              || (s.part() == 1
                  ? Long.compareUnsigned(mark, s.previousLsn()) >= 0
                  : partial.isPresent()
                      && partial.get().commitLsn() == s.commitLsn()
                      && partial.get().done() == s.part() - 1);
      if (!inOrder) {
        return new Gap(s, mark);
      }
      start = resumed ? cut : null;
    }
    long commitLsn = f.source().map(SourcePosition::commitLsn).orElse(0L);
    Object evaluated = evaluate(f.mutations(), commitLsn, true, start, cdc);
    if (evaluated instanceof FrameReply refused) {
      return refused;
    }
    MutationCheck.Evaluation ev = (MutationCheck.Evaluation) evaluated;
    // A frame is written in parts only when it does not fit an event of its own: one that does
    // not fit beside others goes first in the next event.
    if (!fits(ev.entries().size(), ev.bytes()) || ev.cut() != null) {
      if (!accepted.isEmpty()) {
        return Stop.FULL;
      }
      if (!cdc && tooLarge(ev.entries().size(), ev.bytes())) {
        return new Rejected(
            "the frame's "
                + ev.entries().size()
                + " outbox entries are more than one journal row holds"
                + " (weir.partitions.frame.*, or the whole outbox quota); send fewer mutations");
      }
    }
    FrameReply quota = quota(ev.seqAfter(), ev.bytes());
    if (quota != null) {
      return quota;
    }
    long first = next;
    take(ev.seen(), ev.seqAfter(), ev.bytes());
    // The revisions of a frame written in parts: those of its earlier parts (0 for parts written
    // before the partition last started, which it no longer knows) and this part's.
    List<Long> revisions = new ArrayList<>();
    if (start != null) {
      if (prior != null && prior.frame() == f && prior.revisions().size() == start.mutations()) {
        revisions.addAll(prior.revisions());
        first = prior.firstSequence();
      } else {
        for (int i = 0; i < start.mutations(); i++) {
          revisions.add(0L);
        }
      }
    }
    revisions.addAll(ev.revisions());
    if (ev.cut() != null) {
      SourcePosition s = f.source().get();
      partials.put(s.source(), Optional.of(new PartProgress(s.commitLsn(), s.part() - 1)));
      cuts.put(s.source(), ev.cut());
      accept(
          new FrameApplied(
              null,
              ev.entries(),
              f.source(),
              List.of(),
              List.of(),
              null,
              List.copyOf(ev.fenced()),
              null,
              ev.cut()),
          ev.bytes());
      split = new Split(f, first, List.copyOf(revisions));
      return Stop.PART;
    }
    f.source()
        .ifPresent(
            s -> {
              cuts.put(s.source(), null);
              if (s.last()) {
                watermarks.put(s.source(), s.commitLsn());
                partials.put(s.source(), Optional.empty());
              } else {
                partials.put(s.source(), Optional.of(new PartProgress(s.commitLsn(), s.part())));
              }
            });
    String commandId = cdc ? null : f.commandId();
    Applied applied = new Applied(f.commandId(), first, List.copyOf(revisions), false);
    if (commandId != null && PartitionProtocol.keepsReceipt(commandId)) {
      receipts.put(
          PartitionProtocol.receiptKey(commandId), new Receipt(commandId, first, revisions, now));
    }
    accept(
        new FrameApplied(
            commandId,
            ev.entries(),
            f.source(),
            List.of(),
            List.of(),
            null,
            List.copyOf(ev.fenced()),
            null),
        ev.bytes());
    return applied;
  }

  /**
   * Checks {@code mutations} in order against the state plus this plan ({@link MutationCheck}): an
   * evaluation of the entries they would write, or the conflict or rejection refusing them. Changes
   * nothing.
   */
  Object evaluate(
      List<Mutation> mutations,
      long commitLsn,
      boolean allowTruncate,
      Cut start,
      boolean splittable) {
    return new MutationCheck(this).evaluate(mutations, commitLsn, allowTruncate, start, splittable);
  }

  Quota.Admission admit(long seqAfter, long frameBytes, boolean reserveAllowed) {
    return Quota.admit(
        settings,
        next - state.outboxFirst,
        seqAfter - state.outboxFirst,
        bytes + frameBytes,
        reserveAllowed);
  }

  private FrameReply quota(long seqAfter, long frameBytes) {
    if (admit(seqAfter, frameBytes, false) == Quota.Admission.REFUSED) {
      return new QuotaExceeded(
          next - state.outboxFirst, bytes, settings.maxOutboxEntries(), settings.maxOutboxBytes());
    }
    return null;
  }

  /** Accepts the changes of an evaluation (a frame's or a consumer batch's effects). */
  void take(Map<String, Document> seen, long seqAfter, long addedBytes) {
    docs.putAll(seen);
    next = seqAfter;
    bytes += addedBytes;
  }

  /** Plans rows of a snapshot: the reply, or {@link Stop#FULL} (see {@link #frame}). */
  Object load(LoadRows l) {
    List<Document> loaded = new ArrayList<>();
    List<OutboxEntry> entries = new ArrayList<>();
    HashMap<String, Document> seen = new HashMap<>();
    for (String collection : l.reset()) {
      state.index.forEach(collection, (id, e) -> seen.put(Partition.key(collection, id), REMOVED));
      for (Map.Entry<String, Document> e : docs.entrySet()) {
        if (e.getValue() != REMOVED && e.getValue().collection().equals(collection)) {
          seen.put(e.getKey(), REMOVED);
        }
      }
    }
    long seq = next;
    long frameBytes = 0;
    int changed = 0;
    Set<String> fenced = new TreeSet<>(l.reset()); // re-seeded: any row may have changed
    if (!l.recordChanges()) {
      // Initial-snapshot rows change documents without outbox entries: no cursor could follow.
      l.rows().forEach(r -> fenced.add(r.collection()));
    }
    for (Upsert row : l.rows()) {
      if (row.collection().isEmpty() || row.id().isEmpty()) {
        return new Rejected("a snapshot row has no collection or id");
      }
      String k = Partition.key(row.collection(), row.id());
      Document cur = seen.containsKey(k) ? seen.get(k) : current(row.collection(), row.id());
      if (cur == REMOVED) {
        cur = null;
      }
      if (cur != null && !cur.deleted() && cur.body().equals(row.body())) {
        continue;
      }
      changed++;
      if (aclChanges(row.collection(), cur, row.body())) {
        fenced.add(row.collection());
      }
      long revision = cur == null ? 0 : cur.revision();
      Document d = new Document(row.collection(), row.id(), revision + 1, row.body(), false);
      seen.put(k, d);
      if (l.recordChanges()) {
        String before = cur == null || cur.deleted() ? null : cur.body();
        OutboxEntry e =
            new OutboxEntry(
                seq++,
                entries.size(),
                row.collection(),
                row.id(),
                "snapshot",
                revision + 1,
                before,
                row.body(),
                now,
                0);
        entries.add(e);
        frameBytes += e.bytes();
      } else {
        loaded.add(d);
      }
    }
    long rowBytes = frameBytes;
    for (Document d : loaded) {
      rowBytes += PartitionState.loadedBytes(d);
    }
    if (!fits(entries.size(), rowBytes)) {
      if (!accepted.isEmpty()) {
        return Stop.FULL;
      }
      if (tooLarge(entries.size(), rowBytes)) {
        return new Rejected(
            "the rows are more than one journal row holds (weir.partitions.frame.*); send fewer");
      }
    }
    FrameReply quota = quota(seq, frameBytes);
    if (quota != null) {
      return quota;
    }
    if (changed == 0 && l.reset().isEmpty()) {
      return new Loaded(0);
    }
    take(seen, seq, frameBytes);
    accept(
        new FrameApplied(
            null, entries, Optional.empty(), l.reset(), loaded, null, List.copyOf(fenced), null));
    return new Loaded(changed);
  }
}
