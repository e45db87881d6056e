package io.weir.sharding.partition;

import io.weir.persistence.SafeErrors;
import io.weir.protocol.Utf8;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefusal;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefused;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.Partition.Consumer;
import io.weir.sharding.partition.ReadProtocol.Document;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A partition's reads (ADR 0032). Documents come from the documents table with read-your-writes:
 * what the partition has not applied there yet ({@link Unapplied}) or has cached ({@link
 * BodyCache}) is answered from memory; a table row is served only from the change the index names
 * or a later one. A read of many documents reads the table's rows and its position N in one
 * transaction and merges the unapplied changes after N that were pending when the read began: the
 * documents as of the partition's last event then (or as of N, if the table got further meanwhile),
 * never older than an acknowledged write. The outbox and consumer reads come from the state's
 * outbox index. Every method runs on the partition's actor; the table's answers are merged and
 * replied on the table's executor, from values captured here.
 */
final class PartitionReads {
  private static final Logger log = LoggerFactory.getLogger(PartitionReads.class);

  /** Bytes counted per document in a scan's budget besides its strings. */
  static final int DOCUMENT_OVERHEAD = 64;

  private final int partition;
  private final DocumentTable table;
  private final Runnable tableBehind;
  private final AclMemo aclMemo = new AclMemo();

  /**
   * @param tableBehind called when a row is older than the index: the writer then checks whether
   *     the table lost applies ({@link TableWriter#verify})
   */
  PartitionReads(int partition, DocumentTable table, Runnable tableBehind) {
    this.partition = partition;
    this.table = table;
    this.tableBehind = tableBehind;
  }

  /** Estimated bytes a document counts for in a read's budget (0 for none). */
  static long size(Document d) {
    return d == null
        ? 0
        : DOCUMENT_OVERHEAD
            + Utf8.length(d.collection())
            + Utf8.length(d.id())
            + Utf8.length(d.body())
            + Utf8.length(d.acl());
  }

  /**
   * The document of index entry {@code e} from memory, or null when only the table has it: an
   * unapplied version, a cached one, or a tombstone whose row-visibility value is known to be none.
   */
  static Document local(
      PartitionState s,
      Unapplied unapplied,
      BodyCache cache,
      String collection,
      String id,
      String key,
      DocumentIndex.Entry e) {
    Unapplied.Pending p = unapplied.get(key);
    if (p != null && p.seq() == e.lastSeq()) {
      return p.document();
    }
    Document cached = cache.get(key, e.lastSeq());
    if (cached != null) {
      return cached;
    }
    if (e.deleted() && s.ruleField(collection) == null) {
      return new Document(collection, id, e.revision(), null, true, null);
    }
    return null;
  }

  /**
   * A table row as the partition holds it: without its row-visibility value when an unapplied
   * change of its collection ({@code changes}) cleared tombstones after the row was written.
   */
  static Document held(DocumentTable.Row row, List<Unapplied.CollectionChange> changes) {
    Document d = row.document();
    for (Unapplied.CollectionChange c : changes) {
      if (!c.reset() && row.journalSeq() < c.seq() && d.deleted() && d.acl() != null) {
        d = Unapplied.withoutAcl(d);
      }
    }
    return d;
  }

  /**
   * A row served for index entry {@code e}; null (logged) when the table is behind the index: after
   * a crash of PostgreSQL lost applies that had not been flushed yet (the writer is told and
   * replays them from the journal, so a retried read finds the row).
   */
  private Document served(
      DocumentTable.Row row, DocumentIndex.Entry e, List<Unapplied.CollectionChange> changes) {
    if (row == null || row.journalSeq() < e.lastSeq()) {
      log.error(
          "partition {}: the documents table holds an older version of a document than its"
              + " index (journal sequence {} < {}); the read is not answered",
          partition,
          row == null ? -1 : row.journalSeq(),
          e.lastSeq());
      tableBehind.run();
      return null;
    }
    return held(row, changes);
  }

  void document(
      PartitionState s, Unapplied unapplied, BodyCache cache, ReadProtocol.GetDocument c) {
    long ruleVersion = s.ruleVersion(c.collection());
    DocumentIndex.Entry e = s.index.get(c.collection(), c.id());
    if (e == null) {
      c.replyTo().tell(new DocumentReply(Optional.empty(), ruleVersion));
      return;
    }
    Document d =
        local(
            s, unapplied, cache, c.collection(), c.id(), Partition.key(c.collection(), c.id()), e);
    if (d != null) {
      c.replyTo().tell(new DocumentReply(Optional.of(d), ruleVersion));
      return;
    }
    List<Unapplied.CollectionChange> changes = unapplied.changes(c.collection());
    table
        .rows(partition, List.of(new DocumentTable.Key(c.collection(), c.id())))
        .thenAccept(
            rows -> {
              Document served = served(rows.isEmpty() ? null : rows.get(0), e, changes);
              if (served != null) {
                c.replyTo().tell(new DocumentReply(Optional.of(served), ruleVersion));
              }
            })
        .exceptionally(failed("a document"));
  }

