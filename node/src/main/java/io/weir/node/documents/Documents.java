package io.weir.node.documents;

import io.weir.node.cdc.PipelineConfig;
import io.weir.protocol.partition.Partitioning;
import io.weir.sharding.cdc.PartitionChannel;
import io.weir.sharding.partition.OutboxReader;
import io.weir.sharding.partition.PartitionProtocol;
import io.weir.sharding.partition.PartitionProtocol.ApplyFrame;
import io.weir.sharding.partition.PartitionProtocol.Conflict;
import io.weir.sharding.partition.PartitionProtocol.Delete;
import io.weir.sharding.partition.PartitionProtocol.FrameReply;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import io.weir.sharding.partition.PartitionProtocol.Upsert;
import io.weir.sharding.partition.PartitionSharding;
import io.weir.sharding.partition.ReadProtocol.Document;
import io.weir.sharding.partition.ReadProtocol.DocumentReply;
import io.weir.sharding.partition.ReadProtocol.GetDocument;
import io.weir.sharding.partition.StatusProtocol;
import io.weir.sharding.partition.StatusProtocol.GetStatus;
import io.weir.sharding.partition.StatusProtocol.PartitionStatus;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Function;
import java.util.regex.Pattern;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityRef;

/**
 * Document operations of the HTTP API, asked of the partitions: a document {@code (collection, id)}
 * lives in partition {@code partitionOf(collection, id, P)} (the id is its partition key). Every
 * write is one {@link ApplyFrame}; its command id is derived from the caller's idempotency key
 * (scoped to the operation and the document), or random without one.
 */
public final class Documents {
  /** Collections the API may write: no dot, so never a CDC default name ({@code schema.table}). */
  private static final Pattern WRITABLE_COLLECTION = Pattern.compile("[A-Za-z0-9_-]{1,128}");

  /** Collections the API may read: also CDC collections. */
  private static final Pattern READABLE_COLLECTION = Pattern.compile("[A-Za-z0-9_.-]{1,128}");

  public static final int MAX_ID_LENGTH = 512;
  public static final int MAX_IDEMPOTENCY_KEY_LENGTH = 255;

  /** An expected revision no document has: a frame with it is only ever answered by a receipt. */
  private static final long NO_REVISION = -1;

  private final ActorSystem<?> system;
  private final int partitions;
  private final Set<String> cdcCollections;

  /** CDC collections routed by columns other than their id: a read cannot compute the partition. */
  private final Set<String> routedByOtherColumns;

  private final Duration timeout;

  /** Partition n's reference once asked (an EntityRef is immutable; asked on every request). */
  private final AtomicReferenceArray<EntityRef<PartitionProtocol.Command>> refs;

  /**
   * @param pipelines the configured pipelines: collections their partition sinks name explicitly
   *     may not be written through the API
   */
  public Documents(
      ActorSystem<?> system, int partitions, List<PipelineConfig> pipelines, Duration timeout) {
    this.system = system;
    this.partitions = partitions;
    Set<String> fed = new TreeSet<>();
    pipelines.forEach(p -> fed.addAll(p.mappedCollections()));
    this.cdcCollections = Set.copyOf(fed);
    Set<String> scattered = new TreeSet<>();
    for (PipelineConfig p : pipelines) {
      if (p.partitions() != null) {
        p.partitions()
            .partitionKeys()
            .keySet()
            .forEach(
                table -> scattered.add(p.partitions().collections().getOrDefault(table, table)));
      }
    }
    this.routedByOtherColumns = Set.copyOf(scattered);
    this.timeout = timeout;
    this.refs = new AtomicReferenceArray<>(partitions);
  }

  /**
   * Asks partition {@code n}; the stage completes on the answering thread (Pekko's Java ask would
   * run every callback on the common pool, a new thread per callback on small machines).
   */
  public <T> CompletableFuture<T> ask(
      int n, Function<ActorRef<T>, PartitionProtocol.Command> make) {
    return PartitionChannel.direct(ref(n).ask(make::apply, timeout));
  }

  /** Partition {@code n}'s reference, kept once made (a number outside the range is not kept). */
  private EntityRef<PartitionProtocol.Command> ref(int n) {
    if (n < 0 || n >= partitions) {
      return PartitionSharding.partition(system, n);
    }
    EntityRef<PartitionProtocol.Command> ref = refs.get(n);
    if (ref == null) {
      ref = PartitionSharding.partition(system, n);
      refs.set(n, ref);
    }
    return ref;
  }

  public int partitions() {
    return partitions;
  }

  public int partitionOf(String collection, String id) {
    return Partitioning.partitionOf(collection, id, partitions);
  }

  public static boolean writableCollection(String collection) {
    return WRITABLE_COLLECTION.matcher(collection).matches();
  }

  public static boolean readableCollection(String collection) {
    return READABLE_COLLECTION.matcher(collection).matches();
  }

