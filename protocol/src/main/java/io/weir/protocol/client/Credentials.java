package io.weir.protocol.client;

import java.util.Objects;

/**
 * The credentials a protocol client presents with every request: a principal's bearer token, the
 * same one it would send in an HTTP {@code Authorization} header. Travels only over cluster
 * remoting (mutual TLS in production) and is never logged: {@link #toString()} leaves it out.
 */
public record Credentials(String bearerToken) {
  public Credentials {
    Objects.requireNonNull(bearerToken, "bearerToken");
  }

  public static Credentials bearer(String token) {
    return new Credentials(token);
  }

  @Override
  public String toString() {
    return "Credentials[bearerToken=<redacted>]";
  }
}
