package io.weir.node.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.auth.Access;
import io.weir.node.auth.Authenticator;
import io.weir.node.auth.Policies;
import io.weir.node.auth.Principal;
import io.weir.node.auth.ShownImage;
import io.weir.node.documents.Documents;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.http.DocumentWritten;
import io.weir.protocol.http.RevisionConflict;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.Conflict;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.ReadProtocol.Document;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.headers.ETag;
import org.apache.pekko.http.javadsl.model.headers.EntityTag;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The document API. A document is a JSON object in a collection, identified by an id, with a
 * revision that counts its versions (a delete is one too).
 *
 * <ul>
 *   <li>{@code PUT}: the body (a JSON object, at most {@code weir.documents.max-bytes}, stored
 *       compacted) creates or replaces the document. 200 {@link DocumentWritten} with {@code ETag:
 *       "<revision>"}.
 *   <li>{@code GET}: 200 with the body and its {@code ETag}; 404 when absent or deleted.
 *   <li>{@code DELETE}: 200 {@link DocumentWritten} ({@code deleted: true}); 404 without writing
 *       when absent or already deleted.
 * </ul>
 *
 * <p>Writes take {@code If-Match: <revision>} (or {@code "<revision>"}; 0: must not exist), 409
 * {@link RevisionConflict} when it does not match, and {@code Idempotency-Key}: a retry with the
 * same key by the same principal with the same request (method, document, {@code If-Match}, body)
 * gets the first reply again with {@code replayed: true} and writes nothing, as long as the
 * partition remembers it (its last 10,000 keyed commands); the same key with another request is 409
 * {@code idempotency-key-reused}; another principal's key never matches. Collections are 1-128 of
 * {@code [A-Za-z0-9_-]} for writes ({@code .} also for reads: CDC collections), ids 1-512
 * characters without control characters (400 {@code invalid-name}); collections a pipeline's
 * partition sink names are read-only (409 {@code collection-fed-by-cdc}). A full outbox is 429
 * {@code quota-exceeded}; a partition that does not answer in time 503 {@code unavailable}, both
 * retryable.
 *
 * <p>Reads and writes check the collection's grant ({@code DocumentsRead}, {@code DocumentsWrite})
 * and, for a principal a collection policy governs, row visibility and sensitive fields; the
 * changes feed and queries ({@link FeedRoutes}) are served under the same prefix.
 */
final class DocumentRoutes extends JsonRoutes {
  private static final Logger log = LoggerFactory.getLogger(DocumentRoutes.class);

  /** A policy check found the partition running another row-rule version than this node. */
  private static final Object STALE = new Object();

  private final Authenticator authenticator;
  private final Documents documents;
  private final long maxDocumentBytes;
  private final Policies policies;
  private final DocumentBatchRoutes batchRoutes;
  private final FeedRoutes feedRoutes;

  /**
   * @param policies collection policies, or null (every collection unrestricted)
   * @param batchRoutes {@code POST /v1/documents/batch}
   * @param feedRoutes the changes feed and queries, or null (their paths are not served)
   */
  DocumentRoutes(
      ObjectMapper json,
      Authenticator authenticator,
      Documents documents,
      long maxDocumentBytes,
      Policies policies,
      DocumentBatchRoutes batchRoutes,
      FeedRoutes feedRoutes) {
    super(json);
    this.authenticator = authenticator;
    this.documents = documents;
    this.maxDocumentBytes = maxDocumentBytes;
    this.policies = policies;
    this.batchRoutes = batchRoutes;
    this.feedRoutes = feedRoutes;
  }

  /**
   * The routes under {@code /v1} for {@code principal}. Built for every request (the principal is
   * the request's), so the batch, feed and query trees are built only for a path under their first
   * segments: a document request does not build them.
   */
  Route routes(Principal principal) {
    return concat(
        pathPrefixTest(
            PathMatchers.segment("documents").slash("batch"), () -> batchRoutes.routes(principal)),
        path(
            PathMatchers.segment("documents")
                .slash(PathMatchers.segment())
                .slash(PathMatchers.segment()),
            (collection, id) ->
                concat(
                    put(
                        () ->
                            write(
                                principal,
                                collection,
                                (p, expected, key) ->
                                    putDocument(p, collection, id, expected, key))),
                    get(
                        () ->
                            granted(
                                principal,
                                "DocumentsRead",
                                collection,
                                p -> getDocument(p, collection, id))),
                    delete(
                        () ->
                            write(
                                principal,
                                collection,
                                (p, expected, key) ->
                                    deleteDocument(p, collection, id, expected, key))))),
        feedRoutes == null
            ? reject()
            : concat(
                pathPrefixTest("changes", () -> feedRoutes.routes(principal)),
                pathPrefixTest("query", () -> feedRoutes.routes(principal))));
  }

