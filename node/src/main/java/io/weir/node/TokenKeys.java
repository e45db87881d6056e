package io.weir.node;

import io.weir.persistence.TokenKeyStore;
import io.weir.persistence.TokenKeyStore.KeyRing;
import io.weir.protocol.token.TokenSigner;
import java.sql.Connection;
import java.time.Duration;
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
 * rotated). Rotation and retirement go to PostgreSQL and take effect here at once; other nodes see
 * them at their next reload.
 *
 * <p>Each load takes a ticket just before it reads the keys (after its own change, for a rotation or
 * retirement, is committed); a result is published only if no load with a later ticket has published
 * already, so a slow scheduled reload can never bring back a key retired meanwhile. The key ring and
 * its signer are published together.
 */
public final class TokenKeys {
  private static final Logger log = LoggerFactory.getLogger(TokenKeys.class);

  /** What a load produced: the keys and their signer, and the ticket of the load. */
  private record Loaded(long ticket, KeyRing ring, TokenSigner signer) {}

  private final DataSource dataSource;
  private final String schema;
  private final Executor blocking;
  private final Duration retireAfter;
  private final AtomicLong tickets = new AtomicLong();
  private final AtomicReference<Loaded> current = new AtomicReference<>();
  /** The reload that unknown-key checks wait for: one at a time. */
  private final AtomicReference<CompletableFuture<TokenSigner>> unknownKeyReload = new AtomicReference<>();

  /**
   * @param blocking where the JDBC calls run
   * @param retireAfter a key may be retired only this long after it stopped signing (the nodes'
   *     reload interval: until then another node may still sign with it)
   */
  public TokenKeys(DataSource dataSource, String schema, Executor blocking, Duration retireAfter) {
    this.dataSource = dataSource;
    this.schema = schema;
    this.blocking = blocking;
    this.retireAfter = retireAfter;
  }

  /** The signer, once the keys were loaded (storage ready); empty before. */
  public Optional<TokenSigner> signer() {
    return Optional.ofNullable(current.get()).map(Loaded::signer);
  }

  /** The keys' public facts as last loaded. */
  public Optional<KeyRing> ring() {
    return Optional.ofNullable(current.get()).map(Loaded::ring);
  }

  /** Reloads the keys from PostgreSQL. */
  public CompletionStage<TokenSigner> reload() {
    return run(c -> { });
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
        reload().whenComplete((signer, error) -> {
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

  /** A change to the keys, committed before they are read again. */
  @FunctionalInterface
  private interface KeyChange {
    void apply(Connection c) throws Exception;
  }

  private CompletionStage<TokenSigner> run(KeyChange change) {
    return CompletableFuture.supplyAsync(() -> {
      try (Connection c = dataSource.getConnection()) {
        change.apply(c);
        long ticket = tickets.incrementAndGet();
        KeyRing ring = TokenKeyStore.load(c, schema);
        Loaded loaded = new Loaded(ticket, ring, new TokenSigner(ring.activeKid(), ring.keys()));
        Loaded before = current.getAndAccumulate(loaded, (old, fresh) -> old != null && old.ticket() > fresh.ticket() ? old : fresh);
        if (before != null && before.ticket() > ticket) {
          return before.signer(); // a later load published already: its keys are the newer ones
        }
        if (before == null || !before.ring().activeKid().equals(ring.activeKid())
            || !before.ring().keys().keySet().equals(ring.keys().keySet())) {
          log.info("token keys loaded: signing with {}, {} key(s) verify", ring.activeKid(), ring.keys().size());
        }
        return loaded.signer();
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new java.util.concurrent.CompletionException(e);
      }
    }, blocking);
  }
}
