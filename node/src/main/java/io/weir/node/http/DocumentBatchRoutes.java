package io.weir.node.http;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectReader;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.node.auth.Access;
import io.weir.node.auth.Authenticator;
import io.weir.node.auth.Policies;
import io.weir.node.auth.Principal;
import io.weir.node.documents.BatchLimits;
import io.weir.node.documents.Documents;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.persistence.SafeErrors;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.http.BatchWritten;
import io.weir.protocol.http.BatchWritten.Item;
import io.weir.protocol.partition.Partitioning;
import io.weir.sharding.partition.PartitionProtocol.Applied;
import io.weir.sharding.partition.PartitionProtocol.Conflict;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.KeyReused;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import java.io.EOFException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeoutException;
import org.apache.pekko.http.javadsl.server.PathMatchers;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.pattern.AskTimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code POST /v1/documents/batch}: many document writes in one request.
 *
 * <p>The body is {@code {"items": [...]}}, each item {@code {"op": "put"|"delete", "collection",
 * "id", "body"? (put: a JSON object), "ifMatch"? (a revision, 0: must not exist)}}, at most {@code
 * weir.documents.batch.max-items} items and {@code max-bytes} bytes, each body at most {@code
 * weir.documents.max-bytes}. The whole request is checked first: a malformed one, a name of the
 * wrong shape, a body too large, a missing {@code DocumentsWrite} grant or (checked after the
 * grants) a collection fed by CDC refuses it whole (the message names the item's index, never its
 * values or field names) and nothing is written.
 *
 * <p>Then the items are grouped by the partition holding their document; each group is one frame,
 * written atomically, and the groups independently and concurrently: the reply is 200 with a result
 * per item ({@link BatchWritten}) — applied, conflict, not-found, failed (with the error a single
 * write would get) or aborted (another item of its group was not written). A delete without {@code
 * ifMatch} expects the revision the node reads just before (as does a put under a collection
 * policy); when that revision changed before the write, the group is read and tried again, 3
 * attempts in all. A delete of a document that does not exist is {@code not-found} and stops its
 * group. Collection policies apply to each item as to a single write ({@link WriteGuard}). The
 * node's reads of one request are at most {@value #READS_IN_FLIGHT} at a time.
 *
 * <p>With an {@code Idempotency-Key}, every group's frame carries the key bound to the principal
 * and the whole request: a retry of the same batch is answered group by group, a group that was
 * written answering its first result with {@code replayed: true}, the others written now. The same
 * key with another batch is {@code idempotency-key-reused} in every partition that holds a receipt
 * for it; receipts are per partition, so a partition the first batch did not write to does not see
 * the reuse.
 */
final class DocumentBatchRoutes extends JsonRoutes {
  private static final Logger log = LoggerFactory.getLogger(DocumentBatchRoutes.class);

  private static final Set<String> FIELDS = Set.of("items");
  private static final Set<String> ITEM_FIELDS =
      Set.of("op", "collection", "id", "body", "ifMatch");

  /** How often a group is tried when a document changed between the node's read and the write. */
  private static final int ATTEMPTS = 3;

  private final Authenticator authenticator;
  private final Documents documents;
  private final long maxDocumentBytes;
  private final BatchLimits limits;
  private final Policies policies;

  /**
   * @param policies collection policies, or null (every collection unrestricted)
   */
  DocumentBatchRoutes(
      ObjectMapper json,
      Authenticator authenticator,
      Documents documents,
      long maxDocumentBytes,
      BatchLimits limits,
      Policies policies) {
    super(json);
    this.authenticator = authenticator;
    this.documents = documents;
    this.maxDocumentBytes = maxDocumentBytes;
    this.limits = limits;
    this.policies = policies;
  }

