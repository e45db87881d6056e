package io.weir.node.tls;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.weir.node.NodeSettings;
import io.weir.persistence.SettingsException;
import io.weir.persistence.testing.TestCertificates;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import javax.net.ssl.SSLEngine;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code weir.http.tls} and {@code weir.cluster.tls}: parsed and opened at settings time, errors
 * name the setting and never a password or path.
 */
class TlsSettingsTest {
  private static final String WRONG_PASSWORD = "canary-wrong-password-5d1e";

  @TempDir static Path dir;
  static TestCertificates.Authority ca;
  static TestCertificates.Leaf node;
  static TestCertificates.Leaf expired;

  @BeforeAll
  static void certificates() {
    TestCertificates certs = TestCertificates.in(dir);
    ca = certs.authority("settings-test");
    node = certs.issue(ca, "settings-node", List.of("ip:127.0.0.1"));
    expired = certs.issue(ca, "settings-expired", List.of("ip:127.0.0.1"), "-10d", 2);
  }

  private static Config with(Map<String, Object> overrides) {
    Map<String, Object> base = new HashMap<>();
    base.put("weir.admin-token", "an-admin-token-of-sufficient-length");
    base.put("weir.postgres.url", "jdbc:postgresql://127.0.0.1:5432/weir");
    base.putAll(overrides);
    return ConfigFactory.parseMap(base)
        .withFallback(ConfigFactory.parseResources("reference.conf"))
        .resolve(ConfigResolveOptions.noSystem());
  }

  private static SettingsException refused(Map<String, Object> overrides) {
    try {
      NodeSettings.create(with(overrides));
    } catch (SettingsException e) {
      assertThat(e.getMessage())
          .as("no password in a settings error")
          .doesNotContain(TestCertificates.PASSWORD)
          .doesNotContain(WRONG_PASSWORD);
      return e;
    }
    throw new AssertionError("settings should have been refused: " + overrides.keySet());
  }

  private static Map<String, Object> cluster(Path keyStore, String password, Path trustStore) {
    Map<String, Object> m = new HashMap<>();
    m.put("weir.cluster.tls.key-store", keyStore.toString());
    m.put("weir.cluster.tls.key-store-password", password);
    m.put("weir.cluster.tls.trust-store", trustStore.toString());
    m.put("weir.cluster.tls.trust-store-password", TestCertificates.PASSWORD);
    return m;
  }

  @Test
  void offByDefault() {
    NodeSettings s = NodeSettings.create(with(Map.of()));
    assertThat(s.httpTls()).isEmpty();
    assertThat(s.clusterTls()).isEmpty();
    assertThat(s.toString()).contains("httpTls=off").contains("clusterTls=off");
  }

  @Test
  void httpsFromAKeyStore() {
    NodeSettings s =
        NodeSettings.create(
            with(
                Map.of(
                    "weir.http.tls.key-store",
                    node.keyStore().toString(),
                    "weir.http.tls.key-store-password",
                    TestCertificates.PASSWORD)));
    HttpTls tls = s.httpTls().orElseThrow();
    SSLEngine engine = tls.sslContext().createSSLEngine();
    assertThat(tls.certificate().getSubjectX500Principal().getName()).isEqualTo("CN=settings-node");
    assertThat(engine).isNotNull();
    assertThat(tls.connectionContext()).isNotNull();
    assertThat(s.toString()).doesNotContain(TestCertificates.PASSWORD);
  }

  @Test
  void httpsSettingsMustBeComplete() {
    SettingsException e = refused(Map.of("weir.http.tls.key-store", node.keyStore().toString()));
    assertThat(e.key()).isEqualTo("weir.http.tls.key-store-password");
    assertThat(e.getMessage()).contains("WEIR_HTTP_TLS_KEY_STORE_PASSWORD");
    e = refused(Map.of("weir.http.tls.key-store-password", TestCertificates.PASSWORD));
    assertThat(e.key())
        .as("a password alone does not silently mean plain HTTP")
        .isEqualTo("weir.http.tls.key-store");
  }

  @Test
  void aWrongPasswordNamesThePasswordSettingNotThePassword() {
    SettingsException e =
        refused(
            Map.of(
                "weir.http.tls.key-store",
                node.keyStore().toString(),
                "weir.http.tls.key-store-password",
                WRONG_PASSWORD));
    assertThat(e.key()).isEqualTo("weir.http.tls.key-store-password");
    assertThat(e.getMessage()).contains("wrong password");
  }

