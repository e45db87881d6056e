package io.weir.node.auth;

import java.util.Optional;

/** Maps a presented bearer token to a principal. Implementations never log or keep the token. */
public interface Authenticator {
  Optional<Principal> authenticate(String bearerToken);
}
