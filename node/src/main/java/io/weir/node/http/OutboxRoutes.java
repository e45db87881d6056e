package io.weir.node.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.weir.node.documents.Documents;
import io.weir.persistence.StorageSystem;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.Lsn;
import io.weir.protocol.http.OutboxSettings;
import io.weir.protocol.http.OutboxStatus;
import io.weir.sharding.partition.PartitionProtocol.OutboxPurged;
import io.weir.sharding.partition.PartitionProtocol.PurgeRefused;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import io.weir.sharding.partition.StatusProtocol.StorageLossAccepted;
import io.weir.sharding.partition.StatusProtocol.StorageLossRefused;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * The partitions' outboxes and storage, for administrators under {@code /admin}: {@code GET
 * outbox/settings}, {@code GET outbox/status[?partition=N]}, {@code POST outbox/purge} and {@code
 * POST partitions/{n}/accept-storage-loss}. Without the document service every one answers 404
 * (without settings, {@code outbox/settings} does).
 */
final class OutboxRoutes extends JsonRoutes {
  private final Documents documents;
  private final OutboxSettings settings;

  /**
   * @param documents the partitions, or null (404)
   * @param settings the quota and retention every partition runs under, or null (404)
   */
  OutboxRoutes(ObjectMapper json, Documents documents, OutboxSettings settings) {
    super(json);
    this.documents = documents;
    this.settings = settings;
  }

  /** The routes, below {@code /admin}. */
  Route routes() {
    return concat(
        path(
            PathMatchers.segment("outbox").slash("settings"),
            () ->
                get(
                    () ->
                        settings == null
                            ? error(ErrorCode.NOT_FOUND, "no such resource")
                            : json(200, settings))),
        documents == null
            ? reject()
            : concat(
                path(
                    PathMatchers.segment("partitions")
                        .slash(PathMatchers.integerSegment())
                        .slash("accept-storage-loss"),
                    n ->
                        post(
                            () ->
                                parameterOptional(
                                    "confirm", confirm -> acceptStorageLoss(n, confirm)))),
                path(
                    PathMatchers.segment("outbox").slash("status"),
                    () -> get(() -> parameterOptional("partition", this::outboxStatus))),
                path(
                    PathMatchers.segment("outbox").slash("purge"),
                    () -> post(() -> jsonBody(ADMIN_BODY, this::purge)))));
  }

  /**
   * {@code GET /admin/outbox/status?partition=N}: partition N's {@link OutboxStatus} (400 for N
   * outside 0 to P-1); without {@code partition}, a list of all P, asked in parallel. 503 when a
   * partition does not answer in time.
   */
  private Route outboxStatus(Optional<String> partition) {
    if (partition.isEmpty()) {
      return onComplete(
          documents.statusAll(),
          result ->
              result.isSuccess()
                  ? json(200, result.get().stream().map(OutboxRoutes::outboxStatus).toList())
                  : partitionUnavailable(result.failed().get()));
    }
    int n;
    try {
      n = Integer.parseInt(partition.get());
    } catch (NumberFormatException e) {
      n = -1;
    }
    if (n < 0 || n >= documents.partitions()) {
      return error(
          ErrorCode.BAD_REQUEST,
          "partition must be a number from 0 to " + (documents.partitions() - 1));
    }
    return onComplete(
        documents.status(n),
        result ->
            result.isSuccess()
                ? json(200, outboxStatus(result.get()))
                : partitionUnavailable(result.failed().get()));
  }

