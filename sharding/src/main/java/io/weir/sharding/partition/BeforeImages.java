package io.weir.sharding.partition;

import static io.weir.sharding.partition.Partition.key;

import io.weir.sharding.partition.ReadProtocol.Document;
import java.util.HashMap;
import java.util.Optional;

/**
 * Where the plan of a group commit's next event finds the current version of a document and a key's
 * receipt: in memory (the events not yet applied to the documents table, the body cache), else in
 * what was read from the table for this batch ({@link Partition.BodiesFetched}). What it finds in
 * neither the plan lists as missing, and the batch is planned again once it is fetched; a receipt
 * key the {@link ReceiptFilter} rules out is not looked for in the table. Counts where the before
 * images of each planned event came from. Actor thread only.
 */
final class BeforeImages implements WritePlan.Bodies {
  private final Unapplied unapplied;
  private final BodyCache cache;
  private final ReceiptFilter receiptFilter;

  /** The before images fetched for the batch being planned, by document key. */
  private final HashMap<String, DocumentTable.Row> fetched = new HashMap<>();

  /** The receipts read from the receipts table for the batch being planned (empty: none). */
  private final HashMap<String, Optional<Receipt>> fetchedReceipts = new HashMap<>();

  private PartitionState state;
  private long nowMillis;
  private int foundInMemory;
  private int readFromTable;
  private int receiptsRuledOut;

  BeforeImages(Unapplied unapplied, BodyCache cache, ReceiptFilter receiptFilter) {
    this.unapplied = unapplied;
    this.cache = cache;
    this.receiptFilter = receiptFilter;
  }

  /**
   * Starts the plan of an event over {@code state}, made at {@code nowMillis}: the counts start
   * from zero.
   */
  BeforeImages over(PartitionState state, long nowMillis) {
    this.state = state;
    this.nowMillis = nowMillis;
    foundInMemory = 0;
    readFromTable = 0;
    receiptsRuledOut = 0;
    return this;
  }

  /** The current version of a document for the plan: in memory, or fetched for this batch. */
  @Override
  public Document find(String collection, String id, String key, DocumentIndex.Entry e) {
    Document d = PartitionReads.local(state, unapplied, cache, collection, id, key, e);
    if (d != null) {
      foundInMemory++;
      return d;
    }
    DocumentTable.Row row = fetched.get(key);
    if (row == null || row.journalSeq() != e.lastSeq()) {
      return null;
    }
    readFromTable++;
    return PartitionReads.held(row, unapplied.changes(collection));
  }

  @Override
  public Optional<Receipt> receipt(String key) {
    // An event not in the table yet holds the key's newest receipt outside the heap.
    Receipt pending = unapplied.receipt(key);
    if (pending != null) {
      return Optional.of(pending);
    }
    Optional<Receipt> fetched = fetchedReceipts.get(key);
    if (fetched != null) {
      return fetched;
    }
    // A key the filter never saw needs no read of the table (ADR 0057).
    if (receiptFilter.mayHold(key, nowMillis)) {
      return null;
    }
    receiptsRuledOut++;
    return Optional.empty();
  }

  /** What was read from the table for the batch; its receipts only when the read succeeded. */
  void fetched(Partition.BodiesFetched c) {
    for (DocumentTable.Row row : c.rows()) {
      fetched.put(key(row.document().collection(), row.document().id()), row);
    }
    if (c.failure() == null) {
      c.receiptKeys().forEach(k -> fetchedReceipts.put(k, Optional.empty()));
      c.receipts().forEach(r -> fetchedReceipts.put(r.key(), Optional.of(r.receipt())));
    }
  }

  /** The batch's event was planned in full: what was fetched for it goes. */
  void clear() {
    fetched.clear();
    fetchedReceipts.clear();
  }

  /** Receipt keys of the plan the filter ruled out of the receipts table (no read). */
  int receiptsRuledOut() {
    return receiptsRuledOut;
  }

  int foundInMemory() {
    return foundInMemory;
  }

  int readFromTable() {
    return readFromTable;
  }
}
