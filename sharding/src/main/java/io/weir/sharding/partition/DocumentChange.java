package io.weir.sharding.partition;

import io.weir.sharding.partition.ReadProtocol.Document;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * What one journal event does to a partition's documents, in order. The documents table ({@link
 * DocumentTable}) applies these, and the partition keeps the ones the table has not applied yet
 * ({@link Unapplied}), so the two cannot see an event differently.
 */
public sealed interface DocumentChange {
  /**
   * The document's new version (a tombstone when deleted).
   *
   * @param key {@link Partition#key} of the document, built once: the cache, the unapplied changes
   *     and the table's apply each look the document up by it (its hash is kept with the string)
   */
  record Put(Document document, String key) implements DocumentChange {
    public Put {
      assert key.equals(Partition.key(document.collection(), document.id()))
          : "a put's key is not its document's";
    }

    Put(Document document) {
      this(document, Partition.key(document.collection(), document.id()));
    }
  }

  /** Every document of the collection goes (an initial snapshot restarting from its first row). */
  record Reset(String collection) implements DocumentChange {}

  /**
   * The collection's row rule moved to another field: tombstones lose the row-visibility value they
   * kept (it was of the old field), so they are shown to administrators only.
   */
  record ClearTombstoneAcls(String collection) implements DocumentChange {}

  /** Where the row rules' fields live while changes are derived (they change with the events). */
  interface RuleFields {
    /** The field of the collection's row rule, or null without one. */
    String field(String collection);

    /** A rule change in the event: later entries of the event use it. */
    void set(Partition.RuleChange change);

    /** Rule fields kept in {@code fields} (collection to field), which rule changes update. */
    static RuleFields over(Map<String, String> fields) {
      return new RuleFields() {
        @Override
        public String field(String collection) {
          return fields.get(collection);
        }

        @Override
        public void set(Partition.RuleChange r) {
          if (r.field() == null) {
            fields.remove(r.collection());
          } else {
            fields.put(r.collection(), r.field());
          }
        }
      };
    }
  }

  /**
   * The document changes of {@code event}, deriving tombstones' row-visibility values with {@code
   * rules} and moving {@code rules} past the event's rule changes.
   */
  static List<DocumentChange> of(Partition.Event event, RuleFields rules) {
    if (!(event instanceof Partition.Written w)) {
      return List.of();
    }
    int n = 0;
    for (Partition.FrameApplied f : w.frames()) {
      n += size(f.entries()) + size(f.loaded()) + size(f.reset()) + 1;
    }
    List<DocumentChange> out = new ArrayList<>(n);
    for (Partition.FrameApplied f : w.frames()) {
      for (String collection : f.reset()) {
        out.add(new Reset(collection));
      }
      for (Document d : f.loaded()) {
        out.add(new Put(d));
      }
      for (Partition.OutboxEntry x : f.entries()) {
        boolean deleted = x.kind().equals("delete");
        out.add(
            new Put(
                new Document(
                    x.collection(),
                    x.id(),
                    x.revision(),
                    x.after(),
                    deleted,
                    deleted ? JsonFields.aclOf(x.before(), rules.field(x.collection())) : null)));
      }
      if (f.rule() != null) {
        String previous = rules.field(f.rule().collection());
        rules.set(f.rule());
        if (!Objects.equals(previous, f.rule().field())) {
          out.add(new ClearTombstoneAcls(f.rule().collection()));
        }
      }
    }
    // Shared by the partition's unapplied changes and the table writer's thread: never changed.
    return Collections.unmodifiableList(out);
  }

  private static int size(List<?> list) {
    return list == null ? 0 : list.size();
  }

  /**
   * {@code changes}, the document changes {@link #of} derived from {@code event} earlier, having
   * moved {@code rules} past the event's rule changes as {@link #of} would.
   */
  static List<DocumentChange> ruled(
      Partition.Event event, RuleFields rules, List<DocumentChange> changes) {
    if (event instanceof Partition.Written w) {
      for (Partition.FrameApplied f : w.frames()) {
        if (f.rule() != null) {
          rules.set(f.rule());
        }
      }
    }
    return changes;
  }
}
