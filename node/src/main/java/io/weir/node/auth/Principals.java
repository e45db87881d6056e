package io.weir.node.auth;

import io.weir.node.OrderedLoads;
import io.weir.persistence.Identifiers;
import io.weir.persistence.PrincipalStore;
import io.weir.persistence.PrincipalStore.StoredPrincipal;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;

/**
 * The principals of the cluster as this node knows them: the bootstrap administrator (from
 * configuration) and those stored in PostgreSQL ({@link PrincipalStore}), reloaded on a schedule,
 * on an announcement from another node, and at once on this node after a change made through it
 * ({@link OrderedLoads}: an earlier reload cannot bring back a revoked principal). Stored tokens
 * are SHA-256 hashes; a presented token is looked up by its hash (lookup timing can only tell a
 * caller about hashes of its own inputs).
 *
 * <p>The bound (issue 24), which depends neither on the announcement nor on the refresh interval: a
 * request ({@link #authenticateFresh}) is answered from the view only when a check or load that
 * began at most {@link Freshness#maxStaleness()} before the request began confirmed it. A check is
 * one query reading a fingerprint of every row of {@code principals} and {@code grants} (counts,
 * sums and row hashes: {@link #fingerprintQuery}); each load reads the same fingerprint in the same
 * snapshot as the rows (one REPEATABLE READ transaction), so equal fingerprints mean the view holds
 * what PostgreSQL held when the check began; a different one reloads before the request is
 * answered. Checks run one at a time per node and every waiting request shares one ({@link
 * CoalescedRuns}); a request waits for one at most {@link Freshness#checkTimeout()} and fails
 * otherwise (503), never answered from an older view. So a change committed at time t is seen by
 * every request that begins after t + maxStaleness, on every node.
 */
public final class Principals implements Authenticator {
  /** A token a principal is known by; {@code validUntil} null for its current token. */
  private record Entry(Principal principal, Instant validUntil) {}

  /**
   * Every stored principal, the active ones by token hash (hex), previous tokens in their grace
   * included, and the active ones by id.
   */
  private record View(
      List<StoredPrincipal> all,
      Map<String, Entry> byHash,
      Map<String, Principal> activeById,
      String fingerprint) {}

  private final TokenAuthenticator bootstrap;
  private final DataSource dataSource;
  private final Executor blocking;
  private final String schema;
  private final String fingerprintQuery;
  private final OrderedLoads<View> view;
  private final Clock clock;
  private final Duration rotationGrace;
  private final long maxStalenessNanos;
  private final long checkTimeoutNanos;
  private final int checkQueryTimeoutSeconds;
  private final long checkNetworkTimeoutMillis;
  private volatile Runnable changed = () -> {};

  /**
   * The {@link System#nanoTime} at which the latest confirmation began: a check or load that began
   * then found or published a view holding every change committed before it. Only moves forward.
   */
  private final AtomicLong confirmedAt;

  /** Freshness checks: one at a time, shared by every request waiting for one. */
  private final CoalescedRuns<Void> checks;

