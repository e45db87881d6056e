package io.weir.node;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.micrometer.core.instrument.MeterRegistry;
import io.weir.node.auth.Access;
import io.weir.node.auth.Policies;
import io.weir.node.auth.Principal;
import io.weir.node.metrics.FeedMetrics;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.persistence.PolicyStore.Visibility;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.Utf8;
import io.weir.protocol.query.Q1Query;
import io.weir.protocol.token.ChangeCursor;
import io.weir.protocol.token.TokenSigner;
import io.weir.sharding.partition.OutboxReader;
import io.weir.sharding.partition.Partition.OutboxEntry;
import io.weir.sharding.partition.PartitionProtocol.Acls;
import io.weir.sharding.partition.PartitionProtocol.ChangesSpan;
import io.weir.sharding.partition.PartitionProtocol.CollectionScan;
import io.weir.sharding.partition.PartitionProtocol.Document;
import io.weir.sharding.partition.PartitionProtocol.GetAcls;
import io.weir.sharding.partition.PartitionProtocol.ReadChanges;
import io.weir.sharding.partition.PartitionProtocol.ScanCollection;
import io.weir.sharding.partition.PartitionProtocol.ScanReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * The public read side over the partitions' outboxes: the changes feed ({@code POST
 * /v1/changes/read}), live Q1 queries ({@code /v1/query/live/start|read}) and one-shot Q1 queries
 * ({@code POST /v1/query}). Every output goes through {@link Access} (row visibility, sensitive
 * fields).
 *
 * <p>A cursor holds every partition's position (a collection spans them all; order holds within a
 * partition only) and a fence: a digest of each partition's incarnation (where the cursor has read
 * something) and the collection's row-visibility epoch. A restored partition, an ACL change of an
 * existing document or a new collection policy changes the fence, and the cursor is refused with
 * {@code token-invalidated}; so is one whose principal's policy epoch moved.
 *
 * <p>Queries and reads share one admission limit ({@code max-concurrent}); a partition that does
 * not answer within the ask timeout fails the request as retryable.
 */
public final class Feeds {
  /**
   * @param defaultLimit positions one page examines when the request names none
   * @param maxLimit the most a request may ask for
   * @param defaultBytes payload bytes one page selects when the request names none
   * @param maxBytes the most a request may ask for
   * @param candidateBytes document bytes a query or live start may scan per partition
   * @param maxRows rows a query or live baseline may return at most
   * @param maxConcurrent reads and queries running at once on this node
   * @param cursorTtl how long a cursor is accepted
   */
  public record Limits(
      int defaultLimit,
      int maxLimit,
      long defaultBytes,
      long maxBytes,
      long candidateBytes,
      int maxRows,
      int maxConcurrent,
      Duration cursorTtl) {
    public static final Limits DEFAULTS =
        new Limits(100, 1000, 4L << 20, 16L << 20, 4L << 20, 10_000, 64, Duration.ofHours(24));
  }

  /** A refused request: the typed code and a value-free message. */
  public static final class Refused extends RuntimeException {
    private final ErrorCode code;

    public Refused(ErrorCode code, String message) {
      super(message, null, false, false);
      this.code = code;
    }

    public ErrorCode code() {
      return code;
    }
  }

  /**
   * One change as a principal may see it.
   *
   * @param before the before image (JSON), null when absent or not visible
   * @param after the after image (JSON), null when deleted or not visible; pages of the changes
   *     feed carry them projected (without the fields the principal may not read)
   * @param bytes the size of the images as the principal receives them (projected): what the byte
   *     budget counts, so a budget never measures a hidden field
   */
  public record Change(
      int partition,
      long sequence,
      long commitLsn,
      String id,
      String kind,
      long revision,
      boolean deleted,
      String before,
      String after,
      long bytes) {

    @Override
    public String toString() {
      return "Change[partition=" + partition + ", sequence=" + sequence + ", kind=" + kind + "]";
    }
  }

  /** A page of changes: the next cursor and whether more positions wait already. */
  public record Page(List<Change> changes, String cursor, boolean hasMore) {}