  /** A document write, given the principal and the request's If-Match and Idempotency-Key. */
  private interface Write {
    Route apply(Principal principal, Optional<Long> expected, Optional<String> key);
  }

  /** {@code write} under {@code DocumentsWrite} on {@code collection}, with its headers parsed. */
  private Route write(Principal principal, String collection, Write write) {
    return granted(
        principal,
        "DocumentsWrite",
        collection,
        p -> writeHeaders((expected, key) -> write.apply(p, expected, key)));
  }

  /**
   * {@code inner} when {@code principal} holds {@code grant} on {@code collection} (administrators
   * hold all); 403 otherwise, after a second look at freshly loaded principals ({@link
   * #grantChecked}).
   */
  private Route granted(
      Principal principal, String grant, String collection, Function<Principal, Route> inner) {
    return grantChecked(
        authenticator,
        principal,
        p ->
            p.may(grant, collection)
                ? inner.apply(p)
                : new MissingGrant(
                    "this operation requires the grant " + grant + " on this collection"));
  }

  /**
   * The collection's policy when it governs {@code principal} (not an administrator); empty without
   * policies. Throws {@link Policies.PoliciesUnavailable} before the policies are loaded. A
   * governed request checks that the partition runs the same policy version ({@link #stalePolicy}):
   * a policy that has not reached this node or that partition is never used.
   */
  private Optional<CollectionPolicy> governing(Principal principal, String collection) {
    if (policies == null || principal.administrator()) {
      return Optional.empty();
    }
    return Optional.of(policies.policy(collection));
  }

  /**
   * Whether partition {@code reply} came from runs another row-rule version than {@code policy}
   * (then the rule is sent to it again, or this node reloads its policies, and the request fails as
   * retryable).
   */
  private boolean stalePolicy(
      CollectionPolicy policy, String collection, String id, long installed) {
    if (installed == policy.version()) {
      return false;
    }
    policies.reconcile(
        policy, installed < 0 ? -1 : documents.partitionOf(collection, id), installed);
    return true;
  }

  private Route policyPropagating() {
    return error(
        ErrorCode.UNAVAILABLE,
        "the collection's policy is not yet the same on this node and its partition; retry");
  }

  private Route policiesUnavailable() {
    return error(ErrorCode.UNAVAILABLE, "the collection policies are not loaded yet; retry");
  }

  private Route putDocument(
      Principal principal,
      String collection,
      String id,
      Optional<Long> expected,
      Optional<String> key) {
    Route refused = refuseWrite(collection, id);
    if (refused != null) {
      return refused;
    }
    Optional<CollectionPolicy> policy;
    try {
      policy = governing(principal, collection);
    } catch (Policies.PoliciesUnavailable e) {
      return policiesUnavailable();
    }
    return documentBody(
        bytes -> {
          String body;
          try {
            body = DocumentBodies.canonicalObject(bytes);
          } catch (DocumentBodies.MalformedDocument e) {
            return error(ErrorCode.MALFORMED_JSON, e.getMessage());
          }
          Optional<Documents.Idempotency> idempotency =
              key.map(
                  k ->
                      Documents.Idempotency.of(
                          principal.id(), k, "PUT", collection, id, expected, body));
          if (policy.isPresent()) {
            return guardedPut(principal, policy.get(), collection, id, body, expected, idempotency);
          }
          return onComplete(
              documents.put(collection, id, body, expected, idempotency),
              result ->
                  result.isSuccess()
                      ? written(collection, id, result.get(), false)
                      : partitionUnavailable(result.failed().get()));
        });
  }

