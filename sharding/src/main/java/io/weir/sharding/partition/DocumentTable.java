package io.weir.sharding.partition;

import io.weir.sharding.partition.ReadProtocol.Document;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;

/**
 * Where a partition keeps its documents: the documents table in the journal's schema ({@link
 * SqlDocumentTable}; {@link InMemoryDocumentTable} beside Pekko's in-memory journals), written by
 * the partition itself from its persisted journal events ({@link TableWriter}). Each partition has
 * one position row saying through which journal sequence its events are applied; the rows and that
 * position change in one transaction, so the table holds every persisted event exactly once. Reads
 * come from here too (ADR 0032): the partition merges its unapplied changes over them.
 */
public interface DocumentTable {
  /**
   * How long an idle partition waits before it applies what it persisted, so that events arriving
   * meanwhile share one apply (ADR 0035): 200 ms for a table in PostgreSQL.
   */
  default Duration applyDelay() {
    return TableWriter.APPLY_DELAY;
  }

  /**
   * A partition's position in the table.
   *
   * @param appliedThrough the journal sequence through which its events are applied (0: none)
   * @param ruleFields the row rules' fields (collection to field) as of that event: tombstones of
   *     later events take their row-visibility value from them
   * @param outboxNext the partition's next outbox sequence as of that event (0: unknown, a table
   *     written before it was kept)
   * @param writerEpoch the epoch of the writer that last claimed the partition's rows ({@link
   *     #claim}; 0: none yet)
   */
  record Position(
      long appliedThrough, Map<String, String> ruleFields, long outboxNext, long writerEpoch) {
    public Position {
      ruleFields = Map.copyOf(ruleFields);
    }

    public Position(long appliedThrough, Map<String, String> ruleFields, long outboxNext) {
      this(appliedThrough, ruleFields, outboxNext, 0);
    }
  }

  /** The writer epoch of an apply that claimed nothing (tests, tools): never refused as stale. */
  long UNFENCED = -1;

  /** One journal event's document changes, and the receipts it keeps (ADR 0034). */
  record Applying(long sequence, List<DocumentChange> changes, List<Receipt.Keyed> receipts) {
    public Applying {
      receipts = receipts == null ? List.of() : List.copyOf(receipts);
    }

    public Applying(long sequence, List<DocumentChange> changes) {
      this(sequence, changes, List.of());
    }

    /** A receipt kept by the event at {@code sequence}. */
    record Kept(Receipt.Keyed receipt, long sequence) {}
  }

  /** A document's row: the document and the journal sequence of the change that wrote it. */
  record Row(Document document, long journalSeq) {}

  /** A document by name. */
  record Key(String collection, String id) {}

  /**
   * Where a read of many rows saw the table: applied through {@code appliedThrough}, when the
   * partition's next outbox sequence was {@code outboxNext}.
   */
  record Seen(long appliedThrough, long outboxNext) {}

  /** A partition's position ({@code 0}, no rules and outbox next 0 when it has none yet). */
  CompletionStage<Position> position(int partition);

  /**
   * Claims the partition's rows for a writer that starts (ADR 0060): raises the position's writer
   * epoch and returns the position with the new epoch. From then on an apply that names an older
   * epoch fails with {@link Fenced} and writes nothing.
   */
  CompletionStage<Position> claim(int partition);

  /**
   * Applies consecutive events in one transaction that first locks the partition's position: events
   * at or before the position are skipped (another writer applied them), the rest are applied and
   * the position moves to the last one, with {@code ruleFieldsAfter} and {@code outboxNextAfter}.
   * With no events it only sets the outbox sequence, if the position is still {@code
   * expectedThrough}. Receipts written before {@code receiptsBefore} (0: none) are deleted in the
   * same transaction.
   *
   * @param writerEpoch the epoch the writer {@link #claim claimed}, or {@link #UNFENCED}
   * @return the partition's position afterwards
   * @throws TableGap (as the stage's failure) when the position is before the first event minus
   *     one: the events between must be applied first
   * @throws Fenced (as the stage's failure) when a newer writer claimed the partition, or the
   *     journal on this storage lacks the last event offered: nothing of this apply is written
   */
  CompletionStage<Long> apply(
      int partition,
      List<Applying> events,
      Map<String, String> ruleFieldsAfter,
      long outboxNextAfter,
      long expectedThrough,
      long receiptsBefore,
      long writerEpoch);

  /** {@link #apply(int, List, Map, long, long, long, long)} without a claim ({@link #UNFENCED}). */
  default CompletionStage<Long> apply(
      int partition,
      List<Applying> events,
      Map<String, String> ruleFieldsAfter,
      long outboxNextAfter,
      long expectedThrough,
      long receiptsBefore) {
    return apply(
        partition,
        events,
        ruleFieldsAfter,
        outboxNextAfter,
        expectedThrough,
        receiptsBefore,
        UNFENCED);
  }

  /** The receipts of the partition under these keys (those it has). */
  CompletionStage<List<Receipt.Keyed>> receipts(int partition, List<String> keys);

  /**
   * Hands {@code into} the keys and times of the partition's receipts written at or after {@code
   * sinceMillis}, newest first, at most {@code limit} (ADR 0057); it is called on the table's
   * thread, and returning false ends the read.
   */
  CompletionStage<Void> receiptKeys(
      int partition, long sinceMillis, int limit, ReceiptKeyVisitor into);

  /** What {@link #receiptKeys} hands its receipts to. */
  interface ReceiptKeyVisitor {
    /** One receipt; false: no more. */
    boolean receipt(String key, long atMillis);

    /** Whether the read is still wanted when it is about to begin (false: it reads nothing). */
    default boolean wanted() {
      return true;
    }
  }

  /** The rows of these documents of the partition (those it has; tombstones included). */
  CompletionStage<List<Row>> rows(int partition, List<Key> keys);

  /** What a scan hands its rows to. */
  interface ScanVisitor {
    /** The table's position the rows are as of: called once, before any row. */
    void seen(Seen seen);

    /** The next row; false ends the scan. */
    boolean row(Row row);
  }

  /**
   * Reads, at one moment, the partition's position and its rows of {@code collection} in id order
   * (code points) after {@code afterId} (null: from the first), handing them to {@code visit} until
   * it answers false or {@code limit} rows were handed (0: no limit).
   *
   * @param liveOnly tombstones are left out
   * @return the position, once every row was handed
   */
  CompletionStage<Seen> scan(
      int partition,
      String collection,
      String afterId,
      int limit,
      boolean liveOnly,
      ScanVisitor visit);

  /** The table's position is behind the events offered: the ones after it must come first. */
  final class TableGap extends RuntimeException {
    private final long appliedThrough;

    public TableGap(long appliedThrough) {
      super(
          "the documents table is applied through journal sequence " + appliedThrough,
          null,
          false,
          false);
      this.appliedThrough = appliedThrough;
    }

    public long appliedThrough() {
      return appliedThrough;
    }
  }

  /**
   * The apply's writer may not write the partition's rows any more (ADR 0060): a newer writer
   * claimed them, or the journal on this storage lacks the events it offered (the storage changed
   * under it). Not retried: the writer stops and its partition recovers again.
   */
  final class Fenced extends RuntimeException {
    public Fenced(String reason) {
      super(reason, null, false, false);
    }
  }
}