  Route routes(Principal principal) {
    return path(
        PathMatchers.segment("documents").slash("batch"),
        () ->
            post(
                () ->
                    optionalHeaderValueByName(
                        "Idempotency-Key",
                        key -> {
                          if (key.isPresent() && !Documents.validIdempotencyKey(key.get())) {
                            return error(
                                ErrorCode.BAD_REQUEST,
                                "Idempotency-Key must be 1 to "
                                    + Documents.MAX_IDEMPOTENCY_KEY_LENGTH
                                    + " printable ASCII characters");
                          }
                          return body(
                              limits.maxBytes(),
                              () ->
                                  error(
                                      ErrorCode.DOCUMENT_TOO_LARGE,
                                      "the batch is larger than weir.documents.batch.max-bytes ("
                                          + limits.maxBytes()
                                          + " bytes)"),
                              bytes -> batch(principal, key, bytes));
                        })));
  }

  /** One item as checked: {@code body} canonical (null for a delete). */
  private record BatchItem(
      int index,
      boolean delete,
      String collection,
      String id,
      String body,
      Optional<Long> ifMatch,
      int partition) {
    /** The item's canonical form, part of the batch's idempotency request. */
    String canonical() {
      return Partitioning.canonicalKey(
          List.of(
              delete ? "DELETE" : "PUT",
              collection,
              id,
              ifMatch.map(String::valueOf).orElse("-"),
              body == null ? "-" : "+" + body));
    }

    @Override
    public String toString() {
      return "BatchItem[index=" + index + ", partition=" + partition + "]";
    }
  }

  /** A request refused whole: the route answering it. */
  private static final class Refused extends Exception {
    final transient Route route;

    Refused(Route route) {
      super(null, null, false, false);
      this.route = route;
    }
  }

  private Route batch(Principal principal, Optional<String> key, byte[] bytes) {
    List<BatchItem> items;
    try {
      items = parse(bytes);
    } catch (Refused r) {
      return r.route;
    }
    Set<String> collections = new java.util.TreeSet<>();
    items.forEach(i -> collections.add(i.collection()));
    return grantChecked(
        authenticator,
        principal,
        p -> {
          for (String c : collections) {
            if (!p.may("DocumentsWrite", c)) {
              return new MissingGrant(
                  "this batch writes a collection without the grant DocumentsWrite on it");
            }
          }
          // Only a principal who may write them learns which collections CDC writes.
          for (BatchItem i : items) {
            if (documents.fedByCdc(i.collection())) {
              return error(
                  ErrorCode.COLLECTION_FED_BY_CDC,
                  "item "
                      + i.index()
                      + " writes a collection a CDC pipeline writes; the API may only read it");
            }
          }
          return write(p, key, items, collections);
        });
  }

  /**
   * The request as {@link #readJson} reads it, but each item's {@code body} object is copied to its
   * compact form as it is read ({@link DocumentBodies#copyObject}) instead of becoming a tree: in
   * {@code root} it is an empty object, its text in {@code bodies} under the item's node. The
   * bodies are most of a batch's bytes; this reads each once and builds no tree of it.
   */
  record ReadBatch(JsonNode root, IdentityHashMap<JsonNode, String> bodies) {
    /** Value-free: the request's content is the caller's. */
    @Override
    public String toString() {
      return "ReadBatch[bodies=" + bodies.size() + "]";
    }
  }

