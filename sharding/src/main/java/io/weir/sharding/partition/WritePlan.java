package io.weir.sharding.partition;

import io.weir.sharding.partition.Partition.Consumer;
import io.weir.sharding.partition.Partition.FrameApplied;
import io.weir.sharding.partition.Partition.OutboxEntry;
import io.weir.sharding.partition.Partition.PartProgress;
import io.weir.sharding.partition.Partition.RowRule;
import io.weir.sharding.partition.Partition.RuleChange;
import io.weir.sharding.partition.PartitionProtocol.AlreadyApplied;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Conflict;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.Document;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Gap;
import io.weir.sharding.partition.PartitionProtocol.LoadRows;
import io.weir.sharding.partition.PartitionProtocol.Loaded;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.QuotaExceeded;
import io.weir.sharding.partition.PartitionProtocol.Rejected;
import io.weir.sharding.partition.PartitionProtocol.SourcePosition;
import io.weir.sharding.partition.PartitionProtocol.Truncate;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
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
 */
final class WritePlan {
  /** Where the plan finds a document's current version. */
  interface Bodies {
    /**
     * The document as of its index entry {@code e}, or null when its body (or a tombstone's
     * row-visibility value) is not at hand.
     */
    Document find(String collection, String id, DocumentIndex.Entry e);
  }

  private static final Document REMOVED = new Document("", "", 0, null, true);

  final PartitionState state;
  final PartitionSettings settings;
  final long now;
  private final Bodies bodies;
  final List<FrameApplied> accepted = new ArrayList<>();
  private final HashMap<String, Document> docs = new HashMap<>();
  private final HashMap<String, Long> watermarks = new HashMap<>();
  private final HashMap<String, Optional<PartProgress>> partials = new HashMap<>();
  private final HashMap<String, Applied> receipts = new HashMap<>();
  final HashMap<String, Consumer> consumers = new HashMap<>();
  private final HashMap<String, RowRule> rules = new HashMap<>();
  private final LinkedHashSet<DocumentTable.Key> missing = new LinkedHashSet<>();
  long next;
  long bytes;

  WritePlan(PartitionState state, PartitionSettings settings, long now, Bodies bodies) {
    this.state = state;
    this.settings = settings;
    this.now = now;
    this.bodies = bodies;
    this.next = state.nextSequence;
    this.bytes = state.outboxBytes;
  }

  /** Documents whose current version the plan needed and did not find: fetch, then plan again. */
  List<DocumentTable.Key> missing() {
    return List.copyOf(missing);
  }

