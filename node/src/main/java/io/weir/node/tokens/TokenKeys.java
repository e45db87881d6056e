package io.weir.node.tokens;

import io.weir.node.OrderedLoads;
import io.weir.node.auth.CoalescedRuns;
import io.weir.persistence.TokenKeyStore;
import io.weir.persistence.TokenKeyStore.KeyRing;
import io.weir.protocol.token.TokenSigner;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * This node's view of the cluster's token-signing keys ({@link TokenKeyStore}): loaded from
 * PostgreSQL, reloaded on a schedule and when a token names a key not loaded yet (another node
 * rotated; at most once per {@link #UNKNOWN_KEY_RELOAD_GAP}). Rotation and retirement go to
 * PostgreSQL and take effect here at once ({@link OrderedLoads}: a reload that started earlier
 * cannot overwrite them); other nodes see them at their next reload. The key ring and its signer
 * are published together.
 */
public final class TokenKeys {
  private static final Logger log = LoggerFactory.getLogger(TokenKeys.class);

  /** The keys and their signer, as one load read them. */
  private record Keys(KeyRing ring, TokenSigner signer) {}

  private final String schema;
  private final Duration retireAfter;
  private final OrderedLoads<Keys> keys;

  /**
   * Reloads caused by tokens naming an unknown key start at most once per this gap (and one at a
   * time), as reloads caused by unknown bearer tokens do: forged key ids cannot turn into
   * PostgreSQL transactions at the rate they arrive; they only wait up to this long for their
   * refusal.
   */
  static final Duration UNKNOWN_KEY_RELOAD_GAP = Duration.ofSeconds(1);

  /** Reloads caused by unknown key ids: one at a time, one per gap at most. */
  private final CoalescedRuns<TokenSigner> unknownKeyReloads;

  /**
   * @param blocking where the JDBC calls run
   * @param retireAfter a key may be retired only this long after it stopped signing (the nodes'
   *     reload interval: until then another node may still sign with it)
   */
  public TokenKeys(DataSource dataSource, String schema, Executor blocking, Duration retireAfter) {
    this(
        dataSource,
        schema,
        blocking,
        retireAfter,
        c -> TokenKeyStore.load(c, schema),
        UNKNOWN_KEY_RELOAD_GAP);
  }

  /** With the rows read by {@code load} and unknown-key reloads at most once per {@code gap}. */
  TokenKeys(
      DataSource dataSource,
      String schema,
      Executor blocking,
      Duration retireAfter,
      OrderedLoads.Loader<KeyRing> load,
      Duration unknownKeyReloadGap) {
    this.schema = schema;
    this.retireAfter = retireAfter;
    this.keys =
        new OrderedLoads<>(
            dataSource,
            blocking,
            c -> {
              KeyRing ring = load.load(c);
              return new Keys(ring, new TokenSigner(ring.activeKid(), ring.keys(), ring.fenced()));
            },
            null);
    this.unknownKeyReloads = new CoalescedRuns<>(this::reload, unknownKeyReloadGap);
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
   * Reloads because a token named a key this node does not hold (another node may have rotated):
   * the stage holds the signer of a load that started after this call, or fails if that load fails.
   * Such loads run one at a time and start at most once per {@link #UNKNOWN_KEY_RELOAD_GAP}; every
   * caller waiting meanwhile shares the next one, so forged key ids cannot turn into a query each
   * ({@link CoalescedRuns}, shared with the principals' reloads after an unknown bearer token).
   * Only cursors and batch tokens come here; replay tokens of continuous queries (a Last-Event-ID
   * that every SSE reconnection presents) are verified with {@link #signer()} alone and never cause
   * a reload: one naming a key this node has not loaded is refused until the next scheduled reload.
   */
  public CompletionStage<TokenSigner> reloadForUnknownKey() {
    return unknownKeyReloads.next();
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