  /** A live-query delta: an upsert (with its projected row) or a remove (no payload). */
  public record Delta(
      boolean upsert, int partition, long sequence, String id, long revision, String row) {
    @Override
    public String toString() {
      return "Delta[upsert=" + upsert + ", partition=" + partition + ", sequence=" + sequence + "]";
    }
  }

  public record LivePage(List<Delta> deltas, String cursor, boolean hasMore) {}

  /** A query result row: its id, revision and projected document. */
  public record Row(String id, long revision, String row) {
    @Override
    public String toString() {
      return "Row[revision=" + revision + "]";
    }
  }

  /**
   * A complete query result; {@code cursor} continues a live query from it (null for one-shot
   * queries).
   */
  public record Result(List<Row> rows, String cursor) {}

  private final Documents documents;
  private final OutboxReader reader;
  private final TokenKeys keys;
  private final Policies policies;
  private final Clock clock;
  private final Limits limits;
  private final Semaphore admission;
  private final Duration deadline;

  /** Where work continues after partitions answered: never on a partition's own thread. */
  private final Executor executor;

  /** The deadline of a read or query unless configured: {@value #DEFAULT_DEADLINE_SECONDS} s. */
  public static final int DEFAULT_DEADLINE_SECONDS = 30;

  public Feeds(
      Documents documents,
      OutboxReader reader,
      TokenKeys keys,
      Policies policies,
      Limits limits,
      Clock clock) {
    this(
        documents,
        reader,
        keys,
        policies,
        limits,
        Duration.ofSeconds(DEFAULT_DEADLINE_SECONDS),
        clock);
  }

  /**
   * @param deadline how long one read or query may take (then it fails as retryable; its admission
   *     slot is given back, while the partitions may still finish their part)
   */
  public Feeds(
      Documents documents,
      OutboxReader reader,
      TokenKeys keys,
      Policies policies,
      Limits limits,
      Duration deadline,
      Clock clock) {
    this.deadline = deadline;
    this.documents = documents;
    this.executor = documents.executor();
    this.reader = reader;
    this.keys = keys;
    this.policies = policies;
    this.limits = limits;
    this.clock = clock;
    this.admission = new Semaphore(limits.maxConcurrent());
  }

  public Limits limits() {
    return limits;
  }

  private volatile FeedMetrics metrics;

  /**
   * Counts this node's reads and queries on {@code registry} ({@link
   * io.weir.node.metrics.FeedMetrics}).
   */
  public void bindMetrics(MeterRegistry registry) {
    metrics =
        new FeedMetrics(registry, () -> limits.maxConcurrent() - admission.availablePermits());
  }

  /**
   * Where a read starts: a cursor, or the retained beginning / the current tail of every partition.
   */
  public sealed interface Start permits Beginning, Now, FromCursor {}

  public record Beginning() implements Start {}

  public record Now() implements Start {}

  public record FromCursor(String token) implements Start {}

  // ---- changes feed ----

  public CompletionStage<Page> read(
      Principal principal, String collection, Start start, int limit, long maxBytes) {
    return admitted(
        "changes",
        () -> {
          CollectionPolicy policy = policy(collection);
          return positions(principal, collection, policy, start, new byte[0])
              .thenCompose(
                  at ->
                      page(principal, collection, policy, at, limit, maxBytes)
                          .thenApply(
                              p ->
                                  new Page(
                                      projected(principal, policy, p.changes),
                                      sign(
                                          principal,
                                          collection,
                                          policy,
                                          new byte[0],
                                          p.positions,
                                          p.spans,
                                          p.next),
                                      p.hasMore)));
        });
  }

  /** The changes with the fields {@code principal} may not read omitted from their images. */
  private static List<Change> projected(
      Principal principal, CollectionPolicy policy, List<Change> changes) {
    if (principal.administrator() || policy.sensitiveFields().isEmpty()) {
      return changes;
    }
    List<Change> out = new ArrayList<>(changes.size());
    for (Change c : changes) {
      out.add(
          new Change(
              c.partition(),
              c.sequence(),
              c.commitLsn(),
              c.id(),
              c.kind(),
              c.revision(),
              c.deleted(),
              project(principal, policy, c.before()),
              project(principal, policy, c.after()),
              c.bytes()));
    }
    return out;
  }

