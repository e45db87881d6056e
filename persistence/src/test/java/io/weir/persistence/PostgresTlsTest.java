package io.weir.persistence;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.weir.persistence.cdc.source.SourceSettings;
import io.weir.persistence.testing.TestCertificates;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code weir.postgres.tls}: parsing, checks, and what reaches pgjdbc. */
class PostgresTlsTest {
  private static final String KEY_PASSWORD = "canary-key-password-91c2";

  @TempDir static Path dir;
  static TestCertificates.Authority ca;

  @BeforeAll
  static void authority() {
    ca = TestCertificates.in(dir).authority("pg-tls-test");
  }

  private static Config with(Map<String, Object> overrides) {
    Map<String, Object> base = new HashMap<>();
    base.put("weir.postgres.url", "jdbc:postgresql://db.example:5432/weir");
    base.putAll(overrides);
    return ConfigFactory.parseMap(base)
        .withFallback(ConfigFactory.parseResources("reference.conf"))
        .resolve(ConfigResolveOptions.noSystem());
  }

  private static SettingsException refused(Map<String, Object> overrides) {
    try {
      PostgresSettings.create(with(overrides));
    } catch (SettingsException e) {
      return e;
    }
    throw new AssertionError("settings should have been refused: " + overrides.keySet());
  }

  @Test
  void unsetMeansNoTlsPropertiesAtAll() {
    PostgresSettings s = PostgresSettings.create(with(Map.of()));
    assertThat(s.tls()).isEqualTo(PostgresTls.NONE);
    assertThat(s.tls().isSet()).isFalse();
    assertThat(s.tls().jdbcProperties()).as("pgjdbc's defaults and the URL decide").isEmpty();
  }

  @Test
  void verifyFullWithARootCertificateReachesPgjdbc() {
    PostgresSettings s =
        PostgresSettings.create(
            with(
                Map.of(
                    "weir.postgres.tls.mode",
                    "verify-full",
                    "weir.postgres.tls.root-cert",
                    ca.certificate().toString())));
    assertThat(s.tls().jdbcProperties())
        .containsExactly(
            Map.entry("sslmode", "verify-full"),
            Map.entry("sslrootcert", ca.certificate().toString()));
    assertThat(s.tls().verifiesServer()).isTrue();
    // Source connections get the same properties, plus no server error details.
    Properties props = new SourceSettings(s.url(), "weir", "pw", s.tls()).properties("weir-test");
    assertThat(props.getProperty("sslmode")).isEqualTo("verify-full");
    assertThat(props.getProperty("sslrootcert")).isEqualTo(ca.certificate().toString());
    assertThat(props.getProperty("logServerErrorDetail")).isEqualTo("false");
    assertThat(props.getProperty("ApplicationName")).isEqualTo("weir-test");
  }

  @Test
  void modeMustBeAKnownValueAndIsNotEchoed() {
    SettingsException e = refused(Map.of("weir.postgres.tls.mode", "verify-everything"));
    assertThat(e.key()).isEqualTo("weir.postgres.tls.mode");
    assertThat(e.getMessage())
        .contains("WEIR_PG_SSLMODE")
        .contains("verify-full")
        .doesNotContain("verify-everything");
    assertThat(
            PostgresSettings.create(with(Map.of("weir.postgres.tls.mode", "REQUIRE"))).tls().mode())
        .as("case does not matter")
        .isEqualTo("require");
  }

  @Test
  void verifyingModesNeedARootCertificate() {
    for (String mode : List.of("verify-ca", "verify-full")) {
      SettingsException e = refused(Map.of("weir.postgres.tls.mode", mode));
      assertThat(e.key()).isEqualTo("weir.postgres.tls.root-cert");
      assertThat(e.getMessage()).contains("WEIR_PG_SSLROOTCERT");
    }
  }

  @Test
  void filesMustExistAndParseWithoutTheirPathInTheMessage() throws Exception {
    String missing = dir.resolve("no-such-root.pem").toString();
    SettingsException e =
        refused(
            Map.of(
                "weir.postgres.tls.mode", "verify-full", "weir.postgres.tls.root-cert", missing));
    assertThat(e.key()).isEqualTo("weir.postgres.tls.root-cert");
    assertThat(e.getMessage()).contains("missing or not readable").doesNotContain(missing);

    Path notPem = Files.writeString(dir.resolve("not-a-cert.pem"), "hello\n");
    e =
        refused(
            Map.of(
                "weir.postgres.tls.mode",
                "verify-full",
                "weir.postgres.tls.root-cert",
                notPem.toString()));
    assertThat(e.key()).isEqualTo("weir.postgres.tls.root-cert");
    assertThat(e.getMessage()).contains("PEM");
  }

  @Test
  void clientCertificateAndKeyGoTogether() {
    SettingsException e =
        refused(
            Map.of(
                "weir.postgres.tls.mode",
                "require",
                "weir.postgres.tls.cert",
                ca.certificate().toString()));
    assertThat(e.key()).isEqualTo("weir.postgres.tls.key");
    e = refused(Map.of("weir.postgres.tls.root-cert", ca.certificate().toString()));
    assertThat(e.key())
        .as("files without a mode are refused, not ignored")
        .isEqualTo("weir.postgres.tls.mode");
  }

  @Test
  void theKeyPasswordIsPassedButNeverShown() throws Exception {
    Path key = Files.writeString(dir.resolve("client-key.pem"), "placeholder\n");
    PostgresSettings s =
        PostgresSettings.create(
            with(
                Map.of(
                    "weir.postgres.tls.mode",
                    "verify-full",
                    "weir.postgres.tls.root-cert",
                    ca.certificate().toString(),
                    "weir.postgres.tls.cert",
                    ca.certificate().toString(),
                    "weir.postgres.tls.key",
                    key.toString(),
                    "weir.postgres.tls.key-password",
                    KEY_PASSWORD)));
    assertThat(s.tls().jdbcProperties())
        .containsEntry("sslpassword", KEY_PASSWORD)
        .containsEntry("sslkey", key.toString());
    assertThat(s.toString()).doesNotContain(KEY_PASSWORD);
    assertThat(s.tls().toString()).doesNotContain(KEY_PASSWORD).contains("<hidden>");
  }

  @Test
  void aUrlWithItsOwnSslParametersIsRefusedWhenModeIsSet() {
    SettingsException e =
        refused(
            Map.of(
                "weir.postgres.url",
                "jdbc:postgresql://db.example:5432/weir?targetServerType=primary&sslmode=disable",
                "weir.postgres.tls.mode",
                "verify-full",
                "weir.postgres.tls.root-cert",
                ca.certificate().toString()));
    assertThat(e.key()).isEqualTo("weir.postgres.url");
    assertThat(e.getMessage()).doesNotContain("disable");
    // Without tls.mode the URL's parameters are the user's choice, as before.
    assertThat(
            PostgresSettings.create(
                    with(
                        Map.of(
                            "weir.postgres.url",
                            "jdbc:postgresql://db.example/weir?sslmode=require")))
                .tls())
        .isEqualTo(PostgresTls.NONE);
  }
}
