package io.weir.protocol.cdc;

import java.util.Iterator;
import java.util.List;
import java.util.Objects;

/**
 * The changes of one transaction, in the order they were made.
 *
 * <p>Two kinds exist. Changes held in memory ({@link #of}) may be iterated any number of times and
 * read as a list. A large streamed transaction may instead be read from disk as it is iterated:
 * then {@link #repeatable()} is false, {@link #iterator()} may be called once, and only during the
 * sink call that received the transaction (its spill file is deleted when the call completes). A
 * second iteration, or one after the call, fails with {@link IllegalStateException} rather than
 * silently yielding nothing. A sink therefore handles each change as it comes and keeps none of
 * them.
 *
 * <p>Counts that sinks and metrics need without iterating ({@link Transaction#rowCount()}, {@link
 * Transaction#rowsByTable()}) travel with the transaction.
 */
public interface Changes extends Iterable<Change> {

  /** Number of changes: row changes, truncates and transactional messages. */
  long count();

  default boolean isEmpty() {
    return count() == 0;
  }

  /** Whether {@link #iterator()} may be called more than once. */
  boolean repeatable();

  /**
   * The changes as an immutable list.
   *
   * @throws IllegalStateException for changes that are not {@link #repeatable()}: materialising a
   *     spilled transaction is what spilling avoids
   */
  List<Change> asList();

  /** Changes held in memory, in this order. */
  static Changes of(List<Change> changes) {
    return new InMemory(List.copyOf(changes));
  }

  /** A repeatable, list-backed sequence. */
  final class InMemory implements Changes {
    private final List<Change> changes;

    private InMemory(List<Change> changes) {
      this.changes = changes;
    }

    @Override
    public long count() {
      return changes.size();
    }

    @Override
    public boolean repeatable() {
      return true;
    }

    @Override
    public List<Change> asList() {
      return changes;
    }

    @Override
    public Iterator<Change> iterator() {
      return changes.iterator();
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof InMemory other && changes.equals(other.changes);
    }

    @Override
    public int hashCode() {
      return Objects.hash(changes);
    }

    @Override
    public String toString() {
      return "Changes[count=" + changes.size() + "]";
    }
  }
}