  /** 1 to {@value #MAX_ID_LENGTH} code points, none of them a control character. */
  public static boolean validId(String id) {
    int n = id.codePointCount(0, id.length());
    if (n < 1 || n > MAX_ID_LENGTH) {
      return false;
    }
    for (int i = 0; i < id.length(); i++) {
      // A control character is a single UTF-16 unit; surrogates are never one.
      if (Character.isISOControl(id.charAt(i))) {
        return false;
      }
    }
    return true;
  }

  /** 1 to {@value #MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters. */
  public static boolean validIdempotencyKey(String key) {
    return !key.isEmpty()
        && key.length() <= MAX_IDEMPOTENCY_KEY_LENGTH
        && key.chars().allMatch(c -> c >= 0x20 && c < 0x7f);
  }

  /**
   * Whether {@code collection} is routed by columns other than its id (a CDC table with partition
   * keys): its documents can move between partitions.
   */
  public boolean routedByOtherColumns(String collection) {
    return routedByOtherColumns.contains(collection);
  }

  /**
   * Whether a pipeline's partition sink writes {@code collection} (then the API may only read it).
   */
  public boolean fedByCdc(String collection) {
    return cdcCollections.contains(collection);
  }

  /**
   * Creates or replaces a document; {@code body} is a canonical JSON object. With {@code
   * idempotency}, the partition keeps a receipt: the same caller key with the same request is
   * answered by it, with another request {@link PartitionProtocol.KeyReused}.
   */
  public CompletionStage<FrameReply> put(
      String collection,
      String id,
      String body,
      Optional<Long> expectedRevision,
      Optional<Idempotency> idempotency) {
    return apply(
        collection, id, new Upsert(collection, id, body, expectedRevision), commandId(idempotency));
  }

  /**
   * Deletes a live document. Empty when there is none (absent or already deleted) and nothing was
   * written; a retried idempotency key still gets its first reply. Without {@code expectedRevision}
   * the delete expects the revision just read, and reads again if the document changed meanwhile.
   */
  public CompletionStage<Optional<FrameReply>> delete(
      String collection,
      String id,
      Optional<Long> expectedRevision,
      Optional<Idempotency> idempotency) {
    return delete(
        collection, id, expectedRevision, commandId(idempotency), idempotency.isPresent(), 3);
  }

  private CompletionStage<Optional<FrameReply>> delete(
      String collection,
      String id,
      Optional<Long> expectedRevision,
      String commandId,
      boolean keyed,
      int attempts) {
    return get(collection, id)
        .thenCompose(
            reply -> {
              Optional<Document> live = reply.document().filter(d -> !d.deleted());
              if (live.isEmpty()) {
                if (!keyed) {
                  return CompletableFuture.completedFuture(Optional.empty());
                }
                // A retry of a delete that went through finds a tombstone: a frame that no document
                // can
                // satisfy returns the receipt if there is one and writes nothing either way.
                return apply(
                        collection,
                        id,
                        new Delete(collection, id, Optional.of(NO_REVISION)),
                        commandId)
                    .thenApply(
                        r -> r instanceof Conflict ? Optional.<FrameReply>empty() : Optional.of(r));
              }
              long expected = expectedRevision.orElse(live.get().revision());
              return apply(
                      collection, id, new Delete(collection, id, Optional.of(expected)), commandId)
                  .thenCompose(
                      r -> {
                        if (r instanceof Conflict && expectedRevision.isEmpty() && attempts > 1) {
                          return delete(
                              collection, id, expectedRevision, commandId, keyed, attempts - 1);
                        }
                        return CompletableFuture.completedFuture(Optional.of(r));
                      });
            });
  }

  /** The document as its partition holds it (tombstones included). */
  public CompletionStage<DocumentReply> get(String collection, String id) {
    if (!routedByOtherColumns.contains(collection)) {
      return ask(partitionOf(collection, id), r -> new GetDocument(collection, id, r));
    }
    // Routed by a partition key the id does not carry: ask every partition. A document that moved
    // left a tombstone behind; the live one (or else the latest tombstone) is the answer.
    List<CompletableFuture<DocumentReply>> asks = new ArrayList<>();
    for (int n = 0; n < partitions; n++) {
      asks.add(this.<DocumentReply>ask(n, r -> new GetDocument(collection, id, r)));
    }
    return CompletableFuture.allOf(asks.toArray(CompletableFuture[]::new))
        .thenApply(
            done ->
                asks.stream()
                    .map(CompletableFuture::join)
                    .flatMap(r -> r.document().stream())
                    .max(
                        Comparator.comparing((Document d) -> !d.deleted())
                            .thenComparingLong(Document::revision))
                    .map(d -> new DocumentReply(Optional.of(d), ruleVersion(asks)))
                    .orElse(new DocumentReply(Optional.empty(), ruleVersion(asks))));
  }

  /**
   * The row-rule version every partition reported, or -1 when they differ (so it matches no
   * policy).
   */
  private static long ruleVersion(List<CompletableFuture<DocumentReply>> asks) {
    List<Long> versions = asks.stream().map(a -> a.join().ruleVersion()).distinct().toList();
    return versions.size() == 1 ? versions.get(0) : -1;
  }

  /** The executor for work after partitions answered: never the answering partition's thread. */
  public Executor executor() {
    return system.executionContext();
  }

