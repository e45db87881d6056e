package io.weir.node.projection;

import io.weir.node.NodeSettings;
import io.weir.node.documents.Documents;
import io.weir.node.documents.ReadAdmission;
import io.weir.node.tokens.TokenKeys;
import io.weir.protocol.ErrorCode;
import io.weir.protocol.token.BatchToken;
import io.weir.protocol.token.TokenSigner;
import io.weir.sharding.partition.BatchSelection;
import io.weir.sharding.partition.ConsumerProtocol.CommitBatch;
import io.weir.sharding.partition.ConsumerProtocol.ConfigureConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerRefused;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerReply;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerSpan;
import io.weir.sharding.partition.ConsumerProtocol.ConsumerView;
import io.weir.sharding.partition.ConsumerProtocol.ReadConsumer;
import io.weir.sharding.partition.ConsumerProtocol.ReleaseConsumer;
import io.weir.sharding.partition.OutboxReader;
import io.weir.sharding.partition.Partition;
import io.weir.sharding.partition.PartitionProtocol.Mutation;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Projection consumer operations, asked of the partitions: configure, read (the partition names
 * where the next entries are; they are read from the journal here and cut into a batch with a
 * signed token), commit (the token is verified here; the partition checks it is still current and
 * applies effects, checkpoint and receipt as one frame) and release.
 */
public final class Projections {
  private final Documents documents;
  private final OutboxReader reader;
  private final TokenKeys keys;
  private final NodeSettings.Projections limits;
  private final Duration batchTtl;
  private final Clock clock;
  private final int maxEffects;
  private final ReadAdmission admission;

  /**
   * @param maxEffects effects one commit may carry (the partitions' limit)
   */
  public Projections(
      Documents documents,
      OutboxReader reader,
      TokenKeys keys,
      NodeSettings.Projections limits,
      int maxEffects,
      Duration batchTtl,
      Clock clock) {
    this.documents = documents;
    this.maxEffects = maxEffects;
    this.reader = reader;
    this.keys = keys;
    this.limits = limits;
    this.batchTtl = batchTtl;
    this.clock = clock;
    this.admission =
        new ReadAdmission(limits.maxConcurrentReads(), limits.readDeadline(), "batch reads");
  }

  public NodeSettings.Projections limits() {
    return limits;
  }

  public int maxEffects() {
    return maxEffects;
  }

  public int partitions() {
    return documents.partitions();
  }

  public CompletionStage<ConsumerReply> configure(
      int partition,
      String name,
      long generation,
      List<String> collections,
      List<String> kinds,
      Optional<Long> startAfter) {
    return documents.ask(
        partition, r -> new ConfigureConsumer(name, generation, collections, kinds, startAfter, r));
  }

  public CompletionStage<ConsumerReply> release(int partition, String name, long generation) {
    return documents.ask(partition, r -> new ReleaseConsumer(name, generation, r));
  }

  /** The answer to a read. */
  public sealed interface ReadResult permits Batch, Refused, BudgetExceeded {}

  /**
   * A batch: the selected entries after {@code start}, through {@code through}.
   *
   * @param token the signed batch token a commit presents
   */
  public record Batch(
      int partition,
      ConsumerView consumer,
      long start,
      long through,
      long tail,
      boolean hasMore,
      List<Partition.OutboxEntry> entries,
      long bytes,
      String token)
      implements ReadResult {
    /** No entries (row values) and no token. */
    @Override
    public String toString() {
      return "Batch[partition="
          + partition
          + ", start="
          + start
          + ", through="
          + through
          + ", entries="
          + entries.size()
          + "]";
    }
  }

  /**
   * The consumer as its partition holds it now: a {@link ConsumerSpan} or a {@link
   * ConsumerRefused}.
   */
  public CompletionStage<ConsumerReply> consumer(int partition, String name, long generation) {
    return documents.ask(partition, r -> new ReadConsumer(name, generation, 1, r));
  }

  /** The partition refused (no such consumer, released, purged history). */
  public record Refused(ConsumerRefused refusal) implements ReadResult {}

  /** The first entry to return is larger than the byte budget. */
  public record BudgetExceeded(long position, long entryBytes, long maxBytes)
      implements ReadResult {}

  /**
   * Reads consumer {@code name}/{@code generation}'s next batch: up to {@code maxEntries} entries
   * examined after its checkpoint, selected ones up to {@code maxBytes} of payload. Changes
   * nothing.
   */
  public CompletionStage<ReadResult> read(
      int partition, String name, long generation, int maxEntries, long maxBytes) {
    Optional<TokenSigner> signer = keys.signer();
    if (signer.isEmpty()) {
      return CompletableFuture.failedFuture(new KeysUnavailable());
    }
    return admission.admit(
        () -> read(signer.get(), partition, name, generation, maxEntries, maxBytes));
  }