  /**
   * {@code POST /admin/partitions/{n}/accept-storage-loss?confirm={n}}: gives partition N, halted
   * {@code storage-behind} because its journal lacks writes it acknowledged, a new incarnation at
   * its journal's tail (ADR 0036). 200 {@code {"partition", "epoch", "journalTail", "lost"}}; 400
   * without the confirmation or for N out of range; 409 {@code not-storage-behind} when the
   * partition's journal holds everything it acknowledged.
   */
  private Route acceptStorageLoss(int n, Optional<String> confirm) {
    if (n < 0 || n >= documents.partitions()) {
      return error(
          ErrorCode.BAD_REQUEST,
          "partition must be a number from 0 to " + (documents.partitions() - 1));
    }
    if (confirm.isEmpty() || !confirm.get().equals(Integer.toString(n))) {
      return error(
          ErrorCode.BAD_REQUEST,
          "accepting a storage loss gives up the writes the storage lost and invalidates the"
              + " partition's tokens and cursors; confirm with ?confirm=<the partition's number>");
    }
    return onComplete(
        documents.acceptStorageLoss(n),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          if (result.get() instanceof StorageLossRefused r) {
            return error(ErrorCode.NOT_STORAGE_BEHIND, r.reason());
          }
          var a = (StorageLossAccepted) result.get();
          return json(
              200,
              Map.of(
                  "partition",
                  n,
                  "epoch",
                  a.epoch(),
                  "journalTail",
                  a.journalTail(),
                  "lost",
                  a.lost()));
        });
  }

  /** Outbox entries one purge request reclaims at most (a bounded prefix; ask again for more). */
  static final long MAX_PURGE_ENTRIES = 100_000;

  /**
   * {@code POST /admin/outbox/purge} with {@code {"partition": N, "through": S}}: reclaims
   * partition N's outbox entries up to S, at most {@link #MAX_PURGE_ENTRIES} per request (the
   * reply's {@code more} says to ask again). 200 {@code {"partition", "outboxFirst", "outboxNext",
   * "purged", "more"}}; 400 for a bad body, a partition out of range, or S at or past the outbox's
   * end (nothing is purged then).
   */
  private Route purge(JsonNode root) {
    if (root == null
        || !root.isObject()
        || !root.path("partition").canConvertToInt()
        || !root.path("partition").isIntegralNumber()
        || !root.path("through").isIntegralNumber()
        || !root.path("through").canConvertToLong()) {
      return error(
          ErrorCode.BAD_REQUEST, "the body must be {\"partition\": N, \"through\": sequence}");
    }
    int n = root.get("partition").intValue();
    long through = root.get("through").longValue();
    if (n < 0 || n >= documents.partitions()) {
      return error(
          ErrorCode.BAD_REQUEST,
          "partition must be a number from 0 to " + (documents.partitions() - 1));
    }
    if (through < 0) {
      return error(ErrorCode.BAD_REQUEST, "through must not be negative");
    }
    int partition = n;
    return onComplete(
        documents.purge(n, through, MAX_PURGE_ENTRIES),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          if (result.get() instanceof PurgeRefused r) {
            return error(ErrorCode.BAD_REQUEST, r.reason());
          }
          var p = (OutboxPurged) result.get();
          return json(
              200,
              Map.of(
                  "partition",
                  partition,
                  "outboxFirst",
                  p.outboxFirst(),
                  "outboxNext",
                  p.outboxNext(),
                  "purged",
                  p.purged(),
                  "more",
                  p.more(),
                  "pinned",
                  p.pinned()));
        });
  }

  private static OutboxStatus outboxStatus(PartitionStatus s) {
    Map<String, String> watermarks = new TreeMap<>();
    s.watermarks().forEach((source, lsn) -> watermarks.put(source, Lsn.of(lsn).toString()));
    List<OutboxStatus.Consumer> consumers =
        s.consumers().stream()
            .map(
                c ->
                    new OutboxStatus.Consumer(
                        c.name(),
                        c.generation(),
                        c.collections(),
                        c.kinds(),
                        c.startAfter(),
                        c.checkpoint(),
                        s.outboxNext() - 1 - c.checkpoint(),
                        c.released()))
            .toList();
    return new OutboxStatus(
        s.partition(),
        s.documents(),
        s.outboxFirst(),
        s.outboxNext(),
        s.outboxEntries(),
        s.outboxBytes(),
        s.journalEvents(),
        watermarks,
        consumers,
        s.storage() == null
            ? null
            : new OutboxStatus.Storage(
                s.storage().state(),
                s.storage().acknowledged(),
                s.storage().epoch(),
                s.storage().copies(),
                identity(s.storage().checkedOn()),
                identity(s.storage().acknowledgedOn())),
        s.table() == null
            ? null
            : new OutboxStatus.DocumentsTable(
                s.table().state(),
                s.table().appliedThrough(),
                s.table().lagEvents(),
                s.table().failures(),
                s.table().lastError(),
                s.table().moved(),
                s.table().toMove(),
                s.table().lagBytes()));
  }

  private static OutboxStatus.StorageIdentity identity(StorageSystem s) {
    return s == null
        ? null
        : new OutboxStatus.StorageIdentity(
            Long.toUnsignedString(s.systemIdentifier()), s.timeline());
  }
}
