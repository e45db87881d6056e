package io.weir.node;

import static org.assertj.core.api.Assertions.assertThat;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import io.weir.persistence.testing.TestCertificates;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.pekko.actor.BootstrapSetup;
import org.apache.pekko.actor.setup.ActorSystemSetup;
import org.apache.pekko.remote.artery.tcp.SSLEngineProviderSetup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What Weir's TLS settings turn into for Pekko: the transport, the engine provider, the journal
 * pool's properties.
 */
class ActorSystemSetupTest {

  private static Config config(Map<String, Object> overrides) {
    Map<String, Object> base = new HashMap<>();
    base.put("weir.admin-token", "an-admin-token-of-sufficient-length");
    base.put("weir.postgres.url", "jdbc:postgresql://127.0.0.1:5432/weir");
    base.putAll(overrides);
    return ConfigFactory.parseMap(base)
        .withFallback(ConfigFactory.parseResources("reference.conf"))
        .resolve(ConfigResolveOptions.noSystem());
  }

  private static Config bootstrapConfig(ActorSystemSetup setup) {
    return setup.get(BootstrapSetup.class).orElseThrow().config().get();
  }

  private static final String MARGIN = "pekko.cluster.down-removal-margin";

  @Test
  void withoutTlsNothingChangesButTheRemovalMargin() {
    Config config = config(Map.of());
    ActorSystemSetup setup = WeirNode.actorSystemSetup(config, NodeSettings.create(config));
    assertThat(bootstrapConfig(setup).withoutPath(MARGIN)).isEqualTo(config.withoutPath(MARGIN));
    assertThat(setup.get(SSLEngineProviderSetup.class)).isEmpty();
  }

  @Test
  void theRemovalMarginIsShortOnlyWhileTheMarksAreOn() {
    Config on = config(Map.of());
    assertThat(on.getString(MARGIN)).as("Pekko's own: stable-after again").isEqualTo("off");
    assertThat(
            bootstrapConfig(WeirNode.actorSystemSetup(on, NodeSettings.create(on)))
                .getDuration(MARGIN))
        .isEqualTo(Duration.ofMillis(500));
    Config off = config(Map.of("weir.storage.acknowledged-marks.enabled", false));
    assertThat(
            bootstrapConfig(WeirNode.actorSystemSetup(off, NodeSettings.create(off)))
                .getString(MARGIN))
        .as("without the marks nothing stops a stale incarnation from acknowledging")
        .isEqualTo("off");
    Config explicit = config(Map.of(MARGIN, "30s"));
    assertThat(
            bootstrapConfig(WeirNode.actorSystemSetup(explicit, NodeSettings.create(explicit)))
                .getDuration(MARGIN))
        .isEqualTo(Duration.ofSeconds(30));
  }

  @Test
  void clusterAndPostgresTlsReachPekkoWithoutTheirPasswords(@TempDir Path dir) {
    TestCertificates certs = TestCertificates.in(dir);
    TestCertificates.Authority ca = certs.authority("setup-test");
    TestCertificates.Leaf node = certs.issue(ca, "setup-node", List.of("ip:127.0.0.1"));
    Map<String, Object> m = new HashMap<>();
    m.put("weir.cluster.tls.key-store", node.keyStore().toString());
    m.put("weir.cluster.tls.key-store-password", TestCertificates.PASSWORD);
    m.put("weir.cluster.tls.trust-store", ca.trustStore().toString());
    m.put("weir.cluster.tls.trust-store-password", TestCertificates.PASSWORD);
    m.put("weir.postgres.tls.mode", "verify-full");
    m.put("weir.postgres.tls.root-cert", ca.certificate().toString());
    Config config = config(m);
    ActorSystemSetup setup = WeirNode.actorSystemSetup(config, NodeSettings.create(config));

    Config effective = bootstrapConfig(setup);
    assertThat(effective.getString("pekko.remote.artery.transport")).isEqualTo("tls-tcp");
    for (String pool : List.of("weir", "weir-reads")) {
      assertThat(
              effective.getString(
                  "pekko-persistence-jdbc.shared-databases." + pool + ".db.properties.sslmode"))
          .isEqualTo("verify-full");
      assertThat(
              effective.getString(
                  "pekko-persistence-jdbc.shared-databases." + pool + ".db.properties.sslrootcert"))
          .isEqualTo(ca.certificate().toString());
    }
    assertThat(effective.getConfig("pekko").root().render())
        .as("the cluster's key store password stays out of Pekko's settings")
        .doesNotContain(TestCertificates.PASSWORD);
    assertThat(setup.get(SSLEngineProviderSetup.class)).isPresent();
  }
}