  /** The document as the plan sees it now (null: absent), finding its body if it exists. */
  Document current(String collection, String id) {
    String k = Partition.key(collection, id);
    if (docs.containsKey(k)) {
      Document d = docs.get(k);
      return d == REMOVED ? null : d;
    }
    DocumentIndex.Entry e = state.index.get(collection, id);
    if (e == null) {
      return null;
    }
    Document d = bodies.find(collection, id, e);
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
    accepted.add(
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

  /** Live documents of a collection as the plan sees them, in code-point order of their ids. */
  List<Document> live(String collection) {
    TreeSet<String> ids = new TreeSet<>(Ids.ORDER);
    ids.addAll(state.index.liveIds(collection));
    for (Document d : docs.values()) {
      if (d != REMOVED && d.collection().equals(collection)) {
        ids.add(d.id());
      }
    }
    List<Document> out = new ArrayList<>();
    for (String id : ids) {
      Document d = current(collection, id);
      if (d != null && !d.deleted()) {
        out.add(d);
      }
    }
    return out;
  }

  FrameReply frame(ApplyFrame f) {
    boolean cdc = f.source().isPresent();
    if (!cdc) {
      if (f.commandId() == null || f.commandId().isEmpty()) {
        return new Rejected("an API frame needs a command id");
      }
      String key = PartitionProtocol.receiptKey(f.commandId());
      Applied receipt = receipts.containsKey(key) ? receipts.get(key) : state.receipts.get(key);
      if (receipt != null && !receipt.commandId().equals(f.commandId())) {
        return new PartitionProtocol.KeyReused();
      }
      if (receipt != null) {
        return new Applied(receipt.commandId(), receipt.firstSequence(), receipt.revisions(), true);
      }
    }
    if (f.mutations().isEmpty() && !cdc) {
      return new Rejected("a frame needs at least one mutation");
    }
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
      boolean inOrder =
          s.part() == 1
              ? Long.compareUnsigned(mark, s.previousLsn()) >= 0
              : partial.isPresent()
                  && partial.get().commitLsn() == s.commitLsn()
                  && partial.get().done() == s.part() - 1;
      if (!inOrder) {
        return new Gap(s, mark);
      }
    }
    long commitLsn = f.source().map(SourcePosition::commitLsn).orElse(0L);
    Object evaluated = evaluate(f.mutations(), commitLsn, true);
    if (evaluated instanceof FrameReply refused) {
      return refused;
    }
    Evaluation ev = (Evaluation) evaluated;
    FrameReply quota = quota(ev.seqAfter(), ev.bytes());
    if (quota != null) {
      return quota;
    }
    docs.putAll(ev.seen());
    long first = next;
    next = ev.seqAfter();
    bytes += ev.bytes();
    f.source()
        .ifPresent(
            s -> {
              if (s.last()) {
                watermarks.put(s.source(), s.commitLsn());
                partials.put(s.source(), Optional.empty());
              } else {
                partials.put(s.source(), Optional.of(new PartProgress(s.commitLsn(), s.part())));
              }
            });
    String commandId = cdc ? null : f.commandId();
    Applied applied = new Applied(f.commandId(), first, List.copyOf(ev.revisions()), false);
    if (commandId != null && PartitionProtocol.keepsReceipt(commandId)) {
      receipts.put(PartitionProtocol.receiptKey(commandId), applied);
    }
    accepted.add(
        new FrameApplied(
            commandId,
            ev.entries(),
            f.source(),
            List.of(),
            List.of(),
            null,
            List.copyOf(ev.fenced()),
            null));
    return applied;
  }

  /** What a list of mutations writes, checked against the plan. */
  record Evaluation(
      List<OutboxEntry> entries,
      List<Long> revisions,
      long bytes,
      HashMap<String, Document> seen,
      long seqAfter,
      Set<String> fenced) {}

  /**
   * Checks {@code mutations} in order (each sees the ones before it) against the state plus this
   * plan: an {@link Evaluation} of the entries they would write, or the {@link Conflict} or {@link
   * Rejected} refusing them. Changes nothing.
   *
   * @param allowTruncate whether {@link Truncate} may appear (not in projection effects)
   */
  Object evaluate(List<Mutation> mutations, long commitLsn, boolean allowTruncate) {
    HashMap<String, Document> seen = new HashMap<>();
    List<OutboxEntry> entries = new ArrayList<>();
    List<Long> revisions = new ArrayList<>();
    Set<String> fenced = new TreeSet<>();
    long seq = next;
    long frameBytes = 0;
    for (int i = 0; i < mutations.size(); i++) {
      Mutation m = mutations.get(i);
      if (m instanceof Truncate t) {
        if (!allowTruncate) {
          return new Rejected("mutation " + i + " is a truncate, which is not allowed here");
        }
        // Every live document, those this frame created before the truncate included.
        TreeMap<String, Document> victims = new TreeMap<>(Ids.ORDER);
        for (Document d : live(t.collection())) {
          victims.put(d.id(), d);
        }
        for (Document d : seen.values()) {
          if (d.collection().equals(t.collection())) {
            victims.put(d.id(), d);
          }
        }
        for (Document d : victims.values()) {
          String k = Partition.key(d.collection(), d.id());
          Document cur = seen.containsKey(k) ? seen.get(k) : d;
          if (cur.deleted()) {
            continue;
          }
          OutboxEntry e =
              new OutboxEntry(
                  seq++,
                  entries.size(),
                  d.collection(),
                  d.id(),
                  "delete",
                  cur.revision() + 1,
                  cur.body(),
                  null,
                  now,
                  commitLsn);
          entries.add(e);
          frameBytes += e.bytes();
          seen.put(
              k,
              new Document(
                  d.collection(),
                  d.id(),
                  cur.revision() + 1,
                  null,
                  true,
                  JsonFields.aclOf(cur.body(), ruleField(d.collection()))));
        }
        revisions.add(0L);
        continue;
      }
      String collection = m.collection();
      String id = m instanceof Upsert u ? u.id() : ((Delete) m).id();
      Optional<Long> expected =
          m instanceof Upsert u ? u.expectedRevision() : ((Delete) m).expectedRevision();
      if (collection.isEmpty() || id.isEmpty()) {
        return new Rejected("mutation " + i + " has no collection or id");
      }
      String k = Partition.key(collection, id);
      Document cur = seen.containsKey(k) ? seen.get(k) : current(collection, id);
      long revision = cur == null ? 0 : cur.revision();
      if (expected.isPresent() && expected.get() != revision) {
        return new Conflict(i, revision);
      }
      String before = cur == null || cur.deleted() ? null : cur.body();
      OutboxEntry e;
      if (m instanceof Upsert u) {
        String body = u.body();
        if (!u.keep().isEmpty()) {
          if (before == null) {
            return new Rejected(
                "mutation "
                    + i
                    + " of collection "
                    + collection
                    + " keeps unchanged (TOAST) fields of a document this partition does not"
                    + " have; seed the collection with an initial snapshot, or use REPLICA"
                    + " IDENTITY FULL on its table");
          }
          body = JsonFields.merge(before, body, u.keep());
          if (body == null) {
            return new Rejected(
                "mutation " + i + " keeps fields of a document that is not a JSON object");
          }
        }
        e =
            new OutboxEntry(
                seq++,
                entries.size(),
                collection,
                id,
                "upsert",
                revision + 1,
                before,
                body,
                now,
                commitLsn);
        seen.put(k, new Document(collection, id, revision + 1, body, false));
        if (aclChanges(collection, cur, body)) {
          fenced.add(collection);
        }
      } else {
        e =
            new OutboxEntry(
                seq++,
                entries.size(),
                collection,
                id,
                "delete",
                revision + 1,
                before,
                null,
                now,
                commitLsn);
        seen.put(
            k,
            new Document(
                collection,
                id,
                revision + 1,
                null,
                true,
                JsonFields.aclOf(before, ruleField(collection))));
      }
      entries.add(e);
      frameBytes += e.bytes();
      revisions.add(revision + 1);
    }
    return new Evaluation(entries, revisions, frameBytes, seen, seq, fenced);
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

  FrameReply load(LoadRows l) {
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
    FrameReply quota = quota(seq, frameBytes);
    if (quota != null) {
      return quota;
    }
    if (changed == 0 && l.reset().isEmpty()) {
      return new Loaded(0);
    }
    take(seen, seq, frameBytes);
    accepted.add(
        new FrameApplied(
            null, entries, Optional.empty(), l.reset(), loaded, null, List.copyOf(fenced), null));
    return new Loaded(changed);
  }
}