  private static String project(Principal principal, CollectionPolicy policy, String image) {
    JsonNode tree = tree(image);
    return tree == null || !tree.isObject()
        ? null
        : text(Access.project(principal, policy, (ObjectNode) tree));
  }

  // ---- live queries ----

  /**
   * The complete initial result of {@code query} and a cursor at each partition's tail, both taken
   * in one step per partition (a partition's documents and tail come from one message), so no write
   * falls between them.
   */
  public CompletionStage<Result> startLive(
      Principal principal, Q1Query query, int maxRows, long maxBytes) {
    return admitted("live-start", () -> scan(principal, query, maxRows, maxBytes, true));
  }

  /** A one-shot Q1 query: the complete result or {@code result-too-large}. */
  public CompletionStage<Result> query(
      Principal principal, Q1Query query, int maxRows, long maxBytes) {
    return admitted("query", () -> scan(principal, query, maxRows, maxBytes, false));
  }

  /**
   * The live query's deltas after {@code cursor}: each visible change is evaluated with the same Q1
   * evaluator: a matching after image is an upsert (projected), a visible matching before image
   * whose after image no longer matches (or is deleted) is a remove; other changes only move the
   * cursor.
   */
  public CompletionStage<LivePage> readLive(
      Principal principal, Q1Query query, String cursor, int limit, long maxBytes) {
    return admitted(
        "live-read",
        () -> {
          CollectionPolicy policy = policy(query.collection());
          if (documents.routedByOtherColumns(query.collection())) {
            throw new Refused(
                ErrorCode.UNSUPPORTED_QUERY,
                "queries over a collection routed by a partition key other than"
                    + " its id are not supported yet");
          }
          byte[] hash = query.fingerprint();
          return positions(principal, query.collection(), policy, new FromCursor(cursor), hash)
              .thenCompose(
                  at ->
                      page(principal, query.collection(), policy, at, limit, maxBytes)
                          .thenApply(
                              p -> {
                                Predicate<String> hidden = Access.omitted(principal, policy);
                                List<Delta> deltas = new ArrayList<>();
                                for (Change c : p.changes) {
                                  JsonNode after = tree(c.after());
                                  JsonNode before = tree(c.before());
                                  if (after != null && query.matches(after)) {
                                    deltas.add(
                                        new Delta(
                                            true,
                                            c.partition(),
                                            c.sequence(),
                                            c.id(),
                                            c.revision(),
                                            text(query.project((ObjectNode) after, hidden))));
                                  } else if (before != null && query.matches(before)) {
                                    deltas.add(
                                        new Delta(
                                            false,
                                            c.partition(),
                                            c.sequence(),
                                            c.id(),
                                            c.revision(),
                                            null));
                                  }
                                }
                                return new LivePage(
                                    deltas,
                                    sign(
                                        principal,
                                        query.collection(),
                                        policy,
                                        hash,
                                        p.positions,
                                        p.spans,
                                        p.next),
                                    p.hasMore);
                              }));
        });
  }

  // ---- internals ----

  private <T> CompletionStage<T> admitted(String operation, Supplier<CompletionStage<T>> work) {
    FeedMetrics m = metrics;
    CompletionStage<T> result = admitted(work);
    if (m != null) {
      result.whenComplete(
          (v, e) -> {
            Throwable t =
                e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
            m.finished(
                operation,
                t == null ? null : t instanceof Refused r ? r.code() : ErrorCode.INTERNAL);
          });
    }
    return result;
  }

  private <T> CompletionStage<T> admitted(Supplier<CompletionStage<T>> work) {
    if (!admission.tryAcquire()) {
      return CompletableFuture.failedFuture(
          new Refused(
              ErrorCode.BUSY,
              "too many reads and queries are running on this node; retry shortly"));
    }
    try {
      return work.get()
          .toCompletableFuture()
          .orTimeout(deadline.toMillis(), TimeUnit.MILLISECONDS)
          .exceptionally(
              e -> {
                Throwable t =
                    e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
                if (t instanceof TimeoutException) {
                  throw new Refused(
                      ErrorCode.UNAVAILABLE,
                      "the read did not finish within " + deadline.toSeconds() + " s; retry");
                }
                throw e instanceof RuntimeException r ? r : new CompletionException(e);
              })
          .whenComplete((v, e) -> admission.release());
    } catch (RuntimeException e) {
      admission.release();
      return CompletableFuture.failedFuture(e);
    }
  }