  private CompletionStage<ReadResult> read(
      TokenSigner signer,
      int partition,
      String name,
      long generation,
      int maxEntries,
      long maxBytes) {
    return documents
        .<ConsumerReply>ask(partition, r -> new ReadConsumer(name, generation, maxEntries, r))
        .thenCompose(
            reply -> {
              if (reply instanceof ConsumerRefused refused) {
                return CompletableFuture.completedFuture(new Refused(refused));
              }
              ConsumerSpan span = (ConsumerSpan) reply;
              long checkpoint = span.consumer().checkpoint();
              long through = Math.min(span.tail(), checkpoint + maxEntries);
              return reader
                  .entries(
                      partition, span.incarnation(), span.journalSequences(), checkpoint, through)
                  .thenApply(
                      entries -> {
                        BatchSelection.Result cut =
                            BatchSelection.select(
                                span.consumer(), checkpoint, entries, span.tail(), maxBytes);
                        if (cut instanceof BatchSelection.BudgetExceeded b) {
                          return new BudgetExceeded(b.position(), b.entryBytes(), b.maxBytes());
                        }
                        BatchSelection.Batch batch = (BatchSelection.Batch) cut;
                        String token =
                            new BatchToken(
                                    span.incarnation(),
                                    partition,
                                    name,
                                    generation,
                                    checkpoint,
                                    batch.through())
                                .sign(signer, clock.millis() + batchTtl.toMillis());
                        return new Batch(
                            partition,
                            span.consumer(),
                            checkpoint,
                            batch.through(),
                            span.tail(),
                            batch.hasMore(),
                            batch.entries(),
                            batch.bytes(),
                            token);
                      });
            });
  }

  /**
   * The error code of a refused signed token: 409 {@code token-invalidated} for a token issued
   * before a restore from a backup, 400 {@code token-expired} or {@code invalid-token} otherwise.
   */
  public static ErrorCode tokenErrorCode(TokenSigner.Failure failure) {
    return switch (failure) {
      case INVALIDATED_BY_RESTORE -> ErrorCode.TOKEN_INVALIDATED;
      case EXPIRED -> ErrorCode.TOKEN_EXPIRED;
      default -> ErrorCode.INVALID_TOKEN;
    };
  }

  /** The token keys are not loaded yet (storage is not ready): retry later. */
  public static final class KeysUnavailable extends RuntimeException {
    KeysUnavailable() {
      super("the cluster's token keys are not loaded yet", null, false, false);
    }
  }

  /**
   * Verifies a batch token: its fields, or a failure with {@link TokenSigner.InvalidToken} saying
   * why it is refused ({@link KeysUnavailable} before the keys are loaded). A token signed with a
   * key this node has not loaded makes it reload the keys once (another node may have rotated).
   */
  public CompletionStage<BatchToken> verify(String token) {
    Optional<TokenSigner> signer = keys.signer();
    if (signer.isEmpty()) {
      return CompletableFuture.failedFuture(new KeysUnavailable());
    }
    try {
      return CompletableFuture.completedFuture(
          BatchToken.verify(signer.get(), token, clock.millis()));
    } catch (TokenSigner.InvalidToken e) {
      if (e.failure() != TokenSigner.Failure.UNKNOWN_KEY) {
        return CompletableFuture.failedFuture(e);
      }
      // A reload that fails surfaces as a failure other than InvalidToken: 503, retryable.
      return keys.reloadForUnknownKey()
          .thenCompose(
              reloaded -> {
                try {
                  return CompletableFuture.completedFuture(
                      BatchToken.verify(reloaded, token, clock.millis()));
                } catch (TokenSigner.InvalidToken again) {
                  return CompletableFuture.failedFuture(again);
                }
              });
    }
  }

  /**
   * Commits the batch {@code token} names with {@code effects}. The caller has verified the token
   * ({@link #verify}) and checked the effects (every one in the token's partition).
   *
   * @param commandId the caller's id for this commit, kept in the receipt; empty: a random one
   */
  public CompletionStage<ConsumerReply> commit(
      BatchToken token, Optional<String> commandId, List<Mutation> effects) {
    String id = commandId.orElseGet(() -> UUID.randomUUID().toString());
    return documents.ask(
        token.partition(),
        r ->
            new CommitBatch(
                id,
                token.consumer(),
                token.generation(),
                token.incarnation(),
                token.start(),
                token.end(),
                effects,
                r));
  }
}
