package io.weir.node.http;

import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import io.weir.node.documents.Documents;
import io.weir.node.documents.ReadAdmission;
import io.weir.node.projection.Projections;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.Lsn;
import io.weir.protocol.token.BatchToken;
import io.weir.protocol.token.TokenSigner;
import io.weir.sharding.partition.ConsumerProtocol;
import io.weir.sharding.partition.ConsumerProtocol.BatchCommitted;
import io.weir.sharding.partition.ConsumerProtocol.BatchReceipt;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerConfigured;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefused;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReleased;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerView;
import io.weir.sharding.partition.OutboxReader;
import io.weir.sharding.partition.Partition;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.server.Route;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code /admin/projections/*}: projection consumers over a partition's outbox (cluster
 * administrators only; {@link HttpApi} checks that before these routes run). Every request is a
 * JSON object read strictly: unknown fields, wrong types and duplicate fields are 400 and change
 * nothing.
 *
 * <ul>
 *   <li>{@code configure} {@code {"partition", "consumer", "generation", "collections"?, "kinds"?,
 *       "startAfter"?}}: 201 with the consumer when created, 200 when it existed with the same
 *       definition.
 *   <li>{@code read} {@code {"partition", "consumer", "generation", "maxEntries"?, "maxBytes"?}}:
 *       200 with the batch and its {@code token}.
 *   <li>{@code commit} {@code {"token", "commandId"?, "effects": [...]}} (optionally {@code
 *       partition}, {@code consumer}, {@code generation}, which must match the token): 200 with the
 *       receipt, {@code alreadyProcessed} for a retried batch.
 *   <li>{@code release} {@code {"partition", "consumer", "generation"}}: 200.
 * </ul>
 */
final class ProjectionRoutes extends JsonRoutes {
  private static final Logger log = LoggerFactory.getLogger(ProjectionRoutes.class);

  /** Request bodies other than commits are small. */
  private static final long SMALL_BODY = 64 * 1024;

  private final Projections projections;
  private final Documents documents;
  private final long maxDocumentBytes;

  ProjectionRoutes(
      ObjectMapper json, Projections projections, Documents documents, long maxDocumentBytes) {
    super(json);
    this.projections = projections;
    this.documents = documents;
    this.maxDocumentBytes = maxDocumentBytes;
  }

  Route routes() {
    long commitLimit = projections.limits().maxEffectBytes() * 2 + SMALL_BODY;
    return concat(
        path(
            "configure",
            () ->
                post(
                    () ->
                        request(
                            SMALL_BODY,
                            ErrorCode.BAD_REQUEST,
                            ProjectionRequests.ConfigureRequest.class,
                            this::configure))),
        path(
            "read",
            () ->
                post(
                    () ->
                        request(
                            SMALL_BODY,
                            ErrorCode.BAD_REQUEST,
                            ProjectionRequests.ReadRequest.class,
                            this::read))),
        path(
            "commit",
            () ->
                post(
                    () ->
                        request(
                            commitLimit,
                            ErrorCode.EFFECTS_TOO_LARGE,
                            ProjectionRequests.CommitRequest.class,
                            this::commit))),
        path(
            "release",
            () ->
                post(
                    () ->
                        request(
                            SMALL_BODY,
                            ErrorCode.BAD_REQUEST,
                            ProjectionRequests.ReleaseRequest.class,
                            this::release))));
  }

  private <T> Route request(
      long limit, ErrorCode tooLarge, Class<T> type, Function<T, Route> inner) {
    return body(
        limit,
        () -> error(tooLarge, "the request body is larger than " + limit + " bytes"),
        bytes -> {
          T value;
          try {
            value = STRICT.readValue(utf8(bytes), type);
          } catch (MalformedBody e) {
            return error(ErrorCode.MALFORMED_JSON, e.getMessage());
          } catch (UnrecognizedPropertyException e) {
            String name = e.getPropertyName();
            return error(
                ErrorCode.BAD_REQUEST,
                name != null && name.matches("[A-Za-z0-9_]{1,64}")
                    ? "unknown field " + name
                    : "the body has an unknown field");
          } catch (JsonParseException e) {
            return error(ErrorCode.MALFORMED_JSON, "the body is not valid JSON");
          } catch (IOException | RuntimeException e) {
            // Jackson's messages may quote the input: only the field path goes out.
            return error(
                ErrorCode.BAD_REQUEST,
                "the body does not have the expected shape" + ProjectionRequests.fieldPath(e));
          }
          if (value == null) {
            return error(ErrorCode.BAD_REQUEST, "the body must be a JSON object");
          }
          return inner.apply(value);
        });
  }

