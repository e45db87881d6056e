package io.weir.node.auth;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/** Maps a presented bearer token to a principal. Implementations never log or keep the token. */
public interface Authenticator {
  Optional<Principal> authenticate(String bearerToken);

  /**
   * As {@link #authenticate}, but an unknown token is looked up again in a view loaded after this
   * call: a principal created (or rotated) through another node a moment ago is known here too,
   * instead of being refused until the next scheduled reload. Fails when that load fails.
   */
  default CompletionStage<Optional<Principal>> authenticateFresh(String bearerToken) {
    return CompletableFuture.completedFuture(authenticate(bearerToken));
  }

  /**
   * {@code principal} as stored in a view loaded after this call (its grants may have changed
   * through another node); empty when it is no longer active. Fails when that load fails.
   */
  default CompletionStage<Optional<Principal>> refresh(Principal principal) {
    return CompletableFuture.completedFuture(Optional.of(principal));
  }

  /**
   * {@code principal} as this node last loaded it, without loading (for long-lived streams that
   * check their principal before every read and must not keep its token); empty when it is no
   * longer active, or when this authenticator cannot tell (fails closed).
   */
  default Optional<Principal> current(Principal principal) {
    return Optional.empty();
  }
}
