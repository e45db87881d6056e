package io.weir.sharding.partition;

import io.weir.sharding.partition.ReadProtocol.Document;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * The documents table in memory, for partitions on Pekko's in-memory journals (unit tests, tools):
 * the same rules as {@link SqlDocumentTable} (one position per partition moving with its rows, gaps
 * refused, ids in code-point order), lost with the process like those journals. Thread-safe: every
 * operation holds this table's lock, as the SQL table's position lock serializes writers.
 */
public final class InMemoryDocumentTable implements DocumentTable {
  /** An apply in memory costs nothing: nothing to gather, so an idle partition applies at once. */
  @Override
  public Duration applyDelay() {
    return Duration.ofMillis(1);
  }

  private static final class Rows {
    long appliedThrough;
    long outboxNext;
    long writerEpoch;
    Map<String, String> ruleFields = Map.of();
    final HashMap<String, TreeMap<String, Row>> collections = new HashMap<>();
    final HashMap<String, Receipt> receipts = new HashMap<>();
  }

  private final HashMap<Integer, Rows> partitions = new HashMap<>();

  private Rows partition(int n) {
    return partitions.computeIfAbsent(n, k -> new Rows());
  }

  @Override
  public synchronized CompletionStage<Position> position(int partition) {
    Rows p = partition(partition);
    return CompletableFuture.completedFuture(
        new Position(p.appliedThrough, p.ruleFields, p.outboxNext, p.writerEpoch));
  }

  @Override
  public synchronized CompletionStage<Position> claim(int partition) {
    partition(partition).writerEpoch++;
    return position(partition);
  }

  @Override
  public synchronized CompletionStage<Long> apply(
      int partition,
      List<Applying> events,
      Map<String, String> ruleFieldsAfter,
      long outboxNextAfter,
      long expectedThrough,
      long receiptsBefore,
      long writerEpoch) {
    Rows p = partition(partition);
    if (writerEpoch != UNFENCED && writerEpoch != p.writerEpoch) {
      return CompletableFuture.failedFuture(new Fenced("a newer writer claimed the partition"));
    }
    p.receipts.values().removeIf(r -> r.atMillis() < receiptsBefore);
    if (events.isEmpty()) {
      if (p.appliedThrough == expectedThrough) {
        p.outboxNext = outboxNextAfter;
      }
      return CompletableFuture.completedFuture(p.appliedThrough);
    }
    long last = events.get(events.size() - 1).sequence();
    if (p.appliedThrough >= last) {
      return CompletableFuture.completedFuture(p.appliedThrough);
    }
    if (p.appliedThrough < events.get(0).sequence() - 1) {
      return CompletableFuture.failedFuture(new TableGap(p.appliedThrough));
    }
    for (Applying e : events) {
      if (e.sequence() <= p.appliedThrough) {
        continue;
      }
      e.receipts().forEach(r -> p.receipts.put(r.key(), r.receipt()));
      for (DocumentChange change : e.changes()) {
        if (change instanceof DocumentChange.Put put) {
          Document d = put.document();
          p.collections
              .computeIfAbsent(d.collection(), k -> new TreeMap<>(Ids.ORDER))
              .put(d.id(), new Row(d, e.sequence()));
        } else if (change instanceof DocumentChange.Reset r) {
          p.collections.remove(r.collection());
        } else {
          String collection = ((DocumentChange.ClearTombstoneAcls) change).collection();
          TreeMap<String, Row> rows = p.collections.get(collection);
          if (rows != null) {
            rows.replaceAll(
                (id, row) ->
                    row.document().deleted() && row.document().acl() != null
                        ? new Row(Unapplied.withoutAcl(row.document()), row.journalSeq())
                        : row);
          }
        }
      }
    }
    p.appliedThrough = last;
    p.ruleFields = Map.copyOf(ruleFieldsAfter);
    p.outboxNext = outboxNextAfter;
    return CompletableFuture.completedFuture(last);
  }

  @Override
  public synchronized CompletionStage<List<Receipt.Keyed>> receipts(
      int partition, List<String> keys) {
    Rows p = partition(partition);
    List<Receipt.Keyed> out = new ArrayList<>();
    for (String k : keys) {
      Receipt r = p.receipts.get(k);
      if (r != null) {
        out.add(new Receipt.Keyed(k, r));
      }
    }
    return CompletableFuture.completedFuture(out);
  }

  @Override
  public synchronized CompletionStage<Void> receiptKeys(
      int partition, long sinceMillis, int limit, ReceiptKeyVisitor into) {
    List<Receipt.Keyed> newest = new ArrayList<>();
    partition(partition)
        .receipts
        .forEach(
            (k, r) -> {
              if (r.atMillis() >= sinceMillis) {
                newest.add(new Receipt.Keyed(k, r));
              }
            });
    newest.sort(Comparator.comparingLong((Receipt.Keyed k) -> k.receipt().atMillis()).reversed());
    for (int i = 0; i < Math.min(limit, newest.size()); i++) {
      if (!into.receipt(newest.get(i).key(), newest.get(i).receipt().atMillis())) {
        break;
      }
    }
    return CompletableFuture.completedFuture(null);
  }

  @Override
  public synchronized CompletionStage<List<Row>> rows(int partition, List<Key> keys) {
    Rows p = partition(partition);
    List<Row> out = new ArrayList<>();
    for (Key k : keys) {
      TreeMap<String, Row> rows = p.collections.get(k.collection());
      Row row = rows == null ? null : rows.get(k.id());
      if (row != null) {
        out.add(row);
      }
    }
    return CompletableFuture.completedFuture(out);
  }

  @Override
  public CompletionStage<Seen> scan(
      int partition,
      String collection,
      String afterId,
      int limit,
      boolean liveOnly,
      ScanVisitor visit) {
    List<Row> rows;
    Seen seen;
    synchronized (this) {
      Rows p = partition(partition);
      TreeMap<String, Row> all = p.collections.get(collection);
      rows =
          all == null
              ? List.of()
              : new ArrayList<>(
                  afterId == null ? all.values() : all.tailMap(afterId, false).values());
      seen = new Seen(p.appliedThrough, p.outboxNext);
    }
    visit.seen(seen);
    int handed = 0;
    for (Row r : rows) {
      if (limit > 0 && handed == limit) {
        break;
      }
      if (liveOnly && r.document().deleted()) {
        continue;
      }
      handed++;
      if (!visit.row(r)) {
        break;
      }
    }
    return CompletableFuture.completedFuture(seen);
  }
}