  @Test
  void aMissingKeyStoreNamesTheSettingNotThePath() {
    String missing = dir.resolve("absent.p12").toString();
    SettingsException e =
        refused(
            Map.of(
                "weir.http.tls.key-store",
                missing,
                "weir.http.tls.key-store-password",
                TestCertificates.PASSWORD));
    assertThat(e.key()).isEqualTo("weir.http.tls.key-store");
    assertThat(e.getMessage()).contains("WEIR_HTTP_TLS_KEY_STORE").doesNotContain(missing);
  }

  @Test
  void anExpiredCertificateIsRefusedAtStart() {
    SettingsException e =
        refused(
            Map.of(
                "weir.http.tls.key-store",
                expired.keyStore().toString(),
                "weir.http.tls.key-store-password",
                TestCertificates.PASSWORD));
    assertThat(e.key()).isEqualTo("weir.http.tls.key-store");
    assertThat(e.getMessage()).contains("expired");
  }

  @Test
  void mutualTlsBetweenNodes() {
    NodeSettings s =
        NodeSettings.create(
            with(cluster(node.keyStore(), TestCertificates.PASSWORD, ca.trustStore())));
    ClusterTls tls = s.clusterTls().orElseThrow();
    assertThat(tls.protocol()).isEqualTo("TLSv1.3");
    assertThat(tls.hostnameVerification()).isFalse();
    assertThat(tls.pekkoConfig().getString("pekko.remote.artery.transport")).isEqualTo("tls-tcp");
    assertThat(tls.pekkoConfig().root().render())
        .as("no secret in Pekko's configuration")
        .doesNotContain(TestCertificates.PASSWORD);
    assertThat(tls.engineProviderSetup()).isNotNull();
    assertThat(s.toString()).doesNotContain(TestCertificates.PASSWORD);

    Map<String, Object> tls12 =
        cluster(node.keyStore(), TestCertificates.PASSWORD, ca.trustStore());
    tls12.put("weir.cluster.tls.protocol", "TLSv1.2");
    tls12.put("weir.cluster.tls.hostname-verification", "on");
    ClusterTls t12 = NodeSettings.create(with(tls12)).clusterTls().orElseThrow();
    assertThat(t12.protocol()).isEqualTo("TLSv1.2");
    assertThat(t12.hostnameVerification()).isTrue();
  }

  @Test
  void clusterSettingsMustBeCompleteAndUsable() {
    SettingsException e =
        refused(
            Map.of(
                "weir.cluster.tls.key-store",
                node.keyStore().toString(),
                "weir.cluster.tls.key-store-password",
                TestCertificates.PASSWORD));
    assertThat(e.key()).isEqualTo("weir.cluster.tls.trust-store");
    assertThat(e.getMessage()).contains("WEIR_CLUSTER_TLS_TRUST_STORE");

    e = refused(Map.of("weir.cluster.tls.trust-store", ca.trustStore().toString()));
    assertThat(e.key()).isEqualTo("weir.cluster.tls.key-store");

    e = refused(cluster(node.keyStore(), WRONG_PASSWORD, ca.trustStore()));
    assertThat(e.key()).isEqualTo("weir.cluster.tls.key-store-password");

    e = refused(cluster(ca.trustStore(), TestCertificates.PASSWORD, ca.trustStore()));
    assertThat(e.key())
        .as("a trust store is not a key store")
        .isEqualTo("weir.cluster.tls.key-store");
    assertThat(e.getMessage()).contains("no private key");

    e = refused(cluster(node.keyStore(), TestCertificates.PASSWORD, node.keyStore()));
    assertThat(e.key())
        .as("a key store without trusted entries is no trust store")
        .isEqualTo("weir.cluster.tls.trust-store");
    assertThat(e.getMessage()).contains("no trusted certificate");

    Map<String, Object> wrongTrustPassword =
        cluster(node.keyStore(), TestCertificates.PASSWORD, ca.trustStore());
    wrongTrustPassword.put("weir.cluster.tls.trust-store-password", WRONG_PASSWORD);
    assertThat(refused(wrongTrustPassword).key())
        .isEqualTo("weir.cluster.tls.trust-store-password");

    Map<String, Object> oldProtocol =
        cluster(node.keyStore(), TestCertificates.PASSWORD, ca.trustStore());
    oldProtocol.put("weir.cluster.tls.protocol", "TLSv1.1");
    e = refused(oldProtocol);
    assertThat(e.key()).isEqualTo("weir.cluster.tls.protocol");
    assertThat(e.getMessage()).doesNotContain("TLSv1.1");
  }
}