  /**
   * The current row-visibility values of {@code c}'s documents: remembered in the index ({@link
   * AclMemo}), else read from the version in memory or the table row and remembered (the rows'
   * values through {@code learned}, which hands them to the actor as {@link Partition.AclsRead}).
   */
  void acls(
      PartitionState s,
      Unapplied unapplied,
      BodyCache cache,
      ReadProtocol.GetAcls c,
      java.util.function.Consumer<Partition.AclsRead> learned) {
    String field = s.ruleField(c.collection());
    long epoch = s.rowEpoch(c.collection());
    long version = s.ruleVersion(c.collection());
    String incarnation = s.incarnation;
    Map<String, String> out = new HashMap<>();
    Map<String, DocumentIndex.Entry> wanted = new HashMap<>();
    for (String id : c.ids()) {
      DocumentIndex.Entry e = s.index.get(c.collection(), id);
      if (e == null) {
        continue;
      }
      if (field == null) {
        out.put(id, "null"); // no rule: no document has a row-visibility value
        continue;
      }
      String remembered = e.acl(version);
      if (remembered != null) {
        out.put(id, remembered);
        continue;
      }
      Document d =
          local(s, unapplied, cache, c.collection(), id, Partition.key(c.collection(), id), e);
      if (d != null) {
        String acl = acl(d, field);
        out.put(id, acl);
        remember(s, c.collection(), id, e, version, acl);
      } else {
        wanted.put(id, e);
      }
    }
    if (wanted.isEmpty()) {
      c.replyTo().tell(new ReadProtocol.Acls(epoch, version, out));
      return;
    }
    List<Unapplied.CollectionChange> changes = unapplied.changes(c.collection());
    List<DocumentTable.Key> keys = new ArrayList<>();
    wanted.keySet().forEach(id -> keys.add(new DocumentTable.Key(c.collection(), id)));
    table
        .rows(partition, keys)
        .thenAccept(
            rows -> {
              Map<String, DocumentTable.Row> byId = new HashMap<>();
              rows.forEach(r -> byId.put(r.document().id(), r));
              List<Partition.AclRead> read = new ArrayList<>(wanted.size());
              for (Map.Entry<String, DocumentIndex.Entry> w : wanted.entrySet()) {
                Document d = served(byId.get(w.getKey()), w.getValue(), changes);
                if (d == null) {
                  return;
                }
                String acl = acl(d, field);
                out.put(w.getKey(), acl);
                read.add(new Partition.AclRead(w.getKey(), w.getValue().lastSeq(), acl));
              }
              // Told first: a read the answer prompts finds the values remembered.
              learned.accept(new Partition.AclsRead(incarnation, c.collection(), version, read));
              c.replyTo().tell(new ReadProtocol.Acls(epoch, version, out));
            })
        .exceptionally(failed("row-visibility values"));
  }

  /**
   * Remembers the values {@code r} read from the table, for the versions the index still holds and
   * under the rule they were read with (in the same incarnation: journal sequences of another,
   * after an accepted loss of storage, name other versions).
   */
  void learned(PartitionState s, Partition.AclsRead r) {
    if (!java.util.Objects.equals(s.incarnation, r.incarnation())
        || s.ruleVersion(r.collection()) != r.ruleVersion()
        || s.ruleField(r.collection()) == null) {
      return;
    }
    for (Partition.AclRead a : r.values()) {
      DocumentIndex.Entry e = s.index.get(r.collection(), a.id());
      if (e != null && e.lastSeq() == a.lastSeq()) {
        remember(s, r.collection(), a.id(), e, r.ruleVersion(), a.acl());
      }
    }
  }

  private void remember(
      PartitionState s,
      String collection,
      String id,
      DocumentIndex.Entry e,
      long ruleVersion,
      String acl) {
    AclMemo.Acl memo = aclMemo.of(collection, ruleVersion, acl);
    if (memo != null && memo != e.acl()) {
      s.index.put(collection, id, e.withAcl(memo));
    }
  }

  private static String acl(Document d, String field) {
    String acl = d.deleted() ? d.acl() : JsonFields.aclOf(d.body(), field);
    return acl == null ? "null" : acl;
  }

