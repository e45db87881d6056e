package io.weir.sharding.partition;

import java.util.HashMap;
import java.util.Map;

/**
 * The row-visibility values a partition remembers per document version (ADR 0059), so that a
 * restricted feed page's question "what is each document's current ACL" is answered from the index
 * rather than by reading and parsing every body again for every reader and every page.
 *
 * <p>A value is remembered as an {@link Acl} shared by every document that has it, under the
 * collection's row-rule version it was read with: an entry's value counts only while the rule's
 * version is unchanged (a rule change, which can change every value or clear tombstones' values,
 * makes every remembered value of the collection unknown again). Documents share their ACLs (the
 * same lists, the same groups), so per collection at most {@link #MAX_VALUES} distinct values of at
 * most {@link #MAX_CHARS} characters are kept; a value beyond either bound is not remembered and is
 * read from the body as before. The heap this takes is bounded per collection (about 64 KiB) and 4
 * bytes of reference per document.
 *
 * <p>Not state: never journalled nor in snapshots; recovery starts with nothing remembered. Owned
 * by the partition's actor; not thread-safe.
 */
final class AclMemo {
  /** Distinct values remembered per collection and rule version. */
  static final int MAX_VALUES = 256;

  /** Longest value remembered, in characters of its JSON text. */
  static final int MAX_CHARS = 128;

  /**
   * A row-visibility value (the JSON text of the rule's field, or {@code "null"}) as read under the
   * collection's rule {@code ruleVersion}.
   */
  record Acl(long ruleVersion, String value) {
    @Override
    public String toString() {
      return "Acl[ruleVersion=" + ruleVersion + "]"; // the value is row data
    }
  }

  private static final class Pool {
    final long ruleVersion;
    final HashMap<String, Acl> values = new HashMap<>();

    Pool(long ruleVersion) {
      this.ruleVersion = ruleVersion;
    }
  }

  private final Map<String, Pool> pools = new HashMap<>();

  /**
   * The shared {@link Acl} of {@code value} in {@code collection} under rule {@code ruleVersion},
   * or null when it is not to be remembered (too long, or the collection's pool is full).
   */
  Acl of(String collection, long ruleVersion, String value) {
    if (value == null || value.length() > MAX_CHARS) {
      return null;
    }
    Pool pool = pools.get(collection);
    if (pool == null || pool.ruleVersion != ruleVersion) {
      // Values read under another rule are never valid again: their pool goes.
      pool = new Pool(ruleVersion);
      pools.put(collection, pool);
    }
    Acl acl = pool.values.get(value);
    if (acl == null && pool.values.size() < MAX_VALUES) {
      acl = new Acl(ruleVersion, value);
      pool.values.put(value, acl);
    }
    return acl;
  }

  /** Values remembered for {@code collection} (tests). */
  int values(String collection) {
    Pool pool = pools.get(collection);
    return pool == null ? 0 : pool.values.size();
  }
}