  /**
   * Where reads assemble what partitions answered (the feed's pages, queries' results): the reads
   * dispatcher, apart from the partitions ({@link OutboxReader#executor}).
   */
  public Executor readsExecutor() {
    return OutboxReader.executor(system);
  }

  /** Partition {@code n}'s counters and watermarks. */
  public CompletionStage<PartitionStatus> status(int n) {
    return ask(n, GetStatus::new);
  }

  /**
   * Purges partition {@code n}'s outbox through {@code through}, at most {@code maxEntries}
   * entries.
   */
  public CompletionStage<PartitionProtocol.PurgeReply> purge(int n, long through, long maxEntries) {
    return ask(n, r -> new PartitionProtocol.PurgeOutbox(through, maxEntries, r));
  }

  /** Asks partition {@code n} to accept that its storage lost acknowledged writes (ADR 0036). */
  public CompletionStage<StatusProtocol.StorageLossReply> acceptStorageLoss(int n) {
    return ask(n, StatusProtocol.AcceptStorageLoss::new);
  }

  /** Every partition's status, asked in parallel, in partition order. */
  public CompletionStage<List<PartitionStatus>> statusAll() {
    List<CompletableFuture<PartitionStatus>> asks = new ArrayList<>();
    for (int n = 0; n < partitions; n++) {
      asks.add(status(n).toCompletableFuture());
    }
    return CompletableFuture.allOf(asks.toArray(CompletableFuture[]::new))
        .thenApply(done -> asks.stream().map(CompletableFuture::join).toList());
  }

  /**
   * Applies {@code mutations} in partition {@code n} as one frame: all or nothing (a batch's group;
   * every mutation's document must live in partition {@code n}).
   */
  public CompletionStage<FrameReply> applyFrame(
      int n, List<Mutation> mutations, Optional<Idempotency> idempotency) {
    String commandId = commandId(idempotency);
    return ask(n, r -> new ApplyFrame(commandId, mutations, Optional.empty(), r));
  }

  private CompletionStage<FrameReply> apply(
      String collection, String id, Mutation m, String commandId) {
    return ask(
        partitionOf(collection, id),
        r -> new ApplyFrame(commandId, List.of(m), Optional.empty(), r));
  }

  /** The frame's command id: the caller's (see {@link Idempotency}), else a new random one. */
  static String commandId(Optional<Idempotency> idempotency) {
    return idempotency
        .map(Idempotency::commandId)
        .orElseGet(() -> PartitionProtocol.UNKEYED_COMMAND_PREFIX + UUID.randomUUID());
  }

  /**
   * A document write's idempotency: the caller's {@code Idempotency-Key} bound to its principal and
   * to the HTTP request it came with. The command id is {@code api2:<caller key>:<request>} (both
   * SHA-256, hex): the partition finds a receipt by the caller key, so another principal's key
   * never matches, and answers a retry only when the request is the same too; the same key with
   * another request is refused ({@link PartitionProtocol.KeyReused}). The request is what the
   * client sent (method, route, collection, id, {@code If-Match}, canonical body), not the frame
   * derived from it, so a DELETE retried after a lost reply (the document now gone) still matches.
   * Receipts are per partition: a key reused for a document of another partition is not seen.
   */
  public record Idempotency(String commandId) {
    public Idempotency {
      Objects.requireNonNull(commandId, "commandId");
    }

    /** {@code body}: the canonical JSON body, or null for a request without one (DELETE). */
    public static Idempotency of(
        String principal,
        String key,
        String method,
        String collection,
        String id,
        Optional<Long> ifMatch,
        String body) {
      String caller = sha256(Partitioning.canonicalKey(List.of("idempotency-key", principal, key)));
      String request =
          sha256(
              Partitioning.canonicalKey(
                  List.of(
                      method,
                      "/v1/documents/{collection}/{id}",
                      collection,
                      id,
                      ifMatch.map(String::valueOf).orElse("-"),
                      body == null ? "-" : "+" + body)));
      return new Idempotency(PartitionProtocol.BOUND_COMMAND_PREFIX + caller + ":" + request);
    }

    /**
     * A batch's idempotency ({@code POST /v1/documents/batch}): the caller key as for single
     * writes, the request being the whole batch, {@code items} its canonical form (each item's
     * operation, collection, id, {@code ifMatch} and canonical body, in order). Each partition's
     * group keeps its receipt under this key, so a retried batch is answered group by group.
     */
    public static Idempotency ofBatch(String principal, String key, List<String> items) {
      String caller = sha256(Partitioning.canonicalKey(List.of("idempotency-key", principal, key)));
      List<String> parts = new ArrayList<>(items.size() + 2);
      parts.add("POST");
      parts.add("/v1/documents/batch");
      parts.addAll(items);
      String request = sha256(Partitioning.canonicalKey(parts));
      return new Idempotency(PartitionProtocol.BOUND_COMMAND_PREFIX + caller + ":" + request);
    }

    @Override
    public String toString() {
      return "Idempotency[<hidden>]";
    }
  }

  private static String sha256(String text) {
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every JVM", e);
    }
  }
}