  /** {@code collection}'s policy; {@link Refused} (retryable) before the policies are loaded. */
  public CollectionPolicy policy(String collection) {
    try {
      return policies.policy(collection);
    } catch (Policies.PoliciesUnavailable e) {
      throw new Refused(ErrorCode.UNAVAILABLE, "the collection policies are not loaded yet; retry");
    }
  }

  private TokenSigner signer() {
    return keys.signer()
        .orElseThrow(
            () ->
                new Refused(
                    ErrorCode.UNAVAILABLE, "the cluster's token keys are not loaded yet; retry"));
  }

  /**
   * Where a page starts: each partition's position, its span, and the partition served first
   * ({@link ChangeCursor#next}).
   */
  private record At(long[] positions, ChangesSpan[] spans, int next) {}

  private CompletionStage<At> positions(
      Principal principal,
      String collection,
      CollectionPolicy policy,
      Start start,
      byte[] queryHash) {
    int n = documents.partitions();
    if (n > ChangeCursor.MAX_PARTITIONS) {
      throw new Refused(
          ErrorCode.INTERNAL,
          "cursors hold at most "
              + ChangeCursor.MAX_PARTITIONS
              + " partitions; this cluster has "
              + n
              + " (weir.partitions.count)");
    }
    if (start instanceof FromCursor c) {
      return verify(c.token())
          .thenCompose(
              cursor -> {
                if (!cursor.collection().equals(collection)
                    || !cursor.principal().equals(principal.id())
                    || !Arrays.equals(cursor.queryHash(), queryHash)
                    || cursor.positions().length != n) {
                  throw new Refused(
                      ErrorCode.TOKEN_MISMATCH,
                      "the cursor was issued for another collection, principal, query or partition count");
                }
                if (cursor.policyVersion() > policy.version()) {
                  policies.reload();
                }
                if (cursor.policyEpoch() > principal.policyEpoch()
                    || cursor.policyVersion() > policy.version()) {
                  throw new Refused(
                      ErrorCode.UNAVAILABLE,
                      "this node has not loaded the latest grants or policy yet; retry");
                }
                if (cursor.policyEpoch() != principal.policyEpoch()
                    || cursor.policyVersion() != policy.version()) {
                  throw new Refused(
                      ErrorCode.TOKEN_INVALIDATED,
                      "the principal's grants or the collection's policy changed since the cursor was issued; resynchronise"
                          + " from a new snapshot");
                }
                return spans(collection, cursor.positions(), 1)
                    .thenApply(
                        spans -> {
                          check(policy, cursor.positions(), spans);
                          if (!Arrays.equals(fence(cursor.positions(), spans), cursor.fence())) {
                            throw new Refused(
                                ErrorCode.TOKEN_INVALIDATED,
                                "row visibility in the collection changed (an ACL change) or a"
                                    + " partition was restored since the cursor was issued; resynchronise from a new snapshot");
                          }
                          return new At(cursor.positions(), spans, cursor.next());
                        });
              });
    }
    return spans(collection, new long[n], 1)
        .thenApply(
            spans -> {
              long[] at = new long[n];
              for (int i = 0; i < n; i++) {
                at[i] = start instanceof Beginning ? spans[i].outboxFirst() - 1 : spans[i].tail();
              }
              check(policy, at, spans);
              return new At(at, spans, 0);
            });
  }

  private CompletionStage<ChangeCursor> verify(String token) {
    TokenSigner signer = signer();
    try {
      return CompletableFuture.completedFuture(ChangeCursor.verify(signer, token, clock.millis()));
    } catch (TokenSigner.InvalidToken e) {
      if (e.failure() != TokenSigner.Failure.UNKNOWN_KEY) {
        return CompletableFuture.failedFuture(invalid(e));
      }
      return keys.reloadForUnknownKey()
          .thenApply(
              reloaded -> {
                try {
                  return ChangeCursor.verify(reloaded, token, clock.millis());
                } catch (TokenSigner.InvalidToken again) {
                  throw invalid(again);
                }
              });
    }
  }

