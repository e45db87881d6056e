package io.weir.node.auth;

import io.weir.node.OrderedLoads;
import io.weir.persistence.PrincipalStore;
import io.weir.persistence.PrincipalStore.StoredPrincipal;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;

/**
 * The principals of the cluster as this node knows them: the bootstrap administrator (from
 * configuration) and those stored in PostgreSQL ({@link PrincipalStore}), reloaded on a schedule
 * and at once on this node after a change made through it ({@link OrderedLoads}: an earlier reload
 * cannot bring back a revoked principal). Stored tokens are SHA-256 hashes; a presented token is
 * looked up by its hash (lookup timing can only tell a caller about hashes of its own inputs).
 */
public final class Principals implements Authenticator {
  /** A token a principal is known by; {@code validUntil} null for its current token. */
  private record Entry(Principal principal, Instant validUntil) {}

  /**
   * Every stored principal, the active ones by token hash (hex), previous tokens in their grace
   * included, and the active ones by id.
   */
  private record View(
      List<StoredPrincipal> all, Map<String, Entry> byHash, Map<String, Principal> activeById) {}

  private final TokenAuthenticator bootstrap;
  private final String schema;
  private final OrderedLoads<View> view;
  private final Clock clock;
  private final Duration rotationGrace;
  private volatile Runnable changed = () -> {};

  public Principals(
      TokenAuthenticator bootstrap, DataSource dataSource, String schema, Executor blocking) {
    this(bootstrap, dataSource, schema, blocking, Clock.systemUTC(), Duration.ofHours(1));
  }

  /**
   * @param clock ends previous tokens' grace periods: a previous token is refused from its {@code
   *     previous_valid_until} on, on every node, without waiting for a reload
   * @param rotationGrace how long a rotated principal's previous token stays valid unless the
   *     rotation asks otherwise ({@code weir.principals.rotation-grace})
   */
  public Principals(
      TokenAuthenticator bootstrap,
      DataSource dataSource,
      String schema,
      Executor blocking,
      Clock clock,
      Duration rotationGrace) {
    this.bootstrap = bootstrap;
    this.schema = schema;
    this.clock = clock;
    this.rotationGrace = rotationGrace;
    this.view =
        new OrderedLoads<>(
            dataSource,
            blocking,
            c -> index(PrincipalStore.load(c, schema)),
            new View(List.of(), Map.of(), Map.of()));
  }

  private static View index(List<StoredPrincipal> all) {
    Map<String, Entry> byHash = new java.util.HashMap<>();
    Map<String, Principal> byId = new java.util.HashMap<>();
    for (StoredPrincipal s : all) {
      if (s.revokedAt() == null) {
        Principal p =
            new Principal(s.id(), s.administrator(), s.grants(), s.policyEpoch(), s.groups());
        byId.put(s.id(), p);
        if (s.previousTokenHash() != null && s.previousValidUntil() != null) {
          byHash.put(
              HexFormat.of().formatHex(s.previousTokenHash()),
              new Entry(p, s.previousValidUntil()));
        }
        // The current token wins should a previous hash ever equal it.
        byHash.put(HexFormat.of().formatHex(s.tokenHash()), new Entry(p, null));
      }
    }
    return new View(List.copyOf(all), Map.copyOf(byHash), Map.copyOf(byId));
  }

  @Override
  public Optional<Principal> authenticate(String bearerToken) {
    Optional<Principal> admin = bootstrap.authenticate(bearerToken);
    if (admin.isPresent() || bearerToken == null || bearerToken.isEmpty()) {
      return admin;
    }
    Entry e =
        view.current().byHash().get(HexFormat.of().formatHex(PrincipalStore.sha256(bearerToken)));
    if (e == null || (e.validUntil() != null && !clock.instant().isBefore(e.validUntil()))) {
      return Optional.empty();
    }
    return Optional.of(e.principal());
  }

  /**
   * Runs {@code listener} after every change made through this node has committed (the node tells
   * the other nodes, which reload at once instead of at their next scheduled reload).
   */
  public void onChange(Runnable listener) {
    this.changed = listener;
  }

  /** {@code stage}, telling the change listener once it has succeeded. */
  private <T> CompletionStage<T> announced(CompletionStage<T> stage) {
    return stage.whenComplete(
        (v, e) -> {
          if (e == null) {
            changed.run();
          }
        });
  }

  /** The grace period a rotation gives the previous token unless it asks for another. */
  public Duration rotationGrace() {
    return rotationGrace;
  }

