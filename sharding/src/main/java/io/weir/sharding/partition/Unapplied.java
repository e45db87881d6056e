package io.weir.sharding.partition;

import io.weir.sharding.partition.ReadProtocol.Document;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * The document changes a partition persisted that the documents table has not applied yet (ADR
 * 0032): the latest unapplied version of each document it touched, and the collection-wide changes
 * (resets, tombstones losing their row-visibility value). A read merges them over the table's rows,
 * so it is never older than what the partition acknowledged; a write takes a before image from
 * them. Bounded by the table's lag bound ({@link TableWriter#MAX_LAG_EVENTS}, {@link
 * TableWriter#MAX_LAG_BYTES}): past it the partition's writes wait.
 *
 * <p>Owned by the partition's actor; not thread-safe. {@link View}s handed to reads are immutable.
 */
final class Unapplied {
  /** A document's version written by the event at {@code seq}. */
  record Pending(long seq, Document document) {}

  /**
   * A change of a whole collection at {@code seq}: {@code reset} (every document before it is gone)
   * or else tombstones before it lose their row-visibility value.
   */
  record CollectionChange(long seq, String collection, boolean reset) {}

  private record Event(long seq, List<String> keys) {}

  private final HashMap<String, Pending> documents = new HashMap<>();

  /**
   * The journal sequence through which the table holds every event, as far as the partition was
   * told (its writer's applies, the catch-up at start): every change here is later. It never moves
   * back, so a read whose table position is below it read a table that lost applies.
   */
  private long base;

  private final ArrayDeque<Event> events = new ArrayDeque<>();
  private final List<CollectionChange> collectionChanges = new ArrayList<>();

  private record PendingReceipt(long seq, Receipt receipt) {}

  /** The receipts the unapplied events keep, by key: the receipts table has not got them yet. */
  private final HashMap<String, PendingReceipt> receipts = new HashMap<>();

  /** Adds the receipts the event at {@code seq} keeps (a key's latest wins). */
  void addReceipts(long seq, List<Receipt.Keyed> kept) {
    for (Receipt.Keyed r : kept) {
      receipts.put(r.key(), new PendingReceipt(seq, r.receipt()));
    }
  }

  /**
   * The receipt under {@code key} of an event the table has not applied yet, or null: a receipt
   * that left the heap by count is looked up here before the receipts table.
   */
  Receipt receipt(String key) {
    PendingReceipt p = receipts.get(key);
    return p == null ? null : p.receipt();
  }

  /** Adds the changes of the event at {@code seq}, in order. */
  void add(long seq, List<DocumentChange> changes) {
    List<String> keys = new ArrayList<>();
    for (DocumentChange c : changes) {
      if (c instanceof DocumentChange.Put p) {
        String k = p.key();
        documents.put(k, new Pending(seq, p.document()));
        keys.add(k);
      } else if (c instanceof DocumentChange.Reset r) {
        documents.values().removeIf(d -> d.document().collection().equals(r.collection()));
        collectionChanges.add(new CollectionChange(seq, r.collection(), true));
      } else {
        String collection = ((DocumentChange.ClearTombstoneAcls) c).collection();
        documents.replaceAll(
            (k, d) ->
                d.document().deleted()
                        && d.document().acl() != null
                        && d.document().collection().equals(collection)
                    ? new Pending(d.seq(), withoutAcl(d.document()))
                    : d);
        collectionChanges.add(new CollectionChange(seq, collection, false));
      }
    }
    events.add(new Event(seq, keys));
  }

  /**
   * The table applied the events through {@code through}: they leave, and {@code applied} hears of
   * each document whose latest version was among them (the cache keeps it).
   */
  void applied(long through, BiConsumer<String, Pending> applied) {
    base = Math.max(base, through);
    while (!events.isEmpty() && events.peekFirst().seq() <= through) {
      for (String k : events.pollFirst().keys()) {
        Pending p = documents.get(k);
        if (p != null && p.seq() <= through) {
          documents.remove(k);
          applied.accept(k, p);
        }
      }
    }
    collectionChanges.removeIf(c -> c.seq() <= through);
    if (!receipts.isEmpty()) {
      receipts.values().removeIf(r -> r.seq() <= through);
    }
  }

  /** The table caught up with the journal through {@code through} before the partition serves. */
  void caughtUp(long through) {
    base = Math.max(base, through);
  }

  /** See {@link #base}. */
  long base() {
    return base;
  }

  /** The latest unapplied version of the document of {@link Partition#key} {@code key}, or null. */
  Pending get(String key) {
    return documents.get(key);
  }

  boolean isEmpty() {
    return events.isEmpty();
  }

  int events() {
    return events.size();
  }

  /** The unapplied collection-wide changes of {@code collection}, oldest first. */
  List<CollectionChange> changes(String collection) {
    if (collectionChanges.isEmpty()) {
      return List.of();
    }
    List<CollectionChange> out = new ArrayList<>();
    for (CollectionChange c : collectionChanges) {
      if (c.collection().equals(collection)) {
        out.add(c);
      }
    }
    return out;
  }

  /** The unapplied changes of {@code collection}, as an immutable view for a read. */
  View view(String collection) {
    Map<String, Pending> docs = new HashMap<>();
    for (Pending p : documents.values()) {
      if (p.document().collection().equals(collection)) {
        docs.put(p.document().id(), p);
      }
    }
    return new View(Map.copyOf(docs), List.copyOf(changes(collection)), base);
  }

  static Document withoutAcl(Document d) {
    return new Document(d.collection(), d.id(), d.revision(), d.body(), d.deleted(), null);
  }

  /**
   * One collection's unapplied changes when a read began: merged over the table's rows as of the
   * table's position, it gives the documents as of the partition's last event then.
   *
   * @param documents id to its latest unapplied version
   * @param base the table's position the partition knew of then ({@link Unapplied#base}): a table
   *     read below it lacks applies this view does not hold
   */
  record View(Map<String, Pending> documents, List<CollectionChange> changes, long base) {
    /**
     * Whether a table read at position {@code appliedThrough} lacks events that this view does not
     * hold either: PostgreSQL lost applies the writer had committed (they commit without waiting
     * for the flush), and the rows read may be older than what the partition acknowledged.
     */
    boolean tableLost(long appliedThrough) {
      return appliedThrough < base;
    }

    /**
     * A table row (of journal sequence {@code rowSeq}, when the table was applied through {@code
     * appliedThrough}) as the partition holds it: null when an unapplied change replaced it or a
     * reset removed it; without its row-visibility value when an unapplied change cleared it.
     */
    Document merge(Document row, long rowSeq, long appliedThrough) {
      Pending p = documents.get(row.id());
      if (p != null && p.seq() > appliedThrough) {
        return null; // the unapplied version is newer; it is added by the caller
      }
      Document out = row;
      for (CollectionChange c : changes) {
        if (c.seq() > appliedThrough && rowSeq < c.seq()) {
          if (c.reset()) {
            return null;
          }
          if (out.deleted() && out.acl() != null) {
            out = withoutAcl(out);
          }
        }
      }
      return out;
    }

    /** The unapplied versions newer than the table's position, in no particular order. */
    List<Document> newer(long appliedThrough) {
      List<Document> out = new ArrayList<>();
      for (Iterator<Pending> it = documents.values().iterator(); it.hasNext(); ) {
        Pending p = it.next();
        if (p.seq() > appliedThrough) {
          out.add(p.document());
        }
      }
      return out;
    }
  }
}