  private static Refused invalid(TokenSigner.InvalidToken e) {
    if (e.failure() == TokenSigner.Failure.INVALIDATED_BY_RESTORE) {
      return new Refused(
          ErrorCode.TOKEN_INVALIDATED,
          "the cursor was issued before the cluster was restored from a"
              + " backup; resynchronise from a new snapshot");
    }
    return new Refused(
        Projections.tokenErrorCode(e.failure()), "the cursor is not valid: " + e.getMessage());
  }

  /**
   * The partitions' rule versions must be the policy's; positions must be retained and not ahead.
   */
  private void check(CollectionPolicy policy, long[] positions, ChangesSpan[] spans) {
    for (int i = 0; i < spans.length; i++) {
      ruleInstalled(policy, i, spans[i].ruleVersion());
      if (positions[i] > spans[i].tail()) {
        throw new Refused(
            ErrorCode.TOKEN_INVALIDATED,
            "the cursor is ahead of a partition's history (restored?);"
                + " resynchronise from a new snapshot");
      }
      if (positions[i] < spans[i].outboxFirst() - 1) {
        throw new Refused(
            ErrorCode.HISTORY_UNAVAILABLE,
            "changes after the cursor were purged; resynchronise from a" + " new snapshot");
      }
    }
  }

  private CompletionStage<ChangesSpan[]> spans(String collection, long[] after, long maxEntries) {
    List<CompletableFuture<ChangesSpan>> asks = new ArrayList<>();
    for (int i = 0; i < after.length; i++) {
      long from = after[i];
      asks.add(documents.ask(i, r -> new ReadChanges(collection, from, maxEntries, r)));
    }
    return CompletableFuture.allOf(asks.toArray(CompletableFuture[]::new))
        .thenApply(done -> asks.stream().map(CompletableFuture::join).toArray(ChangesSpan[]::new));
  }

