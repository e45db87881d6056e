package io.weir.node.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.auth.Access;
import io.weir.node.auth.Principal;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.protocol.ErrorCode;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.KeyReused;
import io.weir.sharding.partition.PartitionProtocol.QuotaExceeded;
import io.weir.sharding.partition.PartitionProtocol.Rejected;
import io.weir.sharding.partition.PartitionProtocol.StorageBehind;
import io.weir.sharding.partition.PartitionProtocol.StorageRefused;
import io.weir.sharding.partition.PartitionProtocol.TableApplyFailed;
import io.weir.sharding.partition.ReadProtocol.Document;
import io.weir.sharding.partition.StorageGate;
import java.io.IOException;
import java.util.Optional;
import java.util.function.Predicate;

/**
 * The checks a document write under a restricting collection policy passes, for single writes
 * ({@link DocumentRoutes}) and batches ({@link DocumentBatchRoutes}) alike: the current document
 * must be visible to the writer, and so must the new one (nobody writes rows they could not read
 * back); sensitive fields the writer may not read cannot be written and keep their current values.
 * The write then expects the revision just checked, so a concurrent change (say, of the ACL) makes
 * it a conflict rather than slip through; an {@code If-Match} other than the checked revision can
 * only get a retried write's receipt ({@link #NO_REVISION}).
 */
final class WriteGuard {
  private WriteGuard() {}

  /** An expected revision no document has: a write with it can only be answered by a receipt. */
  static final long NO_REVISION = -1;

  /** Why a write under a restricting policy was not sent to the partition. */
  enum Refusal {
    /** The current document's row is not visible to the writer. */
    HIDDEN,
    /** The new document's row would not be visible to the writer. */
    INVISIBLE,
    /** The current document could not be read as JSON. */
    UNREADABLE
  }

  /** A write that passed: the body to store and the revision the partition must find. */
  record Guarded(String body, long expected) {
    @Override
    public String toString() {
      return "Guarded[expected=" + expected + "]";
    }
  }

  /**
   * A sensitive field {@code next} sets that {@code principal} may not read (a field name the
   * policy declares, so an operator's word, not the client's), or null when there is none.
   */
  static String forbiddenField(Principal principal, CollectionPolicy policy, ObjectNode next) {
    Predicate<String> hidden = Access.omitted(principal, policy);
    for (String f : policy.sensitiveFields()) {
      if (hidden.test(f) && next.has(f)) {
        return f;
      }
    }
    return null;
  }

  /**
   * The put of {@code next} over {@code current} (as the partition holds it, tombstones included):
   * a {@link Guarded} or a {@link Refusal}.
   */
  static Object put(
      Principal principal,
      CollectionPolicy policy,
      ObjectNode next,
      Optional<Document> current,
      Optional<Long> ifMatch) {
    Optional<Document> live = current.filter(d -> !d.deleted());
    ObjectNode merged = next;
    if (live.isPresent()) {
      JsonNode body;
      try {
        body = Access.JSON.readTree(live.get().body());
      } catch (IOException e) {
        return Refusal.UNREADABLE;
      }
      if (!Access.visibleRow(principal, policy, body)) {
        return Refusal.HIDDEN;
      }
      Predicate<String> hidden = Access.omitted(principal, policy);
      merged = next.deepCopy();
      for (String f : policy.sensitiveFields()) {
        if (hidden.test(f) && body.has(f)) {
          merged.set(f, body.get(f));
        }
      }
    }
    if (!Access.visibleRow(principal, policy, merged)) {
      return Refusal.INVISIBLE;
    }
    long checked = current.map(Document::revision).orElse(0L);
    try {
      return new Guarded(Access.JSON.writeValueAsString(merged), pinned(ifMatch, checked));
    } catch (JsonProcessingException e) {
      return Refusal.UNREADABLE;
    }
  }

  /**
   * The revision a delete of {@code current} expects ({@link #NO_REVISION} when there is no live
   * document), or {@link Refusal#HIDDEN} when its row is not visible to {@code principal} (answered
   * as if it did not exist).
   */
  static Object delete(
      Principal principal,
      CollectionPolicy policy,
      Optional<Document> current,
      Optional<Long> ifMatch) {
    Optional<Document> live = current.filter(d -> !d.deleted());
    if (live.isPresent()) {
      try {
        if (!Access.visibleRow(principal, policy, Access.JSON.readTree(live.get().body()))) {
          return Refusal.HIDDEN;
        }
      } catch (IOException e) {
        return Refusal.UNREADABLE;
      }
    }
    return pinned(ifMatch, live.map(Document::revision).orElse(NO_REVISION));
  }

  /** A partition's refusal of a write frame, as the API answers it. */
  record FrameRefusal(ErrorCode code, String message) {}

  /**
   * What the API answers for {@code reply} when the partition refused the frame as a whole (quota,
   * storage gate, storage behind, documents table failing, malformed, idempotency key reused),
   * {@code what} naming what was not written ("nothing", "nothing of this group"); null for any
   * other reply.
   */
  static FrameRefusal refusal(FrameReply reply, String what) {
    if (reply instanceof QuotaExceeded) {
      return new FrameRefusal(
          ErrorCode.QUOTA_EXCEEDED,
          "the partition's outbox is full; retry once entries are purged");
    }
    if (reply instanceof StorageRefused s) {
      return new FrameRefusal(
          ErrorCode.STORAGE_COPIES_INSUFFICIENT,
          "the storage keeps "
              + new StorageGate.Refusal(s.copies(), s.required()).describe()
              + "; "
              + what
              + " was written; retry once the copies are back");
    }
    if (reply instanceof StorageBehind) {
      return new FrameRefusal(
          ErrorCode.STORAGE_BEHIND,
          "the partition's storage lost writes it acknowledged; "
              + what
              + " was written; an operator must accept the loss (weir ctl partitions"
              + " accept-storage-loss)");
    }
    if (reply instanceof TableApplyFailed) {
      return new FrameRefusal(
          ErrorCode.TABLE_APPLY_FAILED,
          "the partition's documents table is as far behind as it may be and applying to it keeps"
              + " failing; "
              + what
              + " was written; retry later");
    }
    if (reply instanceof Rejected r) {
      return new FrameRefusal(ErrorCode.BAD_REQUEST, r.reason());
    }
    if (reply instanceof KeyReused) {
      return new FrameRefusal(
          ErrorCode.IDEMPOTENCY_KEY_REUSED,
          "this Idempotency-Key was used by this principal for another request; use a new key"
              + " for a new request");
    }
    return null;
  }

  /** The checked revision, or {@link #NO_REVISION} when the client expected another one. */
  private static long pinned(Optional<Long> ifMatch, long checked) {
    return ifMatch.isPresent() && ifMatch.get() != checked ? NO_REVISION : checked;
  }
}
