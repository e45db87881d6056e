package io.weir.node;

import io.weir.persistence.TokenKeyStore;
import io.weir.persistence.TokenKeyStore.KeyRing;
import io.weir.protocol.token.TokenSigner;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * This node's view of the cluster's token-signing keys ({@link TokenKeyStore}): loaded from
 * PostgreSQL, reloaded on a schedule and when a token names a key not loaded yet (another node
 * rotated). Rotation and retirement go to PostgreSQL and take effect here at once ({@link
 * OrderedLoads}: a reload that started earlier cannot overwrite them); other nodes see them at
 * their next reload. The key ring and its signer are published together.
 */
public final class TokenKeys {
  private static final Logger log = LoggerFactory.getLogger(TokenKeys.class);

  /** The keys and their signer, as one load read them. */
  private record Keys(KeyRing ring, TokenSigner signer) {}

  private final String schema;
  private final Duration retireAfter;
  private final OrderedLoads<Keys> keys;

  /** The reload that unknown-key checks wait for: one at a time. */
  private final AtomicReference<CompletableFuture<TokenSigner>> unknownKeyReload =
      new AtomicReference<>();

  /**
   * @param blocking where the JDBC calls run
   * @param retireAfter a key may be retired only this long after it stopped signing (the nodes'
   *     reload interval: until then another node may still sign with it)
   */
  public TokenKeys(DataSource dataSource, String schema, Executor blocking, Duration retireAfter) {
    this.schema = schema;
    this.retireAfter = retireAfter;
    this.keys =
        new OrderedLoads<>(
            dataSource,
            blocking,
            c -> {
              KeyRing ring = TokenKeyStore.load(c, schema);
              return new Keys(ring, new TokenSigner(ring.activeKid(), ring.keys(), ring.fenced()));
            },
            null);
  }

  /** The signer, once the keys were loaded (storage ready); empty before. */
  public Optional<TokenSigner> signer() {
    return Optional.ofNullable(keys.current()).map(Keys::signer);
  }

  /** The keys' public facts as last loaded. */
  public Optional<KeyRing> ring() {
    return Optional.ofNullable(keys.current()).map(Keys::ring);
  }

  /** Reloads the keys from PostgreSQL. */
  public CompletionStage<TokenSigner> reload() {
    return run(null);
  }

  /**
   * Reloads because a token named a key this node does not hold. Concurrent callers share one
   * reload (forged key ids cannot turn into a query each); the stage fails if the reload fails.
   */
  public CompletionStage<TokenSigner> reloadForUnknownKey() {
    while (true) {
      CompletableFuture<TokenSigner> running = unknownKeyReload.get();
      if (running != null && !running.isDone()) {
        return running;
      }
      CompletableFuture<TokenSigner> next = new CompletableFuture<>();
      if (unknownKeyReload.compareAndSet(running, next)) {
        reload()
            .whenComplete(
                (signer, error) -> {
                  if (error == null) {
                    next.complete(signer);
                  } else {
                    next.completeExceptionally(error);
                  }
                });
        return next;
      }
    }
  }

  /** Adds a key that signs from now on. */
  public CompletionStage<TokenSigner> rotate() {
    return run(c -> TokenKeyStore.rotate(c, schema));
  }

  /**
   * Retires a key; fails with {@link TokenKeyStore.KeyRefused} for an unknown key, the signing key,
   * or a key that stopped signing less than the reload interval ago.
   */
  public CompletionStage<TokenSigner> retire(String kid) {
    return run(c -> TokenKeyStore.retire(c, schema, kid, retireAfter));
  }

  private CompletionStage<TokenSigner> run(OrderedLoads.Change change) {
    Keys before = keys.current();
    return keys.run(change)
        .thenApply(
            now -> {
              if (before == null
                  || !before.ring().activeKid().equals(now.ring().activeKid())
                  || !before.ring().keys().keySet().equals(now.ring().keys().keySet())) {
                log.info(
                    "token keys loaded: signing with {}, {} key(s) verify",
                    now.ring().activeKid(),
                    now.ring().keys().size());
              }
              return now.signer();
            });
  }
}
