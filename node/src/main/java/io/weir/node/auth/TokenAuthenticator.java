package io.weir.node.auth;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Authenticates bearer tokens against stored SHA-256 hashes. Every stored hash is compared with
 * {@link MessageDigest#isEqual} (constant time) and no comparison stops early, so response time
 * does not reveal how much of a token matched or which entry did.
 */
public final class TokenAuthenticator implements Authenticator {
  private record Entry(byte[] hash, Principal principal) {}

  private final List<Entry> entries;

  private TokenAuthenticator(List<Entry> entries) {
    this.entries = List.copyOf(entries);
  }

  /** An authenticator knowing only the bootstrap administrator. */
  public static TokenAuthenticator withBootstrapAdmin(String adminToken) {
    return withBootstrapAdmin(adminToken, Optional.empty());
  }

  /**
   * An authenticator knowing only the bootstrap administrator, by its token and, while a new token
   * is rolled out node by node, by its previous one too ({@code weir.admin-token-previous}).
   */
  public static TokenAuthenticator withBootstrapAdmin(
      String adminToken, Optional<String> previous) {
    List<Entry> entries = new ArrayList<>();
    Principal admin = new Principal("admin", true);
    entries.add(new Entry(sha256(adminToken), admin));
    previous.ifPresent(p -> entries.add(new Entry(sha256(p), admin)));
    return new TokenAuthenticator(entries);
  }

  /** A principal this authenticator holds stays as it is (its set never changes). */
  @Override
  public Optional<Principal> current(Principal principal) {
    return knows(principal) ? Optional.of(principal) : Optional.empty();
  }

  /** Whether {@code principal} is one this authenticator holds (by any of its tokens). */
  public boolean knows(Principal principal) {
    return entries.stream().anyMatch(e -> e.principal().equals(principal));
  }

  /** A copy that also knows {@code principal} by {@code token}. */
  public TokenAuthenticator with(String token, Principal principal) {
    List<Entry> next = new ArrayList<>(entries);
    next.add(new Entry(sha256(token), principal));
    return new TokenAuthenticator(next);
  }

  @Override
  public Optional<Principal> authenticate(String bearerToken) {
    if (bearerToken == null || bearerToken.isEmpty()) {
      return Optional.empty();
    }
    byte[] presented = sha256(bearerToken);
    Principal found = null;
    for (Entry e : entries) {
      if (MessageDigest.isEqual(e.hash(), presented) && found == null) {
        found = e.principal();
      }
    }
    return Optional.ofNullable(found);
  }

  static byte[] sha256(String token) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(token.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every JVM", e);
    }
  }
}
