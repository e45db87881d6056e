package io.weir.node.feed;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.micrometer.core.instrument.MeterRegistry;
import io.weir.node.auth.Access;
import io.weir.node.auth.Policies;
import io.weir.node.auth.Principal;
import io.weir.node.documents.Documents;
import io.weir.node.documents.ReadAdmission;
import io.weir.node.metrics.FeedMetrics;
import io.weir.node.tokens.TokenKeys;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.persistence.PolicyStore.Visibility;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.Utf8;
import io.weir.protocol.query.Q1Query;
import io.weir.sharding.partition.OutboxReader;
import io.weir.sharding.partition.ReadProtocol.ChangesSpan;
import io.weir.sharding.partition.ReadProtocol.CollectionScan;
import io.weir.sharding.partition.ReadProtocol.Document;
import io.weir.sharding.partition.ReadProtocol.ScanCollection;
import io.weir.sharding.partition.ReadProtocol.ScanReader;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
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
  public static final class Refused extends ReadAdmission.Refused {
    public Refused(ErrorCode code, String message) {
      super(code, message);
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

  /**
   * A live query's page: its deltas, the next cursor, whether more positions wait already, whether
   * the read stopped short of the tails as they stood when it began (its limit or maxBytes: the
   * next read has these positions to read whatever was written since), and where the cursor stands
   * ({@link LiveAt}; null only from stand-ins in tests).
   */
  public record LivePage(
      List<Delta> deltas, String cursor, boolean hasMore, boolean backlog, LiveAt at) {
    public LivePage(List<Delta> deltas, String cursor, boolean hasMore) {
      this(deltas, cursor, hasMore, hasMore, null);
    }
  }

  /**
   * Where a live read left its cursor: the positions, and a key equal for two cursors of one
   * principal and query exactly when reading after either gives the same changes (same policy epoch
   * and version, same fences, same positions; only the expiry and the partition served first
   * differ). Pushed streams at equal keys share one read ({@link LiveStreams}).
   */
  public record LiveAt(long[] positions, String key) {
    @Override
    public String toString() {
      return "LiveAt[partitions=" + positions.length + "]";
    }
  }

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
  private final ReadAdmission admission;

  /** Where work continues after partitions answered: never on a partition's own thread. */
  private final Executor executor;

  /**
   * Where a read starts (a verified cursor, or the beginning or end) and the cursor it hands out.
   */
  private final FeedCursors cursors;

  /** The pages of changes read after a cursor's positions. */
  private final FeedPages pages;

  /** Change images parsed once for every reader on this node. */
  private final ParsedImages images = new ParsedImages(ParsedImages.DEFAULT_MAX_CHARS);

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
    this.documents = documents;
    this.executor = documents.readsExecutor();
    this.reader = reader;
    this.keys = keys;
    this.policies = policies;
    this.limits = limits;
    this.clock = clock;
    this.admission =
        new ReadAdmission(limits.maxConcurrent(), deadline, "reads and queries", Refused::new);
    this.cursors = new FeedCursors(documents, keys, policies, limits, clock);
    this.pages = new FeedPages(documents, reader, executor);
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
    metrics = new FeedMetrics(registry, () -> limits.maxConcurrent() - admission.available());
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
          return cursors
              .positions(principal, collection, policy, start, new byte[0])
              .thenCompose(
                  at ->
                      pages
                          .page(principal, collection, policy, at, limit, maxBytes, null, false)
                          .thenApply(
                              p ->
                                  new Page(
                                      p.changes(),
                                      cursors.sign(
                                          principal,
                                          collection,
                                          policy,
                                          new byte[0],
                                          p.positions(),
                                          p.spans(),
                                          p.next()),
                                      p.hasMore())));
        });
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
    return readLive(principal, query, cursor, limit, maxBytes, null);
  }

  /**
   * Like {@link #readLive(Principal, Q1Query, String, int, long)}, reading no partition past {@code
   * through} (its positions; null: up to every tail): a pushed stream behind others of its query
   * catches up to where they stand, and then shares their reads.
   */
  public CompletionStage<LivePage> readLive(
      Principal principal, Q1Query query, String cursor, int limit, long maxBytes, long[] through) {
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
          return cursors
              .positions(principal, query.collection(), policy, new FromCursor(cursor), hash)
              .thenCompose(
                  at ->
                      pages
                          .page(
                              principal,
                              query.collection(),
                              policy,
                              at,
                              limit,
                              maxBytes,
                              through,
                              true)
                          .thenApply(
                              p -> {
                                Predicate<String> hidden = Access.omitted(principal, policy);
                                List<Delta> deltas = new ArrayList<>();
                                for (Change c : p.changes()) {
                                  JsonNode after = images.tree(c.after());
                                  JsonNode before = images.tree(c.before());
                                  if (after != null && query.matches(after)) {
                                    deltas.add(
                                        new Delta(
                                            true,
                                            c.partition(),
                                            c.sequence(),
                                            c.id(),
                                            c.revision(),
                                            text(query.project((ObjectNode) after, hidden::test))));
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
                                byte[] fence = FeedCursors.fence(p.positions(), p.spans());
                                return new LivePage(
                                    deltas,
                                    cursors.sign(
                                        principal,
                                        query.collection(),
                                        policy,
                                        hash,
                                        p.positions(),
                                        fence,
                                        p.next()),
                                    p.hasMore(),
                                    p.backlog(),
                                    new LiveAt(
                                        p.positions(),
                                        cursors.liveKey(
                                            principal, policy, hash, p.positions(), fence)));
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
    return admission.admit(work);
  }

  /**
   * Null when {@code principal} may run {@code query} ({@code QueryRead} and {@code DocumentsRead}
   * on its collection, also {@code ChangesRead} when {@code live}, and {@code FieldUse} on every
   * predicate field the policy makes sensitive); else the refusal: {@code forbidden} for a missing
   * grant, {@code unavailable} while the policies are not loaded.
   */
  public LiveStreams.Refusal refusal(Principal principal, Q1Query query, boolean live) {
    String c = query.collection();
    boolean granted =
        principal.may("QueryRead", c)
            && principal.may("DocumentsRead", c)
            && (!live || principal.may("ChangesRead", c));
    if (!granted) {
      return new LiveStreams.Refusal(
          ErrorCode.FORBIDDEN,
          live
              ? "live queries require QueryRead, DocumentsRead and ChangesRead on this collection"
              : "queries require QueryRead and DocumentsRead on this collection");
    }
    CollectionPolicy policy;
    try {
      policy = policy(c);
    } catch (Refused e) {
      return new LiveStreams.Refusal(e.code(), e.getMessage());
    }
    for (String field : new TreeSet<>(query.predicateFields())) {
      if (!Access.mayUse(principal, policy, field)) {
        return new LiveStreams.Refusal(
            ErrorCode.FORBIDDEN,
            "the predicate uses the field " + field + ", which needs FieldUse on it");
      }
    }
    return null;
  }

  /** {@code collection}'s policy; {@link Refused} (retryable) before the policies are loaded. */
  public CollectionPolicy policy(String collection) {
    try {
      return policies.policy(collection);
    } catch (Policies.PoliciesUnavailable e) {
      throw new Refused(ErrorCode.UNAVAILABLE, "the collection policies are not loaded yet; retry");
    }
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
                cursors.ruleInstalled(policy, i, s.ruleVersion());
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
                  JsonNode body = Access.tree(d.body());
                  if (body == null
                      || !body.isObject()
                      || !Access.visibleRow(principal, policy, body)
                      || !query.matches(body)) {
                    continue;
                  }
                  String row = text(query.project((ObjectNode) body, hidden::test));
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
                      ? cursors.sign(
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

  static String text(JsonNode node) {
    try {
      return Access.JSON.writeValueAsString(node);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("a JSON tree always serializes", e);
    }
  }
}