  /** {@link #STRICT} for one value inside the request (the request goes on after it). */
  private static final ObjectReader SUBTREE =
      STRICT.reader().without(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

  static ReadBatch readBatch(byte[] bytes) throws MalformedBody {
    String text = utf8(bytes);
    IdentityHashMap<JsonNode, String> bodies = new IdentityHashMap<>();
    try (JsonParser p = STRICT.createParser(text)) {
      if (p.nextToken() == JsonToken.START_OBJECT) {
        ObjectNode root = STRICT.getNodeFactory().objectNode();
        while (next(p) == JsonToken.FIELD_NAME) {
          String name = p.currentName();
          if (next(p) == JsonToken.START_ARRAY && name.equals("items")) {
            ArrayNode items = root.putArray(name);
            while (next(p) != JsonToken.END_ARRAY) {
              if (p.currentToken() != JsonToken.START_OBJECT) {
                items.add((JsonNode) SUBTREE.readTree(p));
                continue;
              }
              ObjectNode item = items.addObject();
              while (next(p) == JsonToken.FIELD_NAME) {
                String field = p.currentName();
                if (next(p) == JsonToken.START_OBJECT && field.equals("body")) {
                  item.putObject(field);
                  bodies.put(item, DocumentBodies.copyObject(p, 256));
                } else {
                  item.set(field, SUBTREE.readTree(p));
                }
              }
            }
          } else {
            root.set(name, SUBTREE.readTree(p));
          }
        }
        if (p.currentToken() == JsonToken.END_OBJECT && p.nextToken() == null) {
          return new ReadBatch(root, bodies);
        }
      }
    } catch (IOException | RuntimeException e) {
      // not JSON, not an object, more than one value: the tree's way says which
    }
    return new ReadBatch(readJson(bytes), new IdentityHashMap<>());
  }

  /** The next token; the end of the input inside the request is an error. */
  private static JsonToken next(JsonParser p) throws IOException {
    JsonToken t = p.nextToken();
    if (t == null) {
      throw new EOFException("the input ends inside the request");
    }
    return t;
  }

  private List<BatchItem> parse(byte[] bytes) throws Refused {
    JsonNode root;
    IdentityHashMap<JsonNode, String> bodies;
    try {
      ReadBatch read = readBatch(bytes);
      root = read.root();
      bodies = read.bodies();
    } catch (MalformedBody e) {
      throw new Refused(error(ErrorCode.MALFORMED_JSON, e.getMessage()));
    }
    if (root == null || !root.isObject()) {
      throw new Refused(error(ErrorCode.BAD_REQUEST, "the body must be a JSON object"));
    }
    unknownFields(root, FIELDS, "the body");
    JsonNode array = root.get("items");
    if (array == null || !array.isArray() || array.isEmpty()) {
      throw new Refused(
          error(ErrorCode.BAD_REQUEST, "items must be a non-empty array of write items"));
    }
    if (array.size() > limits.maxItems()) {
      throw new Refused(
          error(
              ErrorCode.BAD_REQUEST,
              "the batch has more than weir.documents.batch.max-items ("
                  + limits.maxItems()
                  + ") items"));
    }
    List<BatchItem> items = new ArrayList<>(array.size());
    Map<String, Integer> seen = new HashMap<>();
    for (int i = 0; i < array.size(); i++) {
      BatchItem item = item(i, array.get(i), bodies);
      Integer first =
          seen.putIfAbsent(Partitioning.canonicalKey(List.of(item.collection(), item.id())), i);
      if (first != null) {
        throw new Refused(
            error(
                ErrorCode.BAD_REQUEST,
                "item "
                    + i
                    + " names the same document as item "
                    + first
                    + "; a batch writes each document at most once"));
      }
      items.add(item);
    }
    return items;
  }

  /**
   * Item {@code i}, node {@code n}; {@code bodies}: bodies copied while reading ({@link
   * #readBatch}).
   */
  private BatchItem item(int i, JsonNode n, IdentityHashMap<JsonNode, String> bodies)
      throws Refused {
    String at = "item " + i;
    if (!n.isObject()) {
      throw new Refused(error(ErrorCode.BAD_REQUEST, at + " must be a JSON object"));
    }
    unknownFields(n, ITEM_FIELDS, at);
    JsonNode op = n.get("op");
    if (op == null || !op.isTextual() || !Set.of("put", "delete").contains(op.asText())) {
      throw new Refused(error(ErrorCode.BAD_REQUEST, at + ": op must be put or delete"));
    }
    boolean delete = op.asText().equals("delete");
    JsonNode collection = n.get("collection");
    JsonNode id = n.get("id");
    if (collection == null
        || !collection.isTextual()
        || id == null
        || !id.isTextual()
        || !Documents.writableCollection(collection.asText())
        || !Documents.validId(id.asText())) {
      throw new Refused(
          error(
              ErrorCode.INVALID_NAME,
              at
                  + ": collections are 1 to 128 of A-Z a-z 0-9 _ -; ids are 1 to "
                  + Documents.MAX_ID_LENGTH
                  + " characters without control characters"));
    }
    Optional<Long> ifMatch = Optional.empty();
    JsonNode expected = n.get("ifMatch");
    if (expected != null) {
      if (!expected.isIntegralNumber()
          || !expected.canConvertToLong()
          || expected.asLong() < 0
          || expected.asLong() > 999_999_999_999_999_999L) {
        throw new Refused(
            error(
                ErrorCode.BAD_REQUEST, at + ": ifMatch must be a revision (a whole number >= 0)"));
      }
      ifMatch = Optional.of(expected.asLong());
    }
    JsonNode body = n.get("body");
    String canonical = null;
    if (delete) {
      if (body != null) {
        throw new Refused(error(ErrorCode.BAD_REQUEST, at + ": a delete takes no body"));
      }
    } else {
      if (body == null || !body.isObject()) {
        throw new Refused(error(ErrorCode.BAD_REQUEST, at + ": body must be a JSON object"));
      }
      try {
        String copied = bodies.get(n);
        canonical = copied != null ? copied : DocumentBodies.canonical(body);
      } catch (DocumentBodies.MalformedDocument e) {
        throw new Refused(error(ErrorCode.MALFORMED_JSON, at + ": " + e.getMessage()));
      }
      if (canonical.getBytes(StandardCharsets.UTF_8).length > maxDocumentBytes) {
        throw new Refused(
            error(
                ErrorCode.DOCUMENT_TOO_LARGE,
                at
                    + ": the body is larger than weir.documents.max-bytes ("
                    + maxDocumentBytes
                    + " bytes)"));
      }
    }
    return new BatchItem(
        i,
        delete,
        collection.asText(),
        id.asText(),
        canonical,
        ifMatch,
        documents.partitionOf(collection.asText(), id.asText()));
  }

  private void unknownFields(JsonNode object, Set<String> allowed, String where) throws Refused {
    for (var it = object.fieldNames(); it.hasNext(); ) {
      String name = it.next();
      if (!allowed.contains(name)) {
        throw new Refused(
            error(
                ErrorCode.BAD_REQUEST,
                where
                    + " has an unknown field; the fields are "
                    + new java.util.TreeSet<>(allowed)));
      }
    }
  }

  private Route write(
      Principal principal, Optional<String> key, List<BatchItem> items, Set<String> collections) {
    Map<String, CollectionPolicy> governing = new HashMap<>();
    if (policies != null && !principal.administrator()) {
      try {
        for (String c : collections) {
          governing.put(c, policies.policy(c));
        }
      } catch (Policies.PoliciesUnavailable e) {
        return error(ErrorCode.UNAVAILABLE, "the collection policies are not loaded yet; retry");
      }
    }
    Optional<Documents.Idempotency> idempotency =
        key.map(
            k ->
                Documents.Idempotency.ofBatch(
                    principal.id(), k, items.stream().map(BatchItem::canonical).toList()));
    TreeMap<Integer, List<BatchItem>> groups = new TreeMap<>();
    for (BatchItem i : items) {
      groups.computeIfAbsent(i.partition(), n -> new ArrayList<>()).add(i);
    }
    List<CompletableFuture<List<Item>>> runs = new ArrayList<>();
    Reads reads = new Reads();
    for (List<BatchItem> group : groups.values()) {
      runs.add(
          new Group(principal, governing, group, idempotency, reads)
              .run(ATTEMPTS)
              .toCompletableFuture());
    }
    return onComplete(
        CompletableFuture.allOf(runs.toArray(CompletableFuture[]::new)),
        done -> {
          Item[] results = new Item[items.size()];
          for (CompletableFuture<List<Item>> run : runs) {
            for (Item r : run.join()) {
              results[r.index()] = r;
            }
          }
          int applied =
              (int)
                  Arrays.stream(results)
                      .filter(r -> r.status().equals(BatchWritten.Status.APPLIED.wire()))
                      .count();
          return json(200, new BatchWritten(List.of(results), applied, results.length - applied));
        });
  }

  /**
   * The node's reads of one request: at most {@value #READS_IN_FLIGHT} at a time over all its
   * groups, each reduced to what the checks decided as it arrives, so a request holds at most that
   * many bodies read at once however many items it has.
   */
  private static final class Reads {
    private final ArrayDeque<Runnable> waiting = new ArrayDeque<>();
    private int inFlight;

    <T> CompletableFuture<T> read(
        java.util.function.Supplier<CompletionStage<DocumentReply>> ask,
        java.util.function.Function<DocumentReply, T> reduce) {
      CompletableFuture<T> out = new CompletableFuture<>();
      Runnable start =
          () ->
              ask.get()
                  .whenComplete(
                      (reply, failure) -> {
                        try {
                          if (failure != null) {
                            out.completeExceptionally(failure);
                          } else {
                            out.complete(reduce.apply(reply));
                          }
                        } catch (RuntimeException e) {
                          out.completeExceptionally(e);
                        } finally {
                          release();
                        }
                      });
      boolean now;
      synchronized (this) {
        now = inFlight < READS_IN_FLIGHT;
        if (now) {
          inFlight++;
        } else {
          waiting.add(start);
        }
      }
      if (now) {
        start.run();
      }
      return out;
    }

    private void release() {
      Runnable next;
      synchronized (this) {
        next = waiting.poll();
        if (next == null) {
          inFlight--;
        }
      }
      if (next != null) {
        next.run();
      }
    }
  }

  /** Reads one request keeps in flight at most (each may carry a body of up to 1 MiB). */
  private static final int READS_IN_FLIGHT = 8;

  /**
   * What the node decided for one item from its read (the body read is not kept).
   *
   * @param outcome null (write as sent), a revision to expect ({@code Long}), a {@link
   *     WriteGuard.Guarded} put, a {@link WriteGuard.Refusal}, or the item's refusal ({@link Item})
   * @param absent a delete whose document is absent, deleted or hidden from the caller
   */
  private record Checked(Object outcome, boolean absent) {
    static final Checked AS_SENT = new Checked(null, false);
  }

  /** One partition's items: read what the checks need, write them as one frame, answer each. */
  private final class Group {
    private final Principal principal;
    private final Map<String, CollectionPolicy> governing;
    private final List<BatchItem> items;
    private final Optional<Documents.Idempotency> idempotency;
    private final Reads reads;
    private final int partition;

    /** Collections whose row rule this group already asked its partition to reconcile. */
    private final Set<String> reconciled = java.util.concurrent.ConcurrentHashMap.newKeySet();

    Group(
        Principal principal,
        Map<String, CollectionPolicy> governing,
        List<BatchItem> items,
        Optional<Documents.Idempotency> idempotency,
        Reads reads) {
      this.principal = principal;
      this.governing = governing;
      this.items = items;
      this.idempotency = idempotency;
      this.reads = reads;
      this.partition = items.get(0).partition();
    }

    /** The group's results; never fails (a partition that does not answer fails every item). */
    CompletionStage<List<Item>> run(int attempts) {
      List<CompletableFuture<Checked>> checks = new ArrayList<>();
      for (BatchItem i : items) {
        checks.add(
            needsRead(i)
                ? reads.read(() -> documents.get(i.collection(), i.id()), r -> check(i, r))
                : CompletableFuture.completedFuture(Checked.AS_SENT));
      }
      return CompletableFuture.allOf(checks.toArray(CompletableFuture[]::new))
          .thenCompose(
              done -> write(checks.stream().map(CompletableFuture::join).toList(), attempts))
          .exceptionally(this::failedGroup);
    }

    /** Every item failed by {@code t}: unavailable for a partition that did not answer in time. */
    private List<Item> failedGroup(Throwable t) {
      Throwable cause = unwrap(t);
      if (cause instanceof TimeoutException || cause instanceof AskTimeoutException) {
        log.warn("a partition of a document batch did not answer: {}", SafeErrors.describe(t));
        return every(
            ErrorCode.UNAVAILABLE,
            "the partition did not answer in time; retry (with the same Idempotency-Key)");
      }
      log.error("a document batch's group failed unexpectedly: {}", SafeErrors.describe(t));
      return every(ErrorCode.INTERNAL, "internal error; see the node's log");
    }

    private boolean needsRead(BatchItem i) {
      return i.delete() || governing.containsKey(i.collection());
    }

    private Checked check(BatchItem i, DocumentReply read) {
      boolean absent = i.delete() && read.document().filter(d -> !d.deleted()).isEmpty();
      CollectionPolicy policy = governing.get(i.collection());
      if (policy != null) {
        if (read.ruleVersion() != policy.version()) {
          if (reconciled.add(i.collection())) {
            policies.reconcile(policy, read.ruleVersion() < 0 ? -1 : partition, read.ruleVersion());
          }
          return new Checked(
              failed(
                  i,
                  ErrorCode.UNAVAILABLE,
                  "the collection's policy is not yet the same on this node and its partition;"
                      + " retry"),
              absent);
        }
        Object outcome =
            i.delete()
                ? WriteGuard.delete(principal, policy, read.document(), i.ifMatch())
                : putChecked(i, policy, read);
        return new Checked(outcome, absent || (i.delete() && outcome == WriteGuard.Refusal.HIDDEN));
      }
      if (i.delete()) {
        // Never a tombstone over nothing: a document that is not live can only be answered by a
        // retried batch's receipt, else not-found.
        return new Checked(
            absent ? WriteGuard.NO_REVISION : i.ifMatch().orElse(read.document().get().revision()),
            absent);
      }
      return Checked.AS_SENT;
    }

    private CompletionStage<List<Item>> write(List<Checked> checks, int attempts) {
      List<Mutation> mutations = new ArrayList<>(items.size());
      // Per item: the revision the node chose for it (the client sent no ifMatch), else null.
      List<Long> pinned = new ArrayList<>(items.size());
      boolean[] absent = new boolean[items.size()];
      Item[] refused = new Item[items.size()];
      boolean anyRefused = false;
      for (int k = 0; k < items.size(); k++) {
        BatchItem i = items.get(k);
        Object checked = checks.get(k).outcome();
        absent[k] = checks.get(k).absent();
        if (checked instanceof Item item) {
          refused[k] = item;
        } else if (checked == WriteGuard.Refusal.HIDDEN && i.delete()) {
          refused[k] = Item.notFound(i.index(), i.collection(), i.id(), partition);
        } else if (checked instanceof WriteGuard.Refusal r) {
          refused[k] =
              failed(
                  i,
                  r == WriteGuard.Refusal.UNREADABLE ? ErrorCode.INTERNAL : ErrorCode.FORBIDDEN,
                  refusal(r));
        }
        if (refused[k] != null) {
          anyRefused = true;
          pinned.add(null); // pinned stays aligned with items; mutations are not sent
          continue;
        }
        Optional<Long> expected = i.ifMatch();
        String body = i.body();
        Long pin = null;
        if (checked instanceof WriteGuard.Guarded g) {
          body = g.body();
          pin = g.expected();
        } else if (checked instanceof Long l) {
          pin = l;
        }
        if (pin != null) {
          expected = Optional.of(pin);
        }
        pinned.add(i.ifMatch().isEmpty() ? pin : null);
        mutations.add(
            i.delete()
                ? new Delete(i.collection(), i.id(), expected)
                : new Upsert(i.collection(), i.id(), body, expected));
      }
      if (anyRefused) {
        if (idempotency.isEmpty()) {
          return CompletableFuture.completedFuture(refusedGroup(refused));
        }
        // A keyed retry of a group written before (its documents may have changed since, so the
        // checks refuse now): a frame no document can satisfy finds its receipt, if there is
        // one, and writes nothing either way.
        List<Mutation> probe =
            items.stream()
                .map(
                    i ->
                        (Mutation)
                            new Delete(i.collection(), i.id(), Optional.of(WriteGuard.NO_REVISION)))
                .toList();
        return documents
            .applyFrame(partition, probe, idempotency)
            .thenApply(
                reply ->
                    reply instanceof Applied || reply instanceof KeyReused
                        ? answer(reply, absent, pinned)
                        : refusedGroup(refused));
      }
      return documents
          .applyFrame(partition, mutations, idempotency)
          .thenCompose(
              reply -> {
                if (reply instanceof Conflict c) {
                  Long pin = pinned.get(c.index());
                  if (pin != null && pin != WriteGuard.NO_REVISION && attempts > 1) {
                    // The document changed between the node's read and the write: read again.
                    return run(attempts - 1);
                  }
                }
                return CompletableFuture.completedFuture(answer(reply, absent, pinned));
              });
    }

    /** The put of {@code i} under {@code policy}: a {@link WriteGuard} outcome, or an item. */
    private Object putChecked(BatchItem i, CollectionPolicy policy, DocumentReply read) {
      ObjectNode next;
      try {
        next = (ObjectNode) Access.JSON.readTree(i.body());
      } catch (JsonProcessingException e) {
        return failed(i, ErrorCode.INTERNAL, "internal error; see the node's log");
      }
      String forbidden = WriteGuard.forbiddenField(principal, policy, next);
      if (forbidden != null) {
        return failed(
            i,
            ErrorCode.FORBIDDEN,
            "the field " + forbidden + " is sensitive; writing it requires FieldRead on it");
      }
      return WriteGuard.put(principal, policy, next, read.document(), i.ifMatch());
    }

    private List<Item> answer(FrameReply reply, boolean[] absent, List<Long> pinned) {
      if (reply instanceof Applied a) {
        List<Item> out = new ArrayList<>(items.size());
        for (int k = 0; k < items.size(); k++) {
          BatchItem i = items.get(k);
          out.add(
              Item.applied(
                  i.index(),
                  i.collection(),
                  i.id(),
                  partition,
                  a.revisions().get(k),
                  i.delete(),
                  a.replayed()));
        }
        return out;
      }
      if (reply instanceof Conflict c) {
        BatchItem i = items.get(c.index());
        Item[] refused = new Item[items.size()];
        refused[c.index()] =
            absent[c.index()]
                ? Item.notFound(i.index(), i.collection(), i.id(), partition)
                : Item.conflict(
                    i.index(),
                    i.collection(),
                    i.id(),
                    partition,
                    c.actualRevision(),
                    pinned.get(c.index()) == null
                        ? "the document's revision does not match ifMatch"
                        : "the document kept changing while the batch was written; retry");
        return refusedGroup(refused);
      }
      WriteGuard.FrameRefusal refused = WriteGuard.refusal(reply, "nothing of this group");
      if (refused != null) {
        return every(refused.code(), refused.message());
      }
      log.error(
          "a document batch got an unexpected reply of type {}", reply.getClass().getSimpleName());
      return every(ErrorCode.INTERNAL, "internal error; see the node's log");
    }

    /** Every item failed with the same error (one that concerns the whole group). */
    private List<Item> every(ErrorCode code, String message) {
      return items.stream().map(i -> failed(i, code, message)).toList();
    }

    /** The refused items as they are, the others aborted by the first refused one. */
    private List<Item> refusedGroup(Item[] refused) {
      Item first = Arrays.stream(refused).filter(r -> r != null).findFirst().orElseThrow();
      boolean retryable = Boolean.TRUE.equals(first.retryable());
      List<Item> out = new ArrayList<>(items.size());
      for (int k = 0; k < items.size(); k++) {
        BatchItem i = items.get(k);
        out.add(
            refused[k] != null
                ? refused[k]
                : Item.aborted(
                    i.index(), i.collection(), i.id(), partition, first.index(), retryable));
      }
      return out;
    }

    private Item failed(BatchItem i, ErrorCode code, String message) {
      return Item.failed(i.index(), i.collection(), i.id(), partition, code, message);
    }
  }

  private static String refusal(WriteGuard.Refusal r) {
    return switch (r) {
      case HIDDEN -> "this principal may not change this document (its row is not visible to it)";
      case INVISIBLE -> "the new document would not be visible to this principal (row visibility)";
      case UNREADABLE -> "internal error; see the node's log";
    };
  }
}