  /** A write under a restricting policy: checked by {@link WriteGuard} against the current one. */
  private Route guardedPut(
      Principal principal,
      CollectionPolicy policy,
      String collection,
      String id,
      String body,
      Optional<Long> expected,
      Optional<Documents.Idempotency> key) {
    ObjectNode next;
    try {
      next = (ObjectNode) Access.JSON.readTree(body);
    } catch (IOException e) {
      return error(ErrorCode.MALFORMED_JSON, "the body is not valid JSON");
    }
    String forbidden = WriteGuard.forbiddenField(principal, policy, next);
    if (forbidden != null) {
      return error(
          ErrorCode.FORBIDDEN,
          "the field " + forbidden + " is sensitive; writing it requires FieldRead on it");
    }
    return onComplete(
        documents
            .get(collection, id)
            .thenCompose(
                reply -> {
                  if (stalePolicy(policy, collection, id, reply.ruleVersion())) {
                    return CompletableFuture.completedFuture((Object) STALE);
                  }
                  Object checked =
                      WriteGuard.put(principal, policy, next, reply.document(), expected);
                  if (!(checked instanceof WriteGuard.Guarded g)) {
                    return CompletableFuture.completedFuture(checked);
                  }
                  return documents
                      .put(collection, id, g.body(), Optional.of(g.expected()), key)
                      .thenApply(r -> (Object) r);
                }),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          Object r = result.get();
          if (r instanceof FrameReply reply) {
            return written(collection, id, reply, false);
          }
          if (r == STALE) {
            return policyPropagating();
          }
          return refused((WriteGuard.Refusal) r);
        });
  }

  /** The answer to a write {@link WriteGuard} refused. */
  private Route refused(WriteGuard.Refusal refusal) {
    return switch (refusal) {
      case HIDDEN ->
          error(
              ErrorCode.FORBIDDEN,
              "this principal may not change this document (its row is not visible to it)");
      case INVISIBLE ->
          error(
              ErrorCode.FORBIDDEN,
              "the new document would not be visible to this principal (row visibility)");
      case UNREADABLE -> error(ErrorCode.INTERNAL, "internal error; see the node's log");
    };
  }

  private Route getDocument(Principal principal, String collection, String id) {
    if (!Documents.readableCollection(collection) || !Documents.validId(id)) {
      return invalidName();
    }
    Optional<CollectionPolicy> policy;
    try {
      policy = governing(principal, collection);
    } catch (Policies.PoliciesUnavailable e) {
      return policiesUnavailable();
    }
    return onComplete(
        documents.get(collection, id),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          if (policy.isPresent()
              && stalePolicy(policy.get(), collection, id, result.get().ruleVersion())) {
            return policyPropagating();
          }
          Optional<Document> doc = result.get().document().filter(d -> !d.deleted());
          if (doc.isEmpty()) {
            return error(ErrorCode.NOT_FOUND, "no such document");
          }
          String body = doc.get().body();
          if (policy.isPresent() && !Access.unrestricted(policy.get())) {
            ShownImage shown = ShownImage.of(principal, policy.get(), body);
            if (!shown.json()) {
              return error(ErrorCode.INTERNAL, "internal error; see the node's log");
            }
            if (!shown.visible()) {
              return error(ErrorCode.NOT_FOUND, "no such document");
            }
            body = shown.text();
          }
          return complete(
              HttpResponse.create()
                  .withEntity(ContentTypes.APPLICATION_JSON, body.getBytes(StandardCharsets.UTF_8))
                  .addHeader(etag(doc.get().revision())));
        });
  }

  private Route deleteDocument(
      Principal principal,
      String collection,
      String id,
      Optional<Long> expected,
      Optional<String> idempotencyKey) {
    Route refused = refuseWrite(collection, id);
    if (refused != null) {
      return refused;
    }
    Optional<Documents.Idempotency> key =
        idempotencyKey.map(
            k ->
                Documents.Idempotency.of(
                    principal.id(), k, "DELETE", collection, id, expected, null));
    Optional<CollectionPolicy> policy;
    try {
      policy = governing(principal, collection);
    } catch (Policies.PoliciesUnavailable e) {
      return policiesUnavailable();
    }
    if (policy.isPresent()) {
      // Only a principal who sees the row may delete it; the delete expects the revision checked
      // (an If-Match other than it, or no live document, can only get a retried delete's receipt).
      return onComplete(
          documents.get(collection, id),
          read -> {
            if (!read.isSuccess()) {
              return partitionUnavailable(read.failed().get());
            }
            if (stalePolicy(policy.get(), collection, id, read.get().ruleVersion())) {
              return policyPropagating();
            }
            Object checked =
                WriteGuard.delete(principal, policy.get(), read.get().document(), expected);
            if (checked == WriteGuard.Refusal.HIDDEN) {
              return error(ErrorCode.NOT_FOUND, "no such document");
            }
            if (!(checked instanceof Long pinned)) {
              return error(ErrorCode.INTERNAL, "internal error; see the node's log");
            }
            return deleteDocument(collection, id, Optional.of(pinned), key);
          });
    }
    return deleteDocument(collection, id, expected, key);
  }

  private Route deleteDocument(
      String collection, String id, Optional<Long> expected, Optional<Documents.Idempotency> key) {
    return onComplete(
        documents.delete(collection, id, expected, key),
        result -> {
          if (!result.isSuccess()) {
            return partitionUnavailable(result.failed().get());
          }
          return result.get().isEmpty()
              ? error(ErrorCode.NOT_FOUND, "no such document")
              : written(collection, id, result.get().get(), true);
        });
  }

  /** 400 for a malformed name, 409 for a collection fed by CDC; null when the API may write it. */
  private Route refuseWrite(String collection, String id) {
    if (!Documents.writableCollection(collection) || !Documents.validId(id)) {
      return invalidName();
    }
    if (documents.fedByCdc(collection)) {
      return error(
          ErrorCode.COLLECTION_FED_BY_CDC,
          "this collection is written by a CDC pipeline; the API may only read it");
    }
    return null;
  }

  private Route invalidName() {
    return error(
        ErrorCode.INVALID_NAME,
        "collections are 1 to 128 of A-Z a-z 0-9 _ - (and . for reading CDC collections); ids are 1 to "
            + Documents.MAX_ID_LENGTH
            + " characters without control characters");
  }

  /** {@code If-Match} as an expected revision and {@code Idempotency-Key}; 400 when malformed. */
  private Route writeHeaders(BiFunction<Optional<Long>, Optional<String>, Route> inner) {
    return optionalHeaderValueByName(
        "If-Match",
        ifMatch ->
            optionalHeaderValueByName(
                "Idempotency-Key",
                key -> {
                  Optional<Long> expected = Optional.empty();
                  if (ifMatch.isPresent()) {
                    expected = parseRevision(ifMatch.get());
                    if (expected.isEmpty()) {
                      return error(
                          ErrorCode.BAD_REQUEST,
                          "If-Match must be a document revision: a decimal number, optionally quoted");
                    }
                  }
                  if (key.isPresent() && !Documents.validIdempotencyKey(key.get())) {
                    return error(
                        ErrorCode.BAD_REQUEST,
                        "Idempotency-Key must be 1 to "
                            + Documents.MAX_IDEMPOTENCY_KEY_LENGTH
                            + " printable ASCII characters");
                  }
                  return inner.apply(expected, key);
                }));
  }

  private static final Pattern REVISION = Pattern.compile("\\s*\"?([0-9]{1,18})\"?\\s*");

  /** {@code 3} or {@code "3"} (an entity tag as this API sends it); empty for anything else. */
  static Optional<Long> parseRevision(String header) {
    Matcher m = REVISION.matcher(header);
    if (!m.matches() || header.trim().startsWith("\"") != header.trim().endsWith("\"")) {
      return Optional.empty();
    }
    return Optional.of(Long.parseLong(m.group(1)));
  }

  /**
   * The request body as bytes, at most {@code weir.documents.max-bytes}: 413 {@code
   * document-too-large} for a longer one, refused by its Content-Length before it is read when the
   * client sends one.
   */
  private Route documentBody(Function<byte[], Route> inner) {
    return body(maxDocumentBytes, this::documentTooLarge, inner);
  }

  private Route documentTooLarge() {
    return error(
        ErrorCode.DOCUMENT_TOO_LARGE,
        "the body is larger than weir.documents.max-bytes (" + maxDocumentBytes + " bytes)");
  }

  private Route written(String collection, String id, FrameReply reply, boolean delete) {
    if (reply instanceof Applied a) {
      long revision = a.revisions().get(0);
      HttpResponse response =
          response(200, new DocumentWritten(collection, id, revision, delete, a.replayed()));
      return complete(delete ? response : response.addHeader(etag(revision)));
    }
    if (reply instanceof Conflict c) {
      return json(ErrorCode.CONFLICT.httpStatus(), RevisionConflict.of(c.actualRevision()));
    }
    WriteGuard.FrameRefusal refused = WriteGuard.refusal(reply, "nothing");
    if (refused != null) {
      return error(refused.code(), refused.message());
    }
    log.error(
        "a document write got an unexpected reply of type {}", reply.getClass().getSimpleName());
    return error(ErrorCode.INTERNAL, "internal error; see the node's log");
  }

  private static ETag etag(long revision) {
    return ETag.create(EntityTag.create(Long.toString(revision), false));
  }
}
