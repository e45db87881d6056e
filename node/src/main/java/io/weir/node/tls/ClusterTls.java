package io.weir.node.tls;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;
import io.weir.persistence.ConfigValues;
import io.weir.persistence.SettingsException;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import javax.net.ssl.KeyManager;
import javax.net.ssl.TrustManager;
import org.apache.pekko.event.LogSource;
import org.apache.pekko.event.Logging;
import org.apache.pekko.remote.artery.tcp.ConfigSSLEngineProvider;
import org.apache.pekko.remote.artery.tcp.SSLEngineProviderSetup;

/**
 * TLS on Pekko remoting between nodes ({@code weir.cluster.tls}): Artery's {@code tls-tcp}
 * transport with mutual authentication. Every connection between two nodes is TLS, each side
 * presents the certificate of its key store and accepts only certificates that chain to a CA in its
 * trust store; so only holders of a certificate issued by the cluster's CA can join.
 *
 * <p>The key and trust stores are opened once, at start-up, by Weir (errors name the setting), and
 * handed to Pekko's {@link ConfigSSLEngineProvider} as key and trust managers through an {@link
 * SSLEngineProviderSetup}: the passwords never enter the actor system's configuration.
 *
 * @param keyStorePassword secret (also the private key's password); never part of {@link
 *     #toString()}
 * @param trustStorePassword secret; never part of {@link #toString()}
 * @param protocol {@code TLSv1.3} or {@code TLSv1.2}; every node of a cluster must use the same
 * @param hostnameVerification the connecting node checks that the other's certificate names the
 *     host it connects to (its {@code weir.cluster.host})
 */
