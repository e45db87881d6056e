package io.weir.sharding.partition;

import io.weir.protocol.Utf8;
import io.weir.sharding.partition.Partition.Cut;
import io.weir.sharding.partition.Partition.OutboxEntry;
import io.weir.sharding.partition.PartitionProtocol.Conflict;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.Rejected;
import io.weir.sharding.partition.PartitionProtocol.Truncate;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.Document;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * Checks a list of mutations (a frame's, or a consumer batch's effects) in order against the
 * partition's state plus what a {@link WritePlan} already accepted: each sees the ones before it.
 * Expected revisions, TOAST merges and truncates are resolved here, and the entries are cut where
 * the event is full when the caller allows it. Changes nothing: the plan takes an evaluation it
 * accepts ({@link WritePlan#take}).
 */
final class MutationCheck {
  private final WritePlan plan;

  MutationCheck(WritePlan plan) {
    this.plan = plan;
  }

  /**
   * What a list of mutations writes, checked against the plan.
   *
   * @param cut where the mutations stopped because the event was full (null: all of them)
   */
  record Evaluation(
      List<OutboxEntry> entries,
      List<Long> revisions,
      long bytes,
      HashMap<String, Document> seen,
      long seqAfter,
      Set<String> fenced,
      Cut cut) {}

  /** Bytes the body of a document takes in an outbox entry (0 for none), without reading it. */
  private long bodyBytes(String collection, String id, String k, HashMap<String, Document> seen) {
    Document d = seen.containsKey(k) ? seen.get(k) : plan.docs.get(k);
    if (d != null) {
      return d == WritePlan.REMOVED || d.deleted() ? 0 : Utf8.length(d.body());
    }
    DocumentIndex.Entry e = plan.state.index.get(collection, id);
    return e == null || e.deleted() ? 0 : e.bytes();
  }

  /**
   * Checks {@code mutations} in order (each sees the ones before it) against the state plus this
   * plan: an {@link Evaluation} of the entries they would write, or the {@link Conflict} or {@link
   * Rejected} refusing them. Changes nothing.
   *
   * @param allowTruncate whether {@link Truncate} may appear (not in projection effects)
   * @param start where an earlier part stopped (null: from the first mutation)
   * @param splittable whether the mutations may stop where the event is full, leaving a cut; at
   *     least one entry is taken into an event that has none
   */
  Object evaluate(
      List<Mutation> mutations,
      long commitLsn,
      boolean allowTruncate,
      Cut start,
      boolean splittable) {
    HashMap<String, Document> seen = new HashMap<>();
    List<OutboxEntry> entries = new ArrayList<>();
    List<Long> revisions = new ArrayList<>();
    Set<String> fenced = new TreeSet<>();
    long seq = plan.next;
    long frameBytes = 0;
    for (int i = start == null ? 0 : start.mutations(); i < mutations.size(); i++) {
      Mutation m = mutations.get(i);
      if (m instanceof Truncate t) {
        if (!allowTruncate) {
          return new Rejected("mutation " + i + " is a truncate, which is not allowed here");
        }
        String after = start != null && i == start.mutations() ? start.afterId() : null;
        // Every live document in id order (those this frame created before the truncate
        // included), after the ones an earlier part deleted.
        TreeSet<String> ids = new TreeSet<>(Ids.ORDER);
        ids.addAll(plan.state.index.liveIds(t.collection()));
        for (Document d : plan.docs.values()) {
          if (d != WritePlan.REMOVED && d.collection().equals(t.collection())) {
            ids.add(d.id());
          }
        }
        for (Document d : seen.values()) {
          if (d.collection().equals(t.collection())) {
            ids.add(d.id());
          }
        }
        for (String id : after == null ? ids : ids.tailSet(after, false)) {
          String k = Partition.key(t.collection(), id);
          long predicted = Partition.ENTRY_OVERHEAD + bodyBytes(t.collection(), id, k, seen);
          Document probe = seen.containsKey(k) ? seen.get(k) : null;
          if (probe == null) {
            DocumentIndex.Entry e =
                plan.docs.containsKey(k) ? null : plan.state.index.get(t.collection(), id);
            if (e != null && e.deleted()) {
              continue;
            }
          } else if (probe.deleted()) {
            continue;
          }
          if (splittable
              && !plan.fits(entries.size() + 1, frameBytes + predicted)
              && (!entries.isEmpty() || !plan.accepted.isEmpty())) {
            return new Evaluation(
                entries, revisions, frameBytes, seen, seq, fenced, new Cut(i, after));
          }
          Document cur = probe != null ? probe : plan.current(t.collection(), id, k);
          if (cur == null || cur.deleted()) {
            continue;
          }
          OutboxEntry e =
              new OutboxEntry(
                  seq++,
                  entries.size(),
                  t.collection(),
                  id,
                  "delete",
                  cur.revision() + 1,
                  cur.body(),
                  null,
                  plan.now,
                  commitLsn);
          entries.add(e);
          frameBytes += e.bytes();
          seen.put(
              k,
              new Document(
                  t.collection(),
                  id,
                  cur.revision() + 1,
                  null,
                  true,
                  JsonFields.aclOf(cur.body(), plan.ruleField(t.collection()))));
          after = id;
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
      // The document as these mutations, the plan's earlier frames or the index have it, each
      // looked up once.
      Document prior = seen.get(k);
      if (prior == null) {
        prior = plan.docs.get(k);
      }
      DocumentIndex.Entry indexed = prior == null ? plan.state.index.get(collection, id) : null;
      long bodyBytes = m instanceof Upsert u ? Utf8.length(u.body()) : 0;
      if (splittable) {
        long before =
            prior != null
                ? (prior == WritePlan.REMOVED || prior.deleted() ? 0 : Utf8.length(prior.body()))
                : (indexed == null || indexed.deleted() ? 0 : indexed.bytes());
        long predicted =
            Partition.ENTRY_OVERHEAD
                + before
                + (m instanceof Upsert u ? bodyBytes + (u.keep().isEmpty() ? 0 : before) : 0);
        if (!plan.fits(entries.size() + 1, frameBytes + predicted)
            && (!entries.isEmpty() || !plan.accepted.isEmpty())) {
          return new Evaluation(
              entries, revisions, frameBytes, seen, seq, fenced, new Cut(i, null));
        }
      }
      Document cur =
          prior == WritePlan.REMOVED
              ? null
              : prior != null
                  ? prior
                  : indexed == null ? null : plan.found(collection, id, k, indexed);
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
          bodyBytes = Utf8.length(body);
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
                plan.now,
                commitLsn);
        seen.put(k, new Document(collection, id, revision + 1, body, false));
        if (plan.aclChanges(collection, cur, body)) {
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
                plan.now,
                commitLsn);
        seen.put(
            k,
            new Document(
                collection,
                id,
                revision + 1,
                null,
                true,
                JsonFields.aclOf(before, plan.ruleField(collection))));
      }
      entries.add(e);
      // As e.bytes() counts, the after image's length known already.
      frameBytes += Partition.ENTRY_OVERHEAD + Utf8.length(before) + bodyBytes;
      revisions.add(revision + 1);
    }
    return new Evaluation(entries, revisions, frameBytes, seen, seq, fenced, null);
  }
}
