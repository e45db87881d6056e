package io.weir.node.feed;

import io.weir.node.auth.Access;
import io.weir.node.auth.Principal;
import io.weir.node.auth.ShownImage;
import io.weir.node.documents.Documents;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.persistence.PolicyStore.Visibility;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.Utf8;
import io.weir.sharding.partition.OutboxReader;
import io.weir.sharding.partition.Partition.OutboxEntry;
import io.weir.sharding.partition.ReadProtocol.Acls;
import io.weir.sharding.partition.ReadProtocol.ChangesSpan;
import io.weir.sharding.partition.ReadProtocol.GetAcls;
import io.weir.sharding.partition.ReadProtocol.ReadChanges;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.function.Predicate;

/**
 * The pages of the changes feed and live queries ({@link Feeds}): after a cursor's positions,
 * entries read from every partition's outbox ({@link OutboxReader}) and shared out round-robin
 * under the page's position and byte budgets, with each partition's row visibility applied.
 */
final class FeedPages {
  private final Documents documents;
  private final OutboxReader reader;

  /** Where work continues after partitions answered: never on a partition's own thread. */
  private final Executor executor;

  FeedPages(Documents documents, OutboxReader reader, Executor executor) {
    this.documents = documents;
    this.reader = reader;
    this.executor = executor;
  }

  /**
   * A page read: its changes, where each partition is now, whether more positions wait (at the
   * partitions' tails when they answered), whether the read left positions it planned for the next
   * one (the limit or maxBytes stopped it short of the tails, or {@code through}, as they stood
   * when it began), and the partition served first next.
   */
  record Read(
      List<Feeds.Change> changes,
      long[] positions,
      ChangesSpan[] spans,
      boolean hasMore,
      boolean backlog,
      int next) {}

  /**
   * Reads the next page after {@code at}: at most {@code limit} positions examined over all
   * partitions, visible changes selected while their projected images fit {@code maxBytes}. Both
   * are shared out round-robin from {@code at.next()}: one position per partition with entries
   * waiting, then another, and the selection takes one entry per partition a round in the same
   * order. The next page starts after the last partition the first round reached, or at the
   * partition whose change did not fit, so a partition with changes waiting is served within
   * ceil(partitions / limit) + 1 pages however busy the others are. With {@code through}
   * (positions; null for none), no partition is read past its position there.
   *
   * @param whole whether the changes carry their images whole (a live query's predicate sees every
   *     field; the fields the principal may not read are omitted from what it is sent later), or as
   *     the principal is shown them (the changes feed)
   */
  CompletionStage<Read> page(
      Principal principal,
      String collection,
      CollectionPolicy policy,
      FeedCursors.At at,
      int limit,
      long maxBytes,
      long[] through,
      boolean whole) {
    int n = at.positions().length;
    long[] pending = new long[n];
    long waiting = 0;
    for (int i = 0; i < n; i++) {
      long end = at.spans()[i].tail();
      if (through != null && through.length == n) {
        end = Math.min(end, through[i]);
      }
      pending[i] = Math.max(0, end - at.positions()[i]);
      waiting += pending[i];
    }
    if (waiting == 0) {
      return CompletableFuture.completedFuture(
          new Read(List.of(), at.positions(), at.spans(), false, false, at.next()));
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
                  throw new Feeds.Refused(
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
                  throw new Feeds.Refused(
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
                              resume,
                              pending,
                              whole),
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
                      throw new Feeds.Refused(
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
      FeedCursors.At at,
      List<List<OutboxEntry>> entries,
      List<Map<String, String>> acls,
      ChangesSpan[] spans,
      long maxBytes,
      int resume,
      long[] planned,
      boolean whole) {
    int n = entries.size();
    long[] positions = at.positions().clone();
    int[] taken = new int[n];
    List<Feeds.Change> out = new ArrayList<>();
    long bytes = 0;
    int next = resume;
    boolean restricted = !Access.unrestricted(policy) && !principal.administrator();
    Predicate<String> omitted = Access.omitted(principal, policy);
    // Documents' current ACLs repeat (the same lists, the same groups): each is read once a page.
    Map<String, Boolean> aclsSeen = new HashMap<>();
    Predicate<String> currentVisible =
        acl -> aclsSeen.computeIfAbsent(acl, a -> Access.visibleAcl(principal, policy, a));
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
          Feeds.Change c =
              restricted
                  ? visible(
                      principal,
                      policy,
                      omitted,
                      whole,
                      i,
                      e,
                      currentVisible.test(acls.get(i).get(e.id())))
                  : raw(i, e);
          if (c != null) {
            if (bytes + c.bytes() > maxBytes) {
              if (out.isEmpty()) {
                throw new Feeds.Refused(
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
    boolean backlog = false;
    for (int i = 0; i < positions.length; i++) {
      pending |= positions[i] < spans[i].tail();
      backlog |= positions[i] - at.positions()[i] < planned[i];
    }
    return new Read(out, positions, spans, pending, backlog, next);
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

  private static Feeds.Change raw(int partition, OutboxEntry e) {
    boolean deleted = e.kind().equals("delete");
    String after = deleted ? null : e.after();
    return new Feeds.Change(
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
   * The change with the images {@code principal} may see ({@code whole}, or as it is shown them),
   * or null when it may see none: every image needs the row's current visibility and the after
   * image's ACL; the before image also its own (historical) ACL. The change's bytes count the
   * images as the principal is shown them.
   */
  private static Feeds.Change visible(
      Principal principal,
      CollectionPolicy policy,
      Predicate<String> omitted,
      boolean whole,
      int partition,
      OutboxEntry e,
      boolean currentVisible) {
    if (!currentVisible) {
      return null;
    }
    boolean deleted = e.kind().equals("delete");
    ShownImage before = ShownImage.of(principal, policy, omitted, e.before());
    ShownImage after = deleted ? null : ShownImage.of(principal, policy, omitted, e.after());
    boolean afterVisible = after != null && after.visible();
    // An after image that is absent or not JSON leaves the before image to its own ACL.
    boolean beforeVisible = before.visible() && (after == null || !after.json() || afterVisible);
    if (!afterVisible && !beforeVisible) {
      return null;
    }
    long bytes =
        (beforeVisible ? Utf8.length(before.text()) : 0)
            + (afterVisible ? Utf8.length(after.text()) : 0);
    return new Feeds.Change(
        partition,
        e.sequence(),
        e.commitLsn(),
        e.id(),
        e.kind(),
        e.revision(),
        deleted,
        beforeVisible ? (whole ? e.before() : before.text()) : null,
        afterVisible ? (whole ? e.after() : after.text()) : null,
        bytes);
  }
}
