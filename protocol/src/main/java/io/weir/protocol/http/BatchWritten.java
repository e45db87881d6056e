package io.weir.protocol.http;

import com.fasterxml.jackson.annotation.JsonInclude;
import io.weir.protocol.ErrorCode;
import java.util.List;

/**
 * Reply of {@code POST /v1/documents/batch}: one result per item, in the request's order. The items
 * are grouped by partition; each group is written atomically (all of it or none of it), the groups
 * independently of each other.
 *
 * @param applied how many items were written (or had been: a replayed group)
 * @param failed how many were not
 */
public record BatchWritten(List<Item> results, int applied, int failed) {
  public BatchWritten {
    results = List.copyOf(results);
  }

  @Override
  public String toString() {
    return "BatchWritten[items=" + results.size() + ", applied=" + applied + "]";
  }

  /** What happened to one item. */
  public enum Status {
    /** Written; {@code revision}, {@code deleted} and {@code replayed} say how. */
    APPLIED,
    /** Its {@code ifMatch} did not hold: {@code actualRevision}; its group was not written. */
    CONFLICT,
    /**
     * A delete of a document that does not exist (or is not visible); its group was not written.
     */
    NOT_FOUND,
    /** Refused ({@code error}, {@code message}, {@code retryable}) with the rest of its group. */
    FAILED,
    /** Not written because item {@code abortedBy} of the same group was not. */
    ABORTED;

    public String wire() {
      return name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
    }
  }

  /**
   * One item's result. Fields that do not apply to its status are absent.
   *
   * @param index the item's position in the request, from 0
   * @param partition the partition holding the document: items of one partition form one group
   * @param status {@link Status#wire()}
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  public record Item(
      int index,
      String collection,
      String id,
      int partition,
      String status,
      Long revision,
      Boolean deleted,
      Boolean replayed,
      Long actualRevision,
      Integer abortedBy,
      String error,
      String message,
      Boolean retryable) {

    public static Item applied(
        int index,
        String collection,
        String id,
        int partition,
        long revision,
        boolean deleted,
        boolean replayed) {
      return new Item(
          index,
          collection,
          id,
          partition,
          Status.APPLIED.wire(),
          revision,
          deleted,
          replayed,
          null,
          null,
          null,
          null,
          null);
    }

    public static Item conflict(
        int index,
        String collection,
        String id,
        int partition,
        long actualRevision,
        String message) {
      return new Item(
          index,
          collection,
          id,
          partition,
          Status.CONFLICT.wire(),
          null,
          null,
          null,
          actualRevision,
          null,
          ErrorCode.CONFLICT.wire(),
          message,
          ErrorCode.CONFLICT.retryable());
    }

    public static Item notFound(int index, String collection, String id, int partition) {
      return new Item(
          index,
          collection,
          id,
          partition,
          Status.NOT_FOUND.wire(),
          null,
          null,
          null,
          null,
          null,
          ErrorCode.NOT_FOUND.wire(),
          "no such document",
          ErrorCode.NOT_FOUND.retryable());
    }

    public static Item failed(
        int index, String collection, String id, int partition, ErrorCode code, String message) {
      return new Item(
          index,
          collection,
          id,
          partition,
          Status.FAILED.wire(),
          null,
          null,
          null,
          null,
          null,
          code.wire(),
          message,
          code.retryable());
    }

    public static Item aborted(
        int index, String collection, String id, int partition, int abortedBy, boolean retryable) {
      return new Item(
          index,
          collection,
          id,
          partition,
          Status.ABORTED.wire(),
          null,
          null,
          null,
          null,
          abortedBy,
          null,
          "another item of this partition's group was not written",
          retryable);
    }

    /** Values the client sent (collection, id) are left out. */
    @Override
    public String toString() {
      return "Item[index=" + index + ", partition=" + partition + ", status=" + status + "]";
    }
  }
}