  /** Documents of a collection in id order after {@code afterId}, about 1 MiB a reply. */
  void page(Unapplied unapplied, ReadProtocol.GetDocuments c) {
    Unapplied.View view = unapplied.view(c.collection());
    int limit = Math.max(1, c.limit());
    Collector rows = new Collector(view);
    table
        .scan(partition, c.collection(), c.afterId(), limit + 1, false, rows)
        .thenAccept(
            seen -> {
              if (lost(view, seen, "a page of documents")) {
                return;
              }
              boolean tableMore = rows.read > limit;
              List<Document> merged = rows.out;
              for (Document d : view.newer(seen.appliedThrough())) {
                if (c.afterId() == null || Ids.compare(d.id(), c.afterId()) > 0) {
                  // Past the last row read, the table's next rows are unknown: a later page.
                  if (!tableMore || Ids.compare(d.id(), rows.lastId) <= 0) {
                    merged.add(d);
                  }
                }
              }
              merged.sort(Comparator.comparing(Document::id, Ids.ORDER));
              List<Document> out = new ArrayList<>();
              long bytes = 0;
              for (Document d : merged) {
                // A reply may cross nodes: at most the limit and about 1 MiB of bodies (at least
                // one document).
                if (out.size() == limit
                    || (!out.isEmpty() && bytes + size(d) > Partition.REPLY_BYTES)) {
                  break;
                }
                out.add(d);
                bytes += size(d);
              }
              c.replyTo()
                  .tell(
                      new ReadProtocol.DocumentsReply(
                          out, tableMore || out.size() < merged.size()));
            })
        .exceptionally(failed("a page of documents"));
  }

  /**
   * Whether the table read was below the position the partition knew of (PostgreSQL lost applies):
   * then the read is not answered (its asker times out and may retry) and the writer is told, as
   * for a single document ({@link #served}); the rows may be older than what was acknowledged.
   */
  private boolean lost(Unapplied.View view, DocumentTable.Seen seen, String what) {
    if (!view.tableLost(seen.appliedThrough())) {
      return false;
    }
    log.error(
        "partition {}: the documents table is applied through journal sequence {}, behind the {}"
            + " the partition knew of; {} is not answered",
        partition,
        seen.appliedThrough(),
        view.base(),
        what);
    tableBehind.run();
    return true;
  }

  /** Collects a scan's rows as the partition holds them (the unapplied changes merged over). */
  private static final class Collector implements DocumentTable.ScanVisitor {
    private final Unapplied.View view;
    final List<Document> out = new ArrayList<>();
    long appliedThrough;
    int read;
    String lastId;

    Collector(Unapplied.View view) {
      this.view = view;
    }

    @Override
    public void seen(DocumentTable.Seen seen) {
      appliedThrough = seen.appliedThrough();
    }

    @Override
    public boolean row(DocumentTable.Row r) {
      read++;
      lastId = r.document().id();
      Document d = view.merge(r.document(), r.journalSeq(), appliedThrough);
      if (d != null) {
        out.add(d);
      }
      return true;
    }
  }

  /**
   * Every live document of a collection that the reader may see, with the outbox tail it is as of:
   * the baseline of a live query and a one-shot query. {@code again} repeats the read in the rare
   * case the table got past the partition's last event meanwhile and does not know its outbox
   * sequence there.
   */
  void scan(PartitionState s, Unapplied unapplied, ReadProtocol.ScanCollection c, Runnable again) {
    Unapplied.View view = unapplied.view(c.collection());
    long events = s.events;
    long tail = s.nextSequence - 1;
    String incarnation = s.incarnation;
    long outboxFirst = s.outboxFirst;
    long epoch = s.rowEpoch(c.collection());
    long version = s.ruleVersion(c.collection());
    // Without a rule field here (another rule version than the reader's node runs, which refuses
    // the answer) every document counts.
    String field = c.reader() == null ? null : s.ruleField(c.collection());
    Budget budget = new Budget(c, field);
    table
        .scan(
            partition,
            c.collection(),
            null,
            0,
            true,
            new DocumentTable.ScanVisitor() {
              long appliedThrough;

              @Override
              public void seen(DocumentTable.Seen seen) {
                appliedThrough = seen.appliedThrough();
              }

              @Override
              public boolean row(DocumentTable.Row r) {
                Document d = view.merge(r.document(), r.journalSeq(), appliedThrough);
                return d == null || budget.take(d);
              }
            })
        .thenAccept(
            seen -> {
              if (lost(view, seen, "a collection")) {
                return;
              }
              if (!budget.tooLarge) {
                for (Document d : view.newer(seen.appliedThrough())) {
                  if (!budget.take(d)) {
                    break;
                  }
                }
              }
              long at = tail;
              if (seen.appliedThrough() > events) {
                // The table applied events this read did not capture: its rows are as of them.
                if (seen.outboxNext() == 0) {
                  again.run();
                  return;
                }
                at = seen.outboxNext() - 1;
              }
              List<Document> out = budget.out;
              out.sort(Comparator.comparing(Document::id, Ids.ORDER));
              c.replyTo()
                  .tell(
                      new ReadProtocol.CollectionScan(
                          incarnation, outboxFirst, at, epoch, version, out, budget.tooLarge));
            })
        .exceptionally(failed("a collection"));
  }