  /** 400 naming what is wrong with the identity fields, or null when they are fine. */
  private Route badIdentity(Integer partition, String consumer, Long generation) {
    if (partition == null || partition < 0 || partition >= projections.partitions()) {
      return error(
          ErrorCode.BAD_REQUEST,
          "partition must be a number from 0 to " + (projections.partitions() - 1));
    }
    if (!Partition.validConsumerName(consumer)) {
      return error(ErrorCode.BAD_REQUEST, "consumer must be 1 to 64 of A-Z a-z 0-9 _ . -");
    }
    if (generation == null || generation < 1) {
      return error(ErrorCode.BAD_REQUEST, "generation must be a number from 1");
    }
    return null;
  }

  private Route configure(ProjectionRequests.ConfigureRequest r) {
    Route bad = badIdentity(r.partition(), r.consumer(), r.generation());
    if (bad != null) {
      return bad;
    }
    List<String> collections = r.collections() == null ? List.of() : r.collections();
    List<String> kinds = r.kinds() == null ? List.of() : r.kinds();
    if (collections.stream().anyMatch(c -> c == null || !Documents.readableCollection(c))) {
      return error(ErrorCode.BAD_REQUEST, "collections are 1 to 128 of A-Z a-z 0-9 _ . -");
    }
    if (kinds.stream().anyMatch(k -> k == null || !ConsumerProtocol.ENTRY_KINDS.contains(k))) {
      return error(ErrorCode.BAD_REQUEST, "kinds are among " + ConsumerProtocol.ENTRY_KINDS);
    }
    if (r.startAfter() != null && r.startAfter() < 0) {
      return error(ErrorCode.BAD_REQUEST, "startAfter must not be negative");
    }
    return onComplete(
        projections.configure(
            r.partition(),
            r.consumer(),
            r.generation(),
            collections,
            kinds,
            Optional.ofNullable(r.startAfter())),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          if (result.get() instanceof ConsumerConfigured c) {
            return json(
                c.created() ? 201 : 200,
                Map.of(
                    "partition",
                    r.partition(),
                    "consumer",
                    view(c.consumer()),
                    "created",
                    c.created()));
          }
          return refused(result.get());
        });
  }

  private Route release(ProjectionRequests.ReleaseRequest r) {
    Route bad = badIdentity(r.partition(), r.consumer(), r.generation());
    if (bad != null) {
      return bad;
    }
    return onComplete(
        projections.release(r.partition(), r.consumer(), r.generation()),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          if (result.get() instanceof ConsumerReleased c) {
            return json(
                200,
                Map.of(
                    "partition",
                    r.partition(),
                    "consumer",
                    view(c.consumer()),
                    "alreadyReleased",
                    c.alreadyReleased()));
          }
          return refused(result.get());
        });
  }

  private Route read(ProjectionRequests.ReadRequest r) {
    Route bad = badIdentity(r.partition(), r.consumer(), r.generation());
    if (bad != null) {
      return bad;
    }
    var limits = projections.limits();
    int maxEntries = r.maxEntries() == null ? limits.defaultReadEntries() : r.maxEntries();
    long maxBytes = r.maxBytes() == null ? limits.defaultReadBytes() : r.maxBytes();
    if (maxEntries < 1 || maxEntries > limits.maxReadEntries()) {
      return error(
          ErrorCode.BAD_REQUEST, "maxEntries must be from 1 to " + limits.maxReadEntries());
    }
    if (maxBytes < 1 || maxBytes > limits.maxReadBytes()) {
      return error(ErrorCode.BAD_REQUEST, "maxBytes must be from 1 to " + limits.maxReadBytes());
    }
    return onComplete(
        projections.read(r.partition(), r.consumer(), r.generation(), maxEntries, maxBytes),
        result -> {
          if (!result.isSuccess()) {
            Throwable t = unwrap(result.failed().get());
            if (t instanceof OutboxReader.MissingEntries missing) {
              return missingEntries(r, missing);
            }
            return unavailable(t);
          }
          Projections.ReadResult read = result.get();
          if (read instanceof Projections.Refused refused) {
            return refused(refused.refusal());
          }
          if (read instanceof Projections.BudgetExceeded b) {
            return error(
                ErrorCode.BUDGET_EXCEEDED,
                "the entry at position "
                    + b.position()
                    + " has "
                    + b.entryBytes()
                    + " bytes of payload, more than maxBytes "
                    + b.maxBytes()
                    + "; read with a larger budget");
          }
          return batch((Projections.Batch) read);
        });
  }

  /**
   * Entries the read expected were gone from the journal. That is legitimate when the consumer
   * moved on (another worker committed, then a purge and the journal pruning removed them) or was
   * released meanwhile: the partition is asked again, and the answer is then {@code stale-batch} or
   * {@code token-invalidated}. Only when nothing changed is it a hole: logged, 410.
   */
  private Route missingEntries(
      ProjectionRequests.ReadRequest r, OutboxReader.MissingEntries missing) {
    return onComplete(
        projections.consumer(r.partition(), r.consumer(), r.generation()),
        now -> {
          if (now.isSuccess()
              && now.get() instanceof ConsumerProtocol.ConsumerSpan span
              && span.consumer().checkpoint() != missing.after()) {
            return error(
                ErrorCode.STALE_BATCH,
                "the consumer's checkpoint moved while this batch was read; read again");
          }
          if (now.isSuccess() && now.get() instanceof ConsumerRefused refused) {
            return refused(refused);
          }
          log.error("a projection read found a hole in the outbox: {}", missing.getMessage());
          return error(
              ErrorCode.HISTORY_UNAVAILABLE,
              "entries of this batch are missing from the journal; see the node's log");
        });
  }

  /** The batch as JSON; images are embedded as JSON values, not strings. */
  private Route batch(Projections.Batch b) {
    StringBuilder out =
        new StringBuilder(256 + (int) Math.min(Integer.MAX_VALUE / 2, b.bytes() * 2));
    try {
      out.append("{\"partition\":")
          .append(b.partition())
          .append(",\"consumer\":")
          .append(json.writeValueAsString(b.consumer().name()))
          .append(",\"generation\":")
          .append(b.consumer().generation())
          .append(",\"start\":")
          .append(b.start())
          .append(",\"through\":")
          .append(b.through())
          .append(",\"tail\":")
          .append(b.tail())
          .append(",\"hasMore\":")
          .append(b.hasMore())
          .append(",\"token\":")
          .append(json.writeValueAsString(b.token()))
          .append(",\"entries\":[");
      boolean first = true;
      for (Partition.OutboxEntry e : b.entries()) {
        if (!first) {
          out.append(',');
        }
        first = false;
        out.append("{\"sequence\":")
            .append(e.sequence())
            .append(",\"ordinal\":")
            .append(e.ordinal())
            .append(",\"collection\":")
            .append(json.writeValueAsString(e.collection()))
            .append(",\"id\":")
            .append(json.writeValueAsString(e.id()))
            .append(",\"kind\":")
            .append(json.writeValueAsString(e.kind()))
            .append(",\"revision\":")
            .append(e.revision())
            .append(",\"evaluatedAt\":\"")
            .append(Instant.ofEpochMilli(e.evaluatedAtMillis()))
            .append('"')
            .append(",\"commitLsn\":")
            .append(e.commitLsn() == 0 ? "null" : "\"" + Lsn.of(e.commitLsn()) + "\"")
            .append(",\"before\":")
            .append(e.before() == null ? "null" : e.before())
            .append(",\"after\":")
            .append(e.after() == null ? "null" : e.after())
            .append('}');
      }
      out.append("]}");
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot encode a string", e);
    }
    return complete(
        HttpResponse.create()
            .withEntity(
                ContentTypes.APPLICATION_JSON, out.toString().getBytes(StandardCharsets.UTF_8)));
  }

  private Route commit(ProjectionRequests.CommitRequest r) {
    if (r.token() == null) {
      return error(ErrorCode.BAD_REQUEST, "token is required");
    }
    return onComplete(
        projections.verify(r.token()),
        verified -> {
          if (verified.isSuccess()) {
            return commit(r, verified.get());
          }
          Throwable t = unwrap(verified.failed().get());
          if (t instanceof TokenSigner.InvalidToken e) {
            return error(
                Projections.tokenErrorCode(e.failure()),
                e.failure() == TokenSigner.Failure.INVALIDATED_BY_RESTORE
                    ? "the batch token was issued before the cluster was restored from a backup; read the batch again"
                    : e.getMessage());
          }
          return unavailable(t);
        });
  }

  private Route unavailable(Throwable t) {
    if (t instanceof ReadAdmission.Refused r) {
      return error(r.code(), r.getMessage());
    }
    if (t instanceof Projections.KeysUnavailable) {
      return error(
          ErrorCode.UNAVAILABLE,
          "the cluster's token keys are not loaded yet (storage is starting); retry");
    }
    return partitionUnavailable(t);
  }

  private Route commit(ProjectionRequests.CommitRequest r, BatchToken token) {
    if ((r.partition() != null && r.partition() != token.partition())
        || (r.consumer() != null && !r.consumer().equals(token.consumer()))
        || (r.generation() != null && r.generation() != token.generation())) {
      return error(
          ErrorCode.TOKEN_MISMATCH,
          "the batch token was issued for another partition, consumer or generation");
    }
    if (token.partition() < 0 || token.partition() >= projections.partitions()) {
      return error(
          ErrorCode.INVALID_TOKEN, "the batch token names a partition this cluster does not have");
    }
    if (r.commandId() != null && !Documents.validIdempotencyKey(r.commandId())) {
      return error(
          ErrorCode.BAD_REQUEST,
          "commandId must be 1 to "
              + Documents.MAX_IDEMPOTENCY_KEY_LENGTH
              + " printable ASCII characters");
    }
    List<ProjectionRequests.EffectRequest> requested =
        r.effects() == null ? List.of() : r.effects();
    int maxEffects = projections.maxEffects();
    if (requested.size() > maxEffects) {
      return error(
          ErrorCode.EFFECTS_TOO_LARGE, "a commit carries at most " + maxEffects + " effects");
    }
    List<Mutation> effects = new ArrayList<>(requested.size());
    long bytes = 0;
    for (int i = 0; i < requested.size(); i++) {
      ProjectionRequests.EffectRequest e = requested.get(i);
      if (e == null
          || e.op() == null
          || e.collection() == null
          || e.id() == null
          || e.expectedRevision() == null) {
        return error(
            ErrorCode.BAD_REQUEST,
            "effect " + i + " needs op, collection, id and expectedRevision");
      }
      if (!Documents.writableCollection(e.collection()) || !Documents.validId(e.id())) {
        return error(
            ErrorCode.INVALID_NAME,
            "effect "
                + i
                + ": collections are 1 to 128 of A-Z a-z 0-9 _ -; ids are 1 to "
                + Documents.MAX_ID_LENGTH
                + " characters without control characters");
      }
      if (e.expectedRevision() < 0) {
        return error(
            ErrorCode.BAD_REQUEST,
            "effect " + i + ": expectedRevision must not be negative (0: must not exist)");
      }
      if (documents.fedByCdc(e.collection())) {
        return error(
            ErrorCode.COLLECTION_FED_BY_CDC,
            "effect " + i + " targets a collection written by a CDC pipeline");
      }
      if (documents.partitionOf(e.collection(), e.id()) != token.partition()) {
        return error(
            ErrorCode.CROSS_PARTITION_EFFECT,
            "effect "
                + i
                + " targets a document of partition "
                + documents.partitionOf(e.collection(), e.id())
                + ", not the batch's partition "
                + token.partition());
      }
      switch (e.op()) {
        case "upsert" -> {
          if (e.document() == null || !e.document().isObject()) {
            return error(
                ErrorCode.BAD_REQUEST,
                "effect " + i + ": an upsert needs a document (a JSON object)");
          }
          String body;
          try {
            body = STRICT.writeValueAsString(e.document());
          } catch (JsonProcessingException x) {
            return error(
                ErrorCode.BAD_REQUEST, "effect " + i + ": the document cannot be stored as JSON");
          }
          long size = body.getBytes(StandardCharsets.UTF_8).length;
          if (size > maxDocumentBytes) {
            return error(
                ErrorCode.DOCUMENT_TOO_LARGE,
                "effect "
                    + i
                    + ": the document is larger than weir.documents.max-bytes ("
                    + maxDocumentBytes
                    + " bytes)");
          }
          bytes += size;
          effects.add(new Upsert(e.collection(), e.id(), body, Optional.of(e.expectedRevision())));
        }
        case "delete" -> {
          if (e.document() != null) {
            return error(ErrorCode.BAD_REQUEST, "effect " + i + ": a delete carries no document");
          }
          effects.add(new Delete(e.collection(), e.id(), Optional.of(e.expectedRevision())));
        }
        default -> {
          return error(ErrorCode.BAD_REQUEST, "effect " + i + ": op must be upsert or delete");
        }
      }
    }
    if (bytes > projections.limits().maxEffectBytes()) {
      return error(
          ErrorCode.EFFECTS_TOO_LARGE,
          "the effects' documents hold "
              + bytes
              + " bytes, more than "
              + projections.limits().maxEffectBytes()
              + "; commit smaller batches (read with a smaller maxEntries)");
    }
    return onComplete(
        projections.commit(token, Optional.ofNullable(r.commandId()), effects),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          if (result.get() instanceof BatchCommitted c) {
            Map<String, Object> body = new LinkedHashMap<>();
            body.put("partition", token.partition());
            body.put("consumer", token.consumer());
            body.put("generation", token.generation());
            body.put("checkpoint", c.checkpoint());
            body.put("alreadyProcessed", c.alreadyProcessed());
            body.put("receipt", receipt(c.receipt()));
            return json(200, body);
          }
          return refused(result.get());
        });
  }

  private static Map<String, Object> receipt(BatchReceipt r) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("start", r.start());
    out.put("end", r.end());
    out.put("commandId", r.commandId());
    out.put("firstSequence", r.firstSequence());
    out.put("revisions", r.revisions());
    out.put("committedAt", Instant.ofEpochMilli(r.committedAtMillis()).toString());
    return out;
  }

  static Map<String, Object> view(ConsumerView c) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("consumer", c.name());
    out.put("generation", c.generation());
    out.put("collections", c.collections());
    out.put("kinds", c.kinds());
    out.put("startAfter", c.startAfter());
    out.put("checkpoint", c.checkpoint());
    out.put("released", c.released());
    return out;
  }

  private Route refused(ConsumerReply reply) {
    if (!(reply instanceof ConsumerRefused r)) {
      log.error(
          "a projection request got an unexpected reply of type {}",
          reply.getClass().getSimpleName());
      return error(ErrorCode.INTERNAL, "internal error; see the node's log");
    }
    ErrorCode code =
        switch (r.refusal()) {
          case NOT_FOUND -> ErrorCode.NOT_FOUND;
          case RELEASED -> ErrorCode.CONSUMER_RELEASED;
          case TOKEN_INVALIDATED -> ErrorCode.TOKEN_INVALIDATED;
          case IMMUTABLE, CONFLICT, REVISION_CONFLICT -> ErrorCode.CONFLICT;
          case TOO_MANY -> ErrorCode.TOO_MANY_CONSUMERS;
          case HISTORY_UNAVAILABLE -> ErrorCode.HISTORY_UNAVAILABLE;
          case STALE -> ErrorCode.STALE_BATCH;
          case QUOTA_EXCEEDED -> ErrorCode.QUOTA_EXCEEDED;
          case STORAGE_COPIES -> ErrorCode.STORAGE_COPIES_INSUFFICIENT;
          case STORAGE_BEHIND -> ErrorCode.STORAGE_BEHIND;
          case TABLE_APPLY_FAILED -> ErrorCode.TABLE_APPLY_FAILED;
          case INVALID -> ErrorCode.BAD_REQUEST;
        };
    String message = r.reason();
    if (r.refusal() == ConsumerProtocol.ConsumerRefusal.REVISION_CONFLICT) {
      message = message + " (the document has revision " + r.actualRevision() + ")";
    }
    return error(code, message);
  }
}