  /**
   * A digest of what a cursor's positions depend on: per partition its incarnation (where the
   * cursor read anything: an empty partition gets its incarnation with its first write) and the
   * collection's row-visibility epoch.
   */
  static byte[] fence(long[] positions, ChangesSpan[] spans) {
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      for (int i = 0; i < spans.length; i++) {
        String inc =
            positions[i] > 0 && spans[i].incarnation() != null ? spans[i].incarnation() : "-";
        sha.update((inc + '\0' + spans[i].rowEpoch() + '\0').getBytes(StandardCharsets.UTF_8));
      }
      return Arrays.copyOf(sha.digest(), ChangeCursor.FENCE_BYTES);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every JVM", e);
    }
  }

  private String sign(
      Principal principal,
      String collection,
      CollectionPolicy policy,
      byte[] queryHash,
      long[] positions,
      ChangesSpan[] spans,
      int next) {
    return new ChangeCursor(
            collection,
            principal.id(),
            principal.policyEpoch(),
            policy.version(),
            queryHash,
            fence(positions, spans),
            positions,
            next)
        .sign(signer(), clock.millis() + limits.cursorTtl().toMillis());
  }

  /** A page read: its changes, where each partition is now, and the partition served first next. */
  private record Read(
      List<Change> changes, long[] positions, ChangesSpan[] spans, boolean hasMore, int next) {}

  /**
   * Reads the next page after {@code at}: at most {@code limit} positions examined over all
   * partitions, visible changes selected while their projected images fit {@code maxBytes}. Both
   * are shared out round-robin from {@code at.next()}: one position per partition with entries
   * waiting, then another, and the selection takes one entry per partition a round in the same
   * order. The next page starts after the last partition the first round reached, or at the
   * partition whose change did not fit, so a partition with changes waiting is served within
   * ceil(partitions / limit) pages however busy the others are.
   */
  private CompletionStage<Read> page(
      Principal principal,
      String collection,
      CollectionPolicy policy,
      At at,
      int limit,
      long maxBytes) {
    int n = at.positions().length;
    long[] pending = new long[n];
    long waiting = 0;
    for (int i = 0; i < n; i++) {
      pending[i] = at.spans()[i].tail() - at.positions()[i];
      waiting += pending[i];
    }
    if (waiting == 0) {
      return CompletableFuture.completedFuture(
          new Read(List.of(), at.positions(), at.spans(), false, at.next()));
    }
    long[] share = new long[n];
    int resume = share(pending, limit, at.next(), share);
    List<CompletableFuture<List<OutboxEntry>>> reads = new ArrayList<>();
    List<CompletableFuture<ChangesSpan>> fresh = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      int p = i;
      long from = at.positions()[i];
      long count = share[i];
      if (count == 0) {
        reads.add(CompletableFuture.completedFuture(List.of()));
        fresh.add(CompletableFuture.completedFuture(at.spans()[i]));
        continue;
      }
      CompletableFuture<ChangesSpan> span =
          documents.ask(p, r -> new ReadChanges(collection, from, count, r));
      fresh.add(span);
      reads.add(
          span.thenCompose(
              s -> {
                if (from < s.outboxFirst() - 1) {
                  throw new Refused(
                      ErrorCode.HISTORY_UNAVAILABLE,
                      "changes after the cursor were purged; resynchronise from a new snapshot");
                }
                return reader.entries(
                    p,
                    s.incarnation(),
                    s.journalSequences(),
                    from,
                    Math.min(s.tail(), from + count));
              }));
    }
    return CompletableFuture.allOf(reads.toArray(CompletableFuture[]::new))
        .thenCompose(
            done -> {
              ChangesSpan[] spans =
                  fresh.stream().map(CompletableFuture::join).toArray(ChangesSpan[]::new);
              for (int i = 0; i < n; i++) {
                boolean restored =
                    at.spans()[i].incarnation() != null
                        && !at.spans()[i].incarnation().equals(spans[i].incarnation());
                if (restored
                    || spans[i].rowEpoch() != at.spans()[i].rowEpoch()
                    || spans[i].ruleVersion() != policy.version()) {
                  throw new Refused(
                      ErrorCode.TOKEN_INVALIDATED,
                      "row visibility in the collection changed, or a partition was"
                          + " restored, during the read; resynchronise from a new snapshot");
                }
              }
              List<List<OutboxEntry>> entries =
                  reads.stream().map(CompletableFuture::join).toList();
              return acls(principal, collection, policy, entries, spans)
                  .thenApplyAsync(
                      acls ->
                          select(
                              principal,
                              collection,
                              policy,
                              at,
                              entries,
                              acls,
                              spans,
                              maxBytes,
                              resume),
                      executor);
            });
  }

  /**
   * Current ACLs of the documents in {@code entries}, per partition; empty maps when no row rule
   * restricts.
   */
  private CompletionStage<List<Map<String, String>>> acls(
      Principal principal,
      String collection,
      CollectionPolicy policy,
      List<List<OutboxEntry>> entries,
      ChangesSpan[] spans) {
    List<CompletableFuture<Map<String, String>>> asks = new ArrayList<>();
    boolean needed = !principal.administrator() && policy.visibility() != Visibility.NONE;
    for (int i = 0; i < entries.size(); i++) {
      List<String> ids =
          entries.get(i).stream()
              .filter(e -> e.collection().equals(collection))
              .map(OutboxEntry::id)
              .distinct()
              .toList();
      if (!needed || ids.isEmpty()) {
        asks.add(CompletableFuture.completedFuture(Map.of()));
        continue;
      }
      long epoch = spans[i].rowEpoch();
      asks.add(
          documents
              .<Acls>ask(i, r -> new GetAcls(collection, ids, r))
              .thenApply(
                  a -> {
                    if (a.rowEpoch() != epoch || a.ruleVersion() != policy.version()) {
                      throw new Refused(
                          ErrorCode.TOKEN_INVALIDATED,
                          "row visibility in the collection changed during the read;"
                              + " resynchronise from a new snapshot");
                    }
                    return a.acls();
                  }));
    }
    return CompletableFuture.allOf(asks.toArray(CompletableFuture[]::new))
        .thenApply(done -> asks.stream().map(CompletableFuture::join).toList());
  }

  private Read select(
      Principal principal,
      String collection,
      CollectionPolicy policy,
      At at,
      List<List<OutboxEntry>> entries,
      List<Map<String, String>> acls,
      ChangesSpan[] spans,
      long maxBytes,
      int resume) {
    int n = entries.size();
    long[] positions = at.positions().clone();
    int[] taken = new int[n];
    List<Change> out = new ArrayList<>();
    long bytes = 0;
    int next = resume;
    boolean restricted = !Access.unrestricted(policy) && !principal.administrator();
    boolean more = true;
    rounds:
    while (more) {
      more = false;
      for (int k = 0; k < n; k++) {
        int i = (at.next() + k) % n;
        if (taken[i] == entries.get(i).size()) {
          continue;
        }
        more = true;
        OutboxEntry e = entries.get(i).get(taken[i]);
        if (e.collection().equals(collection)) {
          Change c =
              restricted ? visible(principal, policy, i, e, acls.get(i).get(e.id())) : raw(i, e);
          if (c != null) {
            if (bytes + c.bytes() > maxBytes) {
              if (out.isEmpty()) {
                throw new Refused(
                    ErrorCode.BUDGET_EXCEEDED,
                    "the next change is larger than the request's maxBytes; read again with a"
                        + " larger maxBytes");
              }
              next = i; // the change that did not fit is served first next time
              break rounds;
            }
            out.add(c);
            bytes += c.bytes();
          }
        }
        positions[i] = e.sequence();
        taken[i]++;
      }
    }
    boolean pending = false;
    for (int i = 0; i < positions.length; i++) {
      pending |= positions[i] < spans[i].tail();
    }
    return new Read(out, positions, spans, pending, next);
  }

  /**
   * Shares {@code limit} positions out over the partitions with entries {@code pending},
   * round-robin from partition {@code first}: one each, then another each, while any wait. Returns
   * the partition after the last one the first round reached (where the next page starts).
   */
  static int share(long[] pending, long limit, int first, long[] share) {
    int n = pending.length;
    int resume = first;
    long left = limit;
    boolean firstRound = true;
    while (left > 0) {
      boolean any = false;
      for (int k = 0; k < n && left > 0; k++) {
        int i = (first + k) % n;
        if (share[i] < pending[i]) {
          share[i]++;
          left--;
          any = true;
          if (firstRound) {
            resume = (i + 1) % n;
          }
        }
      }
      if (!any) {
        break;
      }
      firstRound = false;
    }
    return resume;
  }

  private static Change raw(int partition, OutboxEntry e) {
    boolean deleted = e.kind().equals("delete");
    String after = deleted ? null : e.after();
    return new Change(
        partition,
        e.sequence(),
        e.commitLsn(),
        e.id(),
        e.kind(),
        e.revision(),
        deleted,
        e.before(),
        after,
        Utf8.length(e.before()) + Utf8.length(after));
  }

  /**
   * The change with the images {@code principal} may see (whole: fields are omitted later, after a
   * live query's predicate saw them), or null when it may see none: every image needs the row's
   * current visibility and the after image's ACL; the before image also its own (historical) ACL.
   */
  private static Change visible(
      Principal principal,
      CollectionPolicy policy,
      int partition,
      OutboxEntry e,
      String currentAcl) {
    if (!Access.visibleAcl(principal, policy, currentAcl)) {
      return null;
    }
    JsonNode before = tree(e.before());
    JsonNode after = e.kind().equals("delete") ? null : tree(e.after());
    boolean afterVisible =
        after != null && after.isObject() && Access.visibleRow(principal, policy, after);
    boolean beforeVisible =
        before != null
            && before.isObject()
            && Access.visibleRow(principal, policy, before)
            && (after == null || afterVisible);
    if (!afterVisible && !beforeVisible) {
      return null;
    }
    long bytes =
        (beforeVisible
                ? Utf8.length(text(Access.project(principal, policy, (ObjectNode) before)))
                : 0)
            + (afterVisible
                ? Utf8.length(text(Access.project(principal, policy, (ObjectNode) after)))
                : 0);
    return new Change(
        partition,
        e.sequence(),
        e.commitLsn(),
        e.id(),
        e.kind(),
        e.revision(),
        e.kind().equals("delete"),
        beforeVisible ? e.before() : null,
        afterVisible ? e.after() : null,
        bytes);
  }

  private CompletionStage<Result> scan(
      Principal principal, Q1Query query, int maxRows, long maxBytes, boolean live) {
    CollectionPolicy policy = policy(query.collection());
    if (documents.routedByOtherColumns(query.collection())) {
      // Its documents move between partitions: scans of different moments could show one twice or
      // not at all, and a live remove could overtake the upsert elsewhere.
      throw new Refused(
          ErrorCode.UNSUPPORTED_QUERY,
          "queries over a collection routed by a partition key other than"
              + " its id are not supported yet");
    }
    int n = documents.partitions();
    // The candidate budget counts only the documents the principal may see: the partition leaves
    // the others out of the count and of its answer.
    ScanReader reader =
        principal.administrator() || policy.visibility() == Visibility.NONE
            ? null
            : new ScanReader(
                principal.id(), principal.groups(), policy.visibility() == Visibility.OWNER);
    long budget = limits.candidateBytes();
    List<CompletableFuture<CollectionScan>> asks = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      asks.add(documents.ask(i, r -> new ScanCollection(query.collection(), budget, reader, r)));
    }
    return CompletableFuture.allOf(asks.toArray(CompletableFuture[]::new))
        .thenApplyAsync(
            done -> {
              CollectionScan[] scans =
                  asks.stream().map(CompletableFuture::join).toArray(CollectionScan[]::new);
              Predicate<String> hidden = Access.omitted(principal, policy);
              List<Row> rows = new ArrayList<>();
              long bytes = 0;
              long[] positions = new long[n];
              ChangesSpan[] spans = new ChangesSpan[n];
              for (int i = 0; i < n; i++) {
                CollectionScan s = scans[i];
                // The rule first: a partition under another rule version fails closed (retryable),
                // whatever its documents.
                ruleInstalled(policy, i, s.ruleVersion());
                if (s.tooLarge()) {
                  throw new Refused(
                      ErrorCode.RESULT_TOO_LARGE,
                      "a partition holds more than "
                          + limits.candidateBytes()
                          + " bytes (weir.feeds.query.candidate-bytes) of candidate documents for"
                          + " this query");
                }
                positions[i] = s.tail();
                spans[i] =
                    new ChangesSpan(
                        s.incarnation(),
                        s.outboxFirst(),
                        s.tail(),
                        s.rowEpoch(),
                        s.ruleVersion(),
                        List.of());
                for (Document d : s.documents()) {
                  JsonNode body = tree(d.body());
                  if (body == null
                      || !body.isObject()
                      || !Access.visibleRow(principal, policy, body)
                      || !query.matches(body)) {
                    continue;
                  }
                  String row = text(query.project((ObjectNode) body, hidden));
                  bytes += Utf8.length(row);
                  if (rows.size() == maxRows || bytes > maxBytes) {
                    throw new Refused(
                        ErrorCode.RESULT_TOO_LARGE,
                        "the result has more rows or bytes than the request's limit and maxBytes"
                            + " allow; narrow the query");
                  }
                  rows.add(new Row(d.id(), d.revision(), row));
                }
              }
              return new Result(
                  rows,
                  live
                      ? sign(
                          principal,
                          query.collection(),
                          policy,
                          query.fingerprint(),
                          positions,
                          spans,
                          0)
                      : null);
            },
            executor);
  }

  /**
   * Fails (retryable) when partition {@code i}'s row rule is not the policy's, and starts repairing
   * it.
   */
  private void ruleInstalled(CollectionPolicy policy, int i, long installed) {
    if (installed != policy.version()) {
      policies.reconcile(policy, i, installed);
      throw new Refused(
          ErrorCode.UNAVAILABLE,
          "the collection's policy is not yet installed in every partition; retry");
    }
  }

  private static JsonNode tree(String json) {
    if (json == null) {
      return null;
    }
    try {
      return Access.JSON.readTree(json);
    } catch (IOException e) {
      return null;
    }
  }

  private static String text(JsonNode node) {
    try {
      return Access.JSON.writeValueAsString(node);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("a JSON tree always serializes", e);
    }
  }
}