  /** Reloads after an unknown token or a missing grant: one at a time, one per gap at most. */
  private final CoalescedRuns<View> misses;

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
    this(bootstrap, dataSource, schema, blocking, clock, rotationGrace, Freshness.DEFAULT);
  }

  /**
   * @param freshness how stale the view may be when a request is answered, and how long a request
   *     waits for a check ({@code weir.principals.max-staleness}, {@code
   *     weir.principals.check-timeout})
   */
  public Principals(
      TokenAuthenticator bootstrap,
      DataSource dataSource,
      String schema,
      Executor blocking,
      Clock clock,
      Duration rotationGrace,
      Freshness freshness) {
    this.bootstrap = bootstrap;
    this.dataSource = dataSource;
    this.blocking = blocking;
    this.schema = schema;
    this.fingerprintQuery = fingerprintQuery(schema);
    this.clock = clock;
    this.rotationGrace = rotationGrace;
    this.maxStalenessNanos = freshness.maxStaleness().toNanos();
    this.checkTimeoutNanos = freshness.checkTimeout().toNanos();
    this.checkQueryTimeoutSeconds =
        (int) Math.max(1, (freshness.checkTimeout().toMillis() + 999) / 1000);
    this.checkNetworkTimeoutMillis = 1000L * checkQueryTimeoutSeconds + 1000;
    this.confirmedAt = new AtomicLong(System.nanoTime() - maxStalenessNanos - 1);
    this.view =
        new OrderedLoads<>(
            dataSource, blocking, this::load, new View(List.of(), Map.of(), Map.of(), null));
    this.checks =
        new CoalescedRuns<>(
            this::check, Duration.ofNanos(Math.min(CHECK_GAP.toNanos(), maxStalenessNanos)));
    this.misses = new CoalescedRuns<>(() -> run(null), MISS_RELOAD_GAP);
  }

  /**
   * The least time between the starts of two freshness checks (or the bound, if shorter). It only
   * matters when checks fail (PostgreSQL unreachable): a successful check confirms the view for the
   * whole bound.
   */
  static final Duration CHECK_GAP = Duration.ofMillis(100);

  /**
   * One query, one short text: for {@code principals} the row count, the sum of the policy epochs
   * (every revocation and grant change advances one), the number of administrators and of revoked
   * principals, and the sum of a 64-bit hash of each whole row ({@code hash_record_extended}: a
   * rotation, a group or anything else changed in SQL); for {@code grants} the row count and the
   * same sum of row hashes. Revocations, grant changes and demotions change an exact count or sum;
   * any other change goes unseen only if row hashes collide (about 2^-64). No row value leaves
   * PostgreSQL; nothing is sorted.
   */
  private static String fingerprintQuery(String schema) {
    String s = Identifiers.require("schema name", schema);
    return "SELECT (SELECT concat_ws(':', count(*), sum(policy_epoch),"
        + " count(*) FILTER (WHERE administrator), count(revoked_at),"
        + " sum(hash_record_extended(p, 0))) FROM "
        + s
        + ".principals p) || '/' || (SELECT concat_ws(':', count(*),"
        + " sum(hash_record_extended(g, 0))) FROM "
        + s
        + ".grants g)";
  }

  private String fingerprint(Connection c, int queryTimeoutSeconds) throws SQLException {
    try (PreparedStatement s = c.prepareStatement(fingerprintQuery)) {
      if (queryTimeoutSeconds > 0) {
        s.setQueryTimeout(queryTimeoutSeconds);
      }
      try (ResultSet rs = s.executeQuery()) {
        rs.next();
        return rs.getString(1);
      }
    }
  }

  /** The rows and their fingerprint, read in one snapshot. */
  private View load(Connection c) throws SQLException {
    boolean autoCommit = c.getAutoCommit();
    int isolation = c.getTransactionIsolation();
    c.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
    c.setAutoCommit(false);
    try {
      List<StoredPrincipal> all = PrincipalStore.load(c, schema);
      String fingerprint = fingerprint(c, 0);
      c.commit();
      return index(all, fingerprint);
    } catch (SQLException | RuntimeException e) {
      c.rollback();
      throw e;
    } finally {
      c.setAutoCommit(autoCommit);
      c.setTransactionIsolation(isolation);
    }
  }

  /**
   * Applies {@code change} (null: none) and loads. Once done, the published view was read after
   * this call began (a later load's ticket is later still): a confirmation from then on.
   */
  private CompletionStage<View> run(OrderedLoads.Change change) {
    long begun = System.nanoTime();
    return view.run(change)
        .thenApply(
            v -> {
              confirm(begun);
              return v;
            });
  }

  private void confirm(long begun) {
    confirmedAt.accumulateAndGet(begun, (a, b) -> b - a > 0 ? b : a);
  }

  private boolean confirmedSince(long notBefore) {
    return confirmedAt.get() - notBefore >= 0;
  }

  /** One freshness check: the fingerprint now; a reload when it is not the view's. */
  private CompletionStage<Void> check() {
    long begun = System.nanoTime();
    return CompletableFuture.supplyAsync(
            () -> {
              try (Connection c = dataSource.getConnection()) {
                // A network that drops packets must not hold the check (and so every later one)
                // for as long as TCP takes to give up: the socket read ends too (the pool resets
                // the setting when the connection returns).
                c.setNetworkTimeout(Runnable::run, (int) checkNetworkTimeoutMillis);
                return fingerprint(c, checkQueryTimeoutSeconds);
              } catch (SQLException e) {
                throw new CompletionException(e);
              }
            },
            blocking)
        .thenCompose(
            stored -> {
              String held = view.current().fingerprint();
              if (held != null && held.equals(stored)) {
                confirm(begun);
                return CompletableFuture.completedFuture(null);
              }
              return run(null).thenApply(v -> null);
            });
  }

  /**
   * Completes once the view is confirmed by a check or load that began at most the bound before
   * {@code begun}: at once when one is, else after a check (shared with every request waiting).
   * Fails with {@link Unavailable} when no check succeeds within the check timeout.
   */
  private CompletionStage<Void> fresh(long begun) {
    long notBefore = begun - maxStalenessNanos;
    if (confirmedSince(notBefore)) {
      return CompletableFuture.completedFuture(null);
    }
    return checks
        .startedSince(notBefore)
        .toCompletableFuture()
        .orTimeout(checkTimeoutNanos, TimeUnit.NANOSECONDS)
        .handle(
            (v, error) -> {
              if (error == null && confirmedSince(notBefore)) {
                return null;
              }
              throw new CompletionException(new Unavailable(error));
            });
  }

  /**
   * Completes once this node's view holds every change to principals and grants committed more than
   * the bound before this call (what {@link #authenticateFresh} waits for); fails with {@link
   * Unavailable} when PostgreSQL does not confirm it within the check timeout.
   */
  public CompletionStage<Void> fresh() {
    return fresh(System.nanoTime());
  }

  /**
   * The view could not be confirmed current in time (PostgreSQL unreachable or slow): the request
   * is refused as retryable (503), not answered from an older view. Its message holds no value.
   */
  public static final class Unavailable extends RuntimeException {
    Unavailable(Throwable cause) {
      super(
          "the principals could not be confirmed current in time",
          cause instanceof CompletionException && cause.getCause() != null
              ? cause.getCause()
              : cause,
          false,
          false);
    }
  }

  private static View index(List<StoredPrincipal> all, String fingerprint) {
    Map<String, Entry> byHash = new HashMap<>();
    Map<String, Principal> byId = new HashMap<>();
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
    return new View(List.copyOf(all), Map.copyOf(byHash), Map.copyOf(byId), fingerprint);
  }

  /**
   * The principal {@code bearerToken} names in the view as last loaded, however old (no check:
   * requests use {@link #authenticateFresh}, which keeps the bound).
   */
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
        run(c -> rotated.set(PrincipalStore.rotate(c, schema, id, grace)))
            .thenApply(v -> rotated.get()));
  }

  /** Every stored principal as last loaded (revoked ones included). */
  public List<StoredPrincipal> all() {
    return view.current().all();
  }

  public CompletionStage<Void> reload() {
    return run(null).thenApply(v -> null);
  }

  /** Creates a principal; the stage holds its token (returned once). */
  public CompletionStage<String> create(String id, boolean administrator) {
    return create(id, administrator, List.of());
  }

  /** Creates a principal in {@code groups}; the stage holds its token (returned once). */
  public CompletionStage<String> create(String id, boolean administrator, List<String> groups) {
    AtomicReference<String> token = new AtomicReference<>();
    return announced(
        run(c -> token.set(PrincipalStore.create(c, schema, id, administrator, groups)))
            .thenApply(v -> token.get()));
  }

  public CompletionStage<Void> revoke(String id) {
    return announced(run(c -> PrincipalStore.revoke(c, schema, id)).thenApply(v -> null));
  }

  public CompletionStage<Void> changeGrant(
      String id, String collection, String grant, boolean add) {
    return changeGrant(id, collection, grant, "", add);
  }

  /** A collection grant ({@code field} empty) or a field grant. */
  public CompletionStage<Void> changeGrant(
      String id, String collection, String grant, String field, boolean add) {
    return announced(
        run(c -> PrincipalStore.changeGrant(c, schema, id, collection, grant, field, add))
            .thenApply(v -> null));
  }

  /**
   * The principal {@code bearerToken} names, from a view no staler than the bound ({@link #fresh}:
   * a revoked principal, a removed grant or a demoted administrator is seen by every request that
   * begins more than the bound after the change committed). A miss is looked up again in a view
   * loaded after this call (a principal created through another node a moment ago), unless a check
   * that began after this call already confirmed the view. Loads caused by misses run one at a time
   * and at most one per {@link #MISS_RELOAD_GAP} ({@link CoalescedRuns}), so unknown tokens (a
   * typo, or someone guessing) cannot flood PostgreSQL; they only wait up to that long for their
   * 401. Fails with {@link Unavailable} (503) when the view cannot be confirmed in time, or when
   * the reload fails. The bootstrap administrator (configuration, not PostgreSQL) needs neither.
   */
  @Override
  public CompletionStage<Optional<Principal>> authenticateFresh(String bearerToken) {
    if (bearerToken == null || bearerToken.isEmpty()) {
      return CompletableFuture.completedFuture(Optional.empty());
    }
    Optional<Principal> admin = bootstrap.authenticate(bearerToken);
    if (admin.isPresent()) {
      return CompletableFuture.completedFuture(admin);
    }
    long begun = System.nanoTime();
    return fresh(begun)
        .thenCompose(
            confirmed -> {
              Optional<Principal> known = authenticate(bearerToken);
              if (known.isPresent() || confirmedSince(begun)) {
                return CompletableFuture.completedFuture(known);
              }
              return misses.next().thenApply(v -> authenticate(bearerToken));
            });
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
    return misses
        .next()
        .thenApply(v -> Optional.ofNullable(view.current().activeById().get(principal.id())));
  }

  /**
   * The bootstrap administrator as it is; a stored principal as in the view last loaded (empty once
   * revoked or removed).
   */
  @Override
  public Optional<Principal> current(Principal principal) {
    if (bootstrap.knows(principal)) {
      return Optional.of(principal);
    }
    return Optional.ofNullable(view.current().activeById().get(principal.id()));
  }

  /** The least time between the starts of two reloads caused by misses. */
  static final Duration MISS_RELOAD_GAP = Duration.ofSeconds(1);
}
