package io.weir.node.auth;

import io.weir.persistence.PrincipalStore;
import io.weir.persistence.PrincipalStore.StoredPrincipal;
import java.sql.Connection;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;

/**
 * The principals of the cluster as this node knows them: the bootstrap administrator (from
 * configuration) and those stored in PostgreSQL ({@link PrincipalStore}), reloaded on a schedule
 * and at once on this node after a change made through it. Stored tokens are SHA-256 hashes; a
 * presented token is looked up by its hash (lookup timing can only tell a caller about hashes of
 * its own inputs).
 */
public final class Principals implements Authenticator {
  private record Loaded(long ticket, List<StoredPrincipal> all, Map<String, Principal> byHash) {}

  private final TokenAuthenticator bootstrap;
  private final DataSource dataSource;
  private final String schema;
  private final Executor blocking;
  private final AtomicLong tickets = new AtomicLong();
  private final AtomicReference<Loaded> current = new AtomicReference<>(new Loaded(0, List.of(), Map.of()));

  public Principals(TokenAuthenticator bootstrap, DataSource dataSource, String schema, Executor blocking) {
    this.bootstrap = bootstrap;
    this.dataSource = dataSource;
    this.schema = schema;
    this.blocking = blocking;
  }

  @Override
  public Optional<Principal> authenticate(String bearerToken) {
    Optional<Principal> admin = bootstrap.authenticate(bearerToken);
    if (admin.isPresent() || bearerToken == null || bearerToken.isEmpty()) {
      return admin;
    }
    byte[] hash = PrincipalStore.sha256(bearerToken);
    Principal p = current.get().byHash().get(HexFormat.of().formatHex(hash));
    return Optional.ofNullable(p);
  }

  /** Every stored principal as last loaded (revoked ones included). */
  public List<StoredPrincipal> all() {
    return current.get().all();
  }

  public CompletionStage<Void> reload() {
    return run(c -> { });
  }

  /** Creates a principal; the stage holds its token (returned once). */
  public CompletionStage<String> create(String id, boolean administrator) {
    AtomicReference<String> token = new AtomicReference<>();
    return run(c -> token.set(PrincipalStore.create(c, schema, id, administrator))).thenApply(v -> token.get());
  }

  public CompletionStage<Void> revoke(String id) {
    return run(c -> PrincipalStore.revoke(c, schema, id));
  }

  public CompletionStage<Void> changeGrant(String id, String collection, String grant, boolean add) {
    return run(c -> PrincipalStore.changeGrant(c, schema, id, collection, grant, add));
  }

  @FunctionalInterface
  private interface Change {
    void apply(Connection c) throws Exception;
  }

  /** Applies a change, then reloads; a load publishes only if no later-ticketed load has. */
  private CompletionStage<Void> run(Change change) {
    return CompletableFuture.runAsync(() -> {
      try (Connection c = dataSource.getConnection()) {
        change.apply(c);
        long ticket = tickets.incrementAndGet();
        List<StoredPrincipal> all = PrincipalStore.load(c, schema);
        Map<String, Principal> byHash = new java.util.HashMap<>();
        for (StoredPrincipal s : all) {
          if (s.revokedAt() == null) {
            byHash.put(HexFormat.of().formatHex(s.tokenHash()),
                new Principal(s.id(), s.administrator(), s.grants(), s.policyEpoch()));
          }
        }
        Loaded loaded = new Loaded(ticket, List.copyOf(all), Map.copyOf(byHash));
        current.accumulateAndGet(loaded, (old, fresh) -> old.ticket() > fresh.ticket() ? old : fresh);
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new java.util.concurrent.CompletionException(e);
      }
    }, blocking);
  }
}
