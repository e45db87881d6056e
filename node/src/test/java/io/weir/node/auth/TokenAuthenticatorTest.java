package io.weir.node.auth;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class TokenAuthenticatorTest {
  private final TokenAuthenticator auth =
      TokenAuthenticator.withBootstrapAdmin("admin-token-0123456789")
          .with("reader-token-0123456789", new Principal("reader", false));

  @Test
  void knownTokensMapToTheirPrincipals() {
    assertThat(auth.authenticate("admin-token-0123456789")).contains(new Principal("admin", true));
    assertThat(auth.authenticate("reader-token-0123456789"))
        .contains(new Principal("reader", false));
  }

  @Test
  void aPreviousBootstrapTokenIsTheSameAdministrator() {
    TokenAuthenticator rolling =
        TokenAuthenticator.withBootstrapAdmin(
            "new-admin-token-0123456789", java.util.Optional.of("old-admin-token-0123456789"));
    assertThat(rolling.authenticate("new-admin-token-0123456789"))
        .contains(new Principal("admin", true));
    assertThat(rolling.authenticate("old-admin-token-0123456789"))
        .contains(new Principal("admin", true));
    assertThat(rolling.authenticate("other-admin-token-0123456789")).isEmpty();
    assertThat(
            TokenAuthenticator.withBootstrapAdmin(
                    "new-admin-token-0123456789", java.util.Optional.empty())
                .authenticate("old-admin-token-0123456789"))
        .isEmpty();
  }

  @Test
  void unknownEmptyAndPrefixTokensAreRejected() {
    assertThat(auth.authenticate("admin-token-012345678"))
        .as("a prefix of a token is not the token")
        .isEmpty();
    assertThat(auth.authenticate("admin-token-01234567890"))
        .as("an extension of a token is not the token")
        .isEmpty();
    assertThat(auth.authenticate("")).isEmpty();
    assertThat(auth.authenticate(null)).isEmpty();
  }
}
