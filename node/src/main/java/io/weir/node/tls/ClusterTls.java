package io.weir.node.tls;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
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
    String settings,
    Path keyStore,
    String keyStorePassword,
    Path trustStore,
    String trustStorePassword,
    String protocol,
    boolean hostnameVerification) {

  /** The settings of TLS between the nodes of a cluster. */
  public static final String CLUSTER = "weir.cluster.tls";

  /**
   * The settings of TLS on the protocol gateway's own remoting port (ADR 0028): a separate key and
   * trust store, so that a client's certificate never opens the cluster port.
   */
  public static final String GATEWAY = "weir.protocol-gateway.tls";

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
    return create(config, CLUSTER);
  }

  /**
   * Reads the TLS settings below {@code settings} ({@link #CLUSTER} or {@link #GATEWAY}) as {@link
   * #create(Config)} does.
   */
  public static Optional<ClusterTls> create(Config config, String settings) {
    String keyStoreKey = settings + ".key-store";
    String keyStorePasswordKey = settings + ".key-store-password";
    String trustStoreKey = settings + ".trust-store";
    String trustStorePasswordKey = settings + ".trust-store-password";
    String protocolKey = settings + ".protocol";
    String hostnameVerificationKey = settings + ".hostname-verification";
    ConfigValues v = KeyStores.values(config);
    Path keyStore = KeyStores.path(v, keyStoreKey);
    Path trustStore = KeyStores.path(v, trustStoreKey);
    String keyStorePassword = KeyStores.password(v, keyStorePasswordKey);
    String trustStorePassword = KeyStores.password(v, trustStorePasswordKey);
    if (keyStore == null && trustStore == null) {
      if (keyStorePassword != null || trustStorePassword != null) {
        throw new SettingsException(
            keyStoreKey,
            "and "
                + trustStoreKey
                + " are required when a "
                + settings
                + " password is set"
                + KeyStores.hint(keyStoreKey));
      }
      return Optional.empty();
    }
    if (keyStore == null) {
      throw new SettingsException(
          keyStoreKey, "is required with " + trustStoreKey + KeyStores.hint(keyStoreKey));
    }
    if (trustStore == null) {
      throw new SettingsException(
          trustStoreKey, "is required with " + keyStoreKey + KeyStores.hint(trustStoreKey));
    }
    if (keyStorePassword == null) {
      throw new SettingsException(
          keyStorePasswordKey,
          "is required with " + keyStoreKey + KeyStores.hint(keyStorePasswordKey));
    }
    String protocol = v.requiredString(protocolKey);
    if (!CIPHER_SUITES.containsKey(protocol)) {
      throw new SettingsException(protocolKey, "must be TLSv1.3 or TLSv1.2");
    }
    boolean hostnameVerification;
    try {
      hostnameVerification = config.getBoolean(hostnameVerificationKey);
    } catch (ConfigException e) {
      throw new SettingsException(hostnameVerificationKey, "must be on or off");
    }
    ClusterTls tls =
        new ClusterTls(
            settings,
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
        KeyStores.load(
            settings + ".key-store", keyStore, settings + ".key-store-password", keyStorePassword));
  }

  private KeyManager[] keyManagers() {
    String key = settings + ".key-store";
    String password = settings + ".key-store-password";
    KeyStore store = KeyStores.load(key, keyStore, password, keyStorePassword);
    return KeyStores.keyManagers(key, store, password, keyStorePassword);
  }

  private TrustManager[] trustManagers() {
    String key = settings + ".trust-store";
    String password = settings + ".trust-store-password";
    return KeyStores.trustManagers(
        key, KeyStores.load(key, trustStore, password, trustStorePassword));
  }

  @Override
  public String toString() {
    return "ClusterTls[settings="
        + settings
        + ", keyStore="
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
