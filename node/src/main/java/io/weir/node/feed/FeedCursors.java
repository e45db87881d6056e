package io.weir.node.feed;

import io.weir.node.auth.Policies;
import io.weir.node.auth.Principal;
import io.weir.node.documents.Documents;
import io.weir.node.projection.Projections;
import io.weir.node.tokens.TokenKeys;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.token.ChangeCursor;
import io.weir.protocol.token.TokenSigner;
import io.weir.sharding.partition.ReadProtocol.ChangesSpan;
import io.weir.sharding.partition.ReadProtocol.ReadChanges;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Clock;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * The cursors of the changes feed and live queries ({@link Feeds}): where a read starts (a verified
 * cursor, the beginning or the end of every partition's retained outbox) and the signed cursor a
 * page hands out. A cursor is refused when it was issued for another collection, principal, query
 * or partition count ({@code token-mismatch}), when the principal's grants, the collection's
 * policy, a partition's incarnation or the collection's row visibility changed since ({@code
 * token-invalidated}: the fence), when it is ahead of a partition's history, or when the changes
 * after it were purged ({@code history-unavailable}).
 */
final class FeedCursors {
  private final Documents documents;
  private final TokenKeys keys;
  private final Policies policies;
  private final Feeds.Limits limits;
  private final Clock clock;

  FeedCursors(
      Documents documents, TokenKeys keys, Policies policies, Feeds.Limits limits, Clock clock) {
    this.documents = documents;
    this.keys = keys;
    this.policies = policies;
    this.limits = limits;
    this.clock = clock;
  }

  private TokenSigner signer() {
    return keys.signer()
        .orElseThrow(
            () ->
                new Feeds.Refused(
                    ErrorCode.UNAVAILABLE, "the cluster's token keys are not loaded yet; retry"));
  }

  /**
   * Where a page starts: each partition's position, its span, and the partition served first
   * ({@link ChangeCursor#next}).
   */
  record At(long[] positions, ChangesSpan[] spans, int next) {}

  CompletionStage<At> positions(
      Principal principal,
      String collection,
      CollectionPolicy policy,
      Feeds.Start start,
      byte[] queryHash) {
    int n = documents.partitions();
    if (n > ChangeCursor.MAX_PARTITIONS) {
      throw new Feeds.Refused(
          ErrorCode.INTERNAL,
          "cursors hold at most "
              + ChangeCursor.MAX_PARTITIONS
              + " partitions; this cluster has "
              + n
              + " (weir.partitions.count)");
    }
    if (start instanceof Feeds.FromCursor c) {
      return verify(c.token())
          .thenCompose(
              cursor -> {
                if (!cursor.collection().equals(collection)
                    || !cursor.principal().equals(principal.id())
                    || !Arrays.equals(cursor.queryHash(), queryHash)
                    || cursor.positions().length != n) {
                  throw new Feeds.Refused(
                      ErrorCode.TOKEN_MISMATCH,
                      "the cursor was issued for another collection, principal, query or partition count");
                }
                if (cursor.policyVersion() > policy.version()) {
                  policies.reload();
                }
                if (cursor.policyEpoch() > principal.policyEpoch()
                    || cursor.policyVersion() > policy.version()) {
                  throw new Feeds.Refused(
                      ErrorCode.UNAVAILABLE,
                      "this node has not loaded the latest grants or policy yet; retry");
                }
                if (cursor.policyEpoch() != principal.policyEpoch()
                    || cursor.policyVersion() != policy.version()) {
                  throw new Feeds.Refused(
                      ErrorCode.TOKEN_INVALIDATED,
                      "the principal's grants or the collection's policy changed since the cursor was issued; resynchronise"
                          + " from a new snapshot");
                }
                return spans(collection, cursor.positions(), 1)
                    .thenApply(
                        spans -> {
                          check(policy, cursor.positions(), spans);
                          if (!Arrays.equals(fence(cursor.positions(), spans), cursor.fence())) {
                            throw new Feeds.Refused(
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
                at[i] =
                    start instanceof Feeds.Beginning ? spans[i].outboxFirst() - 1 : spans[i].tail();
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

  private static Feeds.Refused invalid(TokenSigner.InvalidToken e) {
    if (e.failure() == TokenSigner.Failure.INVALIDATED_BY_RESTORE) {
      return new Feeds.Refused(
          ErrorCode.TOKEN_INVALIDATED,
          "the cursor was issued before the cluster was restored from a"
              + " backup; resynchronise from a new snapshot");
    }
    return new Feeds.Refused(
        Projections.tokenErrorCode(e.failure()), "the cursor is not valid: " + e.getMessage());
  }

  /**
   * The partitions' rule versions must be the policy's; positions must be retained and not ahead.
   */
  private void check(CollectionPolicy policy, long[] positions, ChangesSpan[] spans) {
    for (int i = 0; i < spans.length; i++) {
      ruleInstalled(policy, i, spans[i].ruleVersion());
      if (positions[i] > spans[i].tail()) {
        throw new Feeds.Refused(
            ErrorCode.TOKEN_INVALIDATED,
            "the cursor is ahead of a partition's history (restored?);"
                + " resynchronise from a new snapshot");
      }
      if (positions[i] < spans[i].outboxFirst() - 1) {
        throw new Feeds.Refused(
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

  /**
   * What a cursor of {@code principal}'s live query {@code queryHash} holds besides its expiry and
   * the partition served first: two cursors with equal keys read the same changes.
   */
  String liveKey(
      Principal principal,
      CollectionPolicy policy,
      byte[] queryHash,
      long[] positions,
      byte[] fence) {
    return principal.id()
        + '/'
        + principal.policyEpoch()
        + '/'
        + policy.version()
        + '/'
        + HexFormat.of().formatHex(queryHash)
        + '/'
        + HexFormat.of().formatHex(fence)
        + '/'
        + Arrays.toString(positions);
  }

  String sign(
      Principal principal,
      String collection,
      CollectionPolicy policy,
      byte[] queryHash,
      long[] positions,
      ChangesSpan[] spans,
      int next) {
    return sign(principal, collection, policy, queryHash, positions, fence(positions, spans), next);
  }

  /** Like the above with the fence ({@link #fence}) already computed. */
  String sign(
      Principal principal,
      String collection,
      CollectionPolicy policy,
      byte[] queryHash,
      long[] positions,
      byte[] fence,
      int next) {
    return new ChangeCursor(
            collection,
            principal.id(),
            principal.policyEpoch(),
            policy.version(),
            queryHash,
            fence,
            positions,
            next)
        .sign(signer(), clock.millis() + limits.cursorTtl().toMillis());
  }

  /**
   * Fails (retryable) when partition {@code i}'s row rule is not the policy's, and starts repairing
   * it.
   */
  void ruleInstalled(CollectionPolicy policy, int i, long installed) {
    if (installed != policy.version()) {
      policies.reconcile(policy, i, installed);
      throw new Feeds.Refused(
          ErrorCode.UNAVAILABLE,
          "the collection's policy is not yet installed in every partition; retry");
    }
  }
}
