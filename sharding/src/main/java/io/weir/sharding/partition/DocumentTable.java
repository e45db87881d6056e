package io.weir.sharding.partition;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;

/**
 * Where a partition keeps its documents outside the heap: the documents table in the journal's
 * schema ({@link SqlDocumentTable}), written by the partition itself from its persisted journal
 * events ({@link TableWriter}). Each partition has one position row saying through which journal
 * sequence its events are applied; the rows and that position change in one transaction, so the
 * table holds every persisted event exactly once.
 */
public interface DocumentTable {
  /**
   * No table: the documents live only in the entity (unit tests, the in-memory journal). A
   * partition given it keeps no {@link TableWriter}, so nothing calls its methods.
   */
  DocumentTable NONE =
      new DocumentTable() {
        @Override
        public boolean enabled() {
          return false;
        }

        @Override
        public CompletionStage<Position> position(int partition) {
          throw new UnsupportedOperationException("no documents table");
        }

        @Override
        public CompletionStage<Long> apply(
            int partition, List<Applying> events, Map<String, String> ruleFieldsAfter) {
          throw new UnsupportedOperationException("no documents table");
        }

        @Override
        public CompletionStage<Long> seed(
            int partition,
            long expected,
            long through,
            List<PartitionProtocol.Document> documents,
            Map<String, String> ruleFields) {
          throw new UnsupportedOperationException("no documents table");
        }
      };

  /** Whether this is a table at all ({@link #NONE} is not). */
  default boolean enabled() {
    return true;
  }

  /**
   * A partition's position in the table.
   *
   * @param appliedThrough the journal sequence through which its events are applied (0: none)
   * @param ruleFields the row rules' fields (collection to field) as of that event: tombstones of
   *     later events take their row-visibility value from them
   */
  record Position(long appliedThrough, Map<String, String> ruleFields) {
    public Position {
      ruleFields = Map.copyOf(ruleFields);
    }
  }

  /** One journal event's document changes. */
  record Applying(long sequence, List<DocumentChange> changes) {}

  /** A partition's position ({@code 0} and no rules when it has none yet). */
  CompletionStage<Position> position(int partition);

  /**
   * Applies consecutive events in one transaction that first locks the partition's position: events
   * at or before the position are skipped (another writer applied them), the rest are applied and
   * the position moves to the last one, with {@code ruleFieldsAfter}.
   *
   * @return the partition's position afterwards
   * @throws TableGap (as the stage's failure) when the position is before the first event minus
   *     one: the events between must be applied first
   */
  CompletionStage<Long> apply(
      int partition, List<Applying> events, Map<String, String> ruleFieldsAfter);

  /**
   * Replaces every row of the partition with {@code documents} (the partition's documents as of
   * journal sequence {@code through}) and sets its position to {@code through}, in one transaction,
   * if its position is still {@code expected}; otherwise changes nothing.
   *
   * @return the partition's position afterwards
   */
  CompletionStage<Long> seed(
      int partition,
      long expected,
      long through,
      List<PartitionProtocol.Document> documents,
      Map<String, String> ruleFields);

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
}
