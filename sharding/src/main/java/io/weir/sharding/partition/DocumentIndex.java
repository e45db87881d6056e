package io.weir.sharding.partition;

import io.weir.protocol.Utf8;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * What a partition keeps in its heap of each document: no body, only what checking a write needs
 * synchronously (ADR 0032). Per collection, id to {@link Entry}: the revision, the journal sequence
 * of the document's last change (a read of the documents table is served only from the row of that
 * change or a later one), the body's size in UTF-8 bytes (-1 for a tombstone) and, once a read has
 * needed it, the version's row-visibility value when it is one of the few {@link AclMemo} keeps
 * (ADR 0059). Bodies and tombstones' row-visibility values live in the documents table, with the
 * changes not yet applied there in {@link Unapplied} and recent bodies in {@link BodyCache}.
 *
 * <p>Owned by the partition's actor; not thread-safe.
 */
final class DocumentIndex {
  /**
   * One document: 40 bytes of heap (12 header, 8 + 8 + 4 + 4, padded), besides its id and the map's
   * node.
   *
   * @param bytes the body's UTF-8 bytes; -1 for a tombstone
   * @param acl the row-visibility value of this version when the partition remembers it ({@link
   *     AclMemo}, valid under its rule version only), else null
   */
  record Entry(long revision, long lastSeq, int bytes, AclMemo.Acl acl) {
    Entry(long revision, long lastSeq, int bytes) {
      this(revision, lastSeq, bytes, null);
    }

    static Entry of(long revision, long lastSeq, String body) {
      return new Entry(revision, lastSeq, body == null ? -1 : clamp(Utf8.length(body)));
    }

    /** A document of {@code bodyBytes} UTF-8 bytes, or a deleted one. */
    static Entry sized(long revision, long lastSeq, boolean deleted, long bodyBytes) {
      return new Entry(revision, lastSeq, deleted ? -1 : clamp(bodyBytes));
    }

    boolean deleted() {
      return bytes < 0;
    }

    /** This version remembering its row-visibility value {@code acl}. */
    Entry withAcl(AclMemo.Acl acl) {
      return new Entry(revision, lastSeq, bytes, acl);
    }

    /** The remembered row-visibility value if it was read under rule {@code ruleVersion}. */
    String acl(long ruleVersion) {
      return acl != null && acl.ruleVersion() == ruleVersion ? acl.value() : null;
    }

    /** Equal entries name the same version: a remembered value is not state (ADR 0059). */
    @Override
    public boolean equals(Object o) {
      return o instanceof Entry e
          && revision == e.revision
          && lastSeq == e.lastSeq
          && bytes == e.bytes;
    }

    @Override
    public int hashCode() {
      return java.util.Objects.hash(revision, lastSeq, bytes);
    }

    private static int clamp(long bytes) {
      return (int) Math.min(bytes, Integer.MAX_VALUE);
    }
  }

  /**
   * Snapshot bytes counted per document besides its id's characters (see {@link
   * #snapshotEstimate}).
   */
  static final int ENTRY_SNAPSHOT = 12;

  private final HashMap<String, HashMap<String, Entry>> collections = new HashMap<>();
  private long documents;
  private long liveBytes;
  private long idChars;

  Entry get(String collection, String id) {
    HashMap<String, Entry> c = collections.get(collection);
    return c == null ? null : c.get(id);
  }

  void put(String collection, String id, Entry entry) {
    HashMap<String, Entry> c = collections.computeIfAbsent(collection, k -> new HashMap<>());
    Entry previous = c.put(id, entry);
    if (previous == null) {
      documents++;
      idChars += id.length();
    } else if (!previous.deleted()) {
      liveBytes -= previous.bytes();
    }
    if (!entry.deleted()) {
      liveBytes += entry.bytes();
    }
  }

  /** Every document of {@code collection} goes (an initial snapshot restarting). */
  void clear(String collection) {
    HashMap<String, Entry> c = collections.remove(collection);
    if (c != null) {
      for (Map.Entry<String, Entry> e : c.entrySet()) {
        documents--;
        idChars -= e.getKey().length();
        if (!e.getValue().deleted()) {
          liveBytes -= e.getValue().bytes();
        }
      }
    }
  }

  /** Documents, tombstones included. */
  long size() {
    return documents;
  }

  /** UTF-8 bytes of the live documents' bodies. */
  long liveBytes() {
    return liveBytes;
  }

  /**
   * Roughly the bytes the index takes in a snapshot ({@link PartitionSnapshotSerializer}: an id, a
   * revision, a sequence distance and a size per document): the snapshot policy compares the
   * journal written since the last snapshot with it.
   */
  long snapshotEstimate() {
    return documents * ENTRY_SNAPSHOT + idChars;
  }

  /** The collection's live documents' ids, in code-point order. */
  List<String> liveIds(String collection) {
    HashMap<String, Entry> c = collections.get(collection);
    List<String> out = new ArrayList<>();
    if (c != null) {
      c.forEach(
          (id, e) -> {
            if (!e.deleted()) {
              out.add(id);
            }
          });
    }
    out.sort(Ids.ORDER);
    return out;
  }

  /** UTF-8 bytes of the live documents' bodies of {@code collection}. */
  long liveBytes(String collection) {
    HashMap<String, Entry> c = collections.get(collection);
    long sum = 0;
    if (c != null) {
      for (Entry e : c.values()) {
        if (!e.deleted()) {
          sum += e.bytes();
        }
      }
    }
    return sum;
  }

  void forEach(String collection, BiConsumer<String, Entry> visit) {
    HashMap<String, Entry> c = collections.get(collection);
    if (c != null) {
      c.forEach(visit);
    }
  }

  /** Collections with at least one document. */
  List<String> collections() {
    return new ArrayList<>(collections.keySet());
  }

  /** A copy sharing only the immutable entries (for a snapshot written while the actor goes on). */
  DocumentIndex copy() {
    DocumentIndex out = new DocumentIndex();
    collections.forEach((k, v) -> out.collections.put(k, new HashMap<>(v)));
    out.documents = documents;
    out.liveBytes = liveBytes;
    out.idChars = idChars;
    return out;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof DocumentIndex d && d.collections.equals(collections);
  }

  @Override
  public int hashCode() {
    return collections.hashCode();
  }

  /** Counts only: ids are row values. */
  @Override
  public String toString() {
    return "DocumentIndex[documents=" + documents + ", collections=" + collections.size() + "]";
  }
}
