package io.weir.sharding.partition;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.protocol.CborSerializable;
import io.weir.sharding.partition.PartitionProtocol.Command;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * Reads of a partition: documents by id, its outbox's changes, the ACLs of documents and scans of a
 * collection with the reader's row visibility applied. None of them writes.
 */
public final class ReadProtocol {
  private ReadProtocol() {}

  /** Replies with a document's current revision and body, if it exists (tombstones included). */
  public record GetDocument(String collection, String id, ActorRef<DocumentReply> replyTo)
      implements Command {
    /** No id: ids are row values (primary keys). */
    @Override
    public String toString() {
      return "GetDocument[" + collection + "]";
    }
  }

  /**
   * Replies with up to {@code limit} documents of {@code collection} (tombstones included) whose id
   * sorts after {@code afterId} (null: from the first), in id order.
   */
  public record GetDocuments(
      String collection, String afterId, int limit, ActorRef<DocumentsReply> replyTo)
      implements Command {
    @Override
    public String toString() {
      return "GetDocuments[" + collection + ", limit=" + limit + "]";
    }
  }

  /**
   * @param more whether documents after the last one returned exist
   */
  public record DocumentsReply(List<Document> documents, boolean more)
      implements CborSerializable {}

  /**
   * A document as the partition holds it.
   *
   * @param body null for a tombstone; never logged
   * @param acl a tombstone's ACL (the row-visibility field of the deleted document, as JSON; null
   *     when the collection has no row rule or it is unknown); null for live documents, whose ACL
   *     is in their body. Never logged
   */
  public record Document(
      String collection, String id, long revision, String body, boolean deleted, String acl)
      implements CborSerializable {
    public Document(String collection, String id, long revision, String body, boolean deleted) {
      this(collection, id, revision, body, deleted, null);
    }

    @Override
    public String toString() {
      return "Document[" + collection + ", revision=" + revision + ", deleted=" + deleted + "]";
    }
  }

  /**
   * @param ruleVersion the version of the collection's row rule installed in the partition (0:
   *     none)
   */
  public record DocumentReply(Optional<Document> document, long ruleVersion)
      implements CborSerializable {
    public DocumentReply(Optional<Document> document) {
      this(document, 0);
    }
  }

  /**
   * Replies where the outbox entries after {@code after} lie (at most {@code maxEntries} of them),
   * with the partition's incarnation and {@code collection}'s row-visibility epoch and rule
   * version.
   */
  public record ReadChanges(
      String collection, long after, long maxEntries, ActorRef<ChangesSpan> replyTo)
      implements Command {}

  /**
   * @param incarnation null while the partition has written nothing
   * @param tail the last outbox position (outboxFirst - 1 when empty)
   * @param rowEpoch how often the collection's row visibility changed in this partition
   * @param ruleVersion the installed row rule's version (0: none)
   * @param journalSequences the journal events holding the positions asked for; empty when they
   *     were purged ({@code after + 1 < outboxFirst})
   */
  public record ChangesSpan(
      String incarnation,
      long outboxFirst,
      long tail,
      long rowEpoch,
      long ruleVersion,
      List<Long> journalSequences)
      implements CborSerializable {}

  /** Replies with the current ACLs of documents of {@code collection} (tombstones keep theirs). */
  public record GetAcls(String collection, List<String> ids, ActorRef<Acls> replyTo)
      implements Command {
    @Override
    public String toString() {
      return "GetAcls[" + collection + ", ids=" + ids.size() + "]";
    }
  }

  /**
   * @param acls id -> the ACL field's value as JSON ({@code "null"} when absent or unknown); ids
   *     the partition does not hold are left out
   */
  public record Acls(long rowEpoch, long ruleVersion, Map<String, String> acls)
      implements CborSerializable {
    @Override
    public String toString() {
      return "Acls[rowEpoch=" + rowEpoch + ", entries=" + acls.size() + "]";
    }
  }

  /**
   * Replies, in one step, with every live document of {@code collection} that {@code reader} may
   * see and the outbox tail at that moment: a baseline and the position its changes start after.
   * More than {@code maxBytes} of those documents (counted like the state's size: with ids and
   * overhead) answers {@code tooLarge} and no documents; documents the reader may not see count for
   * nothing, so neither the answer nor the refusal depends on them.
   *
   * @param reader whose documents: null for every document (an administrator, or a collection
   *     without a row rule)
   */
  public record ScanCollection(
      String collection, long maxBytes, ScanReader reader, ActorRef<CollectionScan> replyTo)
      implements Command {
    /** A scan of every document. */
    public ScanCollection(String collection, long maxBytes, ActorRef<CollectionScan> replyTo) {
      this(collection, maxBytes, null, replyTo);
    }

    /** No principal id or groups. */
    @Override
    public String toString() {
      return "ScanCollection[" + collection + ", maxBytes=" + maxBytes + "]";
    }
  }

  /**
   * The reader of a {@link ScanCollection}, for the row rule installed in the partition: under an
   * {@code owner} rule a document is its when the field is its principal id; under an {@code acl}
   * rule when the field is an array listing its id or {@code "group:<name>"} of one of its groups.
   * A field that is missing or of another shape admits nobody (the node's projector, {@code
   * io.weir.node.auth.Access}, applies the same rule to every row it returns).
   *
   * @param principal the reader's principal id
   * @param groups the reader's groups
   * @param owner whether the rule is {@code owner} (otherwise {@code acl})
   */
  public record ScanReader(String principal, Set<String> groups, boolean owner)
      implements CborSerializable {
    public ScanReader {
      Objects.requireNonNull(principal, "principal");
      groups = groups == null ? Set.of() : Set.copyOf(groups);
    }

    /** Whether a document whose row-visibility field is {@code aclJson} (compact JSON) is its. */
    public boolean sees(String aclJson) {
      if (aclJson == null) {
        return false;
      }
      JsonNode acl;
      try {
        acl = JSON.readTree(aclJson);
      } catch (IOException e) {
        return false;
      }
      if (acl == null) {
        return false;
      }
      if (owner) {
        return acl.isTextual() && acl.textValue().equals(principal);
      }
      if (!acl.isArray()) {
        return false;
      }
      for (JsonNode entry : acl) {
        if (entry.isTextual()) {
          String e = entry.textValue();
          if (e.equals(principal)
              || (e.startsWith("group:") && groups.contains(e.substring("group:".length())))) {
            return true;
          }
        }
      }
      return false;
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    /** No principal id or groups. */
    @Override
    public String toString() {
      return "ScanReader[owner=" + owner + ", groups=" + groups.size() + "]";
    }
  }

  public record CollectionScan(
      String incarnation,
      long outboxFirst,
      long tail,
      long rowEpoch,
      long ruleVersion,
      List<Document> documents,
      boolean tooLarge)
      implements CborSerializable {
    @Override
    public String toString() {
      return "CollectionScan[documents="
          + documents.size()
          + ", tail="
          + tail
          + ", tooLarge="
          + tooLarge
          + "]";
    }
  }
}
