package io.weir.node;

import io.weir.persistence.TokenKeyStore;
import io.weir.persistence.TokenKeyStore.KeyRing;
import io.weir.protocol.token.TokenSigner;
import java.sql.Connection;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * This node's view of the cluster's token-signing keys ({@link TokenKeyStore}): loaded from
 * PostgreSQL, reloaded on a schedule and when a token names a key not loaded yet (another node
 * rotated), at most once a second for that reason. Rotation and retirement go to PostgreSQL and
 * take effect here at once; other nodes see them at their next reload.
 */
public final class TokenKeys {
  private static final Logger log = LoggerFactory.getLogger(TokenKeys.class);
  private static final long UNKNOWN_KEY_RELOAD_MILLIS = 1000;

  private final DataSource dataSource;
  private final String schema;
  private final Executor blocking;
  private final AtomicReference<KeyRing> ring = new AtomicReference<>();
  private final AtomicReference<TokenSigner> signer = new AtomicReference<>();
  private final AtomicLong lastUnknownKeyReload = new AtomicLong();

  /** @param blocking where the JDBC calls run */
  public TokenKeys(DataSource dataSource, String schema, Executor blocking) {
    this.dataSource = dataSource;
    this.schema = schema;
    this.blocking = blocking;
  }

  /** The signer, once the keys were loaded (storage ready); empty before. */
  public Optional<TokenSigner> signer() {
    return Optional.ofNullable(signer.get());
  }

  /** The keys' public facts as last loaded. */
  public Optional<KeyRing> ring() {
    return Optional.ofNullable(ring.get());
  }

  /** Reloads the keys from PostgreSQL. */
  public CompletionStage<TokenSigner> reload() {
    return run(c -> TokenKeyStore.load(c, schema));
  }

  /**
   * Reloads because a token named a key this node does not hold, unless that happened less than a
   * second ago (forged key ids must not turn into a query each).
   */
  public CompletionStage<Optional<TokenSigner>> reloadForUnknownKey() {
    long now = System.currentTimeMillis();
    long last = lastUnknownKeyReload.get();
    if (now - last < UNKNOWN_KEY_RELOAD_MILLIS || !lastUnknownKeyReload.compareAndSet(last, now)) {
      return CompletableFuture.completedFuture(Optional.empty());
    }
    return reload().thenApply(Optional::of);
  }

  /** Adds a key that signs from now on. */
  public CompletionStage<TokenSigner> rotate() {
    return run(c -> TokenKeyStore.rotate(c, schema));
  }

  /** Retires a key; fails with {@link TokenKeyStore.KeyRefused} for an unknown or the signing key. */
  public CompletionStage<TokenSigner> retire(String kid) {
    return run(c -> TokenKeyStore.retire(c, schema, kid));
  }

  @FunctionalInterface
  private interface KeyCall {
    KeyRing apply(Connection c) throws Exception;
  }

  private CompletionStage<TokenSigner> run(KeyCall call) {
    return CompletableFuture.supplyAsync(() -> {
      try (Connection c = dataSource.getConnection()) {
        KeyRing loaded = call.apply(c);
        TokenSigner next = new TokenSigner(loaded.activeKid(), loaded.keys());
        KeyRing before = ring.getAndSet(loaded);
        signer.set(next);
        if (before == null || !before.activeKid().equals(loaded.activeKid()) || !before.keys().keySet().equals(loaded.keys().keySet())) {
          log.info("token keys loaded: signing with {}, {} key(s) verify", loaded.activeKid(), loaded.keys().size());
        }
        return next;
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new java.util.concurrent.CompletionException(e);
      }
    }, blocking);
  }
}