public record ClusterTls(
    Path keyStore,
    String keyStorePassword,
    Path trustStore,
    String trustStorePassword,
    String protocol,
    boolean hostnameVerification) {

  static final String KEY_STORE = "weir.cluster.tls.key-store";
  static final String KEY_STORE_PASSWORD = "weir.cluster.tls.key-store-password";
  static final String TRUST_STORE = "weir.cluster.tls.trust-store";
  static final String TRUST_STORE_PASSWORD = "weir.cluster.tls.trust-store-password";
  static final String PROTOCOL = "weir.cluster.tls.protocol";
  static final String HOSTNAME_VERIFICATION = "weir.cluster.tls.hostname-verification";

  /** Cipher suites per protocol: AES-GCM only (TLS 1.3's are Pekko's default). */
  private static final Map<String, List<String>> CIPHER_SUITES =
      Map.of(
          "TLSv1.3", List.of("TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256"),
          "TLSv1.2",
              List.of(
                  "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                      "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                  "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                      "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"));

  /**
   * Reads {@code weir.cluster.tls}; empty when neither store is set. Both stores are opened and
   * checked here, so a node with unusable ones refuses to start. Setting only some of the values is
   * an error, never a silent fallback to plain TCP.
   */
  public static Optional<ClusterTls> create(Config config) {
    ConfigValues v = KeyStores.values(config);
    Path keyStore = KeyStores.path(v, KEY_STORE);
    Path trustStore = KeyStores.path(v, TRUST_STORE);
    String keyStorePassword = KeyStores.password(v, KEY_STORE_PASSWORD);
    String trustStorePassword = KeyStores.password(v, TRUST_STORE_PASSWORD);
    if (keyStore == null && trustStore == null) {
      if (keyStorePassword != null || trustStorePassword != null) {
        throw new SettingsException(
            KEY_STORE,
            "and "
                + TRUST_STORE
                + " are required when a weir.cluster.tls password is set"
                + KeyStores.hint(KEY_STORE));
      }
      return Optional.empty();
    }
    if (keyStore == null) {
      throw new SettingsException(
          KEY_STORE, "is required with " + TRUST_STORE + KeyStores.hint(KEY_STORE));
    }
    if (trustStore == null) {
      throw new SettingsException(
          TRUST_STORE, "is required with " + KEY_STORE + KeyStores.hint(TRUST_STORE));
    }
    if (keyStorePassword == null) {
      throw new SettingsException(
          KEY_STORE_PASSWORD, "is required with " + KEY_STORE + KeyStores.hint(KEY_STORE_PASSWORD));
    }
    String protocol = v.requiredString(PROTOCOL);
    if (!CIPHER_SUITES.containsKey(protocol)) {
      throw new SettingsException(PROTOCOL, "must be TLSv1.3 or TLSv1.2");
    }
    boolean hostnameVerification;
    try {
      hostnameVerification = config.getBoolean(HOSTNAME_VERIFICATION);
    } catch (com.typesafe.config.ConfigException e) {
      throw new SettingsException(HOSTNAME_VERIFICATION, "must be on or off");
    }
    ClusterTls tls =
        new ClusterTls(
            keyStore,
            keyStorePassword,
            trustStore,
            trustStorePassword,
            protocol,
            hostnameVerification);
    tls.keyManagers();
    tls.trustManagers();
    return Optional.of(tls);
  }

  /** Overrides of Pekko's settings: the tls-tcp transport. Nothing secret. */
  public Config pekkoConfig() {
    return ConfigFactory.parseMap(Map.of("pekko.remote.artery.transport", "tls-tcp"));
  }

  /**
   * The SSL engine provider Artery uses: Pekko's {@link ConfigSSLEngineProvider} (mutual
   * authentication, one protocol, AES-GCM suites, optional host name verification) over the key and
   * trust managers Weir opened.
   */
  public SSLEngineProviderSetup engineProviderSetup() {
    KeyManager[] keyManagers = keyManagers();
    TrustManager[] trustManagers = trustManagers();
    Config engine =
        ConfigFactory.empty()
            // Read by the provider's constructor; unused, as the managers below replace what it
            // would load.
            .withValue("key-store", ConfigValueFactory.fromAnyRef(keyStore.toString()))
            .withValue("trust-store", ConfigValueFactory.fromAnyRef(trustStore.toString()))
            .withValue("key-store-password", ConfigValueFactory.fromAnyRef(""))
            .withValue("key-password", ConfigValueFactory.fromAnyRef(""))
            .withValue("trust-store-password", ConfigValueFactory.fromAnyRef(""))
            .withValue("protocol", ConfigValueFactory.fromAnyRef(protocol))
            .withValue(
                "enabled-algorithms", ConfigValueFactory.fromIterable(CIPHER_SUITES.get(protocol)))
            .withValue("random-number-generator", ConfigValueFactory.fromAnyRef(""))
            .withValue("require-mutual-authentication", ConfigValueFactory.fromAnyRef(true))
            .withValue(
                "hostname-verification", ConfigValueFactory.fromAnyRef(hostnameVerification));
    return SSLEngineProviderSetup.create(
        system ->
            new ConfigSSLEngineProvider(
                engine,
                Logging.withMarker(
                    system, ConfigSSLEngineProvider.class.getName(), LogSource.fromString())) {
              @Override
              public KeyManager[] keyManagers() {
                return keyManagers;
              }

              @Override
              public TrustManager[] trustManagers() {
                return trustManagers;
              }
            });
  }

  /** The certificate the node presents (subject and expiry go to the start-up log). */
  public X509Certificate certificate() {
    return KeyStores.certificate(
        KeyStores.load(KEY_STORE, keyStore, KEY_STORE_PASSWORD, keyStorePassword));
  }

  private KeyManager[] keyManagers() {
    KeyStore store = KeyStores.load(KEY_STORE, keyStore, KEY_STORE_PASSWORD, keyStorePassword);
    return KeyStores.keyManagers(KEY_STORE, store, KEY_STORE_PASSWORD, keyStorePassword);
  }

  private TrustManager[] trustManagers() {
    return KeyStores.trustManagers(
        TRUST_STORE,
        KeyStores.load(TRUST_STORE, trustStore, TRUST_STORE_PASSWORD, trustStorePassword));
  }

  @Override
  public String toString() {
    return "ClusterTls[keyStore="
        + keyStore
        + ", trustStore="
        + trustStore
        + ", protocol="
        + protocol
        + ", hostnameVerification="
        + hostnameVerification
        + ", passwords=<hidden>]";
  }
}