  /** A scan's documents within its byte budget, those the reader may not see left out. */
  private static final class Budget {
    private final ReadProtocol.ScanCollection c;
    private final String field;
    final List<Document> out = new ArrayList<>();
    long bytes;
    boolean tooLarge;

    Budget(ReadProtocol.ScanCollection c, String field) {
      this.c = c;
      this.field = field;
    }

    /** Takes a document the scan found; false once the budget is exceeded. */
    boolean take(Document d) {
      if (d.deleted() || (field != null && !c.reader().sees(JsonFields.aclOf(d.body(), field)))) {
        return true;
      }
      bytes += size(d);
      if (bytes > c.maxBytes()) {
        tooLarge = true;
        out.clear();
        return false;
      }
      out.add(d);
      return true;
    }
  }

  /** Journal events holding positions {@code from} to {@code to} (all retained). */
  private static List<Long> journalEvents(PartitionState s, long from, long to) {
    List<Long> events = new ArrayList<>();
    if (from <= to && from >= s.outboxFirst) {
      s.outbox.journalSequences(from, to, events::add);
    }
    return events;
  }

  /** Where the outbox entries after {@code c.after()} lie, with the collection's fences. */
  static ReadProtocol.ChangesSpan changes(PartitionState s, ReadProtocol.ReadChanges c) {
    long tail = s.nextSequence - 1;
    long room = Math.max(1, c.maxEntries());
    long to = tail - c.after() > room ? c.after() + room : tail;
    return new ReadProtocol.ChangesSpan(
        s.incarnation,
        s.outboxFirst,
        tail,
        s.rowEpoch(c.collection()),
        s.ruleVersion(c.collection()),
        journalEvents(s, c.after() + 1, to));
  }

  /** Where a consumer's next batch lies: the journal events holding its next entries. */
  static ConsumerReply span(PartitionState s, ConsumerProtocol.ReadConsumer c) {
    Consumer con = s.consumers.get(Partition.consumerKey(c.name(), c.generation()));
    if (con == null) {
      return new ConsumerRefused(
          ConsumerRefusal.NOT_FOUND, "no such consumer generation in this partition");
    }
    if (con.released()) {
      return new ConsumerRefused(
          ConsumerRefusal.TOKEN_INVALIDATED, "the consumer generation was released");
    }
    long from = con.checkpoint() + 1;
    long tail = s.nextSequence - 1;
    long to =
        tail - con.checkpoint() > Math.max(1, c.maxEntries())
            ? con.checkpoint() + Math.max(1, c.maxEntries())
            : tail;
    if (from <= to && from < s.outboxFirst) {
      return new ConsumerRefused(
          ConsumerRefusal.HISTORY_UNAVAILABLE,
          "the consumer's next entries were purged",
          con.checkpoint(),
          -1,
          0);
    }
    return new ConsumerProtocol.ConsumerSpan(
        s.incarnation, con.view(), s.outboxFirst, tail, journalEvents(s, from, to));
  }

  /** The partition's counters, watermarks, consumers and documents table. */
  static StatusProtocol.PartitionStatus status(
      int partition,
      PartitionState s,
      StatusProtocol.TableStatus table,
      StatusProtocol.StorageView storage) {
    List<ConsumerProtocol.ConsumerView> consumers =
        s.consumers.values().stream()
            .map(Consumer::view)
            .sorted(
                Comparator.comparing(ConsumerProtocol.ConsumerView::name)
                    .thenComparingLong(ConsumerProtocol.ConsumerView::generation))
            .toList();
    return new StatusProtocol.PartitionStatus(
        partition,
        s.index.size(),
        s.outboxFirst,
        s.nextSequence,
        s.outboxBytes,
        s.events,
        Map.copyOf(s.watermarks),
        consumers,
        table,
        storage);
  }

  private Function<Throwable, Void> failed(String what) {
    return error -> {
      log.warn(
          "partition {}: reading {} from the documents table failed ({}); the read is not"
              + " answered and times out at its deadline",
          partition,
          what,
          SafeErrors.describe(error));
      return null;
    };
  }
}