  /**
   * Gives a principal a new token; its current one stays valid for {@code grace}. The stage holds
   * the new token (returned once) and the end of the grace period.
   */
  public CompletionStage<PrincipalStore.Rotated> rotate(String id, Duration grace) {
    AtomicReference<PrincipalStore.Rotated> rotated = new AtomicReference<>();
    return announced(
        view.run(c -> rotated.set(PrincipalStore.rotate(c, schema, id, grace)))
            .thenApply(v -> rotated.get()));
  }

  /** Every stored principal as last loaded (revoked ones included). */
  public List<StoredPrincipal> all() {
    return view.current().all();
  }

  public CompletionStage<Void> reload() {
    return view.run(null).thenApply(v -> null);
  }

  /** Creates a principal; the stage holds its token (returned once). */
  public CompletionStage<String> create(String id, boolean administrator) {
    return create(id, administrator, List.of());
  }

  /** Creates a principal in {@code groups}; the stage holds its token (returned once). */
  public CompletionStage<String> create(String id, boolean administrator, List<String> groups) {
    AtomicReference<String> token = new AtomicReference<>();
    return announced(
        view.run(c -> token.set(PrincipalStore.create(c, schema, id, administrator, groups)))
            .thenApply(v -> token.get()));
  }

  public CompletionStage<Void> revoke(String id) {
    return announced(view.run(c -> PrincipalStore.revoke(c, schema, id)).thenApply(v -> null));
  }

  public CompletionStage<Void> changeGrant(
      String id, String collection, String grant, boolean add) {
    return changeGrant(id, collection, grant, "", add);
  }

  /** A collection grant ({@code field} empty) or a field grant. */
  public CompletionStage<Void> changeGrant(
      String id, String collection, String grant, String field, boolean add) {
    return announced(
        view.run(c -> PrincipalStore.changeGrant(c, schema, id, collection, grant, field, add))
            .thenApply(v -> null));
  }

  /**
   * A miss reloads the principals before it is refused: every caller waits for a load that starts
   * after it asked. Loads caused by misses run one at a time and at most one per {@link
   * #MISS_RELOAD_GAP}, so unknown tokens (a typo, or someone guessing) cannot flood PostgreSQL;
   * they only wait up to that long for their 401.
   */
  @Override
  public CompletionStage<Optional<Principal>> authenticateFresh(String bearerToken) {
    Optional<Principal> known = authenticate(bearerToken);
    if (known.isPresent() || bearerToken == null || bearerToken.isEmpty()) {
      return CompletableFuture.completedFuture(known);
    }
    return afterNextLoad().thenApply(v -> authenticate(bearerToken));
  }

  /**
   * A principal refused for want of a grant is looked up again, in the same coalesced load as an
   * unknown token: a grant given through another node a moment ago counts at once. Empty when the
   * principal has been revoked meanwhile. Administrators hold every grant and are not looked up.
   */
  @Override
  public CompletionStage<Optional<Principal>> refresh(Principal principal) {
    if (principal.administrator()) {
      return CompletableFuture.completedFuture(Optional.of(principal));
    }
    return afterNextLoad()
        .thenApply(v -> Optional.ofNullable(view.current().activeById().get(principal.id())));
  }

  static final Duration MISS_RELOAD_GAP = Duration.ofSeconds(1);

  private CompletableFuture<Void> nextLoad;
  private boolean loading;
  private boolean startScheduled;
  private long lastLoadStart = System.nanoTime() - MISS_RELOAD_GAP.toNanos();

  private synchronized CompletableFuture<Void> afterNextLoad() {
    if (nextLoad == null) {
      nextLoad = new CompletableFuture<>();
    }
    CompletableFuture<Void> mine = nextLoad;
    startLoadIfDue();
    return mine;
  }

  private synchronized void startLoadIfDue() {
    if (loading || startScheduled || nextLoad == null) {
      return;
    }
    long wait = lastLoadStart + MISS_RELOAD_GAP.toNanos() - System.nanoTime();
    if (wait > 0) {
      startScheduled = true;
      CompletableFuture.delayedExecutor(wait, TimeUnit.NANOSECONDS)
          .execute(
              () -> {
                synchronized (this) {
                  startScheduled = false;
                  startLoadIfDue();
                }
              });
      return;
    }
    CompletableFuture<Void> waiting = nextLoad;
    nextLoad = null;
    loading = true;
    lastLoadStart = System.nanoTime();
    view.run(null)
        .whenComplete(
            (v, e) -> {
              synchronized (this) {
                loading = false;
              }
              if (e == null) {
                waiting.complete(null);
              } else {
                waiting.completeExceptionally(e);
              }
              startLoadIfDue();
            });
  }
}
