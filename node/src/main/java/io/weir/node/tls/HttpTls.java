package io.weir.node.tls;

import com.typesafe.config.Config;
import io.weir.persistence.ConfigValues;
import io.weir.persistence.SettingsException;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.X509Certificate;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import org.apache.pekko.http.javadsl.ConnectionContext;
import org.apache.pekko.http.javadsl.HttpsConnectionContext;

/**
 * HTTPS for the node's HTTP API ({@code weir.http.tls}): when a key store is set the HTTP port
 * speaks TLS 1.3 or 1.2 only, with the key and certificate (chain) of the PKCS12 key store. No
 * client certificates: callers authenticate with bearer tokens.
 *
 * @param keyStorePassword secret; never part of {@link #toString()}
 */
public record HttpTls(Path keyStore, String keyStorePassword) {
  /** The protocols the HTTP port accepts. */
  public static final List<String> PROTOCOLS = List.of("TLSv1.3", "TLSv1.2");

  static final String KEY_STORE = "weir.http.tls.key-store";
  static final String PASSWORD = "weir.http.tls.key-store-password";

  /**
   * Reads {@code weir.http.tls}; empty when no key store is set. The key store is opened and
   * checked here, so a node with an unusable one refuses to start.
   */
  public static Optional<HttpTls> create(Config config) {
    ConfigValues v = KeyStores.values(config);
    Path keyStore = KeyStores.path(v, KEY_STORE);
    String password = KeyStores.password(v, PASSWORD);
    if (keyStore == null) {
      if (password != null) {
        throw new SettingsException(
            KEY_STORE, "is required when " + PASSWORD + " is set" + KeyStores.hint(KEY_STORE));
      }
      return Optional.empty();
    }
    if (password == null) {
      throw new SettingsException(
          PASSWORD, "is required with " + KEY_STORE + KeyStores.hint(PASSWORD));
    }
    HttpTls tls = new HttpTls(keyStore, password);
    tls.sslContext();
    return Optional.of(tls);
  }

  /** An SSL context over the key store (opened anew: a restart picks up a rotated certificate). */
  public SSLContext sslContext() {
    KeyStore store = KeyStores.load(KEY_STORE, keyStore, PASSWORD, keyStorePassword);
    try {
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(KeyStores.keyManagers(KEY_STORE, store, PASSWORD, keyStorePassword), null, null);
      return context;
    } catch (GeneralSecurityException e) {
      throw new SettingsException(
          KEY_STORE, "cannot be used for TLS (" + e.getClass().getSimpleName() + ")");
    }
  }

  /** The certificate the node presents (subject and expiry go to the start-up log). */
  public X509Certificate certificate() {
    return KeyStores.certificate(KeyStores.load(KEY_STORE, keyStore, PASSWORD, keyStorePassword));
  }

  /** pekko-http's server context: server-side engines limited to {@link #PROTOCOLS}. */
  public HttpsConnectionContext connectionContext() {
    SSLContext context = sslContext();
    String[] protocols =
        Arrays.stream(context.getSupportedSSLParameters().getProtocols())
            .filter(PROTOCOLS::contains)
            .toArray(String[]::new);
    return ConnectionContext.httpsServer(
        () -> {
          SSLEngine engine = context.createSSLEngine();
          engine.setUseClientMode(false);
          engine.setEnabledProtocols(protocols);
          return engine;
        });
  }

  @Override
  public String toString() {
    return "HttpTls[keyStore=" + keyStore + ", keyStorePassword=<hidden>]";
  }
}
